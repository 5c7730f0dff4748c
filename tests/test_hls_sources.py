"""Static checks of every kernel's HLS top that no C simulation can see."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPS = {kernel.parent.name: kernel for kernel in sorted(ROOT.glob("hls/*/SPEC.md"))}


@pytest.mark.parametrize("kernel", sorted(TOPS))
def test_top_declares_ap_ctrl_hs(kernel):
    """Vitis kernels default to ap_ctrl_chain, whose ap_done waits for an ap_continue that the drivers
    (pearl_fpga/board/driver.py, ap_ctrl_hs: start, poll done) never write: the top must say ap_ctrl_hs."""
    source = (ROOT / "hls" / kernel / f"{kernel}.cpp").read_text()
    pragmas = re.findall(r"#pragma HLS INTERFACE[^\n]*port\s*=\s*return[^\n]*", source)
    assert any("ap_ctrl_hs" in p for p in pragmas), f"{kernel}_top does not declare ap_ctrl_hs on its return port"
    assert not any("ap_ctrl_chain" in p or "ap_ctrl_none" in p for p in pragmas)
