"""Paper 000: adaptive decentralised power control with a cooperative jammer (Algorithm 1).

Client factor (eq. 14/17): alpha_i = alpha_u p_i / (h_i tau s_i); with the payload already normalised by
tau, alpha_i = alpha_u p_i / (h_i s_i). Complex h_i: the factor inverts phase too (extract: inferred).
s_i >= 1 is the smallest value meeting the power constraint (eq. 11; Appendix A):
||alpha_u p_i / (h_i s_i)||^2 <= P_i  =>  s_i = max(1, alpha_u p_i / (|h_i| sqrt(P_i))).
Jammer (Theorems 2/4, eqs. 23/27): alpha_cj >= (alpha_u/|h_cj|) sqrt(M Delta^2 log(1/delta)/(2 a^2) - sigma_c2/alpha_u^2)
with a = -log(1/delta) + sqrt(log(1/delta)^2 + eps log(1/delta)); silent when the radicand is <= 0.
The paper writes Delta = 1/|D| (one sample of any client, s_i = 1), a premise local training does not
enforce; we use Delta = max_i p_i b_i with b_i the payload bound of the run's privacy.unit
(privacy/sensitivity.py): 1 for 'client', 2 for 'client_replace', the clipped schedule's bound for
'sample', and the paper's 1/|D_i| only under 'sample_paper'.

Server factor alpha_u (the paper leaves it open): chosen so that a client with the mean weight 1/K and
|h| at the configured Rayleigh quantile meets P at s_i = 1: alpha_u = sqrt(P) |h|_q K; or fixed by config.
That is privacy.targeting = "paper"; under "target" ``calibrate_to`` replaces the jammer rule (or alpha_u)
by the one knob that spends the target exactly (power/cj_target.py)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otafl_sdr.channel.fading import rayleigh_amplitude_quantile
from otafl_sdr.privacy.knobs import ClosedFormKnob
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.transmission import Mechanism, RoundPlan
from otafl_sdr.power.base import PowerPolicy, SystemInfo
from otafl_sdr.power.cj_target import calibrate, jammer_for_sigma


def theorem2_a(eps: float, delta: float) -> float:
    """a = -log(1/delta) + sqrt(log(1/delta)^2 + eps log(1/delta))  (eq. 23 of paper 000)."""
    L = np.log(1.0 / delta)
    return float(-L + np.sqrt(L * L + eps * L))


def jammer_radicand(info: SystemInfo, alpha_u: float, delta_sens: float) -> float:
    """M Delta^2 log(1/delta) / (2 a^2) - sigma_c2 / alpha_u^2  (Theorem 2); <= 0 means no jamming needed."""
    a = theorem2_a(info.eps, info.delta)
    return float(info.rounds * delta_sens ** 2 * np.log(1 / info.delta) / (2 * a * a) - info.sigma_c2 / alpha_u ** 2)


def jammer_factor(info: SystemInfo, alpha_u: float, h_cj: complex, delta_sens: float) -> float:
    """Theorem 2's lower bound on alpha_cj (0 when channel noise suffices)."""
    rad = jammer_radicand(info, alpha_u, delta_sens)
    if rad <= 0:
        return 0.0
    return float(alpha_u / abs(h_cj) * np.sqrt(rad))


def auto_alpha_u(info: SystemInfo, quantile: float) -> float:
    return float(np.sqrt(np.min(info.power)) * rayleigh_amplitude_quantile(quantile) * info.clients)


def sensitivity_bound(info: SystemInfo) -> float:
    """Worst-case Delta with s_i = 1: max_i p_i b_i (b_i of privacy/sensitivity.py for the run's unit;
    paper 000's 1/|D| is b_i = 1/|D_i| under 'sample_paper')."""
    return float(np.max(info.p * info.payload_bound()))


@dataclass
class CJOptions:
    pass


@POWER_POLICIES.register("cj_adaptive", "paper 000: decentralised power control alpha_i = alpha_u p_i/(h_i s_i) + cooperative jammer")
class CJAdaptivePolicy(PowerPolicy):
    name = "cj_adaptive"
    Options = CJOptions
    ofdm_carried = True             # inverts each client's gain to alpha_u p_i / s_i; channel + jammer noise flat
    rederivable = True              # the config and the round's seeded channels only

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None):
        super().__init__(cfg, info, options)
        pw = cfg.power
        self.alpha_u = pw.alpha_u if pw.alpha_u > 0 else auto_alpha_u(info, pw.alpha_u_quantile)
        self.jammer = pw.jammer
        self.multiple = pw.jammer_multiple
        self.z_target: float | None = None     # set by calibrate_to (privacy.targeting = "target")
        self.sens_scale = 1.0                  # the ledger's CSI gain margin on the sensitivity

    def privacy_knob(self) -> ClosedFormKnob:
        """privacy.targeting = "target": a closed form (``calibrate_to``) of the solved noise multiplier."""
        return ClosedFormKnob(name="the jammer factor, or alpha_u without a jammer (paper 000)", solve=self.calibrate_to)

    def calibrate_to(self, target, planned: dict, sens_scale: float = 1.0) -> dict:
        """Solve the one privacy knob for ``target`` (privacy/targeting.py) before round 1 on the planned data
        rounds {iteration: (h_known, h_cj)}; returns the summary's calibration fields. UserError when the
        jammer's power cap or the clients' power limit cannot carry it (power/cj_target.py)."""
        cal = calibrate(self.info, self.cfg, target, self.alpha_u, planned, sens_scale)
        self.alpha_u, self.z_target, self.sens_scale = cal.alpha_u, cal.noise_multiplier, sens_scale
        self.jammer = self.jammer and cal.knob == "jammer factor"    # alpha_u knob: the jammer stays silent
        return cal.summary(target)

    def scaling(self, h_known: np.ndarray) -> np.ndarray:
        """s_i = max(1, alpha_u p_i / (|h_i| sqrt(P_i)))  (Appendix A)."""
        return np.maximum(1.0, self.alpha_u * self.info.p / (np.abs(h_known) * np.sqrt(self.info.power)))

    def jammer_alpha(self, h_cj: complex, sens: float | None = None) -> tuple[float, bool]:
        """(alpha_cj, capped): multiple x Theorem 2's bound, limited by the jammer's power
        E||x_cj||^2 = alpha_cj^2 d <= P_cj (capped = True: the target may then not be met; the ledger
        still accounts the noise actually sent). Calibrated to a target: the factor that gives the round
        (sensitivity ``sens``) the target's noise multiplier."""
        if not self.jammer:
            return 0.0, False
        if self.z_target is not None:            # target: sigma_eff = z x the round's (ledger) sensitivity
            sens = sensitivity_bound(self.info) if sens is None else sens
            alpha = jammer_for_sigma(self.alpha_u, self.z_target * sens * self.sens_scale, self.info.sigma_c2, h_cj)
        else:
            alpha = self.multiple * jammer_factor(self.info, self.alpha_u, h_cj, sensitivity_bound(self.info))
        cap = float(np.sqrt(self.info.jammer_power / self.info.dim))
        return (cap, True) if alpha > cap else (float(alpha), False)

    def plan(self, round_index, payload, h, h_cj, rng, csi=None) -> RoundPlan:
        info = self.info
        h_known = h if csi is None else csi
        s = self.scaling(h_known)
        alpha = self.alpha_u * info.p / (h_known * s)                 # eq. (14), complex: inverts phase
        gain = info.p / s                                            # h_i alpha_i / alpha_u (perfect CSI)
        sens = float(np.max(gain * info.payload_bound()))         # max_i (p_i/s_i) b_i (privacy/sensitivity.py)
        alpha_cj, capped = self.jammer_alpha(h_cj, sens)
        var = (info.sigma_c2 + (abs(h_cj) * alpha_cj) ** 2) / self.alpha_u ** 2
        mech = Mechanism(round=round_index, sensitivity=sens, sigma_eff=float(np.sqrt(var)),
                         extra={"s_min": float(np.min(s)), "s_max": float(np.max(s))})
        return RoundPlan(round=round_index, payload=payload, alpha=alpha, h=h, target_gain=gain,
                         alpha_u=self.alpha_u, alpha_cj=alpha_cj, h_cj=h_cj, sigma_c2=info.sigma_c2,
                         mode=["update"] * info.clients, mechanism=mech, power_limit=info.power,
                         extra={"s": s, "cj_capped": capped})
