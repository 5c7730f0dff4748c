"""cocotb testbench of hls/tabular/rtl/tabular_core.sv: bit-exact against the numpy reference
(pearl_fpga.kernels.TabularQ, backend "numpy") on random and adversarial streams, one update per clock,
and a batch of n back-to-back transitions done within n + PIPELINE_DEPTH clocks.

Run by tests/test_tabular_rtl.py (cocotb's Python runner, Verilator). Table size from the environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from pearl_fpga.kernels import TabularQ
from pearl_fpga.spec.tabular import PIPELINE_DEPTH

S = int(os.environ.get("TABULAR_STATES", "13"))
A = int(os.environ.get("TABULAR_ACTIONS", "3"))
SEED = int(os.environ.get("TABULAR_SEED", "1"))


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


class Core:
    def __init__(self, dut) -> None:
        self.dut = dut

    async def reset(self, alpha: int, gamma: int, sarsa: bool) -> None:
        d = self.dut
        d.rst_n.value, d.clear.value, d.in_valid.value = 0, 0, 0
        d.alpha.value, d.gamma.value, d.sarsa.value, d.n_actions.value = alpha, gamma, int(sarsa), A
        for name in ("in_s", "in_a", "in_r", "in_s2", "in_a2", "in_done", "rd_addr", "wr_en", "wr_addr", "wr_data"):
            getattr(d, name).value = 0
        for _ in range(2):
            await RisingEdge(d.clk)
        d.rst_n.value = 1
        await RisingEdge(d.clk)

    async def run(self, t: dict[str, np.ndarray], gaps: np.ndarray | None = None) -> int:
        """Present the transitions (one per clock, or with idle clocks where `gaps` says); return the
        clocks from the first presentation until the last one is written."""
        d = self.dut
        start = int(d.updates.value)
        clocks = 0
        for i in range(len(t["s"])):
            while gaps is not None and gaps[i] > 0:
                d.in_valid.value = 0
                gaps[i] -= 1
                await RisingEdge(d.clk)
                clocks += 1
            d.in_valid.value = 1
            d.in_s.value, d.in_a.value, d.in_s2.value = int(t["s"][i]), int(t["a"][i]), int(t["s2"][i])
            d.in_a2.value, d.in_done.value = int(t["a2"][i]), int(t["done"][i])
            d.in_r.value = int(t["r"][i]) & 0xFFFFFFFF
            await RisingEdge(d.clk)
            clocks += 1
        d.in_valid.value = 0
        while int(d.updates.value) - start < len(t["s"]):
            await RisingEdge(d.clk)
            clocks += 1
        return clocks

    async def table(self) -> np.ndarray:
        out = np.empty(S * A, np.int64)
        for addr in range(S * A):
            self.dut.rd_addr.value = addr
            await Timer(1, unit="ns")
            out[addr] = self.dut.rd_data.value.to_signed()
        return out.reshape(S, A).astype(np.int32)


def reference(alpha: int, gamma: int, sarsa: bool, batches: list[dict[str, np.ndarray]]) -> np.ndarray:
    ref = TabularQ(S, A, alpha / 65536, gamma / 65536, algo="sarsa" if sarsa else "q", backend="numpy")
    for t in batches:
        ref.update(t["s"], t["a"], t["r"] / 65536, t["s2"], t["done"], t["a2"])
    return ref.table


def start_clock(dut) -> None:
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())


async def check(dut, alpha: int, gamma: int, sarsa: bool, batches: list[dict[str, np.ndarray]], gaps=None) -> int:
    """Reset, run the batches, compare the whole table with the numpy reference; clocks of the first batch."""
    core = Core(dut)
    await core.reset(alpha, gamma, sarsa)
    clocks = [await core.run(t, None if gaps is None else gaps.copy()) for t in batches]
    got, want = await core.table(), reference(alpha, gamma, sarsa, batches)
    bad = np.argwhere(got != want)
    assert not len(bad), f"{len(bad)} entries differ, first at {tuple(bad[0])}: rtl {got[tuple(bad[0])]} vs numpy {want[tuple(bad[0])]}"
    return clocks[0]


@cocotb.test()
async def random_q_learning_one_update_per_clock(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED)
    t = stream(rng, 400)
    clocks = await check(dut, alpha=int(rng.integers(1, 65537)), gamma=int(rng.integers(0, 65537)), sarsa=False,
                         batches=[t])
    assert len(t["s"]) <= clocks <= len(t["s"]) + PIPELINE_DEPTH, f"{clocks} clocks for {len(t['s'])} transitions"
    Path("tabular_cycles.json").write_text(json.dumps({"transitions": len(t["s"]), "clocks": clocks,
                                                       "pipeline_depth": PIPELINE_DEPTH}))


@cocotb.test()
async def random_sarsa(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 1)
    await check(dut, alpha=6554, gamma=64880, sarsa=True, batches=[stream(rng, 300), stream(rng, 50)])


@cocotb.test()
async def same_entry_many_times_and_self_loops(dut):
    start_clock(dut)
    n = 120
    s = np.full(n, S - 1)
    t = {"s": s, "a": np.zeros(n, np.int64), "r": np.full(n, 3 << 16), "s2": s.copy(),
         "done": np.arange(n) % 17 == 16, "a2": np.zeros(n, np.int64)}
    await check(dut, alpha=65536 // 3, gamma=65536, sarsa=False, batches=[t])
    await check(dut, alpha=40000, gamma=65536, sarsa=True, batches=[t])


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
    await check(dut, alpha=30000, gamma=60000, sarsa=False, batches=[t], gaps=rng.integers(0, 3, 200))


@cocotb.test()
async def host_writes_load_a_table_that_updates_then_use(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 4)
    core = Core(dut)
    await core.reset(alpha=20000, gamma=65000, sarsa=False)
    start = rng.integers(-(1 << 24), 1 << 24, (S, A)).astype(np.int32)
    for addr, value in enumerate(start.ravel()):
        dut.wr_en.value, dut.wr_addr.value, dut.wr_data.value = 1, addr, int(value) & 0xFFFFFFFF
        await RisingEdge(dut.clk)
    dut.wr_en.value = 0
    await RisingEdge(dut.clk)
    np.testing.assert_array_equal(await core.table(), start)
    t = stream(rng, 100)
    await core.run(t)
    ref = TabularQ(S, A, 20000 / 65536, 65000 / 65536, backend="numpy")
    ref.load(start)
    ref.update(t["s"], t["a"], t["r"] / 65536, t["s2"], t["done"])
    np.testing.assert_array_equal(await core.table(), ref.table)


@cocotb.test()
async def clear_zeroes_the_table(dut):
    start_clock(dut)
    rng = np.random.default_rng(SEED + 3)
    await check(dut, alpha=30000, gamma=60000, sarsa=False, batches=[stream(rng, 50)])
    dut.clear.value = 1
    await RisingEdge(dut.clk)
    dut.clear.value = 0
    await RisingEdge(dut.clk)
    assert not (await Core(dut).table()).any()
    assert int(dut.updates.value) == 0
