// tabular_tb.cpp: C simulation of the tabular update (returns non-zero on a mismatch; run by make
// csim, and by make cosim as the HLS top's testbench). Checks the batch loop and the HLS top
// (through its ports only: command and response streams, scalar arguments) against a
// straightforward transcription of the contract with wide integers, on a random stream and on
// adversarial cases: the same (s, a) many times in a row, s2 == s, done flags, saturation at both
// int32 ends, alpha = gamma = 1; for the top also table loads (WRITE) and read-backs (READ) between
// updates, CLEAR inside a run, fewer columns in use than synthesized, out-of-range commands.
#include <cstdio>
#include <random>
#include <vector>

#include "tabular.h"

namespace {

struct Case {
    uint32_t n_states, n_actions, alpha, gamma;
    bool sarsa;
};

// Independent transcription: floor division by 2^16 written out, no shifts.
int64_t floor_div_65536(__int128 x) {
    __int128 d = 65536, q = x / d;
    if ((x % d != 0) && (x < 0)) q -= 1;
    return int64_t(q);
}

void reference(std::vector<int32_t>& q, const Case& c, uint32_t s, uint32_t a, int32_t r, uint32_t s2, uint32_t a2,
               bool done) {
    __int128 boot = 0;
    if (!done) {
        if (c.sarsa) {
            boot = q[s2 * c.n_actions + a2];
        } else {
            boot = q[s2 * c.n_actions];
            for (uint32_t b = 1; b < c.n_actions; b++) boot = std::max<__int128>(boot, q[s2 * c.n_actions + b]);
        }
    }
    const __int128 target = __int128(r) + floor_div_65536(__int128(c.gamma) * boot + 32768);
    const __int128 old = q[s * c.n_actions + a];
    const __int128 upd = old + floor_div_65536(__int128(c.alpha) * (target - old) + 32768);
    q[s * c.n_actions + a] = upd > INT32_MAX ? INT32_MAX : (upd < INT32_MIN ? INT32_MIN : int32_t(upd));
}

int run(const Case& c, std::mt19937_64& rng, uint32_t n, bool adversarial) {
    std::vector<int32_t> q(c.n_states * c.n_actions), ref;
    std::vector<uint32_t> s(n), a(n), s2(n), a2(n);
    std::vector<int32_t> r(n);
    std::vector<uint8_t> done(n);
    for (auto& v : q) v = int32_t(rng());
    ref = q;
    for (uint32_t i = 0; i < n; i++) {
        s[i] = adversarial ? 0 : uint32_t(rng() % c.n_states);
        a[i] = adversarial ? 0 : uint32_t(rng() % c.n_actions);
        s2[i] = adversarial && (i % 3) ? s[i] : uint32_t(rng() % c.n_states);
        a2[i] = uint32_t(rng() % c.n_actions);
        const uint64_t pick = rng() % 4;
        r[i] = pick == 0 ? INT32_MAX : pick == 1 ? INT32_MIN : int32_t(rng());
        done[i] = (rng() % 5) == 0;
    }
    tabular::update_batch(q.data(), c.n_actions, c.alpha, c.gamma, c.sarsa, s.data(), a.data(), r.data(), s2.data(),
                          a2.data(), done.data(), n);
    for (uint32_t i = 0; i < n; i++) reference(ref, c, s[i], a[i], r[i], s2[i], a2[i], done[i]);
    int errors = 0;
    for (size_t i = 0; i < q.size(); i++) errors += q[i] != ref[i];
    return errors;
}

// ---- the HLS top, through its ports -------------------------------------------------------------

struct Command {
    uint32_t op, s, a, s2, a2;
    int32_t value;
    bool done;
};

pearl::axis128 encode(const Command& c, bool last) {
    const uint64_t lo = uint64_t(uint32_t(c.value)) | (uint64_t(c.s) << 32);
    const uint64_t hi = uint64_t(c.s2) | (uint64_t(c.a & 0xFF) << 32) | (uint64_t(c.a2 & 0xFF) << 40) |
                        (uint64_t(c.done) << 48) | (uint64_t(c.op) << 56);
    return pearl::make_axis128(lo, hi, last);
}

struct TopCall {
    std::vector<int32_t> reads;  // values of the READ responses, in order
    std::vector<uint32_t> counts;  // UPDATE counts of the IDENTITY responses, in order
    uint32_t max_states = 0, max_actions = 0, updates = 0;
    uint64_t slots = 0;  // issue slots the call took (commands + waits for writes in flight)
    int errors = 0;
};

TopCall call_top(const std::vector<Command>& cmds, const Case& c) {
    pearl::stream<pearl::axis128> in, out;
    for (size_t i = 0; i < cmds.size(); i++) in.write(encode(cmds[i], i + 1 == cmds.size()));
    TopCall r;
    tabular_top(in, out, uint32_t(cmds.size()), c.alpha, c.gamma, c.sarsa, c.n_actions, r.max_states, r.max_actions,
                r.updates);
    if (tabular::g_csim_violations != 0) {  // a read within HAZARD_WINDOW slots of its row's write
        std::printf("top: %llu reads ran ahead of a write in flight\n", (unsigned long long)tabular::g_csim_violations);
        r.errors++;
    }
    r.slots = tabular::g_csim_slots;
    for (size_t i = 0; i < cmds.size(); i++) {
        if (cmds[i].op != tabular::OP_READ && cmds[i].op != tabular::OP_IDENTITY) continue;
        if (out.empty()) {
            std::printf("top: command %zu has no response\n", i);
            r.errors++;
            break;
        }
        const pearl::axis128 w = out.read();
        const uint64_t lo = pearl::axis_lo(w), hi = pearl::axis_hi(w);
        if (cmds[i].op == tabular::OP_IDENTITY) {  // SPEC.md: count, max_states, max_actions, opcode
            r.errors += (lo >> 32) != TABULAR_STATES || uint32_t(hi) != TABULAR_ACTIONS || (hi >> 56) != 0x05 ||
                        ((hi >> 32) & 0xFFFFFF) != 0 || w.last != (i + 1 == cmds.size());
            r.counts.push_back(uint32_t(lo));
            continue;
        }
        const bool echo_ok = uint32_t(lo >> 32) == cmds[i].s && ((hi >> 32) & 0xFF) == cmds[i].a && (hi >> 56) == 0x03 &&
                             w.last == (i + 1 == cmds.size());
        if (!echo_ok) r.errors++;
        r.reads.push_back(int32_t(uint32_t(lo)));
    }
    if (!in.empty() || !out.empty()) {
        std::printf("top: words left over (in %d, out %d)\n", int(!in.empty()), int(!out.empty()));
        r.errors++;
    }
    return r;
}

// Issue slots by hand (SPEC.md, "Pipeline hazards"): UPDATEs on rows that no write in flight touches
// take one slot each; an UPDATE whose row s or s2 the command before wrote waits HAZARD_WINDOW - 1
// slots; a READ of the row just written, the same.
int check_issue_slots(std::mt19937_64& rng) {
    const Case c{TABULAR_STATES, 1, 6554, 58982, false};
    const uint32_t W = tabular::HAZARD_WINDOW, n = 40;
    if (TABULAR_STATES < 2 * n) return 0;
    int errors = 0;
    std::vector<Command> distinct, same, chain;
    for (uint32_t i = 0; i < n; i++) {
        const int32_t r = int32_t(rng());
        distinct.push_back({tabular::OP_UPDATE, i, 0, n + i, 0, r, false});   // rows never revisited
        same.push_back({tabular::OP_UPDATE, 3, 0, 3, 0, r, false});           // one row, again and again
        chain.push_back({tabular::OP_UPDATE, i + 1, 0, i, 0, r, false});      // reads the row the last one wrote
    }
    std::vector<Command> read_back = {{tabular::OP_WRITE, 5, 0, 0, 0, 7, false}, {tabular::OP_READ, 5, 0, 0, 0, 0, false},
                                      {tabular::OP_READ, 6, 0, 0, 0, 0, false}};
    const uint64_t got[] = {call_top(distinct, c).slots, call_top(same, c).slots, call_top(chain, c).slots,
                            call_top(read_back, c).slots};
    const uint64_t want[] = {n, 1 + uint64_t(n - 1) * W, 1 + uint64_t(n - 1) * W, 2 + W};
    for (int k = 0; k < 4; k++) {
        if (got[k] != want[k]) {
            std::printf("top: case %d took %llu issue slots, the hazard rule gives %llu\n", k, (unsigned long long)got[k],
                        (unsigned long long)want[k]);
            errors++;
        }
    }
    return errors;
}

// The top's table for the states and actions of `c`, read back with READ commands.
std::vector<int32_t> read_table(const Case& c, int& errors) {
    std::vector<Command> cmds;
    for (uint32_t s = 0; s < c.n_states; s++)
        for (uint32_t a = 0; a < c.n_actions; a++) cmds.push_back({tabular::OP_READ, s, a, 0, 0, 0, false});
    TopCall r = call_top(cmds, c);
    errors += r.errors;
    return r.reads;
}

// Load a random table, run a stream of updates mixed with writes, reads and one clear, and compare
// everything with the reference on a plain table.
int run_top(const Case& c, std::mt19937_64& rng, uint32_t n, bool adversarial) {
    int errors = 0;
    std::vector<int32_t> ref(c.n_states * c.n_actions);
    std::vector<Command> load;
    for (uint32_t s = 0; s < c.n_states; s++)
        for (uint32_t a = 0; a < c.n_actions; a++) {
            const int32_t v = int32_t(rng());
            ref[s * c.n_actions + a] = v;
            load.push_back({tabular::OP_WRITE, s, a, 0, 0, v, false});
        }
    errors += call_top(load, c).errors;
    std::vector<Command> cmds;
    std::vector<int32_t> expect_reads;
    std::vector<uint32_t> expect_counts;
    uint32_t expect_updates = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint64_t kind = rng() % 20;
        Command cmd{tabular::OP_UPDATE, adversarial ? 0 : uint32_t(rng() % c.n_states),
                    adversarial ? 0 : uint32_t(rng() % c.n_actions), 0, uint32_t(rng() % c.n_actions), 0,
                    (rng() % 5) == 0};
        cmd.s2 = adversarial && (i % 3) ? cmd.s : uint32_t(rng() % c.n_states);
        const uint64_t pick = rng() % 4;
        cmd.value = pick == 0 ? INT32_MAX : pick == 1 ? INT32_MIN : int32_t(rng());
        if (i == n / 2) {
            cmd.op = tabular::OP_CLEAR;
            for (auto& v : ref) v = 0;
        } else if (kind == 0) {
            cmd.op = tabular::OP_WRITE;
            ref[cmd.s * c.n_actions + cmd.a] = cmd.value;
        } else if (kind == 1) {
            cmd.op = tabular::OP_READ;
            expect_reads.push_back(ref[cmd.s * c.n_actions + cmd.a]);
        } else if (kind == 2) {
            cmd.op = 0x7F;  // unknown opcode: ignored
        } else if (kind == 3) {
            cmd.s = TABULAR_STATES + uint32_t(rng() % 3);  // outside the synthesized table: ignored
        } else if (kind == 4 || i + 1 == n) {
            cmd.op = tabular::OP_IDENTITY;  // the UPDATEs applied so far in this call
            expect_counts.push_back(expect_updates);
        } else {
            reference(ref, c, cmd.s, cmd.a, cmd.value, cmd.s2, cmd.a2, cmd.done);
            expect_updates++;
        }
        cmds.push_back(cmd);
    }
    const TopCall r = call_top(cmds, c);
    errors += r.errors + (r.reads != expect_reads) + (r.updates != expect_updates) + (r.counts != expect_counts);
    errors += r.max_states != TABULAR_STATES || r.max_actions != TABULAR_ACTIONS;
    const std::vector<int32_t> got = read_table(c, errors);
    for (size_t i = 0; i < ref.size(); i++) errors += got[i] != ref[i];
    if (errors) std::printf("top: %d mismatches (%u x %u, sarsa %d)\n", errors, c.n_states, c.n_actions, int(c.sarsa));
    return errors;
}

}  // namespace

int main() {
    std::mt19937_64 rng(7);
    const Case cases[] = {{7, 3, 19661, 62259, false}, {7, 3, 19661, 62259, true}, {1, 1, 65536, 65536, false},
                          {2, 2, 65536, 65536, true},  {500, 6, 6554, 58982, false}, {64, 4, 1, 0, true}};
    int errors = 0, runs = 0;
    for (const Case& c : cases) {
        for (bool adversarial : {false, true}) {
            errors += run(c, rng, 2000, adversarial);
            runs++;
        }
    }
    // The top: shapes that fit the synthesized table (TABULAR_STATES x TABULAR_ACTIONS), fewer columns
    // in use than synthesized among them, each from a table loaded with WRITE.
    const Case top_cases[] = {{7, 3, 19661, 62259, false},
                              {7, 3, 19661, 62259, true},
                              {1, 1, 65536, 65536, false},
                              {2, TABULAR_ACTIONS, 65536, 65536, true},
                              {TABULAR_STATES, TABULAR_ACTIONS, 6554, 58982, false},
                              {TABULAR_STATES < 64 ? TABULAR_STATES : 64, 1, 1, 0, true}};
    for (const Case& c : top_cases) {
        if (c.n_states > TABULAR_STATES || c.n_actions > TABULAR_ACTIONS) continue;
        for (bool adversarial : {false, true}) {
            errors += run_top(c, rng, 3000, adversarial);
            runs++;
        }
    }
    errors += check_issue_slots(rng);
    runs++;
    // CLEAR zeroes the whole synthesized table, and an empty call reports the identity.
    {
        const Case c{TABULAR_STATES, TABULAR_ACTIONS, 1, 0, false};
        errors += call_top({{tabular::OP_CLEAR, 0, 0, 0, 0, 0, false}}, c).errors;
        for (int32_t v : read_table(c, errors)) errors += v != 0;
        const TopCall empty = call_top({}, c);
        errors += empty.max_states != TABULAR_STATES || empty.max_actions != TABULAR_ACTIONS || empty.updates != 0;
        runs++;
    }
    std::printf("tabular csim: %s (%d cases, %d mismatches; top %u x %u)\n", errors ? "FAIL" : "PASS", runs, errors,
                unsigned(TABULAR_STATES), unsigned(TABULAR_ACTIONS));
    return errors != 0;
}
