// pybind11 binding of the tabular kernel's C++ (hls/tabular/tabular.cpp) as the "cpu" backend:
// pearl_fpga._tabular_native.update(table, alpha, gamma, sarsa, s, a, r, s2, a2, done) applies a batch
// of transitions in order to a C-contiguous int32 table in place, with the GIL released (so K
// threads can run K partitions). Arrays of the wrong dtype, shape or layout are refused, never converted.
// With the GIL released another Python thread may change the caller's arrays: every index is either
// copied before it is checked (update) or read once and checked as read (update_checked), so the
// value checked is the value used.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "isa.h"
#include "tabular.h"
#include "worker_pool.h"

namespace py = pybind11;

namespace {

template <typename T>
const T* vector_of(const py::array& x, const char* name, py::ssize_t n) {
    if (!py::isinstance<py::array_t<T>>(x) || x.ndim() != 1 || x.shape(0) != n ||
        !(x.flags() & py::array::c_style))
        throw py::type_error(std::string(name) + " must be a 1-D C-contiguous " + py::str(py::dtype::of<T>()).cast<std::string>() +
                             " array of length " + std::to_string(n));
    return static_cast<const T*>(x.data());
}

// A private copy, taken with the GIL held, of what the kernel reads with the GIL released.
template <typename T>
std::vector<T> copy_of(const py::array& x, const char* name, py::ssize_t n) {
    const T* p = vector_of<T>(x, name, n);
    return std::vector<T>(p, p + n);
}

// One relaxed atomic load: the compiler may not read the caller's array again later (a second read
// could see another thread's write after the check).
template <typename T>
inline T read_once(const T* p) {
    T v;
    __atomic_load(p, &v, __ATOMIC_RELAXED);
    return v;
}

void update(py::array table, uint32_t alpha, uint32_t gamma, bool sarsa, const py::array& s, const py::array& a,
            const py::array& r, const py::array& s2, const py::array& a2, const py::array& done) {
    if (!py::isinstance<py::array_t<int32_t>>(table) || table.ndim() != 2 || !(table.flags() & py::array::c_style) ||
        !table.writeable())
        throw py::type_error("table must be a writable 2-D C-contiguous int32 array (n_states, n_actions)");
    if (alpha < 1 || alpha > tabular::ONE || gamma > tabular::ONE)
        throw py::value_error("alpha must be a word in 1..65536 and gamma in 0..65536 (16 fractional bits)");
    const py::ssize_t n = s.ndim() == 1 ? s.shape(0) : -1;
    const auto ps = copy_of<uint32_t>(s, "s", n), pa = copy_of<uint32_t>(a, "a", n), ps2 = copy_of<uint32_t>(s2, "s2", n),
               pa2 = copy_of<uint32_t>(a2, "a2", n);
    const auto pr = copy_of<int32_t>(r, "r", n);
    const auto pd = copy_of<uint8_t>(done, "done", n);
    const auto n_states = uint64_t(table.shape(0));
    const auto n_actions = uint32_t(table.shape(1));
    for (py::ssize_t i = 0; i < n; i++) {  // the host validates; this guards the memory
        if (ps[i] >= n_states || ps2[i] >= n_states || pa[i] >= n_actions || (sarsa && pa2[i] >= n_actions))
            throw py::index_error("state or action index out of range of the table at transition " + std::to_string(i));
    }
    auto* q = static_cast<int32_t*>(table.mutable_data());
    py::gil_scoped_release release;
    tabular::update_batch(q, n_actions, alpha, gamma, sarsa, ps.data(), pa.data(), pr.data(), ps2.data(), pa2.data(),
                          pd.data(), uint32_t(n));
}


// The row max as a balanced tree (depth log2 N instead of N - 1: it is on the loop-carried chain).
template <int N>
__attribute__((always_inline)) inline int32_t row_max(const int32_t* row) {
    if constexpr (N == 1) {
        return row[0];
    } else {
        const int32_t lo = row_max<N / 2>(row), hi = row_max<N - N / 2>(row + N / 2);
        return lo > hi ? lo : hi;
    }
}

inline int32_t row_max_n(const int32_t* row, int64_t n) {
    int32_t best = row[0];
    for (int64_t b = 1; b < n; b++) best = row[b] > best ? row[b] : best;
    return best;
}

// The undo log's entry of one applied transition: where it wrote and the word it replaced.
struct Undo {
    int64_t at;
    int32_t word;
};

// One transition of the fast path: check it, convert its reward, remember the old word, update.
// False (nothing written) for a bad entry. N_ACTIONS > 0 fixes the row length at compile time, so
// the row max unrolls; 0 reads it from `n_actions`. CHECK_A2: Q-learning was given an a2, which it
// does not use but checks as the validator does (SARSA always checks its a2).
template <int N_ACTIONS, bool SARSA, bool CHECK_A2>
__attribute__((always_inline)) inline bool checked_step(int32_t* q, int64_t n_states, int64_t n_actions, uint32_t alpha, uint32_t gamma,
                         int64_t s, int64_t a, double r, int64_t s2, int64_t a2, bool done, Undo& undo) {
    const int64_t na = N_ACTIONS > 0 ? N_ACTIONS : n_actions;
    // The reward word floor(r * 65536 + 0.5), as spec.tabular.reward_words; floor(x) is an int32 exactly
    // when -2^31 <= x < 2^31 (NaN and inf fail), and then it is the truncation, less one below a
    // negative non-integer (no libm call: the baseline x86-64 build has no rounding instruction).
    const double x = r * 65536.0 + 0.5;
    const bool reward_ok = (x >= -2147483648.0) & (x < 2147483648.0);
    const double xc = reward_ok ? x : 0.0;
    const int64_t t = int64_t(xc);
    const int32_t w = int32_t(t - (double(t) > xc));
    const bool in = (uint64_t(s) < uint64_t(n_states)) & (uint64_t(s2) < uint64_t(n_states)) &
                    (uint64_t(a) < uint64_t(na)) & reward_ok & (!(SARSA || CHECK_A2) || uint64_t(a2) < uint64_t(na));
    if (!in) return false;
    const int64_t at = s * na + a;
    int32_t* q_sa = q + at;
    const int32_t* row2 = q + s2 * na;
    int64_t boot = 0;
    if (!done) {
        if constexpr (SARSA) {
            boot = row2[a2];
        } else {
            boot = N_ACTIONS > 0 ? row_max<N_ACTIONS>(row2) : row_max_n(row2, na);
        }
    }
    undo = {at, *q_sa};
    *q_sa = tabular::updated(*q_sa, boot, w, alpha, gamma);
    return true;
}

// All transitions in one pass (each checked just before it is applied). With UNDO, at the first bad
// entry the words written so far are restored from the undo log, newest first, so nothing has
// changed; without it (a private table copy, thrown away on failure) nothing is logged. Each input
// is read once (the caller's arrays may change meanwhile) and the log holds the checked offsets.
template <int N_ACTIONS, bool SARSA, bool UNDO, bool CHECK_A2>
__attribute__((always_inline)) inline bool checked_run(int32_t* q, int64_t n_states, int64_t n_actions, uint32_t alpha, uint32_t gamma,
                 const int64_t* s, const int64_t* a, const double* r, const int64_t* s2, const int64_t* a2,
                 const bool* done, py::ssize_t n, Undo* undo) {
    Undo unlogged;
    for (py::ssize_t i = 0; i < n; i++) {
        if (!checked_step<N_ACTIONS, SARSA, CHECK_A2>(q, n_states, n_actions, alpha, gamma, read_once(s + i),
                                                      read_once(a + i), read_once(r + i), read_once(s2 + i),
                                                      SARSA || CHECK_A2 ? read_once(a2 + i) : 0, read_once(done + i),
                                                      UNDO ? undo[i] : unlogged)) {
            if constexpr (UNDO) {
                for (py::ssize_t j = i; j-- > 0;) q[undo[j].at] = undo[j].word;
            }
            return false;
        }
    }
    return true;
}

// The same loop compiled for the baseline and, on x86-64, with AVX2/BMI2 (chosen at run time where the
// CPU has them and PEARL_FPGA_NATIVE_ISA allows: the shifts and compares of the chain get shorter
// encodings); both compute the same integers.
#define TABULAR_RUN_ARGS                                                                                            \
    int32_t *q, int64_t n_states, int64_t n_actions, uint32_t alpha, uint32_t gamma, const int64_t *s,              \
        const int64_t *a, const double *r, const int64_t *s2, const int64_t *a2, const bool *done, py::ssize_t n,   \
        Undo *undo
#define TABULAR_RUN_CALL q, n_states, n_actions, alpha, gamma, s, a, r, s2, a2, done, n, undo
template <int N_ACTIONS, bool SARSA, bool UNDO, bool CHECK_A2>
bool checked_run_base(TABULAR_RUN_ARGS) {
    return checked_run<N_ACTIONS, SARSA, UNDO, CHECK_A2>(TABULAR_RUN_CALL);
}
#if defined(__x86_64__)
template <int N_ACTIONS, bool SARSA, bool UNDO, bool CHECK_A2>
__attribute__((target("avx2,bmi,bmi2"))) bool checked_run_avx2(TABULAR_RUN_ARGS) {
    return checked_run<N_ACTIONS, SARSA, UNDO, CHECK_A2>(TABULAR_RUN_CALL);
}
bool has_avx2() { return int(pearl_isa::best()) >= int(pearl_isa::Isa::AVX2); }  // within PEARL_FPGA_NATIVE_ISA
#else
template <int N_ACTIONS, bool SARSA, bool UNDO, bool CHECK_A2>
bool checked_run_avx2(TABULAR_RUN_ARGS) {
    return checked_run<N_ACTIONS, SARSA, UNDO, CHECK_A2>(TABULAR_RUN_CALL);
}
bool has_avx2() { return false; }
#endif

// The loop for one call, its loop-invariant choices made once: SARSA or not, an a2 to check, the ISA,
// and the toy-text environments' action counts (2, 4, 6) with an unrolled row max.
using RunFn = bool (*)(TABULAR_RUN_ARGS);
template <bool SARSA, bool UNDO, bool CHECK_A2>
RunFn run_for_actions(int64_t n_actions, bool avx2) {
    switch (n_actions) {
        case 2: return avx2 ? &checked_run_avx2<2, SARSA, UNDO, CHECK_A2> : &checked_run_base<2, SARSA, UNDO, CHECK_A2>;
        case 4: return avx2 ? &checked_run_avx2<4, SARSA, UNDO, CHECK_A2> : &checked_run_base<4, SARSA, UNDO, CHECK_A2>;
        case 6: return avx2 ? &checked_run_avx2<6, SARSA, UNDO, CHECK_A2> : &checked_run_base<6, SARSA, UNDO, CHECK_A2>;
        default: return avx2 ? &checked_run_avx2<0, SARSA, UNDO, CHECK_A2> : &checked_run_base<0, SARSA, UNDO, CHECK_A2>;
    }
}

// The table and the words every fast path checks first.
int32_t* checked_table(py::array& table, uint32_t alpha, uint32_t gamma) {
    if (!py::isinstance<py::array_t<int32_t>>(table) || table.ndim() != 2 || !(table.flags() & py::array::c_style) ||
        !table.writeable())
        throw py::type_error("table must be a writable 2-D C-contiguous int32 array (n_states, n_actions)");
    if (alpha < 1 || alpha > tabular::ONE || gamma > tabular::ONE)
        throw py::value_error("alpha must be a word in 1..65536 and gamma in 0..65536 (16 fractional bits)");
    return static_cast<int32_t*>(table.mutable_data());
}

// The arrays of a fast-path call: int64 indices, float64 rewards, bool done, one length; a2 may be None.
struct Transitions {
    const int64_t *s, *a;
    const double* r;
    const int64_t* s2;
    const bool* done;
    const int64_t* a2;
    py::ssize_t n;
};

Transitions transitions_of(const py::array& s, const py::array& a, const py::array& r, const py::array& s2,
                           const py::object& a2, const py::array& done) {
    const py::ssize_t n = s.ndim() == 1 ? s.shape(0) : -1;
    return {vector_of<int64_t>(s, "s", n),
            vector_of<int64_t>(a, "a", n),
            vector_of<double>(r, "r", n),
            vector_of<int64_t>(s2, "s2", n),
            vector_of<bool>(done, "done", n),
            a2.is_none() ? nullptr : vector_of<int64_t>(a2.cast<py::array>(), "a2", n),
            n};
}

// The fast path of TabularQ.update for the arrays users pass (int64 indices, float64 rewards, bool
// done): check and apply in one pass (nothing changes if anything is wrong: it returns false and the
// caller's validator raises the precise error). a2 may be None (Q-learning).
bool update_checked(py::array table, uint32_t alpha, uint32_t gamma, bool sarsa, const py::array& s,
                    const py::array& a, const py::array& r, const py::array& s2, const py::object& a2_obj,
                    const py::array& done) {
    int32_t* q = checked_table(table, alpha, gamma);
    const Transitions t = transitions_of(s, a, r, s2, a2_obj, done);
    if (sarsa && t.a2 == nullptr) return false;
    if (!sarsa && t.a2 != nullptr) {  // Q-learning ignores a2, but a given a2 is checked as the validator does
        bool a2_ok = true;
        for (py::ssize_t i = 0; i < t.n; i++) a2_ok &= uint64_t(t.a2[i]) < uint64_t(table.shape(1));
        if (!a2_ok) return false;
    }
    const auto n_states = int64_t(table.shape(0));
    const auto n_actions = int64_t(table.shape(1));
    std::unique_ptr<Undo[]> undo(new Undo[size_t(t.n > 0 ? t.n : 1)]);  // each entry written before it is read
    py::gil_scoped_release release;
    const RunFn run = sarsa ? run_for_actions<true, true, false>(n_actions, has_avx2())
                            : run_for_actions<false, true, false>(n_actions, has_avx2());
    return run(q, n_states, n_actions, alpha, gamma, t.s, t.a, t.r, t.s2, t.a2, t.done, t.n, undo.get());
}

// A buffer of its own pages: the threads' tables never share a cache line (nor a page).
template <typename T>
struct PageBuffer {
    struct Free {
        void operator()(T* p) const { std::free(p); }
    };
    std::unique_ptr<T, Free> data;
    explicit PageBuffer(size_t count) {
        const size_t bytes = (count * sizeof(T) + 4095) / 4096 * 4096;
        data.reset(static_cast<T*>(std::aligned_alloc(4096, bytes > 0 ? bytes : 4096)));
        if (!data) throw std::bad_alloc();
    }
};

// The partitioned (SwiftRL) mode in one call (SPEC.md, "Partitioned mode"): the transitions split into
// `parts` contiguous slices as np.array_split splits them, each slice applied in order to its own copy
// of `table`, the copies merged into `table` by their integer mean rounded half up. `threads` threads
// of a persistent pool take the slices one at a time, each into its private copy, and add each
// finished copy into their private int64 sum; the sums are added and divided once at the end. Integer
// sums do not depend on which thread ran which slice, so neither does the table. False, with `table`
// unchanged, if any transition is bad (the caller's validator then names it).
bool update_partitioned(py::array table, uint32_t alpha, uint32_t gamma, bool sarsa, const py::array& s,
                        const py::array& a, const py::array& r, const py::array& s2, const py::object& a2_obj,
                        const py::array& done, int64_t parts, int threads) {
    int32_t* q = checked_table(table, alpha, gamma);
    const Transitions t = transitions_of(s, a, r, s2, a2_obj, done);
    if (parts < 1) throw py::value_error("parts must be >= 1, got " + std::to_string(parts));
    if (threads < 1) throw py::value_error("threads must be >= 1, got " + std::to_string(threads));
    if (sarsa && t.a2 == nullptr) return false;
    const auto n_states = int64_t(table.shape(0));
    const auto n_actions = int64_t(table.shape(1));
    const auto entries = size_t(n_states * n_actions);
    const int workers = int(std::min<int64_t>(threads, parts));
    std::vector<PageBuffer<int32_t>> copies;  // each thread's working table
    std::vector<PageBuffer<int64_t>> sums;    // each thread's sum of its finished copies
    for (int w = 0; w < workers; w++) {
        copies.emplace_back(entries);
        sums.emplace_back(entries);
    }
    struct alignas(64) Tally {  // slices one thread finished (a line of its own: each thread writes its own)
        int64_t done = 0;
    };
    std::vector<Tally> tally(static_cast<size_t>(workers));
    const bool check_a2 = !sarsa && t.a2 != nullptr;
    {
        py::gil_scoped_release release;
        const bool avx2 = has_avx2();
        const RunFn run = sarsa      ? run_for_actions<true, false, false>(n_actions, avx2)
                          : check_a2 ? run_for_actions<false, false, true>(n_actions, avx2)
                                     : run_for_actions<false, false, false>(n_actions, avx2);
        std::atomic<int64_t> next_slice{0};
        std::atomic<bool> failed{false};
        const int64_t base = t.n / parts, longer = t.n % parts;  // np.array_split: the first n % parts are longer
        const std::function<void(int)> job = [&](int w) {
            int32_t* copy = copies[size_t(w)].data.get();
            int64_t* sum = sums[size_t(w)].data.get();
            for (;;) {
                const int64_t k = next_slice.fetch_add(1, std::memory_order_relaxed);
                if (k >= parts || failed.load(std::memory_order_relaxed)) return;
                const int64_t lo = k * base + std::min(k, longer), len = base + (k < longer);
                std::memcpy(copy, q, entries * sizeof(int32_t));
                if (!run(copy, n_states, n_actions, alpha, gamma, t.s + lo, t.a + lo, t.r + lo, t.s2 + lo,
                         t.a2 == nullptr ? nullptr : t.a2 + lo, t.done + lo, len, nullptr)) {
                    failed.store(true, std::memory_order_relaxed);
                    return;
                }
                if (tally[size_t(w)].done++ == 0) {
                    for (size_t e = 0; e < entries; e++) sum[e] = copy[e];
                } else {
                    for (size_t e = 0; e < entries; e++) sum[e] += copy[e];
                }
            }
        };
        pearl_pool::pool().run(workers, job);
        if (failed.load()) return false;
        // The merge: floor((sum + floor(K / 2)) / K), as spec.tabular.merge_partitions.
        int64_t* total = nullptr;
        for (int w = 0; w < workers; w++) {
            if (tally[size_t(w)].done == 0) continue;
            int64_t* sum = sums[size_t(w)].data.get();
            if (total == nullptr) {
                total = sum;
            } else {
                for (size_t e = 0; e < entries; e++) total[e] += sum[e];
            }
        }
        const int64_t half = parts / 2;
        if ((parts & (parts - 1)) == 0) {  // a power of two: the floor division is an arithmetic shift
            const int shift = __builtin_ctzll(uint64_t(parts));
            for (size_t e = 0; e < entries; e++) q[e] = int32_t((total[e] + half) >> shift);
        } else {
            for (size_t e = 0; e < entries; e++) {
                const int64_t x = total[e] + half;
                q[e] = int32_t(x / parts - (x % parts < 0));
            }
        }
    }
    return true;
}

}  // namespace

PYBIND11_MODULE(_tabular_native, m) {
    m.doc() = "The tabular Q-learning/SARSA kernel's C++ (hls/tabular) as the cpu backend";
    pearl_isa::best();  // an unknown PEARL_FPGA_NATIVE_ISA fails the import, naming the variable
    m.def("isa", [] { return std::string(has_avx2() ? "avx2" : "scalar"); },
          "The path update() runs: 'avx2' or 'scalar' (the CPU's, capped by PEARL_FPGA_NATIVE_ISA).");
    m.def("update", &update, py::arg("table"), py::arg("alpha"), py::arg("gamma"), py::arg("sarsa"), py::arg("s"),
          py::arg("a"), py::arg("r"), py::arg("s2"), py::arg("a2"), py::arg("done"),
          "Apply the transitions in order to `table` in place (GIL released).");
    m.def("update_checked", &update_checked, py::arg("table"), py::arg("alpha"), py::arg("gamma"), py::arg("sarsa"),
          py::arg("s"), py::arg("a"), py::arg("r"), py::arg("s2"), py::arg("a2"), py::arg("done"),
          "Check int64/float64/bool arrays and apply them (GIL released); False, changing nothing, on a bad entry.");
    m.def("update_partitioned", &update_partitioned, py::arg("table"), py::arg("alpha"), py::arg("gamma"),
          py::arg("sarsa"), py::arg("s"), py::arg("a"), py::arg("r"), py::arg("s2"), py::arg("a2"), py::arg("done"),
          py::arg("parts"), py::arg("threads"),
          "The partitioned mode over int64/float64/bool arrays: `parts` slices on private copies, on `threads` "
          "pooled threads (GIL released), merged into `table`; False, changing nothing, on a bad entry.");
    m.attr("FRAC_BITS") = tabular::FRAC_BITS;
}
