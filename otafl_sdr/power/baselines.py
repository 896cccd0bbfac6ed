"""Paper 001's baselines (Sec. V; open question 11 decided here): ``h_min``, ``gamma_bar``,
``independent_sampling``, ``noise_free``. Payloads are normalised by tau (W = 1); notation as ``power.cdpb``.

h_min (ref. [9], Liu & Simeone, "Privacy for free", JSAC 2021; paper 000's baseline [13]): the server has
  every client's CSI each round and all clients send their update every round, aligned at the worst
  channel: rho_t = min_k P_k |h_k|^2 / W^2 (per round, over the clients' CSI), alpha_k = sqrt(rho_t)/h_k,
  alpha_u = sqrt(rho_t) K. As in "privacy for free" the channel noise is the only noise (option
  ``artificial_noise = true`` lets every client fill its spare power with its own noise, eq. (11), the
  reading of paper 001's Fig. 5 text "increased artificial noise"). The server knows who sends: q = 1.
gamma_bar: CDPB-i whose (rho, tau) meets gamma_bar only (Stage I of Algorithm 3: rho_gamma, tau_gamma_min);
  privacy is not part of the choice. Otherwise identical to ``cdpb_idle`` (same accounting).
independent_sampling (ref. [8], Mohamed, Chang & Tandon, JSAC 2021): each client flips its own
  Bernoulli(q) coin (option ``q``, default 0.5; paper 001 does not give it), independent of its channel;
  it takes part iff the coin says so and it is reliable at the CDPB-i design's rho (the text: "clients
  that meet the channel threshold opt out ... through sampling"), filling its power with noise (eq. 11);
  others stay silent. The server learns who takes part from the CSI feedback (paper 001, Sec. V), so it
  divides by the true count, knows the round's noise exactly, and no amplification is claimed (q = 1).
  Under privacy.targeting = "target" rho is solved like CDPB-i's and the ledger books the coin-free bound
  z_t = sigma_c / (sqrt(rho) Delta_u) (``IndependentSamplingPolicy.privacy_knob``).
noise_free: the same (rho, tau) as ``cdpb_idle`` (the design with the artificial noise) but with
  sigma_r = 0 (no artificial noise): the channel noise alone protects the update; p amplification kept.
  (Re-solving Algorithm 3 with sigma_r = 0 would mostly return an infeasible T.)"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.transmission import Mechanism, RoundPlan
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.power.base import PowerPolicy, SystemInfo
from otafl_sdr.power.cdpb import (NOISE_FILL, W, CDPBIdle, CDPBIdleOptions, CDPBOptions, CDPBPolicy, NoisyRowsPlan, need_option, client_streams,
                   clip, reliable)


def _sensitivity_u(info: SystemInfo) -> float:
    """Largest payload move of one client under the run's unit (privacy/sensitivity.py), W = 1."""
    return W * float(np.max(info.payload_bound()))


def _noise_others(own: np.ndarray, sigma_c2: float) -> float:
    """Per-coordinate noise present whatever client k does (the largest own share left out)."""
    if own.size == 0:
        return sigma_c2
    return float(np.sum(own) - np.max(own) + sigma_c2)


@dataclass
class HMinOptions:
    artificial_noise: bool = False
    order: int = 2              # RDP order reported by the ``cdpb`` accountant
    power_scale: float = 1.0    # c in (0, 1]: rho_t = c min_k P_k |h_k|^2 / W^2 (the privacy knob)

    def check(self) -> None:
        need_option(isinstance(self.power_scale, (int, float)) and not isinstance(self.power_scale, bool)
              and 0 < self.power_scale <= 1, "power_scale", f"must be in (0, 1], got {self.power_scale!r}")
        need_option(isinstance(self.artificial_noise, bool), "artificial_noise", "must be true or false")
        need_option(isinstance(self.order, int) and not isinstance(self.order, bool) and self.order >= 2, "order",
              "must be an integer >= 2")


@POWER_POLICIES.register("h_min", "paper 001 baseline [9] (Liu & Simeone 'privacy for free'): all clients, rho = P min|h|^2 / W^2 from full CSI")
class HMinPolicy(PowerPolicy):
    name = "h_min"
    Options = HMinOptions
    ofdm_carried = True             # without artificial noise (ofdm_refusal)
    rederivable = True

    @classmethod
    def ofdm_refusal(cls, options: dict | None) -> str | None:
        if (options or {}).get("artificial_noise"):
            return "with artificial_noise = true " + NOISE_FILL
        return super().ofdm_refusal(options)

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None):
        self.validate_options(options or {})
        super().__init__(cfg, info, options)
        self.delta_u = _sensitivity_u(info)
        self.power_scale = float(self.options.power_scale)

    def privacy_knob(self) -> PrivacyKnob:
        """privacy.targeting = "target": the knob is the power scaling c of "privacy for free" (Liu & Simeone:
        the clients give up power until the channel noise alone gives the target): rho_t = c min P|h|^2,
        z = sigma_c / (sqrt(rho_t) Delta_u), so epsilon increases with c. At c = 1 (full power) the channel
        noise may already be more than the target needs: then the target cannot be spent and is refused."""
        def put(v: float) -> None:
            self.power_scale = float(v)
        return PrivacyKnob(name="power.options.power_scale", get=lambda: self.power_scale, set=put, lo=1e-12,
                           hi=1.0, private_when="lower", limit="1e-12 <= c <= 1, full power at c = 1")

    def plan(self, round_index, payload, h, h_cj, rng, csi=None) -> RoundPlan:
        info = self.info
        K, d = payload.shape
        h_known = h if csi is None else csi
        g2p = np.abs(h_known) ** 2 * info.power
        rho = self.power_scale * float(np.min(g2p)) / W ** 2              # the worst channel sets rho
        alpha = np.sqrt(rho) / h_known
        var = (np.maximum(g2p / rho - W * W, 0.0) / d) if self.options.artificial_noise else np.zeros(K)
        streams = client_streams(rng, K)
        clean = np.stack([clip(u) for u in payload])
        rows = np.stack([clean[k] + (np.sqrt(var[k]) * streams[k].standard_normal(d) if var[k] > 0 else 0.0)
                         for k in range(K)])
        alpha_u = float(np.sqrt(rho) * K)
        sigma2 = _noise_others(rho * var, info.sigma_c2)
        mech = Mechanism(round=round_index, sensitivity=self.delta_u / K, sigma_eff=float(np.sqrt(sigma2) / alpha_u),
                         sampling_prob=1.0, extra={"rdp_order": self.options.order, "policy": self.name, "rho": rho,
                                                   "paper_literal_r": W ** 2 / (d * (rho * var.sum() + info.sigma_c2))})
        return NoisyRowsPlan.without_jammer(info, round=round_index, payload=rows, alpha=alpha, h=h,
                                            target_gain=np.full(K, 1.0 / K), alpha_u=alpha_u, h_cj=h_cj,
                                            mode=["update"] * K, mechanism=mech, clean=clean, row_noise_var=var,
                                            extra={"rho": rho, "truth": {"participants": K, "noisy": 0}})


@POWER_POLICIES.register("gamma_bar", "paper 001 baseline: CDPB-i with (rho, tau) chosen for gamma_bar only (Stage I)")
class GammaBarPolicy(CDPBPolicy):
    name = "gamma_bar"
    Options = CDPBOptions
    portion = 0.0
    stage = "gamma"


@dataclass
class ISOptions(CDPBIdleOptions):
    q: float = 0.5              # each client's own sampling probability

    def check(self) -> None:
        super().check()
        need_option(isinstance(self.q, (int, float)) and 0 < self.q <= 1, "q", f"must be in (0, 1], got {self.q!r}")


@POWER_POLICIES.register("independent_sampling", "paper 001 baseline [8]: clients sample themselves with prob. q; the server knows who (CSI feedback)")
class IndependentSamplingPolicy(CDPBPolicy):
    name = "independent_sampling"
    Options = ISOptions
    portion = 0.0
    rho_rule = "closed_form"

    @property
    def coin_free(self) -> bool:
        """privacy.targeting = "target": the ledger books the bound that holds for every outcome of the
        clients' private coins (see ``privacy_knob``), so the rounds can be planned before round 1."""
        return self.cfg.privacy.targeting == "target"

    def privacy_knob(self) -> PrivacyKnob:
        """privacy.targeting = "target": the knob is rho, as for CDPB-i (the design it shares). Each client's
        participation coin is its own private draw (OS entropy on zmq/uhd), so who sends cannot be planned
        before round 1; but a round's noise multiplier does not need it: with n participants the sensitivity
        is Delta_u / n and the noise at least the channel's, sigma_c / (sqrt(rho) n) (the other participants'
        artificial noise only adds), so z_t >= sigma_c / (sqrt(rho) Delta_u) for every outcome of the coins.
        Under "target" the ledger books that coin-free bound (like CDPB-mixed's coin-decided noise rows,
        which are not counted), a round with no participant costs nothing, and epsilon increases with rho.
        The sampling probability q is not a privacy knob here (no amplification is claimed: the server
        learns who sends)."""
        return CDPBPolicy.privacy_knob(self)

    def plan(self, round_index, payload, h, h_cj, rng, csi=None) -> RoundPlan:
        info, rho = self.info, self.rho
        K, d = payload.shape
        h_known = h if csi is None else csi
        streams = client_streams(rng, K)
        sampled = np.array([streams[k].random() < self.options.q for k in range(K)])
        part = sampled & np.array([reliable(h_known[k], info.power[k], rho) for k in range(K)])
        alpha = np.where(part, np.sqrt(rho) / h_known, 0)
        var = np.where(part, np.maximum(np.abs(h_known) ** 2 * info.power / rho - W * W, 0.0) / d, 0.0)
        clean = np.stack([clip(u) for u in payload])
        rows = np.stack([clean[k] + np.sqrt(var[k]) * streams[k].standard_normal(d) if part[k] else np.zeros(d)
                         for k in range(K)])
        n = int(part.sum())
        alpha_u = float(np.sqrt(rho) * max(n, 1))                          # the server knows the count
        extra = {"rdp_order": self.options.order, "policy": self.name, "rho": rho, "participants": n}
        # coin-free (privacy_knob): a round is charged when any client is reliable, whatever the coins say,
        # so that the rounds planned before round 1 are the ledger's (a round nobody sent in is overcharged)
        could_send = self.coin_free and any(reliable(h_known[k], info.power[k], rho) for k in range(K))
        if n == 0 and not could_send:
            mech = Mechanism(round=round_index, sensitivity=0.0, sigma_eff=0.0, uses_data=False, extra=extra)
        else:
            sigma2 = _noise_others(rho * var[part], info.sigma_c2)
            extra["paper_literal_r"] = W ** 2 / (d * (rho * var.sum() + info.sigma_c2))
            if self.coin_free:     # the bound for every outcome of the coins (privacy_knob); realised kept beside
                extra.update(noise_model="coin-free bound (channel noise only; the others' coin-decided noise "
                             "not counted; charged whenever a client is reliable)",
                             sigma_realised=float(np.sqrt(sigma2) / alpha_u))
                sigma2 = info.sigma_c2
            mech = Mechanism(round=round_index, sensitivity=self.delta_u / max(n, 1),
                             sigma_eff=float(np.sqrt(sigma2) / alpha_u), sampling_prob=1.0, extra=extra)
        mode = ["update" if p else "silent" for p in part]
        return NoisyRowsPlan.without_jammer(info, round=round_index, payload=rows, alpha=alpha.astype(complex), h=h,
                                            target_gain=np.where(part, np.sqrt(rho) / alpha_u, 0.0), alpha_u=alpha_u,
                                            h_cj=h_cj, mode=mode, mechanism=mech, clean=clean, row_noise_var=var,
                                            extra={"rho": rho, "truth": {"participants": n, "noisy": 0}})


@POWER_POLICIES.register("noise_free", "paper 001 baseline: CDPB-i's rho and rounds without artificial noise")
class NoiseFreePolicy(CDPBIdle):
    name = "noise_free"
    artificial = False
    ofdm_carried = True             # no noise of its own: every sender inverts to one level
