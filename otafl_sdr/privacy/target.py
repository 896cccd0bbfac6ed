"""Calibration to a target (privacy.calibrate = "target"): the per-round noise multiplier z whose planned
rounds spend the target (eps, delta) within 1 % and never above it, by the tight accountant.

The planned mechanism is T identical rounds of a (Poisson-subsampled, q) Gaussian mechanism with noise
multiplier z = sigma_eff / Delta: the rounds that use client data (Upcycled-FL's even iterations are free,
Lemma 1 of paper 000). ``solve`` bisects on log z (``calculator.noise_for_target``: epsilon_of_rounds
composes the T rounds exactly, in O(1) for q = 1) aiming at ``AIM`` x eps, the middle of the band
[(1 - TOL) eps, eps], so that pessimistic estimates of the same curve (a PLD grid adds < 1e-4 relative)
stay within the target; the result is checked against the band. A policy then maps z to its one privacy
knob (power/cj_target.py for paper 000)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UserError
from .calculator import epsilon_of_rounds, noise_for_target

TOL = 0.01             # eps_planned in [(1 - TOL) eps, eps]
AIM = 1.0 - TOL / 2    # bisection target, the middle of the band
TIGHT = ("pld", "rdp")


def calibration_accountant(enforcing: str) -> str:
    """The accountant a target is calibrated by: privacy.accountant if it is a tight one (pld, rdp), else pld."""
    return enforcing if enforcing in TIGHT else "pld"


@dataclass
class Target:
    """The solved per-round mechanism: ``noise_multiplier`` z for ``rounds`` data-using rounds of
    participation ``sampling``; ``eps_planned`` what accountant ``accountant`` says they spend."""

    eps: float
    delta: float
    accountant: str
    rounds: int
    sampling: float
    noise_multiplier: float
    eps_planned: float

    def summary(self) -> dict:
        return {"calibration": f"target ({self.accountant})", "eps_planned": self.eps_planned,
                "calibrated_rounds": self.rounds, "calibrated_noise_multiplier": self.noise_multiplier,
                "calibration_accountant": self.accountant}


def solve(eps: float, delta: float, rounds: int, accountant: str, sampling: float = 1.0) -> Target:
    """z such that ``rounds`` rounds spend eps_planned in [(1 - TOL) eps, eps] by ``accountant``."""
    if rounds < 1:
        raise UserError("privacy.calibrate = 'target': the run plans no round that uses client data")
    try:
        z = noise_for_target(accountant, AIM * eps, rounds, delta, sampling, rel_tol=1e-5)
    except ValueError:
        z = None
    if z is None:
        raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be calibrated by accountant "
                        f"'{accountant}' over {rounds} rounds at sampling {sampling:g}")
    spent = planned_epsilon(accountant, z, rounds, delta, sampling)
    if not (1.0 - TOL) * eps <= spent <= eps:
        raise UserError(f"privacy.eps = {eps:g}: calibration by '{accountant}' reached {spent:.6g}, outside "
                        f"[{(1 - TOL) * eps:.6g}, {eps:g}]")
    return Target(eps=eps, delta=delta, accountant=accountant, rounds=rounds, sampling=sampling,
                  noise_multiplier=z, eps_planned=spent)


def planned_epsilon(accountant: str, z: float, rounds: int, delta: float, sampling: float = 1.0) -> float:
    """Epsilon of ``rounds`` identical rounds of noise multiplier z (inf for z = 0, None -> inf)."""
    if z <= 0:
        return math.inf
    v = epsilon_of_rounds(accountant, z, rounds, delta, sampling)
    return math.inf if v is None else float(v)
