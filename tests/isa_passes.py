"""`make test-isa`: the instruction-set-sensitive tests once per ISA switch, the passes side by side.

Each pass is its own pytest process under one switch (`NAME=VALUE` in its environment); they run as
many at a time as this process has cores (most of a pass is single-threaded Python), each pass's output
printed whole when it ends, in the order given. An ATen switch that lands on the path ATen takes anyway
is the main run's and is skipped. Exits non-zero when any pass fails.

    python tests/isa_passes.py SWITCH... -- PYTEST_ARGS...
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from pearl_fpga.host import available_cores

ATEN_PATH = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def aten_path(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", ATEN_PATH], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def run_pass(switch: str, pytest_args: list[str]) -> tuple[int, str]:
    name, _, value = switch.partition("=")
    env = {**os.environ, name: value}
    done = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], env=env, capture_output=True, text=True)
    return done.returncode, f"tests under {switch}\n{done.stdout}{done.stderr}"


def main(argv: list[str]) -> int:
    if "--" not in argv:
        raise SystemExit("usage: isa_passes.py SWITCH... -- PYTEST_ARGS...")
    split = argv.index("--")
    switches, pytest_args = argv[:split], argv[split + 1:]
    main_aten = aten_path(dict(os.environ))
    passes = []
    for switch in switches:
        name, _, value = switch.partition("=")
        if name == "ATEN_CPU_CAPABILITY" and aten_path({**os.environ, name: value}) == main_aten:
            print(f"tests under {switch}: skipped, ATen's {main_aten} path (the main run's)", flush=True)
            continue
        passes.append(switch)
    workers = max(1, min(available_cores(), len(passes)))
    failed = []
    with ThreadPoolExecutor(workers) as pool:
        for switch, (code, output) in zip(passes, pool.map(lambda s: run_pass(s, pytest_args), passes)):
            print(output, end="", flush=True)
            if code != 0:
                failed.append(switch)
    if failed:
        print(f"ISA passes failed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
