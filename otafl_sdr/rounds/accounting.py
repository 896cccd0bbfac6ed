"""The ledger's side of a round, written once for every air: the plan's mechanism restated as the ledger
books it (``ledger_mechanism``), and the release rule (``release``): the round is recorded BEFORE anything
goes on the air, and every further attempt (a retry with fresh noise, a re-send after a receiver or
jammer died) is a further release, booked as its own mechanism before it is sent."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..airs import air_capabilities
from ..errors import UserError
from ..transmission import Mechanism, Reception
from ..transport import Attempt

INFRA_RETRIES = 3            # attempts redone because the receiver / channel / jammer died


def csi_gain_margin(csi) -> float:
    """The largest 3-sigma gain margin of the calibrated channel estimates; refused when unbounded."""
    margin = float(np.max(csi.gain_margin()))
    if not np.isfinite(margin):
        raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                        "(h_std >= |h| / 3); recalibrate with more pilot energy")
    return margin


def ledger_mechanism(plan, csi, air_name: str, delivered_jammer_gain: float | None) -> Mechanism:
    """The plan's mechanism as the ledger books it. With perfect CSI (csi None): as planned. With
    estimated CSI a client pre-inverting with h_hat_i arrives with up to ``gain_margin`` times the planned
    gain (3-sigma bound of the calibration), so the sensitivity is scaled by the largest margin; where the
    air's jammer path is calibrated, the jammer is counted at its lower 3-sigma bound; where the air
    measured the jammer's delivered noise, the smaller of that and the plan's jammer noise is booked
    (privacy/delivered_jammer.py), recorded as ``extra["jammer_noise"]``."""
    m = plan.mechanism
    if csi is None or not m.uses_data:
        return m
    margin = csi_gain_margin(csi)
    sigma = m.sigma_eff
    extra = {**m.extra, "csi_gain_margin": margin}
    jam = (abs(plan.h_cj) * plan.alpha_cj / plan.alpha_u) ** 2 if plan.alpha_cj > 0 else 0.0
    if air_capabilities(air_name).calibrated_jammer_path and plan.alpha_cj > 0:
        jam_cal = (csi.jammer_lower() * plan.alpha_cj / plan.alpha_u) ** 2
        sigma = float(np.sqrt(max(sigma ** 2 - jam, 0.0) + jam_cal))
        extra["jammer_gain_lower"] = csi.jammer_lower()
        jam = jam_cal
    if delivered_jammer_gain is not None and plan.alpha_cj > 0:
        from ..privacy.delivered_jammer import book_jammer_noise
        sigma, extra["jammer_noise"] = book_jammer_noise(sigma, jam, delivered_jammer_gain, plan.alpha_cj,
                                                         plan.alpha_u)
    return dataclasses.replace(m, sensitivity=m.sensitivity * margin, sigma_eff=min(sigma, m.sigma_eff), extra=extra)


@dataclass
class Release:
    reception: Reception
    attempts: int
    stop: str = ""


def release(ledger, plan, it: int, retries: int, enforce: bool, send: Callable[[int], Attempt],
            notes: list, on_recorded: Callable[[], None] = lambda: None,
            ready: Callable[[], str] = lambda: "") -> Release:
    """Record the round, then send it (``send(attempt)``) until it is received, retrying a lost burst
    ``retries`` times. Each attempt after the first is a further release of the same updates with fresh
    noise: booked as its own mechanism (``extra["attempt"]``) before it is sent, and skipped when it would
    exceed the budget. An attempt lost because the infrastructure died is redone (at most INFRA_RETRIES
    times), and booked like any other. ``ready()`` waits for the infrastructure before each attempt and
    returns a reason to stop ('' to go on): nothing is booked for an attempt that is never sent."""
    ledger.record(plan.mechanism)
    on_recorded()
    rec = Reception(aggregate=None, ok=False, reason="not sent")
    attempt, infra_failures = 0, 0
    while True:
        stop = ready()
        if stop:
            return Release(rec, attempt, stop)
        if attempt > 0:
            further = dataclasses.replace(plan.mechanism, extra={**plan.mechanism.extra, "attempt": attempt})
            if enforce and ledger.would_exceed(further):
                notes.append(f"round {it}: retry {attempt} skipped, it would exceed the privacy budget")
                return Release(rec, attempt)
            ledger.record(further)
        sent = send(attempt)
        rec = sent.reception
        if sent.stop:
            return Release(rec, attempt, sent.stop)
        attempt += 1
        if rec.ok:
            return Release(rec, attempt)
        if sent.infrastructure_died:
            infra_failures += 1
            notes.append(f"round {it}: attempt {attempt} failed ({rec.reason}); retried once it is back")
            if infra_failures > INFRA_RETRIES:
                return Release(rec, attempt, f"round {it}: {rec.reason} {infra_failures} times; stopped "
                                             f"(checkpoint kept)")
            continue
        if attempt > retries:
            return Release(rec, attempt)
