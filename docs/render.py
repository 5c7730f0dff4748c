"""Render docs/benchmarks.md, the README's headline, docs/hardware.md's implementation table and
docs/reliability.md's fuzz table from the records.

The records are the JSON files `pearl-fpga bench ... --json PATH` writes into docs/figures/ (`make
figures` reruns them all), each also kept as its CPU vendor's latest in docs/figures/hosts/<vendor>/:
the headline judges the speed targets (pearl_fpga/bench/targets.py) on the current records' hosts and
against the other vendors' last. Nothing here measures anything; every figure in the docs comes from a
record, with the command, commit, machine and load that produced it.

    python docs/render.py           # rewrite docs/benchmarks.md, the README block and the fuzz table
    python docs/render.py --check   # exit 1 when any is out of date with the records (make test)
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, installed or not

from pearl_fpga.bench.records import read_host_records, read_records  # noqa: E402
from pearl_fpga.bench.targets import markdown_table as _table  # noqa: E402
from pearl_fpga.bench.targets import target_lines, vendor_lines, vendor_section  # noqa: E402
from pearl_fpga.errors import RecordError  # noqa: E402

FIGURES = ROOT / "docs" / "figures"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
HARDWARE = ROOT / "docs" / "hardware.md"
RELIABILITY = ROOT / "docs" / "reliability.md"
START, END = "<!-- figures:start -->", "<!-- figures:end -->"
FUZZ_START, FUZZ_END = "<!-- fuzz:start -->", "<!-- fuzz:end -->"
# record file -> section title, in the order of the page
SECTIONS = {
    "train-dqn": "Training throughput: DQN on CartPole-v1 against Stable-Baselines3",
    "train-ddpg": "Training throughput: DDPG on Pendulum-v1 against Stable-Baselines3",
    "train-td3": "Training throughput: TD3 on Pendulum-v1 against Stable-Baselines3",
    "train-dqn-bf16": "Training throughput: DQN on CartPole-v1 with the bfloat16 learner against SBX",
    "train-ddpg-bf16": "Training throughput: DDPG on Pendulum-v1 with the bfloat16 learner against SBX",
    "train-td3-bf16": "Training throughput: TD3 on Pendulum-v1 with the bfloat16 learner against SBX",
    "train-sac": "Training throughput: SAC on Pendulum-v1 against Stable-Baselines3 and SBX",
    "train-sac-bf16": "Training throughput: SAC on Pendulum-v1 with the bfloat16 learner against SBX",
    "train-ddpg-cuda": "Training throughput on a GPU: DDPG on Pendulum-v1, every learner on the GPU, against SBX",
    "train-td3-cuda": "Training throughput on a GPU: TD3 on Pendulum-v1, every learner on the GPU, against SBX",
    "quality-dqn": "Learning quality: DQN on CartPole-v1",
    "quality-ddpg": "Learning quality: DDPG on Pendulum-v1",
    "quality-td3": "Learning quality: TD3 on Pendulum-v1",
    "quality-sac": "Learning quality: SAC on Pendulum-v1",
    "quality-dqn-bf16": "Learning quality: DQN on CartPole-v1 with the bfloat16 learner",
    "quality-ddpg-bf16": "Learning quality: DDPG on Pendulum-v1 with the bfloat16 learner",
    "quality-td3-bf16": "Learning quality: TD3 on Pendulum-v1 with the bfloat16 learner",
    "quality-sac-bf16": "Learning quality: SAC on Pendulum-v1 with the bfloat16 learner",
    "learner": "The learner step by precision and thread count",
    "learner-schedule-ddpg-64": "The update schedule: DDPG 64x64 on a shared host",
    "learner-schedule-ddpg": "The update schedule: DDPG 400x300 on a shared host",
    "learner-schedule-td3-64": "The update schedule: TD3 64x64 on a shared host",
    "replay": "Replay kernel: prioritized buffer against cpprb and TorchRL",
    "mlp": "MLP kernel: inference against torch eager",
    "plan": "Dispatcher: predicted against measured throughput",
    "tabular": "Tabular kernel: updates per second",
    "tabular-policies": "Tabular kernel: learned policies",
    "ray": "Ray engine: transport, actor scaling, broadcast, recovery",
    "fuzz": "Reliability: files users hand the package, corrupted and edited",
}
QUALITY_TARGETS = {"dqn": (475.0, 4), "ddpg": (-200.0, 4), "td3": (-200.0, 4), "sac": (-200.0, 4)}  # (return at least, seeds out of 5)


def load_records(folder: Path = FIGURES) -> dict[str, dict[str, Any]]:
    """Every record of `folder` by file stem, validated (a record is data: JSON, never code)."""
    return read_records(folder)


def load_host_records(folder: Path = FIGURES) -> dict[str, dict[str, dict[str, Any]]]:
    """The latest record of each benchmark per CPU vendor (folder/hosts/<vendor>/), validated."""
    return read_host_records(folder)


# ----------------------------------------------------------------------------------- helpers
def _provenance(record: dict[str, Any]) -> str:
    m = record["machine"]
    mem = f", {m['memory_gib']} GiB" if "memory_gib" in m else ""
    libs = ", ".join(f"{k} {m[k]}" for k in ("python", "numpy", "torch") if k in m)
    other = record.get("other_cores_busy")
    load = (f"load average {record['load_average_before'][0]:.2f} before, {record['load_average_after'][0]:.2f} after"
            + (f"; other processes kept {other:.2f} cores busy" if other is not None else ""))
    flag = ("\n\n**Taken under load** (other processes kept more than half the cores busy during at least one "
            "run): not a headline figure." if record["under_load"] else "")
    return (f"Command: `{record['command']}` · commit `{record['commit']}` · {record['date']}  \n"
            f"Machine: {m['cpu']}, {m['cores']} cores{mem}, {m['os']}; {libs}  \n{load}{flag}")


def _f(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


# ----------------------------------------------------------------------------------- per benchmark
def _train(results: dict[str, Any]) -> str:
    if results.get("keep_best"):
        return _quality(results)
    names = list(results["sb3_threads"])
    header = ["seed", f"pearl_fpga env steps/s (learner threads)"]
    header += [f"SB3 {results['sb3_threads'][n]} thread{'s' if results['sb3_threads'][n] > 1 else ''} ({n})"
               for n in names]
    header += [f"ratio vs SB3 {n}" for n in names]
    sbx = any("sbx" in r for r in results["runs"])
    on_gpu = results.get("baseline_device") == "cuda"
    if sbx:
        header += ["SBX (JAX on the GPU)" if on_gpu else "SBX (JAX default threads)", "ratio vs SBX"]
    rows = []
    for r in results["runs"]:
        ours = r["pearl_fpga"]
        mark = lambda run: " *" if run["under_load"] else ""  # noqa: E731
        row = [str(r["seed"]), f"{_f(ours['env_steps_per_s'])} ({ours['learner_threads_used']}){mark(ours)}"]
        row += [f"{_f(r['sb3'][n]['env_steps_per_s'])}{mark(r['sb3'][n])}" if n in r["sb3"] else "-" for n in names]
        row += [f"{r['speedup'][n]:.2f}x" if n in r["speedup"] else "-" for n in names]
        if sbx:
            row += [f"{_f(r['sbx']['env_steps_per_s'])}{mark(r['sbx'])}", f"{r['speedup_sbx']:.2f}x"] if "sbx" in r \
                else ["-", "-"]
        rows.append(row)
    out = [_table(header, rows)]
    if "median_speedup" in results:
        out.append("Median ratio over the seeds: " + ", ".join(
            f"**{v:.2f}x** against SB3 at {k} thread(s)" for k, v in results["median_speedup"].items())
            + (f", **{results['median_speedup_sbx']:.2f}x** against SBX" if "median_speedup_sbx" in results else "")
            + ".")
    variant = ("vanilla DQN target on both sides" if results["algo"] == "dqn" and not results["config"]["double_q"]
               else "pearl_fpga's double-DQN target against SB3's vanilla one" if results["algo"] == "dqn"
               else "pearl_fpga computes actor and critic gradients concurrently"
               if results["config"].get("concurrent_updates") else "the same update order on both sides")
    out.append(f"{results['steps']:,} env steps per run, rl-zoo hyper-parameters on both sides ({variant}); "
               "each seed runs the three back to back. `*`: run marked under load.")
    if on_gpu:
        out.append(f"Every learner on {results.get('gpu', 'the GPU')}: pearl_fpga's (placement learn=cuda; its "
                   "actor and replay on the CPU) and each baseline's (SB3 device cuda, SBX's JAX on the GPU); "
                   "the envs on the CPU.")
    tasks = results["runs"][0]["pearl_fpga"]["us_per_env_step"]
    means = {k: statistics.mean(r["pearl_fpga"]["us_per_env_step"][k] for r in results["runs"]) for k in tasks}
    out.append("Where pearl_fpga's time goes, microseconds per env step (mean over seeds):\n\n"
               + _table(list(means), [[f"{v:.1f}" for v in means.values()]]))
    return "\n\n".join(out)


def _quality(results: dict[str, Any]) -> str:
    threshold, need = QUALITY_TARGETS[results["algo"]]
    rows, ok = [], 0
    for r in results["runs"]:
        ours = r["pearl_fpga"]
        ok += ours["final_return"] >= threshold
        rows.append([str(r["seed"]), f"{ours['final_return']:.1f}", f"{ours['eval_policy']} (step {ours['eval_policy_step']:,})",
                     _f(ours["env_steps_per_s"])])
    return "\n\n".join([
        _table(["seed", "evaluation return", "policy evaluated", "env steps/s of the run"], rows),
        f"{results['steps']:,} env steps per seed, the best policy kept by periodic evaluation evaluated on fresh "
        f"episodes (as `pearl-fpga train` does). Target: >= {threshold:g} on {need} of 5 seeds: "
        f"**{ok} of {len(rows)}**.",
    ])


def _learner(results: dict[str, Any]) -> str:
    from pearl_fpga.bench.learner import learner_rows, profile_text

    peaks = results["peak_gflops"]
    rows = [[algo, label, threads, _f(t * 1e6), f"{gflops:.1f}", f"{100 * gflops / peak:.0f}%", ratio]
            for algo, label, threads, t, gflops, peak, ratio in learner_rows(results)]
    work = "; ".join(f"{a}: {m['flops_per_step'] / 1e6:.1f} MFLOP per step" for a, m in results["algos"].items())
    bf16 = results.get("peak_gflops_bfloat16")
    return "\n\n".join([
        _table(["algo", "learner", "torch threads", "us per step", "GFLOP/s", "of peak", "vs 1 thread"], rows),
        f"Work per step ({work}) counted by torch.utils.flop_counter on the torch path. Peak: "
        f"{results['peak_method']}: float32 " + ", ".join(f"{v:.0f} GFLOP/s at {k} thread(s)" for k, v in peaks.items())
        + ("" if not bf16 else "; bfloat16 " + ", ".join(f"{v:.0f} GFLOP/s at {k} thread(s)" for k, v in bf16.items()))
        + "; a step's share is taken against the peak of its precision on the cores it keeps busy (DDPG's concurrent "
          "update runs two callers); vs 1 thread: against the algorithm's first learner at 1 thread.",
        *(f"{algo} update schedule (the first learner's, measured while it was timed): {m['schedule']}; the "
          "`serial` and `concurrent` learners run that schedule fixed." for algo, m in results["algos"].items()
          if m.get("schedule")),
        *(f"Where {algo}'s {p.get('precision', 'float32')} step goes in its serial schedule at {p['threads']} thread(s) "
          f"({_f(p['step_s'] * 1e6)} us; torch.profiler and the native pieces' timers, `--profile`): {profile_text(p)}."
          for algo, m in results["algos"].items() for p in m.get("profile", [])),
        *(f"SBX's {algo} step: SBX {m['sbx']['version']} on jax {m['sbx']['jax']}, its own `train` of "
          f"{m['sbx'].get('gradient_steps_per_call', 1)} gradient step(s) per call as the preset runs it, with its "
          "replay sample, per gradient step (`--sbx`)." for algo, m in results["algos"].items() if "step_s" in m.get("sbx", {})),
    ])


def _replay(results: dict[str, Any]) -> str:
    labels = {"pearl_fpga": "pearl_fpga `PrioritizedReplayBuffer` (cpu)", "cpprb": "cpprb `PrioritizedReplayBuffer`",
              "torchrl": "TorchRL prioritized buffer", "sampler_cpu": "`ReplaySampler` cpu (bare tree)",
              "sampler_numpy": "`ReplaySampler` numpy (reference)"}
    rows = []
    for key, row in results["results"].items():
        if "error" in row:
            rows.append([labels.get(key, key), "n/a", "n/a", "n/a", row["error"]])
            continue
        ratio = row.get("speedup_vs_best_baseline")
        rows.append([labels.get(key, key), f"{row['sample_us']:.1f}", f"{row['update_us']:.1f}",
                     f"{row['iteration_us']:.1f}", f"{ratio:.2f}x" if ratio is not None else ""])
    rtl = results["rtl"]
    if "error" not in rtl:
        rows.append([f"rtl backend, capacity {rtl['capacity']}, batch {rtl['batch']} (cycles)", str(rtl["sample_cycles"]),
                     str(rtl["update_cycles"]), "", f"SPEC bound {rtl['bound_cycles']}"])
    cfg = results["config"]
    return "\n\n".join([
        _table(["implementation", "sample us", "update us", "sample+update us", "vs best baseline"], rows),
        f"Capacity {cfg['capacity']:,}, fan-out {cfg['fanout']}, batch {cfg['batch']}, obs dim {cfg['obs_dim']}; "
        f"{cfg['statistic']} of {cfg['repeats']} iterations.",
    ])


def _mlp(results: dict[str, Any]) -> str:
    rows, rtl_rows = [], []
    for entry in results["networks"]:
        for row in entry["rows"]:
            rows.append([entry["network"], str(row["batch"]), f"{row['cpu_us']:.2f}", f"{row['torch_1thread_us']:.2f}",
                         f"{row['torch_default_us']:.2f}", f"{row['speedup_vs_torch_1thread']:.1f}x",
                         f"{row['speedup_vs_torch_default']:.1f}x"])
        rtl = entry["rtl"]
        if rtl["available"]:
            rtl_rows.append([entry["network"], str(rtl["lanes"]), f"{rtl['cycles_per_inference']:.1f}",
                             f"{rtl['target_cycles_per_inference']:.1f}", "yes" if rtl["meets_target"] else "no"])
    d = results["torch_default_threads"]
    out = [_table(["network", "batch", "cpu us", "torch 1 thread us", f"torch {d} threads us", "vs 1 thread",
                   f"vs {d} threads"], rows),
           f"Best round per figure; cpu backend MAC path: {results.get('cpu_path')}."]
    if rtl_rows:
        out.append("rtl backend, cycles per inference at steady state:\n\n"
                   + _table(["network", "lanes", "cycles", "target MACs/LANES + 8L + 16", "meets"], rtl_rows))
    syncs = results.get("weight_sync")  # records since issue 33
    if syncs:
        out.append("One learner weight sync (`MLPInfer.load_weights`, 256 calibration observations, torch at 1 thread) "
                   "against the reference steps it replaces (a calibration pass every sync, numpy quantization, a "
                   "state copy), timed side by side in the same run:\n\n"
                   + _table(["network", "sync us", "reference us", "speedup"],
                            [[r["network"], f"{r['sync_us']:.0f}", f"{r['reference_us']:.0f}", f"{r['speedup']:.1f}x"]
                             for r in syncs]))
    return "\n\n".join(out)


def _plan(results: dict[str, Any]) -> str:
    rows = [[r["placement"], str(r["workers"]), _f(r["predicted"]), _f(r["measured"]), f"{r['error']:+.0%}",
             r["bottleneck"]] for r in results["rows"]]
    out = [_table(["placement", "workers", "predicted env steps/s", "measured", "error", "predicted bottleneck"], rows),
           f"{results['steps']:,} env steps per run. **{results['within_target']} of {results['cases']}** predictions "
           f"within {results['target_error']:.0%} of the measurement."]
    if results.get("chosen_over_default"):
        out.append(f"The planner's choice ({results['chosen']['placement']}, {results['chosen']['workers']} workers) "
                   f"against the default: {results['chosen_over_default']:.2f}x, measured.")
    return "\n\n".join(out)


def _tabular(results: dict[str, Any]) -> str:
    rows = []
    vs_cpu = any("vs_cpu_backend" in row for row in results["rows"].values())  # records since the one-call partitioned mode
    for name, row in results["rows"].items():
        vs_numba = row.get("vs_numba")
        rows.append([name, str(row["threads"]), _f(row["updates_per_s"]), f"{row['vs_numpy_loop']:.1f}x",
                     f"{vs_numba:.2f}x" if vs_numba is not None else "-",
                     *([f"{row['vs_cpu_backend']:.2f}x" if "vs_cpu_backend" in row else "-"] if vs_cpu else []),
                     {True: "yes", False: "NO", None: "-"}[row.get("exact")]])
    head = ["contender", "threads", "updates/s", "vs numpy loop", "vs numba", *(["vs cpu backend"] if vs_cpu else []),
            "bit-exact"]
    out = [_table(head, rows),
           f"{results['updates']:,} updates on a {results['states']} x {results['actions']} table (the numpy loop "
           f"over {results['numpy_updates']:,}); {results['hazard_rate_4']:.0%} of the transitions bootstrap on a row "
           "one of the 4 previous updates wrote."]
    out += [f"- {note}" for note in results.get("notes", [])]
    rtl = results.get("rtl", {})
    if not rtl.get("available"):
        out.append(f"rtl: {rtl.get('reason', 'not measured')}")
    return "\n\n".join(out)


def _tabular_policies(results: dict[str, Any]) -> str:
    met = {True: "met", False: "NOT met", None: "-"}
    rows = [[r["env"], r["algo"], f"{r['episodes']:,}", f"{r['alpha']:g}", r["backend"], f"{r['train_s']:.1f}",
             f"{r['eval_return']:.3f}", f"{r['eval_success']:.3f}", f"{r['exact_return']:.3f}", f"{r['exact_success']:.3f}",
             met[r["target_met"]]] for r in results["rows"]]
    targets = "; ".join(f"{env}: " + ", ".join(p for p in ((f"return >= {t[0]:g}" if t[0] is not None else ""),
                                                            (f"success >= {t[1]:g}" if t[1] is not None else "")) if p)
                        for env, t in results["targets"].items())
    return "\n\n".join([
        _table(["env", "algo", "episodes", "alpha", "backend", "train s", f"eval return ({results['eval_episodes']:,} ep.)",
                "eval success", "exact return", "exact success", "Q-learning target"], rows),
        f"Presets of `pearl_fpga.config.TrainConfig` (algo qlearning or sarsa; a budget of env steps, the run ends "
        f"with the episode that reaches it), seed {results['seed']}; \"exact\" is the greedy "
        "policy's expected value from the env's transition model. Targets (Q-learning, on the exact values): "
        f"{targets}. SARSA learns the values of its exploring behaviour (a safer, longer path on CliffWalking), so "
        "it is not held to them. The training time depends on the machine, the policies do not."])


def _ray(results: dict[str, Any]) -> str:
    rows = [[str(r["batch"]), _f(r["insert_local"]), _f(r["insert_ray"]), f"{r['insert_ratio']:.2f}",
             _f(r["sample_update_local"]), _f(r["sample_update_ray"]), f"{r['sample_update_ratio']:.2f}"]
            for r in results["shard"]]

    def at(batch: int | None) -> str:
        return f"batch {batch}" if batch is not None else "none of the measured batches"

    t = results["transport"]
    base = results["scaling"][0]["env_steps_per_s"]
    scaling = [[str(r["actors"]), _f(r["env_steps_per_s"]), f"{r['env_steps_per_s'] / base:.2f}x"]
               for r in results["scaling"]]
    out = [f"{results['cluster']}.",
           "**1. A replay shard through Ray against in-process** (transitions/s; every Ray call waited for):",
           _table(["batch", "insert in-process", "insert Ray", "ratio", "sample+update in-process", "sample+update Ray",
                   "ratio"], rows),
           f"Ray reaches 90% of in-process at {at(results['insert_90pct_batch'])} (insert) and "
           f"{at(results['sample_update_90pct_batch'])} (sample+update). Fitted transport cost: "
           f"{t['per_call_s'] * 1e6:,.0f} us per call + {t['per_byte_s'] * 1e9:.2f} ns per byte.",
           f"**2. Env steps/s against env actors** on {results['scaling_env']}: the sleep uses no CPU, so this "
           "shows the engine's scaling on a host with few cores; envs that use the CPU scale with the cores.",
           _table(["env actors", "env steps/s", "vs 1 actor"], scaling),
           "Ray's cost per grant (the call and the actor's insert into its shard) against the env+act time of its "
           "data, one actor on CartPole-v1:",
           _table(["env steps per grant", "ms per grant", "Ray call + insert, ms", "share of env+act time"],
                  [[str(r["chunk"]), f"{r['wall_s'] * 1e3:.1f}", f"{r['ray_s'] * 1e3:.2f}", f"{r['overhead_vs_env']:.0%}"]
                   for r in results["call_overhead"]]),
           f"Grants are up to {results['message_steps']} env steps (bounded by `actor_lag` / actors).",
           "**3. Weight broadcast** (ray.put until every actor loaded the weights):",
           _table(["network", "MB", "actors", "median ms", "max ms"],
                  [[r["net"], f"{r['bytes'] / 1e6:.2f}", str(r["actors"]), f"{r['median_s'] * 1e3:.1f}",
                    f"{r['max_s'] * 1e3:.1f}"] for r in results["broadcast"]])]
    rec = results["recovery"]
    out.append(f"**4. Recovery:** a killed env actor answers again (a new process) after {rec['actor_s']:.2f} s; "
               f"a killed replay shard after {rec['shard_s']:.2f} s, restarted empty ({rec['shard_lost']:,} "
               "transitions lost, counted and reported).")
    return "\n\n".join(out)


def _fuzz(results: dict[str, Any]) -> str:
    cols = [("inputs", "inputs"), ("clear_errors", "clear error"), ("accepted", "accepted (still valid)"),
            ("loaded_identically", "loaded identically"), ("unclear_errors", "error without the file"),
            ("tracebacks", "tracebacks"), ("hangs", "hangs"), ("loaded_but_changed", "loaded but changed")]
    rows = [[f"`{kind}`" if kind != "total" else "**total**", *(_f(counts[c]) for c, _ in cols)]
            for kind, counts in [*results["kinds"].items(), ("total", results["total"])]]
    return (f"Seed {results['seed']}, {results['per_kind']} inputs per kind, each loaded in a worker process; a "
            f"case without a result after {results['case_timeout_s']:g} s counts as a hang.\n\n"
            + _table(["file kind", *(name for _, name in cols)], rows))


RENDER = {"train": _train, "learner": _learner, "replay": _replay, "mlp": _mlp, "plan": _plan, "tabular": _tabular,
          "tabular-policies": _tabular_policies, "ray": _ray, "fuzz": _fuzz}


# ----------------------------------------------------------------------------------- pages
def benchmarks_page(records: dict[str, dict[str, Any]], by_vendor: dict[str, dict[str, dict[str, Any]]]) -> str:
    parts = ["# Benchmarks\n",
             "Every figure of the documentation, rendered by `docs/render.py` from the records in "
             "[figures/](figures/) that `pearl-fpga bench ... --json` wrote (`make figures` reruns them all). "
             "Each section names its command, commit, machine and load. Do not edit this file by hand.\n"]
    order = [k for k in SECTIONS if k in records] + sorted(k for k in records if k not in SECTIONS)
    for key in order:
        record = records[key]
        if record["benchmark"] == "implement":  # docs/hardware.md's table
            continue
        render = RENDER.get(record["benchmark"])
        if render is None:
            raise RecordError(f"docs/figures/{key}.json: no renderer for benchmark {record['benchmark']!r}")
        parts.append(f"## {SECTIONS.get(key, key)}\n\n{_provenance(record)}\n\n{render(record['results'])}\n")
        png = FIGURES / f"{key}.png"
        if png.exists():
            parts.append(f"![{key}](figures/{png.name})\n")
    parts.append(vendor_section(by_vendor))
    return "\n".join(parts)


def headline(records: dict[str, dict[str, Any]], by_vendor: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The README's block: each target, met or not on the host of its current record, then each other
    CPU vendor's last figures and whether a current one is lower."""
    lines: list[str] = []

    def tag(record: dict[str, Any]) -> str:
        return " (taken under load)" if record["under_load"] else ""

    lines += target_lines(records, by_vendor)
    for key, name in (("quality-dqn", "DQN CartPole-v1"), ("quality-ddpg", "DDPG Pendulum-v1"),
                      ("quality-td3", "TD3 Pendulum-v1"), ("quality-sac", "SAC Pendulum-v1"),
                      ("quality-dqn-bf16", "DQN CartPole-v1, bfloat16 learner"),
                      ("quality-ddpg-bf16", "DDPG Pendulum-v1, bfloat16 learner"),
                      ("quality-td3-bf16", "TD3 Pendulum-v1, bfloat16 learner"),
                      ("quality-sac-bf16", "SAC Pendulum-v1, bfloat16 learner")):
        r = records.get(key)
        if r:
            res = r["results"]
            threshold, need = QUALITY_TARGETS[res["algo"]]
            ok = sum(x["pearl_fpga"]["final_return"] >= threshold for x in res["runs"])
            lines.append(f"- {name} learning quality, {res['steps']:,} steps: {ok} of {len(res['runs'])} seeds reach "
                         f"{threshold:g} (target {need} of 5){tag(r)}")
    r = records.get("replay")
    if r and r["results"]["results"].get("pearl_fpga", {}).get("speedup_vs_best_baseline"):
        x = r["results"]["results"]["pearl_fpga"]
        lines.append(f"- Prioritized replay, sample+update of 256 at capacity 2^20: {x['iteration_us']:.0f} us, "
                     f"{x['speedup_vs_best_baseline']:.1f}x faster than the best baseline{tag(r)}")
    lines += vendor_lines(records, by_vendor)
    lines.append("\nAll figures, with their commands and machine: [docs/benchmarks.md](docs/benchmarks.md).")
    return "\n".join(lines)


def readme_with(text: str, block: str, start: str = START, end: str = END, name: str = "README.md") -> str:
    if start not in text or end not in text:
        raise RecordError(f"{name} lacks the {start} ... {end} markers of its rendered block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}\n{end}{tail}"


def reliability_with(text: str, records: dict[str, dict[str, Any]]) -> str:
    """docs/reliability.md with the fuzz record's table (and its provenance) between its markers."""
    record = records.get("fuzz")
    if record is None:
        raise RecordError("docs/figures/fuzz.json is missing; write it with pearl-fpga bench fuzz --json "
                          "docs/figures/fuzz.json")
    return readme_with(text, f"{_fuzz(record['results'])}\n\n{_provenance(record)}", FUZZ_START, FUZZ_END,
                       "docs/reliability.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="fail when the rendered files are out of date")
    args = parser.parse_args(argv)
    try:
        from pearl_fpga.hw.report import END as IMPL_END, START as IMPL_START, implementation_section

        records, by_vendor = load_records(), load_host_records()
        page = benchmarks_page(records, by_vendor)
        readme = readme_with(README.read_text(), headline(records, by_vendor))
        reliability = reliability_with(RELIABILITY.read_text(), records)
        hardware = readme_with(HARDWARE.read_text(), implementation_section(records), IMPL_START, IMPL_END,
                               "docs/hardware.md")
    except ValueError as exc:  # RecordError, or hardware.md or reliability.md without their markers
        print(f"error: {exc}", file=sys.stderr)
        return 2
    outputs = ((BENCHMARKS, page), (README, readme), (HARDWARE, hardware), (RELIABILITY, reliability))
    stale = [p for p, text in outputs if not p.exists() or p.read_text() != text]
    if args.check:
        if stale:
            print("out of date with docs/figures: " + ", ".join(str(p.relative_to(ROOT)) for p in stale)
                  + "; run python docs/render.py", file=sys.stderr)
            return 1
        return 0
    for path, text in outputs:
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
