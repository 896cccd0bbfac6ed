"""Paper 001 (Kim, Seo, Choi): client-driven power balancing, policies ``cdpb_noisy``, ``cdpb_idle``,
``cdpb_mixed`` (option ``portion``). Client side here; the server side is ``power.cdpb_server``.

Client k, each round, from its own update u_k (= payload, ||u_k|| <= W = 1 after the tau normalisation),
its own channel h_k (its CSI: ``csi`` or the true h) and the broadcast rho -- nothing else:
  reliable iff |h_k|^2 P_k >= rho W^2 (eqs. 6-7): alpha_k = sqrt(rho) / h_k (eq. 4: a = rho/|h|^2 with the
      phase pre-compensated), row = u_k + r_k, r_k ~ N(0, s_k^2 I_d) with d s_k^2 = |h_k|^2 P_k / rho - W^2
      (eq. 11 at equality with ||g|| replaced by W, as eq. (55)); arrives as sqrt(rho) (u_k + r_k).
  unreliable, CDPB-n: mode 'noise', alpha = 1 (no scaling, no phase pre-compensation), row = r_k with
      d s^2 = P_k (eq. 10-11); CDPB-i: mode 'silent', alpha = 0, row = 0 (eq. 14); CDPB-mixed: a private
      Bernoulli(portion) coin picks noisy, else idle (portion 1 = CDPB-n, 0 = CDPB-i).
The server (``CDPBServer``) never sees h nor the modes: alpha_u and the ledger record come from the
design alone (the only exception is the sim option ``server_count = 'oracle'``).

Open questions of the extract's section 6, decided once (Q2, Q6-Q10 in ``cdpb_server``, Q4, Q12 in
``privacy.cdpb_rdp``):
  Q1 server's K_t: expected K_t(rho) of eq. (53) in alpha_u = sqrt(rho) K_t(rho) (eq. 18); 'oracle' option.
  Q3 complex vs real: d real values are packed two per complex symbol (I and Q, ``pack_reals``), every
     noise is real per coordinate and the server reads both I and Q; nothing is discarded. The noisy
     clients' noise rotated by their uncompensated channel stays circularly symmetric (its variance per
     coordinate is |h|^2 s^2, eq. (13)).
  Q5 artificial-noise power: from W^2, not ||g_k||^2 (a data-dependent noise level would leak ||g_k||), with
     u_k clipped to W here (the trainer already clips to tau). The power constraint is eq. (3), in
     expectation over the artificial noise: E||x_k||^2 = (rho/|h|^2)(||u||^2 + d s^2) <= P_k, equality at
     ||u|| = W; a realised Gaussian draw exceeds it by O(sqrt(2/d)) relative half of the time.
  Q11 baselines: see ``power.baselines``. Q13 mixed: sigma^2 adds portion x the noisy clients' term
     (exact in expectation); its privacy is Theorem 1 with that sigma^2 (same argument as n and i).
  Q14 unstated constants are options (defaults: alpha = 2, lambda1 = 1, lambda2 = 1e-5, gamma_bar = 1e-2,
     eps_bar = 100 as in Sec. V; 4 M^2 G = 1 W^2; Psi = 1e-6 P/W^2, N_max = 100).
  Neighbouring relation: Lemma 3 amplifies a client-level change (the whole update; the paper's
     Delta^2 <= 2 W^2). We take privacy.unit = 'client' as zero-out (u_k -> 0, Delta_u = W; this is the
     add/remove structure dp-accounting's Poisson analysis needs; 'client_replace' doubles Delta_u), and
     then sampling_prob = p. For the other units (Delta_u = W max_k b_k, privacy/sensitivity.py) both
     neighbours contain client k, so its coin hides nothing in the eps sense: sampling_prob = 1 (sound,
     conservative) and Theorem 1 is evaluated at p = 1.
  Uniform averaging (eq. 1: f = (1/K) sum f_k): the data-size weights p_i are not used.
The ledger record (``CDPBServer.mechanism``) is a Poisson(q)-subsampled Gaussian with z = sigma/Delta:
the generic ``rdp`` and ``pld`` accountants apply to it as they are (exact analysis of the same per-round
model) and ``cdpb`` is the paper's looser Theorem 1. The design uses the expected noise over the fading
(eqs. 56/60, as the paper's Theorem 1 does); the ledger books each round's realised noise instead
(``CDPBPolicy.realised``), without participation amplification."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.transmission import RoundPlan
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.power.base import PowerPolicy, SystemInfo
from otafl_sdr.power.cdpb_server import CDPBDesigner, CDPBModel, CDPBServer, ChannelStats, DesignOptions

# why phy.waveform = "ofdm" cannot carry a policy that fills spare power with noise (power/ofdm_plan.py)
NOISE_FILL = ("fills each client's spare power with its own noise from one flat gain (|h_k|^2 P_k against rho, "
              "paper 001 eqs. 6-11); per-subcarrier inversion spends power unevenly (mean_k 1/|G_k|^2 >= 1 times "
              "more), so neither its power constraint nor the noise the ledger counts would hold")

W = 1.0          # payloads are normalised by tau, so the update bound W of the paper is 1


# ------------------------------------------------------------------------------------------------
@dataclass
class NoisyRowsPlan(RoundPlan):
    """A RoundPlan whose 'update' rows carry the client's own artificial noise (u_k + r_k, eq. 11).

    clean: (K, d) the clipped updates without noise (sim diagnostics: the noiseless aggregate);
    row_noise_var: (K,) per-coordinate variance of the artificial noise inside each 'update' row."""

    clean: np.ndarray | None = None
    row_noise_var: np.ndarray | None = None

    @classmethod
    def without_jammer(cls, info, **fields) -> "NoisyRowsPlan":
        """Paper 001's plans: no jammer (alpha_cj = 0); the channel's noise and the clients' powers of ``info``."""
        return cls(alpha_cj=0.0, sigma_c2=info.sigma_c2, power_limit=info.power, **fields)

    def expected_aggregate(self) -> np.ndarray:
        upd = np.asarray([m == "update" for m in self.mode])
        g = np.where(upd, self.target_gain, 0.0)
        return g @ (self.clean if self.clean is not None else self.payload)

    def sigma_eff(self) -> float:
        """Channel noise, jammer and the reliable clients' own noise, per coordinate of unpack(y)/alpha_u."""
        var = self.sigma_c2 + (abs(self.h_cj) * self.alpha_cj) ** 2
        if self.row_noise_var is not None:
            upd = np.asarray([m == "update" for m in self.mode])
            var += float(np.sum(np.where(upd, np.abs(self.h * self.alpha) ** 2 * self.row_noise_var, 0.0)))
        return float(np.sqrt(var) / self.alpha_u)


@dataclass
class ClientTx:
    """One client's transmission: mode, alpha_k, its payload row, the artificial-noise variance in it."""

    mode: str
    alpha: complex
    row: np.ndarray
    noise_var: float


def clip(u: np.ndarray, bound: float = W) -> np.ndarray:
    n = float(np.linalg.norm(u))
    return u if n <= bound else u * (bound / n)


def reliable(h_known: complex, power: float, rho: float) -> bool:
    """|h_k|^2 >= h_th = rho W^2 / P_k (eqs. 6-7)."""
    return abs(h_known) ** 2 * power >= rho * W * W


def client_transmit(u: np.ndarray, h_known: complex, power: float, rho: float, portion: float,
                    artificial: bool, rng: np.random.Generator) -> ClientTx:
    """The client-side decision of CDPB (Algorithm 1's client branch) from the client's own data only."""
    d = u.shape[0]
    if reliable(h_known, power, rho):
        alpha = np.sqrt(rho) / h_known                                        # eq. (4)
        var = max(abs(h_known) ** 2 * power / rho - W * W, 0.0) / d if artificial else 0.0   # eq. (11)
        row = clip(u) + (np.sqrt(var) * rng.standard_normal(d) if var > 0 else 0.0)
        return ClientTx("update", complex(alpha), row, var)
    noisy = portion >= 1 or (portion > 0 and rng.random() < portion)
    if noisy:                                                                 # eqs. (10)-(11)
        return ClientTx("noise", 1.0 + 0j, np.sqrt(power / d) * rng.standard_normal(d), power / d)
    return ClientTx("silent", 0j, np.zeros(d), 0.0)                           # eq. (14)


def client_streams(rng: np.random.Generator, clients: int) -> list[np.random.Generator]:
    """One independent stream per client (a client's draws do not depend on the others' choices)."""
    seeds = rng.integers(0, 2 ** 63 - 1, size=clients)
    return [np.random.default_rng(int(s)) for s in seeds]


# ------------------------------------------------------------------------------------------------
def need_option(cond: bool, key: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"power.options.{key}", msg)


@dataclass
class CDPBOptions:
    order: int = 2              # RDP order alpha of Theorem 1 (integer >= 2)
    lambda1: float = 1.0        # eq. (24) weights (Sec. V: 1, 1e-5)
    lambda2: float = 1e-5
    gamma_bar: float = 1e-2     # acceptable convergence error (Sec. V)
    eps_bar: float = 100.0      # RDP budget at order alpha for the design (Sec. V)
    grad_const: float = 1.0     # 4 M^2 G in units of W^2 (App. C)
    rho: float = 0.0            # fixed rho (0 = Algorithm 3)
    rounds: int = 0             # fixed number of rounds (0 = Algorithm 3)
    server_count: str = "expected"   # 'expected' (eq. 53) | 'oracle' (sim comparison only)
    tol: float = 1e-6           # bisection tolerance Psi, relative to P/W^2
    max_iter: int = 100         # bisection N_max

    def check(self) -> None:
        need_option(isinstance(self.order, int) and not isinstance(self.order, bool) and self.order >= 2, "order",
              f"must be an integer >= 2 (Theorem 1), got {self.order!r}")
        for k in ("lambda1", "lambda2", "gamma_bar", "eps_bar", "tol"):
            v = getattr(self, k)
            need_option(isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v > 0, k,
                  f"must be a number > 0, got {v!r}")
        need_option(isinstance(self.grad_const, (int, float)) and self.grad_const >= 0, "grad_const", "must be >= 0")
        need_option(isinstance(self.rho, (int, float)) and np.isfinite(self.rho) and self.rho >= 0, "rho",
              f"must be >= 0 (0 = designed), got {self.rho!r}")
        need_option(isinstance(self.rounds, int) and self.rounds >= 0, "rounds", f"must be an integer >= 0, got {self.rounds!r}")
        need_option(self.server_count in ("expected", "oracle"), "server_count", "must be 'expected' or 'oracle'")
        need_option(isinstance(self.max_iter, int) and self.max_iter >= 1, "max_iter", "must be an integer >= 1")


@dataclass
class CDPBIdleOptions(CDPBOptions):
    rho_rule: str = "closed_form"   # Theorem 3 (falls back to bisection where it does not apply) | 'bisection'

    def check(self) -> None:
        super().check()
        need_option(self.rho_rule in ("closed_form", "bisection"), "rho_rule", "must be 'closed_form' or 'bisection'")


@dataclass
class CDPBMixedOptions(CDPBOptions):
    portion: float = 0.5        # share of unreliable clients that send noise (1 = CDPB-n, 0 = CDPB-i)

    def check(self) -> None:
        super().check()
        need_option(isinstance(self.portion, (int, float)) and 0 <= self.portion <= 1, "portion",
              f"must be in [0, 1], got {self.portion!r}")


class CDPBPolicy(PowerPolicy):
    """Shared machinery: the server designs (rho, tau) once from statistics; clients decide per round."""

    name = "cdpb"
    Options: type = CDPBOptions
    ofdm_reason = NOISE_FILL
    small_run = ("power.options={gamma_bar = 0.5, eps_bar = 1e5, rounds = 3}",)   # Sec. V's design is infeasible at 4 clients
    rederivable = True              # (rho, tau) from the config; the realised noise from the seeded plan stream
    portion = 0.0               # unreliable clients that send noise
    artificial = True           # reliable clients add their own noise (eq. 11)
    rho_rule = "bisection"
    stage = "full"

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None):
        self.validate_options(options or {})
        super().__init__(cfg, info, options)
        o = self.options
        self.portion = float(getattr(o, "portion", self.portion))
        self.rho_rule = getattr(o, "rho_rule", self.rho_rule)
        self.stats = ChannelStats.from_config(cfg, info.clients)
        self.delta_u = W * float(np.max(info.payload_bound()))      # privacy/sensitivity.py
        if cfg.privacy.targeting == "target":
            # rho is solved for privacy.eps before round 1 (privacy_knob; a rho set by hand is refused there);
            # until then a placeholder design at the unit channel's threshold for the run's rounds (Algorithm
            # 3 from eps_bar is not used)
            self._set_design(o.rho or float(np.max(info.power)) / (W * W), o.rounds or int(cfg.run.rounds))
        else:
            self._set_design(o.rho, o.rounds)

    def _set_design(self, rho: float, rounds: int) -> None:
        """(rho, tau) by Algorithm 3 (rho = 0 / rounds = 0: designed from eps_bar, gamma_bar), the server with it."""
        o = self.options
        dopts = DesignOptions(order=o.order, lambda1=o.lambda1, lambda2=o.lambda2, gamma_bar=o.gamma_bar,
                              eps_bar=o.eps_bar, grad_const=o.grad_const, rho=rho, rounds=rounds,
                              rho_rule=self.rho_rule, tol=o.tol, max_iter=o.max_iter, stage=self.stage)
        self.design = CDPBDesigner(self.model(artificial=True), dopts).design()
        self.server = CDPBServer(self.model(artificial=self.artificial), self.design, o.order, self.name)

    def privacy_knob(self) -> PrivacyKnob:
        """privacy.targeting = "target": the one knob is rho (eqs. 4, 6-7, 11), the received power every
        reliable client is aligned to. A smaller rho lets more clients in, each adding more of its own
        artificial noise (d s_k^2 = |h_k|^2 P_k / rho - W^2) relative to an update scaled by sqrt(rho), so
        the ledger's z = sigma_others / (sqrt(rho) Delta_u) grows: epsilon increases with rho. The run's
        own rounds replace Algorithm 3's tau, and eps_bar no longer designs anything (the target does)."""
        p_max = float(np.max(self.info.power)) / (W * W)
        rounds = self.options.rounds or int(self.cfg.run.rounds)
        return PrivacyKnob(name="power.options.rho", get=lambda: self.design.rho,
                           set=lambda v: self._set_design(float(v), rounds), lo=1e-9 * p_max, hi=1e3 * p_max,
                           private_when="lower", limit="1e-9 P <= rho W^2 <= 1e3 P")

    def model(self, artificial: bool) -> CDPBModel:
        info = self.info
        return CDPBModel(stats=self.stats, power=info.power, dim=info.dim, sigma_c2=info.sigma_c2, W=W,
                         delta_u=self.delta_u, portion=self.portion, artificial=artificial,
                         amplify=info.unit == "client")

    @property
    def suggested_rounds(self) -> int:
        """tau_opt of Algorithm 3 (or the fixed ``rounds`` option)."""
        return self.design.rounds

    @property
    def rho(self) -> float:
        return self.design.rho

    def clients_transmit(self, payload, h_known, rng) -> list[ClientTx]:
        streams = client_streams(rng, payload.shape[0])
        return [client_transmit(payload[k], h_known[k], float(self.info.power[k]), self.rho, self.portion,
                                self.artificial, streams[k]) for k in range(payload.shape[0])]

    def plan(self, round_index, payload, h, h_cj, rng, csi=None) -> RoundPlan:
        h_known = h if csi is None else csi
        txs = self.clients_transmit(payload, h_known, rng)                  # client side
        mode = [t.mode for t in txs]
        n_upd = sum(m == "update" for m in mode)
        oracle = n_upd if self.options.server_count == "oracle" else None    # sim only
        alpha_u = self.server.alpha_u(oracle)                                # server side
        mech = self.realised(self.server.mechanism(round_index, oracle), txs, h, alpha_u)
        upd = np.asarray([m == "update" for m in mode])
        gain = np.where(upd, np.sqrt(self.rho) / alpha_u, 0.0)
        clean = np.stack([clip(u) for u in payload])
        return NoisyRowsPlan.without_jammer(
            self.info, round=round_index, payload=np.stack([t.row for t in txs]), alpha=np.asarray([t.alpha for t in txs]),
            h=h, target_gain=gain, alpha_u=alpha_u, h_cj=h_cj, mode=mode, mechanism=mech,
            extra={"rho": self.rho, "k_expected": self.design.count,
                   "truth": {"participants": int(n_upd), "noisy": int(sum(m == "noise" for m in mode))}},
            clean=clean, row_noise_var=np.asarray([t.noise_var if t.mode == "update" else 0.0 for t in txs]))

    def realised(self, mech, txs: list, h: np.ndarray, alpha_u: float):
        """The round's ledger record from the noise actually sent (issue: the noise actually sent), not the
        expectation over fading that Theorem 1 uses: per coordinate of unpack(y)/alpha_u the protective noise
        is sigma_c2 plus |h_k alpha_k|^2 v_k of every client k that sent noise (its own artificial noise
        v_k in an 'update' row, or a full-power noise row), without the largest single share (that of
        the neighbouring client itself, as in eqs. 56/60). A noise row decided by a private coin
        (CDPB-mixed, 0 < portion < 1) is not counted: the bound then holds for every outcome of the coins.
        No participation amplification is claimed (sampling_prob = 1): the coins follow the clients'
        channels, which this testbed draws from the run seed that the server holds."""
        if not mech.uses_data:
            return mech
        shares = np.array([abs(h[k] * t.alpha) ** 2 * t.noise_var
                           if t.mode == "update" or (t.mode == "noise" and self.portion >= 1) else 0.0
                           for k, t in enumerate(txs)])
        others = self.info.sigma_c2 + float(shares.sum() - (shares.max() if shares.size else 0.0))
        sigma = float(np.sqrt(others) / alpha_u)
        extra = {**mech.extra, "noise_model": "realised plan (noise sent this round, own share excluded)",
                 "sigma_expected": float(mech.sigma_eff), "claimed_sampling_prob": float(mech.sampling_prob),
                 "amplification": "not claimed (participation follows channels the server can derive)"}
        return dataclasses.replace(mech, sigma_eff=sigma, sampling_prob=1.0, extra=extra)


@POWER_POLICIES.register("cdpb_noisy", "paper 001 CDPB-n: reliable clients send update + own noise, unreliable ones full-power noise")
class CDPBNoisy(CDPBPolicy):
    name = "cdpb_noisy"
    portion = 1.0


@POWER_POLICIES.register("cdpb_idle", "paper 001 CDPB-i: reliable clients send update + own noise, unreliable ones stay silent")
class CDPBIdle(CDPBPolicy):
    name = "cdpb_idle"
    Options = CDPBIdleOptions
    portion = 0.0
    rho_rule = "closed_form"


@POWER_POLICIES.register("cdpb_mixed", "paper 001 CDPB-mixed: unreliable clients send noise with probability power.options.portion")
class CDPBMixed(CDPBPolicy):
    name = "cdpb_mixed"
    Options = CDPBMixedOptions
