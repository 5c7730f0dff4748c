"""Vitis csynth reports as the FPGA model's cycle source: parsing, cycle fits, discovery, fallbacks.

The fixtures are written the way Vitis HLS writes <top>_csynth.xml (a <profile> root with
UserAssignments, PerformanceEstimates/SummaryOfTimingAnalysis, SummaryOfOverallLatency with "undef"
where a latency depends on run-time arguments, SummaryOfLoopLatency with nested loop elements and
<range><min/><max/></range> for LOOP_TRIPCOUNT ranges); the figures are made up.
"""

from __future__ import annotations

import os
import time

import pytest

from pearl_fpga.planner import csynth
from pearl_fpga.planner.model import Fit
from pearl_fpga.spec.replay import tree_depth

REPLAY_XML = """<?xml version="1.0" encoding="UTF-8"?>
<profile>
  <ReportVersion><Version>2024.2</Version></ReportVersion>
  <UserAssignments>
    <unit>ns</unit>
    <ProductFamily>zynq</ProductFamily>
    <Part>xc7z020-clg400-1</Part>
    <TopModelName>replay_top</TopModelName>
    <TargetClockPeriod>{target}</TargetClockPeriod>
    <ClockUncertainty>1.20</ClockUncertainty>
    <FlowTarget>vivado</FlowTarget>
  </UserAssignments>
  <PerformanceEstimates>
    <PipelineType>no</PipelineType>
    <SummaryOfTimingAnalysis><unit>ns</unit><EstimatedClockPeriod>{estimated}</EstimatedClockPeriod></SummaryOfTimingAnalysis>
    <SummaryOfOverallLatency>
      <unit>clock cycles</unit>
      <Best-caseLatency>undef</Best-caseLatency>
      <Average-caseLatency>undef</Average-caseLatency>
      <Worst-caseLatency>undef</Worst-caseLatency>
      <Interval-min>undef</Interval-min>
      <Interval-max>undef</Interval-max>
    </SummaryOfOverallLatency>
    <SummaryOfLoopLatency>
      <SEGMENTS>
        <TripCount>undef</TripCount>
        <Latency>undef</Latency>
        <COMMANDS>
          <TripCount>undef</TripCount>
          <Latency>undef</Latency>
          <IterationLatency>23</IterationLatency>
          <PipelineII>{ii}</PipelineII>
          <PipelineDepth>23</PipelineDepth>
        </COMMANDS>
      </SEGMENTS>
    </SummaryOfLoopLatency>
  </PerformanceEstimates>
  <AreaEstimates><Resources><BRAM_18K>146</BRAM_18K><DSP>0</DSP><FF>9120</FF><LUT>11873</LUT><URAM>0</URAM></Resources></AreaEstimates>
</profile>
"""

MLP_XML = """<?xml version="1.0" encoding="UTF-8"?>
<profile>
  <UserAssignments>
    <unit>ns</unit>
    <TopModelName>mlp_top</TopModelName>
    <TargetClockPeriod>10.00</TargetClockPeriod>
  </UserAssignments>
  <PerformanceEstimates>
    <SummaryOfTimingAnalysis><unit>ns</unit><EstimatedClockPeriod>8.1</EstimatedClockPeriod></SummaryOfTimingAnalysis>
    <SummaryOfOverallLatency>
      <unit>clock cycles</unit>
      <Best-caseLatency>3</Best-caseLatency>
      <Average-caseLatency>1200000</Average-caseLatency>
      <Worst-caseLatency>9000000</Worst-caseLatency>
    </SummaryOfOverallLatency>
    <SummaryOfLoopLatency>
      <INFER_BATCH>
        <TripCount><range><min>1</min><max>1024</max></range></TripCount>
        <Latency><range><min>120</min><max>8912896</max></range></Latency>
        <INFER_READ>
          <TripCount><range><min>1</min><max>128</max></range></TripCount>
          <Latency><range><min>2</min><max>129</max></range></Latency>
          <PipelineII>1</PipelineII>
          <PipelineDepth>2</PipelineDepth>
        </INFER_READ>
      </INFER_BATCH>
    </SummaryOfLoopLatency>
  </PerformanceEstimates>
</profile>
"""


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def replay_report(tmp_path, name="replay_top_csynth.xml", target="10.00", estimated="7.300", ii="1"):
    return write(tmp_path / name, REPLAY_XML.format(target=target, estimated=estimated, ii=ii))


def test_parse_replay_report(tmp_path):
    r = csynth.parse_csynth(replay_report(tmp_path))
    assert r.top == "replay_top" and r.target_period_ns == 10.0 and r.estimated_period_ns == 7.3
    assert r.clock_mhz == pytest.approx(100.0) and r.timing_met
    assert (r.best, r.average, r.worst) == (None, None, None)  # "undef": the command count is a run-time argument
    assert set(r.loops) == {"SEGMENTS", "SEGMENTS/COMMANDS"}
    assert r.loop("COMMANDS") == csynth.LoopLatency("SEGMENTS/COMMANDS", None, None, 1, 23)
    # B commands through a pipeline of depth 23 at II 1: (B - 1) * 1 + 23 cycles
    c0, c1 = csynth.replay_cycles(r)
    assert c0 + c1 * 64 == 63 + 23
    slow = csynth.parse_csynth(replay_report(tmp_path, name="slow.xml", ii="2"))
    assert csynth.replay_cycles(slow) == (21.0, 2.0)


def test_missed_timing_runs_at_the_estimated_clock(tmp_path):
    r = csynth.parse_csynth(replay_report(tmp_path, estimated="12.5"))
    assert not r.timing_met and r.clock_mhz == pytest.approx(80.0)


def test_mlp_cycles_from_the_worst_case_iteration(tmp_path):
    r = csynth.parse_csynth(write(tmp_path / "mlp_top_csynth.xml", MLP_XML))
    assert (r.best, r.average, r.worst) == (3, 1_200_000, 9_000_000)
    assert r.loop("INFER_BATCH").trip_count == 1024 and r.loop("INFER_BATCH").latency == 8_912_896
    assert r.loop("INFER_READ").pipeline_ii == 1
    kernel = {"lanes": 8, "max_width": 128, "max_layers": 4, "max_batch": 1024}
    per_largest = 8_912_896 / 1024  # one inference of the 4 x 128 x 128 network the kernel holds
    largest = 4 * 128 * 128 // 8
    assert csynth.mac_chunks([(128, 128)] * 4, 8) == largest
    # a 4-64-64-2 network: rows read inputs padded to ROW_ALIGN = 32 words
    layers = [(4, 64), (64, 64), (64, 2)]
    chunks = (64 * 32 + 64 * 64 + 2 * 64) // 8
    assert csynth.mac_chunks(layers, 8) == chunks
    assert csynth.mlp_cycles(r, layers, kernel) == pytest.approx(per_largest * chunks / largest)
    with pytest.raises(csynth.CsynthError, match="not replay_top"):
        csynth.replay_cycles(r)


@pytest.mark.parametrize("text, match", [
    ("<profile><PerformanceEstimates>", "not a readable csynth XML"),
    ("<profile><UserAssignments><TargetClockPeriod>10</TargetClockPeriod></UserAssignments></profile>",
     "no PerformanceEstimates"),
    (REPLAY_XML.format(target="fast", estimated="7.3", ii="1"), "TargetClockPeriod"),
    (REPLAY_XML.format(target="10.00", estimated="-1", ii="1"), "EstimatedClockPeriod"),
    (REPLAY_XML.format(target="10.00", estimated="7.3", ii="one"), "PipelineII is 'one'"),
    (REPLAY_XML.format(target="10.00", estimated="7.3", ii="1").replace("<unit>ns</unit>\n    <Product", "<unit>ps</unit>\n    <Product"),
     "only ns"),
])
def test_malformed_reports_name_the_file(tmp_path, text, match):
    path = write(tmp_path / "replay_top_csynth.xml", text)
    with pytest.raises(csynth.CsynthError, match=match) as info:
        csynth.parse_csynth(path)
    assert str(path) in str(info.value)


def test_unpipelined_or_missing_command_loop_is_an_error(tmp_path):
    no_ii = csynth.parse_csynth(replay_report(tmp_path, ii="undef"))
    with pytest.raises(csynth.CsynthError, match="not pipelined"):
        csynth.replay_cycles(no_ii)
    text = REPLAY_XML.format(target="10.00", estimated="7.3", ii="1").replace("COMMANDS>", "CMDS>")
    with pytest.raises(csynth.CsynthError, match="no COMMANDS loop"):
        csynth.replay_cycles(csynth.parse_csynth(write(tmp_path / "x.xml", text)))


def test_find_report_where_make_hls_puts_it(tmp_path):
    # v++ --mode hls (<work_dir>/hls/syn/report) and vitis_hls (<work_dir>/proj/sol/syn/report) layouts
    old = replay_report(tmp_path / "pynq-z2" / "replay" / "proj" / "sol" / "syn" / "report")
    new = replay_report(tmp_path / "pynq-z2" / "replay" / "hls" / "syn" / "report")
    os.utime(old, (time.time() - 60, time.time() - 60))
    assert csynth.find_report("pynq-z2", "replay", [tmp_path]) == new  # the newest
    assert csynth.find_report("zcu104", "replay", [tmp_path / "zcu104"]) is None
    assert csynth.find_report("pynq-z2", "mlp", [tmp_path]) is None  # a replay report is not the MLP's
    # a generic csynth.xml counts for the kernel its TopModelName names
    generic = replay_report(tmp_path / "other", name="csynth.xml")
    assert csynth.find_report("kv260", "replay", [generic]) == generic
    assert csynth.find_report("kv260", "mlp", [generic]) is None


def _host() -> dict:
    return {("act", "cpu-kernel"): Fit(20e-6, 1e-6), ("weight_sync", "cpu-kernel"): Fit(50e-6, 0.0),
            ("host_store", "cpu"): Fit(5e-6, 1e-7), ("host_gather", "cpu"): Fit(10e-6, 2e-7)}


def test_fpga_fits_use_the_csynth_report(tmp_path):
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import fpga_model

    board = get_board("pynq-z2")
    cfg = TrainConfig.preset("dqn", net_arch=[64, 64], per=True, buffer_size=8192)
    # synthesized for 125 MHz (8 ns), not the catalog's 100 MHz: the report's clock is what the kernel runs at
    replay_report(tmp_path / "pynq-z2" / "replay", target="8.00", estimated="7.3")
    write(tmp_path / "pynq-z2" / "mlp" / "mlp_top_csynth.xml", MLP_XML)
    fits, unavailable, notes = fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), csynth_dirs=[tmp_path])
    assert not unavailable
    upd = fits[("replay_update", "fpga-emu")]
    assert upd.source == "cycle model (csynth) @ pynq-z2"
    assert upd(64) == pytest.approx(board.transfer_seconds(64 * 16) + (22 + 64) / 125e6)
    act = fits[("act", "fpga-emu")]
    per_inference = csynth.mlp_cycles(csynth.parse_csynth(tmp_path / "pynq-z2" / "mlp" / "mlp_top_csynth.xml"),
                                      fpga_model.mlp_layers(4, [64, 64], 2), board.kernels["mlp"])
    assert act.source == "cycle model (csynth) @ pynq-z2"
    assert act.b == pytest.approx(per_inference / 100e6 + (8 + 6) / (board.link_bandwidth_gbps * 1e9))
    assert any("125.0 MHz" in n for n in notes) and any("csynth" in n and "replay" in n for n in notes)


def test_a_malformed_report_warns_and_falls_back(tmp_path):
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import fpga_model

    board = get_board("pynq-z2")
    cfg = TrainConfig.preset("dqn", net_arch=[64, 64], per=True, buffer_size=8192)
    bad = write(tmp_path / "pynq-z2" / "replay" / "replay_top_csynth.xml", "<profile><PerformanceEstimates>")
    with pytest.warns(UserWarning, match=str(bad)):
        fits, _, notes = fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), csynth_dirs=[tmp_path])
    rk = board.kernels["replay"]
    hls = fpga_model.replay_cycles_hls(tree_depth(rk["capacity"], rk["fanout"]), rk["fanout"], board.clock_mhz)
    assert fits[("replay_update", "fpga-emu")].source == "cycle model (hls model) @ pynq-z2"
    assert fits[("replay_update", "fpga-emu")](64) == pytest.approx(board.transfer_seconds(64 * 16) + hls(64) / 100e6)
    assert any("unusable" in n and str(bad) in n for n in notes)


def test_a_report_for_another_part_is_not_used(tmp_path):
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import fpga_model

    assert csynth.same_part("xc7z020-clg400-1", "xc7z020clg400-1")
    board = get_board("zcu104")  # the fixture says xc7z020 (PYNQ-Z2's part)
    cfg = TrainConfig.preset("dqn", net_arch=[64, 64], per=True, buffer_size=8192)
    path = replay_report(tmp_path / "zcu104" / "replay")
    with pytest.warns(UserWarning, match="xc7z020"):
        fits, _, notes = fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), csynth_dirs=[tmp_path])
    assert fits[("replay_update", "fpga-emu")].source == "cycle model (hls model) @ zcu104"
    assert any(str(path) in n and "not used" in n for n in notes)


def test_without_a_report_the_hls_model_times_the_kernels_and_the_rtl_stands_beside(tmp_path):
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import fpga_model

    board = get_board("pynq-z2")  # replay 16,384 leaves, K = 16 (4 levels), 100 MHz; MLP 8 lanes
    cfg = TrainConfig.preset("dqn", net_arch=[64, 64], per=True, buffer_size=8192)
    fits, _, notes = fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), csynth_dirs=[tmp_path])
    assert fits[("act", "fpga-emu")].source == "cycle model (hls model) @ pynq-z2"
    # 64 updates: 63 + PipelineDepth 3 + 4 levels x (1 + 16 / 2) = 102 cycles at 100 MHz
    assert fits[("replay_update", "fpga-emu")](64) == pytest.approx(board.transfer_seconds(64 * 16) + 102 / 100e6)
    assert any(n.startswith("replay sample: at 64 per call the HLS design takes 102 cycles (hls model), "
                            "the reference RTL 112 (spec bound)") for n in notes), notes
    # 4-64-64-2 on 8 lanes (rows padded to 32 words, MAC pipeline 10): read 4 + 2, input copy 32,
    # 64 x 4 + 10, 64 x 8 + 10, 2 x 8 + 10 + 30 padding, head 2 + 2, write 2 + 1 (argmax) + 2 = 891 cycles;
    # the RTL's bound: 4,480 MACs / 8 + 8 x 3 + 16 = 600
    assert any(n.startswith("act: at 1 per call the HLS design takes 891 cycles") and "the reference RTL 600" in n
               for n in notes), notes
    spec, _, _ = fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), cycles="spec", csynth_dirs=[tmp_path])
    assert spec[("replay_update", "fpga-emu")].source == "cycle model (spec bound) @ pynq-z2"
    with pytest.raises(ValueError, match="cycles must be"):
        fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), cycles="vivado")


def test_the_note_beside_names_the_hls_figure_when_the_rtl_times_the_kernel(tmp_path):
    """With --cycles spec the fit uses the RTL's bound, and the note still shows the HLS design's own
    figure beside it (not the RTL's twice)."""
    from pearl_fpga.board.catalog import get_board
    from pearl_fpga.config import TrainConfig
    from pearl_fpga.planner import fpga_model

    board = get_board("pynq-z2")
    cfg = TrainConfig.preset("dqn", net_arch=[64, 64], per=True, buffer_size=8192)
    _, _, notes = fpga_model.fpga_fits(board, cfg, 4, 2, True, _host(), cycles="spec", csynth_dirs=[tmp_path])
    assert any(n.startswith("act: at 1 per call the HLS design takes 891 cycles (hls model)") for n in notes), notes
    assert any(n.startswith("replay sample: at 64 per call the HLS design takes 102 cycles (hls model)")
               for n in notes), notes
