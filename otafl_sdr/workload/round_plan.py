"""Planning one round, written once (issue 33, item 1): the round's seeded channels, what the clients believe
of them (the run's CSI), the power policy's plan, the facts the airs and the ledger read off the plan, the
workload's finishing step and the ledger's booking. Everything that plans a round calls ``plan_round``:

  - the server's round (rounds/pipeline.py) on the clients' payloads, the transport's plan stream and the
    clients' own decisions adopted (testbed);
  - the dry run (experiment/dry_run.py), privacy targeting (workload/targeting.py) and re-derivation
    (workload/rederive.py) on a zero payload (``zero_round``: the mechanism depends on public, planned
    quantities only) and a copy of the policy;
  - a testbed client node (net/client.py) takes its share, ``policy_plan``: the same channels, CSI and
    policy call on its own payload, with its protective noise from OS entropy.

So the planned (dry run, targeting), booked (the run's ledger) and re-derived (`verify`) epsilons of a
round agree because one function computes them. Shapes: K clients, d reals per client (``parts.dim``: the
model's size for FL updates, C^2 for paper 003's logits)."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.transmission import Mechanism, RoundPlan
from otafl_sdr.workload.booking import ledger_mechanism
from otafl_sdr.workload.parts import RunParts
from otafl_sdr.workload.workloads import LocalRound


@dataclass(frozen=True)
class RoundChannels:
    """A round's channels, drawn from ``seeding.rng(seed, "channel", round)`` by every node alike.

    h: (K,) complex, the channels the air applies; h_cj: the jammer's; csi: (K,) complex, what the clients
    believe of h (the calibration's estimates), None with perfect CSI."""

    h: np.ndarray
    h_cj: complex
    csi: np.ndarray | None

    @property
    def known(self) -> np.ndarray:
        """(K,) what the clients pre-invert: h with perfect CSI, else the estimates."""
        return self.h if self.csi is None else self.csi


@dataclass
class PlannedRound:
    """One planned round: its channels, the plan the airs carry out (``plan.mechanism``: the policy's or,
    finished, the workload's, in the normalised aggregate's units) and ``booked``: how the ledger books it."""

    channels: RoundChannels
    plan: RoundPlan
    csi: object
    air: str

    def booked(self, jammer_gain: float | None = None) -> Mechanism:
        """The plan's mechanism as the ledger books it (workload/booking.ledger_mechanism: paper 000 eq. 16's
        sensitivity stretched by the CSI margin and the multipath gain; the jammer's noise at its
        calibrated or measured-delivered lower bound, ``jammer_gain``: the air's measured power gain)."""
        return ledger_mechanism(self.plan, self.csi, self.air, jammer_gain)


def round_channels(parts: RunParts, round_index: int) -> RoundChannels:
    """The round's seeded channels and the clients' CSI of them (RunParts.draw_channels, csi_estimates)."""
    h, h_cj = parts.draw_channels(round_index)
    return RoundChannels(h=h, h_cj=h_cj, csi=parts.csi_estimates(round_index, h))


def policy_plan(parts: RunParts, round_index: int, payload: np.ndarray, rng: np.random.Generator,
                policy=None) -> tuple[RoundChannels, RoundPlan]:
    """The power policy's plan (``policy``, default the run's) of round ``round_index`` for ``payload``
    (K, d) on the round's channels; ``rng``: the plan's stream (protective noise, participation coins).
    ``plan.extra["csi"]``: what the clients believed (the airs pre-invert with it)."""
    channels = round_channels(parts, round_index)
    policy = parts.policy if policy is None else policy
    plan = policy.plan(round_index, payload, channels.h, channels.h_cj, rng, csi=channels.csi)
    plan.extra.setdefault("csi", channels.known)
    return channels, plan


def seeded_plan_rng(cfg, round_index: int) -> np.random.Generator:
    """The run's seeded plan stream of a round, ``seeding.rng(seed, "policy", round)``: what the in-process
    transport hands the policy on seeded airs and the testbed's server on every air, so a plan made before
    or after the run (dry run, targeting, re-derivation) draws what the run drew."""
    return seeding.rng(cfg.run.seed, "policy", round_index)


def server_only_booking(round_index: int) -> Mechanism:
    """A server-only iteration's booking (Upcycled-FL's even iteration, eq. 9 of its paper): no client
    data, no privacy cost (post-processing, Lemma 1), recorded so that the ledger holds every iteration."""
    return Mechanism(round=round_index, sensitivity=0.0, sigma_eff=0.0, uses_data=False)


def zero_round(parts: RunParts, clipped: bool = False) -> LocalRound:
    """A round's clients as a plan before the data sees them: a zero (K, d) payload, nobody absent,
    ``clipped``: paper 002's recorded clipping flag (never set by the train.tau check)."""
    K = parts.K
    train = SimpleNamespace(clipped=np.full(K, clipped, dtype=bool), updates=None)
    return LocalRound(payload=np.zeros((K, int(parts.dim))), w=None, absent=np.zeros(K, dtype=bool), train=train)


def plan_round(parts: RunParts, round_index: int, local: LocalRound, rng: np.random.Generator, *,
               policy=None, adopt: Callable[[RoundPlan], None] | None = None, finish: bool = True) -> PlannedRound:
    """Plan round ``round_index`` (module docstring): the policy's plan of ``local.payload`` (K, d) on the
    round's channels, then what the airs and the ledger read off it:

      extra["air_sigma_c2"]    the emulated channel's true noise (sim, loopback: the air adds it; a capture
                               booking counts the smaller of it and the plan's sigma_c2)
      extra["multipath_gain"]  the round's stretch of one client's payload difference (RunParts.multipath_gain:
                               1.0 flat; the reference senders of this plan; OFDM: planned per subcarrier)

    ``adopt(plan)``: the clients' own decisions and absences (the server's round), applied last before
    ``finish``: the workload's finishing step (paper 002's client noise and Lemma 20/22 mechanism) on
    ``local``. ``policy``: a copy planning in its stead (dry run, targeting, re-derivation)."""
    channels, plan = policy_plan(parts, round_index, local.payload, rng, policy)
    plan.extra["air_sigma_c2"] = parts.cfg.channel.sigma_c2
    plan.extra["multipath_gain"] = parts.multipath_gain(plan)
    if adopt is not None:
        adopt(plan)
    if finish:
        parts.workload.finish_plan(parts, plan, local, round_index)
    return PlannedRound(channels=channels, plan=plan, csi=parts.csi, air=parts.cfg.air.name)
