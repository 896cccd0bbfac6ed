"""The jammer noise a round's ledger may count (issue 13): the planned one, or the measured one where lower.

The plan's effective noise holds the jammer's share (|h_cj| alpha_cj / alpha_u)^2 per real coordinate
of the aggregate (eq. 15-16 of paper 000). Where the air measured the jammer path's delivered power gain
G (noise variance per unit alpha_cj^2 at the receiver, lower confidence bound; calibration/
jammer_noise.py), the jammer delivers G alpha_cj^2 / alpha_u^2, and the ledger counts the smaller of the
two: a jammer that delivers less than planned (an attenuator, a weak PA, a cable) never overstates
privacy, and one that delivers more is not credited beyond the plan."""
from __future__ import annotations

import math


def book_jammer_noise(sigma_eff: float, planned_var: float, gain_lower: float, alpha_cj: float,
                      alpha_u: float) -> tuple[float, dict]:
    """(sigma_eff with the jammer's share replaced by min(planned, measured), the figures for the ledger).

    ``planned_var``: the jammer's share of sigma_eff^2; ``gain_lower``: G's lower bound (>= 0)."""
    if not (gain_lower >= 0 and math.isfinite(gain_lower)):
        raise ValueError(f"the jammer's measured power gain must be finite and >= 0, got {gain_lower}")
    if alpha_u <= 0:
        raise ValueError(f"alpha_u must be > 0, got {alpha_u}")
    measured = float(gain_lower) * (float(alpha_cj) / float(alpha_u)) ** 2
    booked = min(float(planned_var), measured)
    sigma = math.sqrt(max(float(sigma_eff) ** 2 - float(planned_var), 0.0) + booked)
    return sigma, {"planned": float(planned_var), "measured": measured, "booked": booked,
                   "power_gain_lower": float(gain_lower), "source": "measured" if measured < planned_var else "planned"}
