"""The training schedule every engine honours (pearl_fpga.runtime.schedule) against a transcription
of Stable-Baselines3's loop."""

from hypothesis import given
from hypothesis import strategies as st

from pearl_fpga.config import TrainConfig
from pearl_fpga.runtime.schedule import (MESSAGE_STEPS, allowed_gradient_steps, credit_chunk, needed_env_steps,
                                         target_copy_due)


def _sb3_schedule(train_freq: int, gradient_steps: int, learning_starts: int, total: int) -> list[int]:
    """Gradient steps done after each env step, by SB3's learn() loop (collect train_freq, then train)."""
    done, out, n = 0, [], 0
    while n < total:
        for _ in range(train_freq):
            n += 1
            out.append(done)
            if n >= total:
                break
        if n % train_freq == 0 and n > learning_starts:
            done += gradient_steps
            out[-1] = done
    return out


@given(st.integers(1, 64), st.integers(0, 8), st.integers(0, 300))
def test_allowed_gradient_steps_matches_sb3_loop(train_freq, gradient_steps, learning_starts):
    c = TrainConfig.preset("dqn", train_freq=train_freq, gradient_steps=gradient_steps, learning_starts=learning_starts,
                           batch_size=1)
    expected = _sb3_schedule(train_freq, gradient_steps, learning_starts, 400)
    assert [allowed_gradient_steps(c, n) for n in range(1, 401)] == expected


@given(st.integers(1, 64), st.integers(1, 8), st.integers(0, 300), st.integers(0, 40))
def test_needed_env_steps_inverts_the_schedule(train_freq, gradient_steps, learning_starts, g):
    c = TrainConfig.preset("dqn", train_freq=train_freq, gradient_steps=gradient_steps,
                           learning_starts=learning_starts, batch_size=1)
    n = needed_env_steps(c, g)
    assert allowed_gradient_steps(c, n) > g  # step g may run once n env steps exist
    assert allowed_gradient_steps(c, n - 1) <= g  # and not one env step earlier


def test_target_copies_follow_sb3_collection():
    # SB3 copies at every multiple of target_update_interval during collection; with the online net
    # frozen while collecting, one copy before the first update of the round is the same
    c = TrainConfig.preset("dqn", target_update_interval=10, train_freq=4)
    assert target_copy_due(c, needed=12, checked=8)  # 10 lies in (8, 12]
    assert not target_copy_due(c, needed=16, checked=12)  # nothing in (12, 16]
    assert target_copy_due(c, needed=20, checked=16)


def test_credit_chunk_is_a_message_of_whole_env_groups():
    c = TrainConfig.preset("dqn", n_envs=3, train_freq=256)
    assert credit_chunk(c) == MESSAGE_STEPS // 3 * 3
    c = TrainConfig.preset("dqn", n_envs=4, train_freq=8, max_actor_lag=0)  # lag = one round of 8
    assert credit_chunk(c) == 8
    c = TrainConfig.preset("dqn", n_envs=16, train_freq=8)
    assert credit_chunk(c) == 16  # at least one env group


def test_lockstep_insert_steps_is_a_training_round_in_whole_env_groups():
    from dataclasses import replace

    from pearl_fpga.config import TrainConfig
    from pearl_fpga.runtime.schedule import BULK_ACT_STEPS, lockstep_insert_steps

    cfg = TrainConfig.preset("dqn", "CartPole-v1")  # train_freq 256
    assert lockstep_insert_steps(cfg) == 256
    assert lockstep_insert_steps(replace(cfg, train_freq=4)) == 4
    assert lockstep_insert_steps(replace(cfg, buffer_size=100)) == 100  # never more than the buffer holds
    assert lockstep_insert_steps(replace(cfg, train_freq=4096)) == BULK_ACT_STEPS
    assert lockstep_insert_steps(replace(cfg, n_envs=8, train_freq=250)) == 248
    assert lockstep_insert_steps(replace(cfg, gradient_steps=0)) == BULK_ACT_STEPS
