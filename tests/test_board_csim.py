"""The board drivers, unchanged, against the HLS C++ tops compiled by g++ (the design that ships), through
pearl_fpga.board.csim_transport; tests/test_board_sim.py runs the same drivers against the RTL.

The C-simulation transport behaves as an HLS IP: output registers (the identity among them) read 0
until a call ends, which is why every driver starts an empty call before reading them.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from driver_cases import mlp_networks, replay_rounds, tabular_updates
from mlp_cases import random_inputs, random_layers

from pearl_fpga.backends.mlp_numpy import NumpyMLPBackend
from pearl_fpga.backends.replay_numpy import ReplayNumpyBackend
from pearl_fpga.backends.tabular_numpy import TabularNumpyBackend
from pearl_fpga.board.csim_transport import CSimTransport
from pearl_fpga.board.mlp_driver import MLPBoardBackend
from pearl_fpga.board.replay_driver import ReplayBoardBackend
from pearl_fpga.board.tabular_driver import TabularBoardBackend
from pearl_fpga.errors import KernelTimeout
from pearl_fpga.spec import mlp as mfmt
from pearl_fpga.spec import replay as rfmt
from pearl_fpga.spec import tabular as tfmt


def test_output_registers_read_zero_until_a_call_ends():
    t = CSimTransport("replay", {"REPLAY_CAPACITY": 100, "REPLAY_FANOUT": 4})
    assert (t.read(rfmt.REG_CAPACITY), t.read(rfmt.REG_FANOUT)) == (0, 0)
    board = ReplayBoardBackend(100, 4, transport=t)  # the driver's empty call sets them
    assert (board.driver.capacity, board.driver.fanout) == (100, 4)


@pytest.mark.parametrize("capacity,fanout,requested", [(100, 4, (100, 4)), (64, 16, (60, 2))])
def test_replay_driver_on_the_hls_top(capacity, fanout, requested):
    """Updates, samples and clear (driver_cases.replay_rounds), in batches split to max_batch, equal to the
    numpy reference; a smaller tree and another fan-out than synthesized."""
    t = CSimTransport("replay", {"REPLAY_CAPACITY": capacity, "REPLAY_FANOUT": fanout})
    cap, k = requested
    replay_rounds(ReplayBoardBackend(cap, k, transport=t, max_batch=16), cap, k, np.random.default_rng(capacity))


def test_mlp_driver_on_the_hls_top():
    """LOAD and INFER (driver_cases.mlp_networks), batches split to max_batch, equal to the numpy
    reference; a network over the synthesized size is refused."""
    lanes, max_width, max_layers = 4, 32, 4  # MAX_WIDTH: a multiple of the HLS top's 32-word row alignment
    t = CSimTransport("mlp", {"MLP_LANES": lanes, "MLP_MAX_WIDTH": max_width, "MLP_MAX_LAYERS": max_layers})
    board = MLPBoardBackend(transport=t, max_batch=5)
    assert (board.lanes, board.max_width, board.max_layers) == (lanes, max_width, max_layers)
    mlp_networks(board, max_width, np.random.default_rng(1))


@pytest.mark.parametrize("sarsa", [False, True])
def test_tabular_driver_on_the_hls_top(sarsa):
    """Loads, updates, read-back and clear (driver_cases.tabular_updates), calls split to max_batch, a
    smaller table than synthesized: equal to numpy."""
    t = CSimTransport("tabular", {"TABULAR_STATES": 32, "TABULAR_ACTIONS": 4})
    rng = np.random.default_rng(int(sarsa))
    for n_states, n_actions in ((32, 4), (20, 3)):
        tabular_updates(TabularBoardBackend(n_states, n_actions, transport=t, max_batch=40), n_states, n_actions, sarsa, rng)


@pytest.mark.parametrize("walk", ["random", "hot", "trajectory"])
def test_the_hls_tops_issue_slots_follow_the_hazard_model(walk):
    """The C model of the top counts its issue slots (one per clock at II = 1, plus the waits for writes
    in flight to the rows a command reads); spec.tabular.hls_issue_slots predicts them, and no read ran
    ahead of a write to its row."""
    t = CSimTransport("tabular", {"TABULAR_STATES": 64, "TABULAR_ACTIONS": 4})
    board = TabularBoardBackend(64, 4, transport=t, max_batch=4096)
    board.configure(19661, 62259, False)
    rng = np.random.default_rng(3)
    n = 500
    if walk == "random":
        s, s2 = rng.integers(0, 64, n), rng.integers(0, 64, n)
    elif walk == "hot":
        s = np.where(rng.random(n) < 0.7, 5, rng.integers(0, 64, n))
        s2 = np.where(rng.random(n) < 0.5, s, rng.integers(0, 64, n))
    else:  # an episode's transitions in order: s2 of one is s of the next
        path = np.cumsum(rng.integers(-1, 2, n + 1)) % 64
        s, s2 = path[:-1], path[1:]
    z = np.zeros(n, np.uint32)
    board.update(s.astype(np.uint32), z, z.astype(np.int32), s2.astype(np.uint32), z, z.astype(np.uint8))
    lib = t._lib
    lib.pearl_csim_tabular_slots.restype = lib.pearl_csim_tabular_violations.restype = ctypes.c_uint64
    assert lib.pearl_csim_tabular_violations() == 0
    assert lib.pearl_csim_tabular_slots() == tfmt.hls_issue_slots(s, s2) >= n


def test_mlp_driver_through_identity_calls_where_registers_cannot_be_read():
    """On XRT the MLP driver learns the synthesized sizes, and whether its LOAD was taken, from an
    IDENTITY call on the stream: the HLS top answers them, and a LOAD it rejects is an error."""
    t = CSimTransport("mlp", {"MLP_LANES": 4, "MLP_MAX_WIDTH": 32, "MLP_MAX_LAYERS": 3})
    t.registers_readable = False
    board = MLPBoardBackend(transport=t, max_batch=4)
    assert (board.lanes, board.max_width, board.max_layers) == (4, 32, 3)
    assert board.driver.ask_identity() == (4, 32, 3, 0)  # nothing loaded yet
    rng = np.random.default_rng(2)
    layers = random_layers(rng, [5, 9, 2], mfmt.HEAD_RAW)
    board.load(layers, mfmt.HEAD_RAW)
    assert board.driver.ask_identity() == (4, 32, 3, mfmt.STATUS_LOADED)
    ref = NumpyMLPBackend()
    ref.load(layers, mfmt.HEAD_RAW)
    x = random_inputs(rng, 6, 5)
    assert np.array_equal(board.infer(x)[0], ref.infer(x)[0])
    truncated = mfmt.encode_load_stream(layers, mfmt.HEAD_RAW)[:-3]  # the kernel drains it and keeps no weights
    board.driver.call(mfmt.MODE_LOAD, 0, truncated, 0)
    assert board.driver.load_rejected()
    assert board.driver.ask_identity()[3] == mfmt.STATUS_LOAD_REJECTED


def test_a_starved_top_times_out_naming_the_kernel():
    """n_cmds says 6, 2 commands are sent: the top waits for ever, the driver times out."""
    t = CSimTransport("tabular", {"TABULAR_STATES": 16, "TABULAR_ACTIONS": 2})
    board = TabularBoardBackend(16, 2, transport=t, timeout_s=0.05)
    zero = np.zeros(2, np.int64)
    cmds = tfmt.encode_commands(np.full(2, tfmt.OP_UPDATE), zero, zero, zero, s2=zero, a2=zero, done=zero)
    with pytest.raises(KernelTimeout, match=r"tabular kernel on C simulation of tabular_top .*did not signal ap_done.*"
                                            r"n_cmds@0x10=0x00000006"):
        board.driver.run(cmds, 0, n_cmds=6)


def test_tabular_backend_refusals():
    """A table over the synthesized one, an instance without a board, and updates the kernel did not
    apply (indices the host should have refused) are errors that name the problem."""
    from pearl_fpga.errors import PearlError

    t = CSimTransport("tabular", {"TABULAR_STATES": 16, "TABULAR_ACTIONS": 2})
    with pytest.raises(ValueError, match=r"a 17 x 2 table does not fit .* synthesized for 16 x 2"):
        TabularBoardBackend(17, 2, transport=t)
    with pytest.raises(ValueError, match="instance 1 needs a board backend"):
        TabularBoardBackend(16, 2, transport=t, instance=1)
    board = TabularBoardBackend(16, 2, transport=t)
    board.configure(32768, 0, False)
    one = np.ones(1, np.uint32)
    with pytest.raises(PearlError, match="applied 0 of 1 updates"):
        board.update(np.array([16], np.uint32), one, one.astype(np.int32), one, one, one.astype(np.uint8))


def test_csim_build_errors(tmp_path, monkeypatch):
    """No compiler, or a top that does not compile at the asked sizes: errors naming the fix or the
    compiler's message; an unknown kernel is refused."""
    from pearl_fpga.errors import BackendUnavailable, PearlError

    monkeypatch.setenv("PEARL_FPGA_CACHE", str(tmp_path))  # nothing cached
    with pytest.raises(PearlError, match=r"(?s)compiling the tabular HLS top for C simulation failed:.*TABULAR_ACTIONS must be 1..64"):
        CSimTransport("tabular", {"TABULAR_STATES": 4, "TABULAR_ACTIONS": 65})
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(BackendUnavailable, match="no-such-compiler, which is not on PATH"):
        CSimTransport("tabular", {"TABULAR_STATES": 4, "TABULAR_ACTIONS": 2})
    with pytest.raises(ValueError, match="unknown kernel 'fft'"):
        CSimTransport("fft")


def test_every_transport_is_a_kernel_instance_of_its_own():
    """Two transports of the same top keep separate tables, as two instances in a bitstream do (the
    tabular partitioned mode runs one per instance, at the same time)."""
    defines = {"TABULAR_STATES": 8, "TABULAR_ACTIONS": 2}
    one = TabularBoardBackend(8, 2, transport=CSimTransport("tabular", defines))
    two = TabularBoardBackend(8, 2, transport=CSimTransport("tabular", defines))
    one.load(np.full((8, 2), 7, np.int32))
    two.load(np.full((8, 2), -3, np.int32))
    assert (one.table() == 7).all() and (two.table() == -3).all()


def test_replay_total_through_the_response_stream_where_registers_cannot_be_read():
    """On XRT the output registers are not readable: the driver asks the HLS top with a TOTAL command
    instead, which gives the same value as the total register."""
    t = CSimTransport("replay", {"REPLAY_CAPACITY": 100, "REPLAY_FANOUT": 4})
    board = ReplayBoardBackend(100, 4, transport=t)
    words, _ = rfmt.priorities_to_fixed(np.random.default_rng(5).exponential(1.0, 60))
    board.update(np.arange(60, dtype=np.uint32), words)
    by_register = board.total()
    t.registers_readable = False
    assert board.total() == by_register == int(words.astype(np.uint64).sum())
    ref = ReplayNumpyBackend(100, 4)
    ref.update(np.arange(60, dtype=np.uint32), words)
    targets = rfmt.stratified_targets(by_register, 8, np.random.default_rng(6))
    assert np.array_equal(board.sample(targets)[0], ref.sample(targets)[0])


@pytest.mark.parametrize("capacity,fanout", [(100, 4), (17, 16)])
def test_replay_identity_through_the_response_stream_where_registers_cannot_be_read(capacity, fanout):
    """On XRT the driver gets the synthesized capacity and fan-out from an IDENTITY command: the HLS top
    answers the spec's word, in command order between the others' responses."""
    t = CSimTransport("replay", {"REPLAY_CAPACITY": capacity, "REPLAY_FANOUT": fanout})
    t.registers_readable = False
    board = ReplayBoardBackend(capacity, fanout, transport=t)
    assert (board.driver.capacity, board.driver.fanout) == (capacity, fanout)
    zero = np.zeros(1, np.uint64)
    ident = rfmt.encode_commands(np.array([rfmt.OP_IDENTITY]), zero, zero)
    total = rfmt.encode_commands(np.array([rfmt.OP_TOTAL]), zero, zero)
    got = board.driver.run(np.concatenate([ident, total, ident]), 3)
    assert np.array_equal(got[[0, 2]], np.concatenate([rfmt.identity_word(capacity, fanout)] * 2))
    assert rfmt.decode_responses(got[1:2])[0][0] == rfmt.OP_TOTAL


@pytest.mark.parametrize("states,actions", [(13, 3), (64, 8)])
def test_tabular_driver_through_identity_commands(states, actions):
    """Where output registers cannot be read (XRT), the tabular driver gets the synthesized shape and
    each call's UPDATE count from an IDENTITY command on the response stream: the HLS top answers the
    spec's word, and the driver gives the reference's tables."""
    t = CSimTransport("tabular", {"TABULAR_STATES": states, "TABULAR_ACTIONS": actions})
    t.registers_readable = False
    board = TabularBoardBackend(states, actions, transport=t, max_batch=8)
    assert (board.driver.max_states, board.driver.max_actions) == (states, actions)
    rng = np.random.default_rng(states)
    ref = TabularNumpyBackend(states, actions)
    board.configure(19661, 62259, False)
    ref.configure(19661, 62259, False)
    n = 30
    s = rng.integers(0, states, n).astype(np.uint32)
    batch = (s, rng.integers(0, actions, n).astype(np.uint32), rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32),
             np.roll(s, -1), rng.integers(0, actions, n).astype(np.uint32), (rng.random(n) < 0.2).astype(np.uint8))
    board.update(*batch)
    ref.update(*batch)
    assert np.array_equal(board.table(), ref.table())
    zero = np.zeros(1, np.int64)
    upd = tfmt.encode_commands(np.full(3, tfmt.OP_UPDATE), np.zeros(3, np.int64), np.zeros(3, np.int64), np.ones(3, np.int64),
                               s2=np.zeros(3, np.int64), a2=np.zeros(3, np.int64), done=np.zeros(3, np.int64))
    ident = tfmt.encode_commands(np.array([tfmt.OP_IDENTITY]), zero, zero, zero)
    got = board.driver.run(np.concatenate([upd[:2], ident, upd[2:], ident]), 2)
    assert np.array_equal(got, np.concatenate([tfmt.identity_word(states, actions, 2), tfmt.identity_word(states, actions, 3)]))
