"""The Alveo transport and drivers on the real XRT library (libxrt 2.13, noop shim).

In noop mode XRT opens a device, loads the generated xclbin, finds compute units by
"kernel:{cu}" (refusing unknown names), and runs start and complete without computing: these tests
check the control path (names, argument indices and values, buffer reuse, deadlines, errors). What
the kernels compute is covered by the C-simulation and cocotb transports (tests/test_board_csim.py,
tests/test_board_sim.py).
"""

from __future__ import annotations

import importlib
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xclbin_writer as xw
from strict_pyxrt import StrictPyxrt, SurfaceError

from pearl_fpga.board import overlay, xrt_kernels
from pearl_fpga.board.catalog import load_catalog
from pearl_fpga.board.manifest import build_manifest, write_manifest
from pearl_fpga.board.mlp_driver import MLPBoardBackend
from pearl_fpga.board.replay_driver import ReplayBoardBackend
from pearl_fpga.board.tabular_driver import TabularBoardBackend
from pearl_fpga.board.xrt_transport import XrtDevice, XrtTransport
from pearl_fpga.errors import BackendUnavailable, KernelTimeout, PearlError
from pearl_fpga.spec import replay as rfmt
from pearl_fpga.spec import tabular as tfmt

BOARD = "alveo-u250"


@pytest.fixture
def px(xrt_env, monkeypatch):
    """The strict pyxrt in place of `import pyxrt` (over the real, test-built binding)."""
    strict = StrictPyxrt(importlib.import_module("pyxrt"))
    monkeypatch.setitem(__import__("sys").modules, "pyxrt", strict)
    return strict


@pytest.fixture
def card(px, xclbin_path):
    return XrtDevice(xclbin_path)


def params(kernel):
    return load_catalog()[BOARD].kernels[kernel]


def open_transport(card, kernel, instance=0):
    from pearl_fpga.spec.kernels import KERNELS

    ip = KERNELS[kernel]
    return XrtTransport(card, kernel, ip.in_word_bytes, ip.out_word_bytes, instance=instance)


def runs_of(px, kernel_obj):
    """The set_arg calls of each run of `kernel_obj`, in order: [{index: value}]."""
    out, current = [], None
    for cls, method, args in px.calls:
        if (cls, method) == ("run", "__init__"):
            current = {} if args[0]._obj is kernel_obj._obj else None
            if current is not None:
                out.append(current)
        elif (cls, method) == ("run", "set_arg") and current is not None:
            current[args[0]] = args[1]
    return out


def prefill(t, word, dtype=np.uint64):
    """Noop runs compute nothing: put the response words the kernel would write in the (reused) s2mm buffer."""
    data = np.ascontiguousarray(word, dtype=dtype).view(np.uint8).ravel()
    t.s2mm.buffer(data.size)
    t.s2mm.bo.write(data, 0)


def test_xclbin_layout_matches_xrt_headers(tmp_path):
    """The struct sizes and offsets the writer uses, as XRT's own xclbin.h lays them out."""
    probe = tmp_path / "probe.cpp"
    probe.write_text(
        '#include <cstdio>\n#include <cstddef>\n#include "xclbin.h"\nint main(){std::printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu",'
        "sizeof(axlf), offsetof(axlf, m_header), sizeof(axlf_section_header), sizeof(ip_data), offsetof(ip_layout, m_ip_data),"
        "sizeof(mem_data), offsetof(mem_topology, m_mem_data), sizeof(connection), offsetof(connectivity, m_connection),"
        "offsetof(axlf_header, uuid), offsetof(axlf_header, m_numSections));}\n")
    exe = tmp_path / "probe"
    subprocess.run(["g++", "-I/usr/include/xrt", str(probe), "-o", str(exe)], check=True, capture_output=True)
    got = [int(v) for v in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert got == [xw.AXLF_SIZE, xw.AXLF_HEADER_OFFSET, xw.SECTION_HEADER_SIZE, xw.IP_DATA_SIZE, 8, xw.MEM_DATA_SIZE, 8,
                   xw.CONNECTION_SIZE, 4, 112, 144]
    blob_path = tmp_path / "t.xclbin"
    xw.write_xclbin(blob_path)
    blob = blob_path.read_bytes()
    assert blob[:8] == b"xclbin2\0"
    assert int.from_bytes(blob[xw.AXLF_HEADER_OFFSET:][:8], "little") == len(blob)


def test_xrt_loads_the_xclbin_and_finds_every_compute_unit(px, card, xclbin_path):
    assert card.uuid.to_string() == card.xclbin.get_uuid().to_string()
    for kernel in xrt_kernels.TOPS:
        for instance in range(params(kernel).get("instances", 1)):
            t = open_transport(card, kernel, instance)
            assert t.description == f"XRT {kernel}_top_{instance + 1}"
    names = [args[2] for args in px.called("kernel", "__init__")]
    assert "tabular_top:{tabular_top_2}" in names and "mm2s_tabular:{mm2s_tabular_2}" in names
    assert "replay_top:{replay_top_1}" in names and "s2mm_mlp:{s2mm_mlp_1}" in names


def test_a_compute_unit_the_xclbin_lacks_is_refused_by_xrt(card):
    with pytest.raises(BackendUnavailable, match=r"no compute unit tabular_top:\{tabular_top_3\}.*make xclbin"):
        open_transport(card, "tabular", instance=2)


def test_replay_driver_control_path(px, card):
    """Arguments by index (n_cmds is argument 2 of replay_top), one run per call, buffers reused,
    and the total through a TOTAL command on the response stream (no output register through XRT)."""
    t = open_transport(card, "replay")
    prefill(t, rfmt.identity_word(params("replay")["capacity"], 16))  # what the kernel answers to IDENTITY
    board = ReplayBoardBackend(1000, 16, transport=t, max_batch=64)
    assert (board.driver.capacity, board.driver.fanout) == (params("replay")["capacity"], 16)
    board.update(np.arange(100, dtype=np.uint32), np.full(100, 1 << 16, np.uint32))
    # the IDENTITY call, CLEAR, then UPDATE in two calls of at most 64 commands
    assert runs_of(px, t.cu) == [{2: 1}, {2: 1}, {2: 64}, {2: 36}]
    assert [r[2] for r in runs_of(px, t.mm2s.kernel)] == [1, 1, 64, 36]
    assert all(r[0]._obj is t.mm2s.bo._obj for r in runs_of(px, t.mm2s.kernel))  # mm2s(in, out, n)
    sent = np.asarray(t.mm2s.bo.read(36 * 16, 0)).view(np.uint64).reshape(-1, 2)
    assert np.all(sent[:, 1] >> np.uint64(56) == rfmt.OP_UPDATE) and sent[-1, 1] & np.uint64(0xFFFFFFFF) == 99
    # noop runs compute nothing: the response the kernel would write is put in the reused s2mm buffer
    word = np.array([[123456789, int(rfmt.OP_TOTAL) << 56]], dtype=np.uint64)
    t.s2mm.buffer(16)
    t.s2mm.bo.write(word.view(np.uint8).ravel(), 0)
    assert board.total() == 123456789
    assert [r[2] for r in runs_of(px, t.s2mm.kernel)] == [1, 1]  # IDENTITY, TOTAL
    assert runs_of(px, t.s2mm.kernel)[1][1]._obj is t.s2mm.bo._obj  # s2mm(in, out, n): the buffer is argument 1
    assert len(px.called("bo", "__init__")) == 2  # one buffer per data mover, for all these calls
    with pytest.raises(PearlError, match=r"register 0x28 cannot be read through XRT \(an output register\)"):
        t.read(rfmt.REG_TOTAL_LO)


def test_wrong_response_and_wrong_register_are_named(card):
    t = open_transport(card, "replay")
    t.s2mm.buffer(16)
    t.s2mm.bo.write(np.zeros(16, np.uint8), 0)
    with pytest.raises(PearlError, match="opcode 0x00 to IDENTITY: the response stream is out of step, or the "
                                         "bitstream predates the IDENTITY command"):
        ReplayBoardBackend(16, 16, transport=t)
    prefill(t, rfmt.identity_word(params("replay")["capacity"], 16))
    board = ReplayBoardBackend(16, 16, transport=t)
    t.s2mm.buffer(16)
    t.s2mm.bo.write(np.zeros(16, np.uint8), 0)
    with pytest.raises(PearlError, match="opcode 0x00 to a TOTAL: the response stream is out of step"):
        board.total()
    with pytest.raises(PearlError, match=r"offset 0x14 is not a scalar input of replay_top"):
        t.write(0x14, 1)


def test_tabular_arguments_by_offset(px, card):
    """alpha, gamma, sarsa, n_actions at 0x18..0x30 are arguments 3..6; a register word above 2**31
    goes to pyxrt's C int as its two's complement."""
    t = open_transport(card, "tabular", instance=1)
    prefill(t, tfmt.identity_word(4096, 16, 3))  # what the kernel answers to IDENTITY after 3 updates
    board = TabularBoardBackend(64, 4, transport=t)
    assert (board.driver.max_states, board.driver.max_actions) == (4096, 16)
    board.configure(0xFFFF_0000, 0x0000_8000, True)
    board.update(*(np.zeros(3, np.uint32) for _ in range(2)), np.zeros(3, np.int32), np.zeros(3, np.uint32),
                 np.zeros(3, np.uint32), np.zeros(3, np.uint8))
    last = runs_of(px, t.cu)[-1]
    assert last == {2: 4, 3: 0xFFFF_0000 - (1 << 32), 4: 0x8000, 5: 1, 6: 4}  # 3 updates + IDENTITY
    sent = np.asarray(t.mm2s.bo.read(4 * 16, 0)).view(np.uint64).reshape(-1, 2)
    assert list(sent[:, 1] >> np.uint64(56)) == [tfmt.OP_UPDATE] * 3 + [tfmt.OP_IDENTITY]
    prefill(t, tfmt.identity_word(4096, 16, 2))
    with pytest.raises(PearlError, match="applied 2 of 3 updates"):
        board.update(*(np.zeros(3, np.uint32) for _ in range(2)), np.zeros(3, np.int32), np.zeros(3, np.uint32),
                     np.zeros(3, np.uint32), np.zeros(3, np.uint8))


def test_mlp_driver_control_path(px, card):
    from mlp_cases import random_layers

    from pearl_fpga.spec import mlp as mfmt

    t = open_transport(card, "mlp")
    p = params("mlp")
    identity = [p["lanes"], p["max_width"], p["max_layers"]]
    prefill(t, identity + [mfmt.STATUS_LOADED], np.uint16)  # what IDENTITY answers after a good LOAD
    board = MLPBoardBackend(transport=t, max_batch=8)
    assert (board.lanes, board.max_width, board.max_layers) == tuple(identity)
    layers = random_layers(np.random.default_rng(0), [6, 8, 3])
    board.load(layers, "raw")
    board.infer(np.zeros((10, 6), np.int16))
    # IDENTITY for the sizes, LOAD, IDENTITY for its status, then INFER in calls of at most 8
    assert [(r[2], r[3]) for r in runs_of(px, t.cu)] == [(mfmt.MODE_IDENTITY, 0), (mfmt.MODE_LOAD, 0),
                                                          (mfmt.MODE_IDENTITY, 0), (mfmt.MODE_INFER, 8), (mfmt.MODE_INFER, 2)]
    assert [r[2] for r in runs_of(px, t.s2mm.kernel)] == [4, 4, 8 * 4, 2 * 4]
    assert len(px.called("bo", "__init__")) == 2
    prefill(t, identity + [mfmt.STATUS_LOADED | mfmt.STATUS_LOAD_REJECTED], np.uint16)
    with pytest.raises(PearlError, match="MLP kernel on XRT mlp_top_1 rejected the weights"):
        board.load(layers, "raw")


def test_a_run_that_does_not_finish_times_out_with_the_deadline(px, card):
    """run.wait gets the driver's deadline in milliseconds; a TIMEOUT state becomes KernelTimeout
    naming the kernel and the run, never a hang."""
    t = open_transport(card, "replay")
    prefill(t, rfmt.identity_word(params("replay")["capacity"], 16))
    board = ReplayBoardBackend(16, 16, transport=t, timeout_s=0.25)
    waits = []

    def stalled(run, timeout_ms):
        waits.append(timeout_ms)
        return px.real.ert_cmd_state.ERT_CMD_STATE_TIMEOUT

    px.hooks[("run", "wait")] = stalled
    with pytest.raises(KernelTimeout, match=r"replay kernel on XRT replay_top_1 did not finish the call within 0.25 s.*"
                                            r"run ended in state .*TIMEOUT"):
        board.clear()
    assert waits and all(1 <= w <= 250 for w in waits)


def test_the_transport_stays_inside_pyxrt(px, card):
    """Everything the transport and drivers touched is bound by XRT's pyxrt; `ip` is not."""
    t = open_transport(card, "replay")
    prefill(t, rfmt.identity_word(params("replay")["capacity"], 16))
    ReplayBoardBackend(16, 16, transport=t).update(np.zeros(1, np.uint32), np.ones(1, np.uint32))
    with pytest.raises(SurfaceError, match="pyxrt has no attribute 'ip'"):
        px.ip  # noqa: B018 - what the old transport called


def test_open_kernel_through_the_manifest(px, xrt_env, monkeypatch):
    """overlay.open_kernel("...", "xrt") on a build folder: manifest checked, xclbin loaded once, the
    identity from the kernel's IDENTITY answer."""
    folder = xrt_env / "bitstreams" / BOARD
    folder.mkdir(parents=True)
    write_manifest(build_manifest(BOARD, {"xclbin": "pearl_fpga.xclbin"}, {"v++": "2024.2"}), folder / "manifest.json")
    xw.write_xclbin(folder / "pearl_fpga.xclbin", {k: v.get("instances", 1) for k, v in load_catalog()[BOARD].kernels.items()})
    monkeypatch.setattr(overlay, "_loaded", {})
    t, entry = overlay.open_kernel("tabular", "xrt", directory=folder, instance=1)
    assert t.description == "XRT tabular_top_2" and entry.instances == 2
    prefill(t, tfmt.identity_word(4096, 16, 0))
    board = TabularBoardBackend(4096, 16, transport=t)
    assert (board.driver.max_states, board.driver.max_actions) == (4096, 16)
    assert len(px.called("device", "load_xclbin")) == 1
    overlay.open_kernel("replay", "xrt", directory=folder)
    assert len(px.called("device", "load_xclbin")) == 1


def test_a_pyxrt_with_hw_context_gets_a_hardware_context(xrt_env, xclbin_path, monkeypatch):
    """Where pyxrt binds hw_context (XRT 2.16 on; 2.25 deprecates load_xclbin and kernel(device, uuid,
    name)), the xclbin is registered and every compute unit opened from the context, never the old way."""
    from context_pyxrt import ContextPyxrt

    shim = ContextPyxrt(importlib.import_module("pyxrt"))
    monkeypatch.setitem(__import__("sys").modules, "pyxrt", shim)
    card = XrtDevice(xclbin_path)
    assert card.context is not None and shim.calls[:2] == ["register_xclbin", "hw_context"]
    t = open_transport(card, "replay")
    prefill(t, rfmt.identity_word(params("replay")["capacity"], 16))
    board = ReplayBoardBackend(1000, 16, transport=t, max_batch=64)
    board.update(np.arange(10, dtype=np.uint32), np.full(10, 1 << 16, np.uint32))
    assert shim.calls.count("kernel(hw_context, name)") == 3  # the compute unit and its two data movers


def test_the_stated_xrt_minimum_is_the_release_tested_here():
    """docs and BackendUnavailable state XRT >= XRT_MINIMUM: the libxrt this tier runs on, whose pyxrt.cpp
    (XRT tag 202210.2.13.466) binds every call of the legacy path."""
    from pearl_fpga.board.xrt_transport import XRT_MINIMUM

    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libxrt-dev"], capture_output=True, text=True)
    if version.returncode:
        pytest.skip("libxrt-dev is not installed as a Debian package")
    tested = ".".join(version.stdout.split(".")[1:3])  # 202210.2.13.466+dfsg-8 -> 2.13
    assert tested == XRT_MINIMUM
    assert f"XRT (>= {XRT_MINIMUM}" in (Path(__file__).resolve().parents[2] / "docs" / "hardware.md").read_text()


def test_the_data_movers_are_chained_as_vitis_builds_them(xclbin_path):
    """The xclbin's IP_LAYOUT gives the kernel tops ap_ctrl_hs (their pragma) and the data movers
    ap_ctrl_chain, the Vitis kernel flow's default (their source declares none)."""
    source = (Path(__file__).resolve().parents[2] / "hls" / "datamover" / "datamover.cpp").read_text()
    assert "ap_ctrl" not in source
    blob = xclbin_path.read_bytes()
    for kernel in xrt_kernels.all_kernels():
        want = xw.IP_CONTROL[xrt_kernels.AP_CTRL_CHAIN if kernel.name.startswith(("mm2s_", "s2mm_")) else xrt_kernels.AP_CTRL_HS]
        assert kernel.control == (xrt_kernels.AP_CTRL_CHAIN if want else xrt_kernels.AP_CTRL_HS)
        name = f"{kernel.name}:{kernel.name}_1".encode()
        at = blob.index(name)
        props = int.from_bytes(blob[at - 12:at - 8], "little")  # ip_data: m_type, properties, m_base_address, m_name
        assert props >> 8 & 0xFF == want, kernel.name
