"""Calibration of a mechanism's one privacy knob to a target (privacy.calibrate = "target"), for the
power policies that declare a ``PrivacyKnob`` (power/base.py).

The run's data-using rounds are planned before round 1 on the run's seeded channels (a copy of the policy,
zero payload: the ledger's mechanism does not depend on the data) for a candidate knob value; each planned
round gives the Gaussian mechanism the ledger would record (sensitivity Delta_t, sigma_eff,t, participation
q_t), composed exactly by the tight accountant (``learning.noisy_target.compose``: full-participation
Gaussian rounds as one Gaussian of mu^2 = sum_t (Delta_t / sigma_t)^2, Poisson-subsampled rounds by
dp-accounting). The knob is bisected (on log value when the range is positive) so the planned rounds spend
AIM x eps and the band [(1 - TOL) eps, eps] of privacy/target.py is checked. A knob whose whole range
cannot reach the target is refused at start, naming the knob and the limit."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ..errors import UserError
from .target import AIM, TOL


@dataclass
class KnobCalibration:
    knob: str
    value: float
    eps_planned: float
    noise_multiplier: float       # the smallest planned z_t
    rounds: int
    sampling: float               # the smallest planned q_t

    def summary(self, accountant: str) -> dict:
        return {"calibration": f"target ({accountant})", "eps_planned": self.eps_planned,
                "calibrated_rounds": self.rounds, "calibrated_noise_multiplier": self.noise_multiplier,
                "calibration_accountant": accountant, "calibrated_knob": self.knob,
                "calibrated_value": self.value, "calibrated_sampling": self.sampling}


def solve_knob(eps: float, delta: float, accountant: str, knob, rounds_at: Callable[[float], list]) -> KnobCalibration:
    """Value v of ``knob`` (a power.base.PrivacyKnob) whose planned rounds ``rounds_at(v)`` -> [(z_t, q_t)]
    spend [(1 - TOL) eps, eps] by ``accountant``. eps(v) must be monotone on [knob.lo, knob.hi], decreasing
    when knob.private_when == "higher"."""
    from ..learning.noisy_target import compose

    lo_eps, aim = (1.0 - TOL) * eps, AIM * eps
    cache: dict = {}

    def f(v: float) -> float:
        if v not in cache:
            rounds = rounds_at(v)
            if not rounds:
                raise UserError("privacy.calibrate = 'target': the run plans no round that uses client data")
            cache[v] = (compose(accountant, rounds, delta), rounds)
        return cache[v][0]

    a, b = float(knob.lo), float(knob.hi)
    private_end, open_end = (b, a) if knob.private_when == "higher" else (a, b)
    if f(private_end) > eps:
        raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be met: even {knob.name} = "
                        f"{private_end:g} ({knob.limit}) spends {f(private_end):.4g} by '{accountant}'; "
                        f"raise privacy.eps or set privacy.calibrate = 'paper'")
    if f(open_end) <= aim:
        value = open_end                       # the least private end already meets the target
        if f(value) < lo_eps:
            raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be spent: even {knob.name} = "
                            f"{open_end:g} ({knob.limit}) spends only {f(open_end):.4g} by '{accountant}' (the mechanism's other "
                            f"noise is larger); lower privacy.eps or set privacy.calibrate = 'paper'")
    else:
        geometric = a > 0 and b / a > 10
        lo, hi = open_end, private_end         # f(lo) > aim >= f(hi)
        for _ in range(200):
            mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
            if f(mid) <= aim:
                hi = mid
            else:
                lo = mid
            if abs(hi - lo) <= 1e-9 * max(abs(hi), abs(lo)) or abs(f(hi) - aim) <= 1e-3 * eps:
                break
        value = hi
    spent, rounds = f(value), cache[value][1]
    if not lo_eps <= spent <= eps:
        raise UserError(f"privacy.eps = {eps:g}: calibration of {knob.name} by '{accountant}' reached {spent:.6g}, "
                        f"outside [{lo_eps:.6g}, {eps:g}] (eps is not monotone in the knob here)")
    return KnobCalibration(knob=knob.name, value=float(value), eps_planned=float(spent),
                           noise_multiplier=float(min(z for z, _ in rounds)), rounds=len(rounds),
                           sampling=float(min(q for _, q in rounds)))
