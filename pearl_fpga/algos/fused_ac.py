"""DDPG's and TD3's CPU learner step with its small ops fused, as DQN's (pearl_fpga.algos.fused).

`FusedActorCriticStep` extends the critics' pieces (algos/fused_critics.py) with the deterministic actor's: its
passes, its gradient through Q1's input gradient, its Adam step, and the Polyak averages. The small (B, action)
and (B, 1) pieces (tanh, smoothing noise, TD target) are the torch path's own ops.

`FusedActorCriticStep.update` runs the step in TD3's order (pearl_fpga.algos.td3: its torch path is the
reference), on the learner's threads (the critics one per thread, DDPG's concurrent actor gradient); the
arithmetic is the torch path's, with sums in another order, so the two agree to float rounding
(tests/test_fused_learner.py checks both against autograd and torch.optim.Adam).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import torch

from pearl_fpga.algos.common import Batch, LeanAdam
from pearl_fpga.algos.fused_critics import CriticBuffers, FusedCritics, parameters, polyak_average
from pearl_fpga.algos.fused_net import FusedNet, Layers, NetPass, backward_together, forward_together, recording

OnThread = Callable[..., Future[Any]]
"""A learner's `_on_grad_thread` (algos/step_threads.py): fn(*args) on its second thread, or at once in the serial
schedule."""


@dataclass
class ActorCriticBuffers(CriticBuffers):
    """Every tensor one DDPG/TD3 step writes, for one batch size: the critics' and the actor's."""

    actor_target_pass: NetPass
    x_pi: torch.Tensor  # (B, obs + action): obs and the actor's action
    actor_pass: NetPass
    q1_pass: NetPass  # Q1 on the actor's action (its own: the concurrent update runs it beside the critics')
    d_q_pi: torch.Tensor  # (B, 1) dLoss/dQ1 of the actor's loss: -1/B
    d_x_pi: torch.Tensor  # (B, obs + action) dLoss/d(Q1's input)
    actor_grads: list[torch.Tensor]


class FusedActorCriticStep(FusedCritics[ActorCriticBuffers]):
    """The pieces of one DDPG/TD3 step on the given networks ((weight, bias) layers of `mlp()` networks,
    their targets, and the LeanAdams over the actor's and over all critics' parameters in layer order)."""

    def __init__(self, actor: Layers, actor_target: Layers, critics: Sequence[Layers], critic_targets: Sequence[Layers],
                 actor_adam: LeanAdam, critic_adam: LeanAdam, gamma: float, tau: float, noise_clip: float, native: Any,
                 precision: torch.dtype | None = None) -> None:
        super().__init__(critics, critic_targets, critic_adam, int(actor[-1][0].shape[0]), gamma, tau, native,
                         precision, together=True)
        self.noise_clip = noise_clip
        self.actor_adam = actor_adam
        self.actor = FusedNet(actor, native, precision)
        self.actor_target = FusedNet(actor_target, native, precision)
        self._actor_pair = (parameters([actor_target]), parameters([actor]))  # its Polyak average's (average_actor)

    def new_buffers(self, n: int) -> ActorCriticBuffers:
        return ActorCriticBuffers(
            **self.critic_buffers(n), actor_target_pass=self.actor_target.new_pass(n),
            x_pi=torch.empty(n, self.input_width), actor_pass=self.actor.new_pass(n),
            q1_pass=self.critics[0].new_pass(n), d_q_pi=torch.full((n, 1), -1.0 / n),
            d_x_pi=torch.empty(n, self.input_width), actor_grads=[torch.empty_like(p) for p in self.actor_adam.params])

    def nets(self) -> list[FusedNet]:
        return [self.actor, self.actor_target, *super().nets()]

    def adams(self) -> list[LeanAdam]:
        return [*super().adams(), self.actor_adam]

    def next_input(self, buf: ActorCriticBuffers, batch: Batch, noise: torch.Tensor | None,
                   threads: int | None = None) -> None:
        """buf.next_in = [next_obs, target actor's action (+ clipped smoothing noise, clipped to [-1, 1])].
        threads: the target actor's wide GEMMs as native tasks on up to this many threads (needs self.gemms)."""
        p = buf.actor_target_pass
        if threads is None:
            self.actor_target.forward(batch.next_obs, p)
        else:
            forward_together([self.actor_target], [batch.next_obs], [p], self.gemms, threads)
        action = torch.tanh_(p.outs[-1])
        if noise is not None:
            action.add_(noise.clamp_(-self.noise_clip, self.noise_clip)).clamp_(-1.0, 1.0)
        torch.cat([batch.next_obs, action], dim=1, out=buf.next_in)

    def actor_grads(self, buf: ActorCriticBuffers, batch: Batch, refresh_q1: bool, prog: Any = None) -> None:
        """The actor's gradients of -mean Q1(s, pi(s)) into buf.actor_grads (actor_forward, then
        actor_backward). prog: as FusedNet's."""
        self.actor_forward(buf, batch, prog=prog)
        self.actor_backward(buf, batch, refresh_q1, prog)

    def actor_forward(self, buf: ActorCriticBuffers, batch: Batch, threads: int | None = None,
                      prog: Any = None) -> None:
        """pi(s) and buf.x_pi = [obs, pi(s)]: the actor's part that no critic update changes. threads: as
        next_input's. prog: as FusedNet's (then the tanh and buf.x_pi follow when it runs, as torch ops: so
        it runs first)."""
        if threads is None:
            self.actor.forward(batch.obs, buf.actor_pass, prog)
        else:
            forward_together([self.actor], [batch.obs], [buf.actor_pass], self.gemms, threads)
        if prog is not None:
            prog.run()
        torch.cat([batch.obs, torch.tanh_(buf.actor_pass.outs[-1])], dim=1, out=buf.x_pi)

    def actor_backward(self, buf: ActorCriticBuffers, batch: Batch, refresh_q1: bool, prog: Any = None,
                       threads: int = 1) -> None:
        """After actor_forward: the actor's gradients through Q1's input gradient (Q1's own weight
        gradients are not computed). refresh_q1: Q1 changed since refresh() (SB3's order). threads: as
        FusedNet.backward's, for the actor's wide layers. prog: as FusedNet's (run in two: the gradient at
        the actor's output is a torch op between them)."""
        if refresh_q1:
            self.critics[0].refresh(prog)
        self.input_grad(0, buf.x_pi, buf.q1_pass, buf.d_q_pi, buf.d_x_pi, prog)
        if prog is not None:
            prog.run()
        self.actor.backward(self._d_actor_out(buf), batch.obs, buf.actor_pass, buf.actor_grads, prog=prog,
                            threads=threads)

    def actor_backward_together(self, buf: ActorCriticBuffers, batch: Batch, threads: int) -> None:
        """actor_backward on the updated Q1 (float32), every wide GEMM as native tasks on up to `threads`
        threads (needs self.gemms)."""
        q1 = self.critics[0]
        forward_together([q1], [buf.x_pi], [buf.q1_pass], self.gemms, threads)
        backward_together([q1], [buf.d_q_pi], [buf.x_pi], [buf.q1_pass], None, self.gemms, threads, [buf.d_x_pi])
        backward_together([self.actor], [self._d_actor_out(buf)], [batch.obs], [buf.actor_pass], [buf.actor_grads],
                          self.gemms, threads)

    def _d_actor_out(self, buf: ActorCriticBuffers) -> torch.Tensor:
        """dLoss/d(actor's pre-tanh output) from dLoss/d(Q1's input) (its action columns)."""
        action = buf.actor_pass.outs[-1]
        return torch.ops.aten.tanh_backward(buf.d_x_pi[:, self.obs_dim:], action).contiguous()

    def step_actor(self, buf: ActorCriticBuffers, threads: int = 1, prog: Any = None) -> None:
        """The actor's Adam step, then its low-precision copy refreshed (recorded into `prog` when given)."""
        with recording(self.native, prog, threads) as rec:
            self.actor_adam.native_step(rec, [g.numpy() for g in buf.actor_grads], 0.0, threads=threads)
            self.actor.refresh(rec)

    def update(self, batch: Batch, update_actor: bool, noise: torch.Tensor | None, *, concurrent: bool, split: bool,
               on_thread: OnThread, threads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One DDPG/TD3 step in algos/td3.py's order and arithmetic (to rounding), with more of it on the second
        thread: returns the critics' loss (0-d) and Q1's |TD error| per sample.

        update_actor: the actor steps and the targets are averaged (TD3's policy delay). concurrent: DDPG's
        concurrent update, the actor's gradient on the step's starting Q1 beside the critics', its Adam step
        after it there. split: each critic after Q1 on the second thread, its Adam step there too; in SB3's order
        the critics' targets are averaged there while this thread takes the actor's step (Adam and the averages
        are element-wise: the bits of one thread). on_thread: the learner's `_on_grad_thread`; threads: the
        threads its schedule gives a program's parts (`_threads()`)."""
        buf = self.buffers(batch)
        self.begin_step()
        split = split and len(self.critics) > 1
        if split and not concurrent and self.gemms is not None:
            result = self._paired_update(buf, batch, update_actor, noise, threads)
        else:
            result = self._scheduled_update(buf, batch, update_actor, noise, concurrent, split, on_thread, threads)
        self.end_step()
        return result

    def _scheduled_update(self, buf: ActorCriticBuffers, batch: Batch, update_actor: bool, noise: torch.Tensor | None,
                          concurrent: bool, split: bool, on_thread: OnThread,
                          threads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """update's step as programs and torch ops, its parts on the learner's threads."""
        actor_future = on_thread(self._actor_half, buf, batch) if concurrent else None
        later = range(1, len(self.critics))  # the critics after Q1: on the second thread when split
        # SB3's order with split critics: the critics' passes at the batch's (obs, action) are made beside their
        # targets (early_passes), and their gradients then need only the TD target
        early = split and not concurrent
        if early:
            self._early_passes(buf, batch, noise, update_actor, on_thread)
        else:
            self.next_input(buf, batch, noise)
            later_targets = on_thread(self.target_values, buf, later) if split else None
            self.target_values(buf, range(1))
            if later_targets is not None:
                later_targets.result()
            else:
                self.target_values(buf, later)
            self.td_target(buf, batch)
        pending_losses = on_thread(self._critics_part, buf, batch, later, early) if split else None
        losses = self._critics_part(buf, batch, range(1), early, actor_future)
        losses += pending_losses.result() if pending_losses is not None else self._critics_part(buf, batch, later, early)
        if update_actor and concurrent:
            self.average()
        elif update_actor:  # SB3's order: the actor's gradient on the updated Q1, whose Adam step refreshed its copy
            averaging = on_thread(self.average_critics) if split else None
            prog = self.native.Program()
            if early:  # the actor's forward pass made
                self.actor_backward(buf, batch, False, prog, threads)
            else:
                self.actor_grads(buf, batch, False, prog)
            self.step_actor(buf, threads, prog)
            prog.run(threads)
            self.average_actor()
            if averaging is not None:
                averaging.result()
            else:
                self.average_critics()
        return torch.tensor(sum(losses), dtype=torch.float32), buf.abs_td.clone()

    def _actor_half(self, buf: ActorCriticBuffers, batch: Batch) -> None:
        """DDPG's concurrent actor half: its gradient on the step's starting Q1, then its Adam step (which touches
        no critic), as one program."""
        prog = self.native.Program()
        self.actor_grads(buf, batch, False, prog)
        self.step_actor(buf, prog=prog)
        prog.run()

    def _early_passes(self, buf: ActorCriticBuffers, batch: Batch, noise: torch.Tensor | None, update_actor: bool,
                      on_thread: OnThread) -> None:
        """The next action and every target value on the second thread (_target_part), beside the parts here that
        need no TD target: every critic at the batch's (obs, action) and, in an actor's step, the actor's forward
        pass (which no critic update changes); then the TD target."""
        pending = on_thread(self._target_part, buf, batch, noise)
        torch.cat([batch.obs, batch.action], dim=1, out=buf.x)
        prog = self.native.Program()
        self.critic_forward(buf, range(len(self.critics)), prog)
        if update_actor:
            self.actor_forward(buf, batch, prog=prog)  # runs the program, then the actor's tanh head
        else:
            prog.run()
        pending.result()
        self.td_target(buf, batch, inputs=False)

    def _target_part(self, buf: ActorCriticBuffers, batch: Batch, noise: torch.Tensor | None) -> None:
        """buf.next_in, then every target critic's value there (one program)."""
        self.next_input(buf, batch, noise)
        prog = self.native.Program()
        self.target_values(buf, range(len(self.critics)), prog)
        prog.run()

    def _critics_part(self, buf: ActorCriticBuffers, batch: Batch, indices: range, early: bool,
                      wait: Future[None] | None = None) -> list[float]:
        """The critics' gradients (early: their passes at buf.x made already), then their Adam step (Adam is per
        parameter), as one program; returns their losses. wait: what must finish before they step (DDPG's
        concurrent actor half reads Q1 as it was: the critics' gradients first, then the wait)."""
        prog = self.native.Program()
        slots = self.critic_grads(buf, batch, indices, prog, forward=not early)
        if wait is not None:
            prog.run()
            wait.result()  # re-raises an error of the actor's half; Q1 may change from here
        self.step_critics(buf, indices, prog)
        values = prog.run()
        return [values[k] for k in slots]

    def _paired_update(self, buf: ActorCriticBuffers, batch: Batch, update_actor: bool, noise: torch.Tensor | None,
                       threads: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A float32 step with twin critics in SB3's order, every wide GEMM as native tasks (algos/fused.py
        native_gemms): the twins' GEMMs of a layer at once, a lone network's in two halves of rows, a layer's
        weight and input gradients at once, and the Adam updates in chunks, on the native pool's helper beside
        the caller in the concurrent schedule (no GIL, no wake per hand-over) and on one thread in the serial
        one: the same code, so the same bits."""
        self.next_input(buf, batch, noise, threads)
        self.target_values_together(buf, threads)
        self.td_target(buf, batch)
        losses = self.critic_grads_together(buf, batch, threads)
        self.step_critics_together(buf, threads)
        if update_actor:  # the actor's gradient on the updated Q1
            self.actor_forward(buf, batch, threads)
            self.actor_backward_together(buf, batch, threads)
            self.step_actor(buf, threads)
            self.average()
        return torch.tensor(sum(losses), dtype=torch.float32), buf.abs_td.clone()

    def average(self) -> None:
        """Polyak-average every target (the actor's and the critics') toward its online network, in one call, then
        refresh the targets' low-precision copies (average_actor and average_critics: the same bits in parts)."""
        polyak_average([self._actor_pair, *self._critic_pairs], self.tau)
        for net in (self.actor_target, *self.critic_targets):
            net.refresh()

    def average_actor(self) -> None:
        """Polyak-average the actor's target toward the actor with tau, then refresh its low-precision copy."""
        polyak_average([self._actor_pair], self.tau)
        self.actor_target.refresh()
