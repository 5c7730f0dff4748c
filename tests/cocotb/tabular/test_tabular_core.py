"""cocotb testbench of hls/tabular/rtl/tabular_core.sv (the table in block RAM and the update pipeline):
bit-exact against the numpy reference (pearl_fpga.kernels.TabularQ, backend "numpy") on random and
adversarial streams (the same (s, a) over and over, s2 == s, SARSA and Q-learning, saturation, WRITE and
READ between updates of the same row), and the HLS top's schedule clock for clock: each UPDATE issues at
the slot spec.tabular.hls_issue_schedule gives and is written spec.tabular.rtl_latency clocks later.

Run by tests/test_tabular_rtl.py (cocotb's Python runner, Verilator). Table size from the environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from pearl_fpga.kernels import TabularQ
from pearl_fpga.spec.tabular import HAZARD_WINDOW, hls_issue_schedule, rtl_latency

S = int(os.environ.get("TABULAR_STATES", "13"))
A = int(os.environ.get("TABULAR_ACTIONS", "3"))
SEED = int(os.environ.get("TABULAR_SEED", "1"))
UPDATE, WRITE, READ, CLEAR = 0, 1, 2, 3  # tabular_core's in_op (4: PASS, the top's)


def stream(rng: np.random.Generator, n: int, reward_bits: int = 20) -> dict[str, np.ndarray]:
    """A random-walk trajectory (s[i+1] = s2[i] except after done): many reads of rows just written."""
    s = np.empty(n, np.int64)
    s2 = np.empty(n, np.int64)
    done = rng.random(n) < 0.1
    cur = int(rng.integers(S))
    for i in range(n):
        s[i] = cur
        s2[i] = (cur + int(rng.integers(-1, 2))) % S
        cur = int(rng.integers(S)) if done[i] else int(s2[i])
    words = rng.integers(-(1 << reward_bits), 1 << reward_bits, n)
    return {"s": s, "a": rng.integers(0, A, n), "r": words, "s2": s2, "done": done, "a2": rng.integers(0, A, n)}


def updates(t: dict[str, np.ndarray]) -> list[dict[str, int]]:
    return [{"op": UPDATE, "s": int(t["s"][i]), "a": int(t["a"][i]), "value": int(t["r"][i]), "s2": int(t["s2"][i]),
             "a2": int(t["a2"][i]), "done": int(t["done"][i])} for i in range(len(t["s"]))]


class Core:
    def __init__(self, dut) -> None:
        self.dut = dut
        self.clock = 0

    async def reset(self, alpha: int, gamma: int, sarsa: bool) -> None:
        d = self.dut
        d.rst_n.value, d.in_valid.value = 0, 0
        d.alpha.value, d.gamma.value, d.sarsa.value, d.n_actions.value = alpha, gamma, int(sarsa), A
        for name in ("in_op", "in_answer", "in_tag", "in_s", "in_a", "in_value", "in_s2", "in_a2", "in_done"):
            getattr(d, name).value = 0
        for _ in range(2):
            await RisingEdge(d.clk)
        d.rst_n.value = 1
        await self.run([])  # reset zeroes the table, one row per clock

    async def run(self, cmds: list[dict[str, int]], gaps: np.ndarray | None = None) -> dict[str, Any]:
        """Present the commands in order (each held until in_ready; idle clocks before command i where
        `gaps` says), until the pipeline is empty and HAZARD_WINDOW clocks have passed, so the next run
        starts with nothing in flight. Returns the clocks (0: the first presentation) each command
        left the issue register at, the READ answers, and the clock after the last one busy (the last
        write landed, or the clear ended)."""
        d = self.dut
        issued: list[int] = []
        answers: list[int] = []
        wait = [0 if gaps is None else int(g) for g in (gaps if gaps is not None else [0] * len(cmds))]
        clock = quiet = last_busy = 0
        i = 0
        while i < len(cmds) or quiet < HAZARD_WINDOW:
            cmd = cmds[i] if i < len(cmds) and wait[i] == 0 else None
            d.in_valid.value = cmd is not None
            if cmd is not None:
                d.in_op.value, d.in_s.value, d.in_a.value = cmd["op"], cmd["s"], cmd["a"]
                d.in_answer.value = int(cmd["op"] == READ)
                d.in_value.value = cmd["value"] & 0xFFFFFFFF
                d.in_s2.value, d.in_a2.value, d.in_done.value = cmd.get("s2", 0), cmd.get("a2", 0), cmd.get("done", 0)
            await ReadOnly()
            taken = cmd is not None and bool(d.in_ready.value)
            if int(d.issued.value):
                issued.append(clock)
            if int(d.ans_valid.value):
                answers.append(d.rd_data.value.to_signed())
            busy = bool(d.busy.value)
            await RisingEdge(d.clk)
            if taken:
                i += 1
            elif i < len(cmds) and wait[i] > 0:
                wait[i] -= 1
            if busy:
                last_busy = clock + 1
            quiet = quiet + 1 if i == len(cmds) and not busy else 0
            clock += 1
        d.in_valid.value = 0
        assert len(issued) == len(cmds), f"{len(issued)} issues for {len(cmds)} commands"
        return {"issued": issued, "answers": answers, "clocks": last_busy}

    async def table(self) -> np.ndarray:
        out = await self.run([{"op": READ, "s": s, "a": a, "value": 0} for s in range(S) for a in range(A)])
        assert len(out["answers"]) == S * A, f"{len(out['answers'])} READ answers for {S * A} READs"
        return np.array(out["answers"], np.int64).reshape(S, A).astype(np.int32)

    async def load(self, table: np.ndarray) -> None:
        await self.run([{"op": WRITE, "s": s, "a": a, "value": int(table[s, a])} for s in range(S) for a in range(A)])


def reference(alpha: int, gamma: int, sarsa: bool, batches: list[dict[str, np.ndarray]],
              start: np.ndarray | None = None) -> np.ndarray:
    ref = TabularQ(S, A, alpha / 65536, gamma / 65536, algo="sarsa" if sarsa else "q", backend="numpy")
    if start is not None:
        ref.load(start)
    for t in batches:
        ref.update(t["s"], t["a"], t["r"] / 65536, t["s2"], t["done"], t["a2"])
    return ref.table


def start_clock(dut) -> None:
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} entries differ, first at {tuple(bad[0])}: rtl {got[tuple(bad[0])]} vs numpy {want[tuple(bad[0])]}"


def assert_schedule(t: dict[str, np.ndarray], out: dict[str, Any]) -> None:
    """Every UPDATE issued at the HLS top's slot, and the last one written rtl_latency clocks later."""
    want = [slot - 1 for slot in hls_issue_schedule(t["s"], t["s2"])]
    got = [c - out["issued"][0] for c in out["issued"]]
    first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
    assert first is None, f"update {first} issued at slot {got[first]}, the HLS top's rule says {want[first]}"
    assert out["clocks"] == out["issued"][-1] + 1 + rtl_latency(A), f"{out['clocks']} clocks, last issue at {out['issued'][-1]}"


async def check(dut, alpha: int, gamma: int, sarsa: bool, batches: list[dict[str, np.ndarray]], gaps=None) -> list[dict]:
    """Reset, run the batches, compare the whole table with the numpy reference; the runs' records."""
    core = Core(dut)
    await core.reset(alpha, gamma, sarsa)
    outs = [await core.run(updates(t), gaps) for t in batches]
    assert_same(await core.table(), reference(alpha, gamma, sarsa, batches))
    return outs


@cocotb.test()
async def random_q_learning_on_the_hls_schedule(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED)
    t = stream(rng, 400)
    out = (await check(dut, alpha=int(rng.integers(1, 65537)), gamma=int(rng.integers(0, 65537)), sarsa=False,
                       batches=[t]))[0]
    assert_schedule(t, out)
    first = out["issued"][0]
    Path("tabular_cycles.json").write_text(json.dumps({"transitions": len(t["s"]), "clocks": out["clocks"] - first,
                                                       "issue_slots": out["issued"][-1] - first + 1,
                                                       "latency": rtl_latency(A)}))


@cocotb.test()
async def independent_rows_one_update_per_clock(dut):
    """Rows that no update of the last HAZARD_WINDOW - 1 wrote: one issue per clock (when the table has
    the rows for it), the last write LATENCY clocks after the last issue."""
    start_clock(dut)
    rng = np.random.default_rng(SEED + 5)
    n = 3 * S
    s = np.arange(n) % S
    t = {"s": s, "a": rng.integers(0, A, n), "r": rng.integers(-(1 << 20), 1 << 20, n), "s2": s.copy(),
         "done": rng.random(n) < 0.1, "a2": rng.integers(0, A, n)}
    out = (await check(dut, alpha=40000, gamma=60000, sarsa=False, batches=[t]))[0]
    assert_schedule(t, out)
    if S >= HAZARD_WINDOW:
        assert out["issued"] == list(range(out["issued"][0], out["issued"][0] + n))


@cocotb.test()
async def random_sarsa(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 1)
    batches = [stream(rng, 300), stream(rng, 50)]
    outs = await check(dut, alpha=6554, gamma=64880, sarsa=True, batches=batches)
    assert_schedule(batches[1], outs[1])


@cocotb.test()
async def same_entry_many_times_and_self_loops(dut):
    start_clock(dut)
    n = 60
    s = np.full(n, S - 1)
    t = {"s": s, "a": np.zeros(n, np.int64), "r": np.full(n, 3 << 16), "s2": s.copy(),
         "done": np.arange(n) % 17 == 16, "a2": np.zeros(n, np.int64)}
    for alpha, sarsa in ((65536 // 3, False), (40000, True)):
        out = (await check(dut, alpha=alpha, gamma=65536, sarsa=sarsa, batches=[t]))[0]
        assert out["issued"] == [out["issued"][0] + HAZARD_WINDOW * i for i in range(n)]
        assert_schedule(t, out)


@cocotb.test()
async def a_row_read_again_at_every_distance(dut):
    """Row 0 written, then d - 1 updates of other rows, then row 0 read again (as s, then as s2 only),
    for every d up to the table's rows and HAZARD_WINDOW: a read at any distance inside the window
    waits for the write (a stale read would change the table), and one outside it does not."""
    start_clock(dut)
    rng = np.random.default_rng(SEED + 7)
    s_list: list[int] = []
    s2_list: list[int] = []
    for d in range(1, min(S, HAZARD_WINDOW + 1)):
        rows = list(range(d))                      # distinct rows, each bootstrapping on itself
        s_list += rows + [0]
        s2_list += rows + [0]
        if d < S:
            s_list += list(range(1, d)) + [d]      # row 0 again, as the bootstrap row only
            s2_list += list(range(1, d)) + [0]
    n = len(s_list)
    t = {"s": np.array(s_list), "a": rng.integers(0, A, n), "r": rng.integers(-(1 << 24), 1 << 24, n),
         "s2": np.array(s2_list), "done": np.zeros(n, bool), "a2": rng.integers(0, A, n)}
    for sarsa in (False, True):
        out = (await check(dut, alpha=50000, gamma=60000, sarsa=sarsa, batches=[t]))[0]
        assert_schedule(t, out)


@cocotb.test()
async def saturation_both_ways(dut):
    start_clock(dut)
    n = 40
    half = n // 2
    t = {"s": np.zeros(n, np.int64), "a": np.zeros(n, np.int64),
         "r": np.r_[np.full(half, (1 << 31) - 1), np.full(n - half, -(1 << 31))],
         "s2": np.zeros(n, np.int64), "done": np.zeros(n, bool), "a2": np.zeros(n, np.int64)}
    await check(dut, alpha=65536, gamma=65536, sarsa=False, batches=[t])


@cocotb.test()
async def idle_clocks_between_transitions(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 2)
    t = stream(rng, 200)
    await check(dut, alpha=30000, gamma=60000, sarsa=False, batches=[t], gaps=rng.integers(0, 4, 200))


@cocotb.test()
async def host_writes_load_a_table_that_updates_then_use(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 4)
    core = Core(dut)
    await core.reset(alpha=20000, gamma=65000, sarsa=False)
    start = rng.integers(-(1 << 31), 1 << 31, (S, A), dtype=np.int64).astype(np.int32)
    await core.load(start)
    np.testing.assert_array_equal(await core.table(), start)
    t = stream(rng, 100)
    await core.run(updates(t))
    assert_same(await core.table(), reference(20000, 65000, False, [t], start))


@cocotb.test()
async def writes_and_reads_between_updates_of_the_same_row(dut):
    """WRITE, READ and UPDATE of a few rows back to back: the READ answers and the table are those of
    the commands applied one after another (a WRITE right after an UPDATE of its word wins; a READ
    right after either sees it)."""
    start_clock(dut)
    rng = np.random.default_rng(SEED + 6)
    core = Core(dut)
    alpha, gamma = 50000, 62000
    await core.reset(alpha, gamma, sarsa=False)
    ref = TabularQ(S, A, alpha / 65536, gamma / 65536, backend="numpy")
    rows = min(S, 3)
    cmds, want = [], []
    for _ in range(300):
        op = int(rng.choice([UPDATE, WRITE, READ], p=[0.5, 0.25, 0.25]))
        s, a = int(rng.integers(rows)), int(rng.integers(A))
        cmd = {"op": op, "s": s, "a": a, "value": int(rng.integers(-(1 << 24), 1 << 24)), "s2": int(rng.integers(rows)),
               "a2": 0, "done": int(rng.random() < 0.1)}
        cmds.append(cmd)
        if op == UPDATE:
            ref.update([s], [a], [cmd["value"] / 65536], [cmd["s2"]], [bool(cmd["done"])])
        elif op == WRITE:
            table = ref.table.copy()
            table[s, a] = cmd["value"]
            ref.load(table)
        else:
            want.append(int(ref.table[s, a]))
    out = await core.run(cmds)
    assert out["answers"] == want
    assert_same(await core.table(), ref.table)


@cocotb.test()
async def clear_zeroes_the_table_one_row_per_clock(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 3)
    await check(dut, alpha=30000, gamma=60000, sarsa=False, batches=[stream(rng, 50)])
    core = Core(dut)
    out = await core.run(updates(stream(rng, 20)) + [{"op": CLEAR, "s": 0, "a": 0, "value": 0}])
    # the CLEAR issues once the updates are written, then zeroes one row per clock
    assert out["issued"][-1] >= out["issued"][-2] + rtl_latency(A)
    assert out["clocks"] == out["issued"][-1] + 1 + S
    assert not (await core.table()).any()
