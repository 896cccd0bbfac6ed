"""Paper 000's mechanism calibrated to a target (privacy.targeting = "target"; privacy/targeting.py).

Round m that uses data is a Gaussian mechanism of sensitivity Delta_m = max_i (p_i / s_i) b_i (times the
calibration's CSI gain margin when CSI is estimated), s_i = max(1, alpha_u p_i / (|h_i| sqrt(P_i)))
(Appendix A), and effective std sigma_m = sqrt(sigma_c2 + |h_cj alpha_cj|^2) / alpha_u (eq. 16/19).
Full-participation Gaussian rounds compose exactly into one Gaussian with mu^2 = sum_m (Delta_m/sigma_m)^2,
so the target's T rounds of noise multiplier z are mu^2 = T / z^2, reached by ONE knob:

* jammer (power.jammer = true): alpha_u keeps the paper rule; each round the jammer, knowing its own
  channel, adds alpha_cj = sqrt(alpha_u^2 sigma_m^2 - sigma_c2) / |h_cj| with sigma_m = z Delta_m (Theorem
  2's factor with the exact sigma instead of the closed form): every round has noise multiplier z. Its
  power alpha_cj^2 d must fit under P_cj (power.jammer_max_snr_db) in every planned round.
* no jammer, or channel noise alone already above what the target needs: the jammer is silent and alpha_u
  is solved by bisection (a larger alpha_u is less effective noise sigma_c2 / alpha_u^2, but weak clients
  reach their power limit, s_i > 1, which lowers Delta_m): a target above what the clients' power limit
  can spend is refused.

The planned rounds' channels are the run's seeded block-fading draws (known before round 1), so the plan is
exactly what the ledger will record, and a target the hardware cannot meet is refused before round 1."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.targeting import TOL, Target, planned_epsilon


@dataclass
class CJCalibration:
    alpha_u: float
    noise_multiplier: float | None    # z of every round (jammer knob); None: alpha_u knob, jammer silent
    knob: str                         # "jammer factor" | "alpha_u"
    eps_planned: float                # of the planned rounds' actual mechanisms
    peak_jammer_power: float          # max over planned rounds of alpha_cj^2 d

    def summary(self, target: Target) -> dict:
        return {**target.summary(), "eps_planned": self.eps_planned, "calibrated_knob": self.knob,
                "calibrated_alpha_u": self.alpha_u, "calibrated_peak_jammer_power": self.peak_jammer_power}


def round_sensitivity(info, alpha_u: float, h_known: np.ndarray) -> float:
    """Delta_m = max_i (p_i / s_i) b_i with s_i of Appendix A (the same as CJAdaptivePolicy.plan)."""
    s = np.maximum(1.0, alpha_u * info.p / (np.abs(h_known) * np.sqrt(info.power)))
    return float(np.max(info.p / s * info.payload_bound()))


def jammer_for_sigma(alpha_u: float, sigma: float, sigma_c2: float, h_cj: complex) -> float:
    """alpha_cj with sqrt(sigma_c2 + |h_cj alpha_cj|^2) / alpha_u = sigma (0 when the channel alone gives
    that much, up to rounding)."""
    v = alpha_u * alpha_u * sigma * sigma - sigma_c2
    if v <= 1e-9 * sigma_c2:
        return 0.0
    return math.inf if abs(h_cj) == 0 else float(math.sqrt(v) / abs(h_cj))


def _eps(target: Target, mu2: float) -> float:
    return planned_epsilon(target.accountant, 1.0 / math.sqrt(mu2), 1, target.delta) if mu2 > 0 else 0.0


def calibrate(info, cfg, target: Target, alpha_u: float, planned: dict, margin: float = 1.0) -> CJCalibration:
    """Map the target to the one knob. ``planned``: {iteration: (h_known (K,), h_cj)} of the data rounds;
    ``margin``: the ledger's CSI gain margin on the sensitivity. UserError (before round 1) when the
    jammer's power cap or the clients' power limit cannot carry the target."""
    if target.sampling < 1:
        raise UserError("privacy.targeting = 'target': cj_adaptive has no client sampling to calibrate")
    z, lo_eps = target.noise_multiplier, (1.0 - TOL) * target.eps
    sc = math.sqrt(info.sigma_c2)
    if cfg.power.jammer:
        sens = {round_index: round_sensitivity(info, alpha_u, hk) * margin for round_index, (hk, _) in planned.items()}
        mu2 = sum((s / max(z * s, sc / alpha_u)) ** 2 for s in sens.values())
        eps = _eps(target, mu2)
        if lo_eps <= eps:          # <= target: every round's z is at least the target's
            need = {round_index: jammer_for_sigma(alpha_u, z * sens[round_index], info.sigma_c2, planned[round_index][1]) ** 2 * info.dim
                    for round_index in planned}
            round_index, peak = max(need.items(), key=lambda kv: kv[1])
            if peak > info.jammer_power:
                cap = cfg.power.jammer_max_snr_db
                raise UserError(
                    f"privacy.eps = {target.eps:g} needs a jammer peak power of "
                    f"{cap + 10 * math.log10(peak / info.jammer_power):.1f} dB above the noise (planned round {round_index}, "
                    f"|h_cj| = {abs(planned[round_index][1]):.3g}); power.jammer_max_snr_db = {cap:g} allows {cap:g} dB: "
                    f"raise it or relax the target")
            return CJCalibration(alpha_u, z, "jammer factor", eps, float(peak))
    if cfg.power.alpha_u > 0:      # the channel noise alone is more than the target needs: alpha_u is the knob
        raise UserError(f"power.alpha_u = {cfg.power.alpha_u:g} is set by hand, and privacy.eps = {target.eps:g} "
                        f"needs alpha_u solved (the channel noise alone is more than the target needs, the jammer "
                        f"stays silent): leave power.alpha_u 0, or set privacy.targeting = 'paper' to keep it")
    return _solve_alpha_u(info, cfg, target, planned, margin)


def _solve_alpha_u(info, cfg, target: Target, planned: dict, margin: float) -> CJCalibration:
    """Bisection on log alpha_u for mu^2(alpha_u) = T / z^2 (mu^2 is nondecreasing in alpha_u)."""
    sc = math.sqrt(info.sigma_c2)
    hs = [hk for hk, _ in planned.values()]
    goal = target.rounds / target.noise_multiplier ** 2

    def mu2(a: float) -> float:
        return sum((a * round_sensitivity(info, a, hk) * margin / sc) ** 2 for hk in hs)

    top = sum((float(np.max(np.abs(hk) * np.sqrt(info.power) * info.payload_bound())) * margin / sc) ** 2
              for hk in hs)                     # every client at its power limit: the most it can spend
    if top < goal * (1 - 1e-9):
        raise UserError(
            f"privacy.eps = {target.eps:g} is more than the clients' power can spend: at power.max_snr_db = "
            f"{cfg.power.max_snr_db:g} the planned rounds reach at most eps {_eps(target, top):.4g} (every client "
            f"at its power limit); raise power.max_snr_db or lower privacy.eps")
    lo = sc * math.sqrt(goal / len(hs)) / (max(round_sensitivity(info, 0.0, hk) for hk in hs) * margin)
    hi = lo
    for _ in range(2000):
        if mu2(hi) >= goal:
            break
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        if hi / lo <= 1 + 1e-12:
            break
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mu2(mid) < goal else (lo, mid)
    a = lo if mu2(lo) <= goal else lo * (1 - 1e-9)
    eps = _eps(target, mu2(a))
    if not (1.0 - TOL) * target.eps <= eps <= target.eps:
        raise UserError(f"privacy.eps = {target.eps:g}: alpha_u calibration reached eps {eps:.6g}, outside "
                        f"[{(1 - TOL) * target.eps:.6g}, {target.eps:g}] (the clients' power limit leaves too "
                        f"little room); lower privacy.eps or raise power.max_snr_db")
    return CJCalibration(float(a), None, "alpha_u", eps, 0.0)
