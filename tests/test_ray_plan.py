"""The planner's Ray model on hand-computed cases (no Ray needed)."""

from __future__ import annotations

import pytest

from pearl_fpga.config import TrainConfig
from pearl_fpga.planner.ray_plan import plan_ray, transition_bytes
from pearl_fpga.runtime.schedule import RAY_MESSAGE_STEPS

CFG = TrainConfig.preset("dqn")  # 128 gradient steps per 256 env steps, batch 64
TASKS = {"env_step": 1e-3, "act": 0.0, "replay_insert": 1e-6, "replay_sample": 2e-6, "replay_update": 1e-6,
         "learn": 1e-4, "weight_sync": 0.0}
FREE = {"per_call_s": 0.0, "per_byte_s": 0.0}


def node(name: str, cpus: float, **other: float) -> dict:
    return {"node_id": name, "address": "127.0.0.1", "resources": {"CPU": cpus, **other}}


def test_actors_fill_the_cpus_left_after_the_learner_and_a_shard():
    plan = plan_ray(TASKS, CFG, [node("head", 4), node("n2", 8)], "head", FREE, 100, one_host=500.0)
    # head: 4 - 1 (learner) = 3; the shard (0.5 CPU) goes to n2: 7.5 -> 7 actors
    assert plan.actors_per_node == [3, 7] and plan.shards == 1
    assert plan.throughput == pytest.approx(10 / 1e-3)  # 10 actors at 1 ms per env step, actor-bound
    assert plan.bottleneck == "env actors" and plan.engine == "ray"


def test_transport_cost_slows_actors_and_learner():
    cost = {"per_call_s": 1e-3, "per_byte_s": 1e-9}
    plan = plan_ray(TASKS, CFG, [node("head", 2), node("n2", 2)], "head", cost, 100, one_host=100.0)
    per_step = 1e-3 + (2 * 1e-3 + 1e-9 * 100 * RAY_MESSAGE_STEPS) / RAY_MESSAGE_STEPS
    assert plan.actors_per_node == [1, 1]  # head: 1 CPU left; n2: 2 - 0.5 (shard) = 1.5 -> 1 actor
    assert plan.bottleneck == "learner"  # one Ray call per shard per gradient step
    assert plan.throughput == pytest.approx(min(2 / per_step, 1 / (1e-4 + 0.5 * (1e-3 + 1e-9 * 100 * 64))), rel=1e-6)


def test_ray_loses_to_one_host_when_its_transport_dominates():
    cost = {"per_call_s": 5e-3, "per_byte_s": 0.0}
    plan = plan_ray(TASKS, CFG, [node("head", 2)], "head", cost, 100, one_host=2000.0)
    assert plan.engine == "processes" and plan.throughput < 2000.0 and plan.notes


def test_no_cpu_for_an_actor_is_said():
    plan = plan_ray(TASKS, CFG, [node("head", 1)], "head", FREE, 100, one_host=100.0)
    assert plan.actors == 0 and "add a node" in plan.notes[0]


def test_transition_bytes():
    assert transition_bytes(4, 2, True) == 4 * 8 + 8 + 8
    assert transition_bytes(3, 1, False) == 4 * 6 + 4 + 8
