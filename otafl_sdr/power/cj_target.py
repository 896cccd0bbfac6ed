"""Paper 000's mechanism calibrated to a target (privacy.calibrate = "target"; privacy/target.py).

Every data-using round is the Gaussian mechanism of sensitivity Delta = max_i p_i b_i (s_i = 1, the worst
case of ``sensitivity_bound``; times the calibration's CSI gain margin when CSI is estimated) and effective
std sigma_eff = sqrt(sigma_c2 + |h_cj alpha_cj|^2) / alpha_u (eq. 16/19; Appendix A). The target's noise
multiplier z fixes sigma_t = z Delta, reached by ONE knob:

* jammer (power.jammer = true): alpha_u keeps the paper rule; each round the jammer, knowing its own
  channel, adds alpha_cj = sqrt(alpha_u^2 sigma_t^2 - sigma_c2) / |h_cj| (Theorem 2's bound with the exact
  sigma_t instead of the closed form), so sigma_eff = sigma_t in every round. Its power alpha_cj^2 d must
  fit under P_cj (power.jammer_max_snr_db) in every planned round: the planned rounds' jammer channels are
  the run's seeded fading draws, so a target that needs more is refused before round 1.
* no jammer, or channel noise alone already above sigma_t: the jammer is silent and
  alpha_u = sqrt(sigma_c2) / sigma_t (a larger alpha_u means less effective noise). The clients' power
  limit never blocks this: s_i >= 1 (Appendix A) keeps every client within P_i and only lowers the
  round's sensitivity below Delta, so the spend stays at or under the plan."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import UserError
from ..privacy.target import Target


@dataclass
class CJCalibration:
    alpha_u: float
    sigma_target: float          # sigma_eff of every data-using round
    knob: str                    # "jammer factor" | "alpha_u"
    sensitivity: float           # Delta the target was solved for
    peak_jammer_power: float     # max over planned rounds of alpha_cj^2 d

    def summary(self, target: Target) -> dict:
        return {**target.summary(), "calibrated_knob": self.knob, "calibrated_alpha_u": self.alpha_u,
                "calibrated_sigma_eff": self.sigma_target, "calibrated_sensitivity": self.sensitivity,
                "calibrated_peak_jammer_power": self.peak_jammer_power}


def jammer_for_sigma(alpha_u: float, sigma_t: float, sigma_c2: float, h_cj: complex) -> float:
    """alpha_cj with sqrt(sigma_c2 + |h_cj alpha_cj|^2) / alpha_u = sigma_t (0 when the channel suffices,
    up to rounding)."""
    v = alpha_u * alpha_u * sigma_t * sigma_t - sigma_c2
    if v <= 1e-9 * sigma_c2:
        return 0.0
    return math.inf if abs(h_cj) == 0 else float(math.sqrt(v) / abs(h_cj))


def calibrate(info, cfg, target: Target, alpha_u: float, jammer_gains: dict, delta_sens: float) -> CJCalibration:
    """Map the target's z to the one knob; ``jammer_gains``: {iteration: h_cj} of the planned data rounds.
    Raises UserError (before round 1) when the jammer's power cap cannot carry some planned round."""
    sigma_t = target.noise_multiplier * delta_sens
    if cfg.power.jammer and alpha_u * sigma_t > math.sqrt(info.sigma_c2):
        need = {it: jammer_for_sigma(alpha_u, sigma_t, info.sigma_c2, h) ** 2 * info.dim
                for it, h in jammer_gains.items()}
        it, peak = max(need.items(), key=lambda kv: kv[1]) if need else (0, 0.0)
        if peak > info.jammer_power:
            cap_db = cfg.power.jammer_max_snr_db
            need_db = cap_db + 10 * np.log10(peak / info.jammer_power)
            raise UserError(
                f"privacy.eps = {cfg.privacy.eps:g} needs a jammer peak power of {need_db:.1f} dB above the noise "
                f"(planned round {it}, |h_cj| = {abs(jammer_gains[it]):.3g}); power.jammer_max_snr_db = "
                f"{cap_db:g} allows {cap_db:g} dB: raise it or relax the target")
        return CJCalibration(alpha_u, sigma_t, "jammer factor", delta_sens, float(peak))
    return CJCalibration(float(math.sqrt(info.sigma_c2) / sigma_t), sigma_t, "alpha_u", delta_sens, 0.0)
