"""Accountants ``fdp`` and ``fdp_feasible``: the convergent Gaussian-DP (f-DP) analysis of paper 002 for
Noisy-FedAvg / Noisy-FedProx (mathematics in ``fdp_analysis``; this module keeps the books).

Per round t the ledger hands over a Mechanism whose ``extra["fdp"]`` describes what the clients did
(the algorithm fills it in, see ``otafl_sdr.learning.noisy_fedavg``). From it the accountant rebuilds
Theorem 10's per-round model sensitivity rho_t and data sensitivity gamma_t and reports
  mu_GDP = sqrt((sum_t P_t gamma_t)^2 / sum_t P_t^2 sigma_t^2),  P_t = prod_{j>t} rho_j    (eq. 16 / A.3)
  eps     = the (eps, delta) implied by mu_GDP-GDP                                            (Lemma 7)
(``fdp``), or the same argument with the interpolation weights kept in [0, 1] (``fdp_feasible``; see
``fdp_analysis`` -- the paper's minimiser violates that constraint for rho > 1, so ``fdp`` reproduces the
published convergent numbers while ``fdp_feasible`` is what the argument supports; it never exceeds the
composition of the rounds and equals it for a constant learning rate).

Units: gamma_t and sigma_t are in the units of the Mechanism (the normalised aggregate):
gamma_t = (model-space gamma_t) / scale, sigma_t = ``mech.sigma_eff``. ``sigma_eff`` must be ALL the
Gaussian noise the server sees in the aggregate: the clients' own noise (Algorithm 1: sigma / sqrt(m) for
equal weights) plus channel noise and jammer (the over-the-air variant, where clients add none). So the
over-the-air path needs nothing special: the accountant always uses the effective noise the server sees.

``extra["fdp"]`` keys (all floats in model units unless said):
  method        "fedavg" (eq. 2) | "fedprox" (eq. 4)
  V             clip norm of every local gradient step (Alg. 1)
  L             smoothness constant of every per-sample loss (Assumption 9) -- a user assumption, the
                bound is only as good as it
  lrs           [eta_{0,t}, ..., eta_{K-1,t}] the local learning rates actually used in this round
  alpha         FedProx proximal weight (= config ``algorithm.mu``); 0 for FedAvg
  weight        largest aggregation coefficient of one client in the aggregate (1/m in paper 002)
  weight_sum    sum of the aggregation coefficients (1 for plain averaging)
  scale         model units per Mechanism unit (``train.tau``: the aggregate is carried as update / tau)
  all_clients   True when every client took part (the analysis has no client sampling)
  update_clipped True when some client's update was clipped after local training (breaks Lemma 21)
  momentum      local momentum (the analysis is for plain gradient steps: must be 0)
  sensitivity_mode "exact" (Lemmas 20-23 from ``lrs``, default) | "table3" (Table 3's closed forms,
                needs schedule/lr/t/K, and alpha > L, lr < 1/(alpha - L) for FedProx)
  schedule, lr, t, K  the schedule name, coefficient, 0-based round and local steps (table3 mode)
  restore_lr    table3 mode, cyclic/continuous: True multiplies gamma by lr as Lemma 20 requires (default);
                False uses Table 3 / Eqs. (18), (20) as printed (the paper drops that factor)
  c, z          table3 mode constants (default H_K/ln(K+1) and H_K/ln 2)
  noise         "client" (Algorithm 1) | "air" (over-the-air variant) -- informational
  sigma_client  std of each client's own noise (model units) -- informational

Threat model: the bound is for an observer of the LAST model only (paper 002's "third parties"); anyone
who sees every broadcast global model is covered by composition (accountants ``rdp`` / ``pld``).
A round without ``extra["fdp"]``, or one that breaks an assumption, makes the accountant report None
from then on (``applies`` says why in ``why_not``). A retransmission (``extra["attempt"] > 0``) is such a
round. A round whose burst is finally lost is recorded before it is sent and counted as a normal round,
although the model stays unchanged: exact for composition, not proven conservative for the ``fdp``
bound (known limitation)."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy import fdp_analysis as fa
from otafl_sdr.privacy.base import Accountant

KEY = "fdp"
METHODS = ("fedavg", "fedprox")
MODES = ("exact", "table3")


def why_not(mech: Mechanism) -> str | None:
    """None when paper 002's analysis covers the round, else the reason (one line)."""
    info = mech.extra.get(KEY) if isinstance(mech.extra, dict) else None
    if not isinstance(info, dict):
        return "no extra['fdp'] (not a Noisy-FedAvg/FedProx round)"
    if info.get("waveform") == "ofdm":
        return ("per-subcarrier gains and noise (phy.waveform = 'ofdm'): the argument needs one scalar weight per "
                "client and isotropic noise (privacy/subcarrier_mechanism.py); rdp / pld compose the rounds")
    if info.get("method") not in METHODS:
        return f"method {info.get('method')!r} is not one of {METHODS}"
    for k in ("V", "L", "weight", "scale"):
        v = info.get(k)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            return f"extra['fdp']['{k}'] must be a finite number > 0, got {v!r}"
    lrs = info.get("lrs")
    if not (isinstance(lrs, (list, tuple)) and len(lrs) >= 1
            and all(isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 for x in lrs)):
        return "extra['fdp']['lrs'] must be a non-empty list of learning rates >= 0"
    if not mech.uses_data:
        return "a round without client data inside a Noisy-FedAvg run is not covered"
    if int(mech.extra.get("attempt", 0) or 0) > 0 or mech.extra.get("fault"):
        return "a retransmission (air.retries) releases the round twice; the last-iterate analysis has no such step"
    if mech.sampling_prob != 1 or not info.get("all_clients", False):
        return "client sampling / dropped clients: the analysis needs every client in every round"
    if info.get("update_clipped", False):
        return "an update was clipped after local training (Lemma 21 does not cover it); raise train.tau"
    if info.get("momentum", 0.0) != 0:
        return "local momentum is not covered (Algorithm 1 takes plain gradient steps)"
    mode = info.get("sensitivity_mode", "exact")
    if mode not in MODES:
        return f"sensitivity_mode {mode!r} is not one of {MODES}"
    alpha = float(info.get("alpha", 0.0) or 0.0)
    if info["method"] == "fedprox" and not alpha > 0:
        return "fedprox needs alpha > 0"
    if mode == "table3":
        for k in ("schedule", "lr", "t", "K"):
            if k not in info:
                return f"table3 mode needs extra['fdp']['{k}']"
        if info["method"] == "fedprox":
            L, lr = float(info["L"]), max(float(x) for x in lrs)
            if not alpha > L:
                return f"Theorem 15 needs alpha > L (alpha={alpha}, L={L})"
            if not (lr < 1.0 / (alpha - L) and lr * alpha <= 1.0):
                return f"Theorem 15 needs lr < 1/(alpha - L) and lr alpha <= 1 (lr={lr})"
        elif info["schedule"] not in ("constant", "cyclic", "stagewise", "continuous"):
            return f"unknown schedule {info['schedule']!r}"
    return None


def round_terms(mech: Mechanism) -> tuple[float, float, float]:
    """(log rho_t, gamma_t, sigma_t) in Mechanism units for a covered round (Theorem 10, Table 3)."""
    info = mech.extra[KEY]
    V, L, scale = float(info["V"]), float(info["L"]), float(info["scale"])
    weight, wsum = float(info["weight"]), float(info.get("weight_sum", 1.0))
    lrs = np.asarray(info["lrs"], dtype=float)
    mode = info.get("sensitivity_mode", "exact")
    if info["method"] == "fedavg":
        if mode == "exact":
            lr_, g = fa.fedavg_rho_gamma(lrs, L, V, weight)
        else:
            K, t = int(info["K"]), int(info["t"])
            c, z = info.get("c") or None, info.get("z") or None
            lr_all, g_all = fa.table3_fedavg(info["schedule"], t + 1, K, float(info["lr"]), L, V, 1.0 / weight,
                                             c=c, z=z, restore_lr=bool(info.get("restore_lr", True)))
            lr_, g = lr_all[-1:], g_all[-1:]
    else:
        alpha = float(info["alpha"])
        if mode == "exact":
            lr_, g = fa.fedprox_rho_gamma(lrs, alpha, L, V, weight)
        else:
            lr_, g = fa.table3_fedprox(1, alpha, L, V, 1.0 / weight)
    log_rho = float(lr_[0])
    # aggregate coefficients summing to G != 1 give (1 - G) w_t + sum g_i w_i: rho_eff = |1 - G| + G rho
    if abs(wsum - 1.0) > 1e-12:
        log_rho = math.log(abs(1.0 - wsum) + wsum * math.exp(log_rho))
    gamma = max(float(g[0]) / scale, float(mech.sensitivity))
    return log_rho, gamma, float(mech.sigma_eff)


@ACCOUNTANTS.register("fdp", "paper 002 Gaussian DP of the last model (eq. 16, Theorems 12/15): convergent in T")
class FdpAccountant(Accountant):
    """Paper 002's bound as published (``bound = 'paper'``)."""

    name = "fdp"
    bound = "paper"

    def _reset(self) -> None:
        self.log_rho: list[float] = []
        self.gamma: list[float] = []
        self.sigma: list[float] = []
        self.uncovered_round: int | None = None
        self.uncovered_reason = ""

    def applies(self, mech: Mechanism) -> bool:
        return why_not(mech) is None

    def step(self, mech: Mechanism) -> None:
        super().step(mech)
        if self.uncovered_round is not None:
            return
        reason = why_not(mech)
        if reason is not None:
            self.uncovered_round, self.uncovered_reason = mech.round, reason
            return
        lr_, g, s = round_terms(mech)
        self.log_rho.append(lr_)
        self.gamma.append(g)
        self.sigma.append(s)

    # ----------------------------------------------------------------------------------- reports
    def _mu_of(self, log_rho, gamma, sigma, bound: str) -> float:
        if not gamma:
            return 0.0
        g = np.asarray(gamma)
        s = np.asarray(sigma)
        if np.any((s == 0) & (g > 0)):
            return math.inf                       # a noiseless round that used data
        s = np.where(s == 0, 1.0, s)               # zero-sensitivity, zero-noise rounds cost nothing
        if bound == "paper":
            return fa.paper_mu(log_rho, g, s)
        if bound == "feasible":
            return fa.feasible_mu(log_rho, g, s)
        return fa.composition_mu(g, s)

    def mu(self, bound: str | None = None) -> float | None:
        """mu_GDP of the last model so far (None when a composed round is not covered)."""
        if self.uncovered_round is not None:
            return None
        return self._mu_of(self.log_rho, self.gamma, self.sigma, bound or self.bound)

    def epsilon(self, delta: float | None = None) -> float | None:
        mu = self.mu()
        return None if mu is None else fa.gdp_to_eps(mu, self.delta if delta is None else delta)

    def peek(self, mech: Mechanism, delta: float | None = None) -> float | None:
        if self.uncovered_round is not None or why_not(mech) is not None:
            return None
        lr_, g, s = round_terms(mech)
        mu = self._mu_of(self.log_rho + [lr_], self.gamma + [g], self.sigma + [s], self.bound)
        return fa.gdp_to_eps(mu, self.delta if delta is None else delta)

    def report(self) -> dict:
        """All three bounds on mu_GDP and the first interpolation weight of the paper's minimiser."""
        if self.uncovered_round is not None:
            return {"covered": False, "uncovered_round": self.uncovered_round, "reason": self.uncovered_reason}
        out = {"covered": True, "rounds": len(self.gamma)}
        for b in ("paper", "feasible", "composition"):
            out[f"mu_{b}"] = self.mu(b)
        if self.gamma and min(self.sigma) > 0:
            lam = fa.paper_lambdas(self.log_rho, self.gamma, self.sigma)
            out["paper_lambda_1"] = float(lam[0])
            out["paper_lambdas_admissible"] = bool(np.all((lam[np.isfinite(lam)] >= -1e-9)
                                                          & (lam[np.isfinite(lam)] <= 1 + 1e-9)))
        return out


@ACCOUNTANTS.register("fdp_feasible", "paper 002's argument with interpolation weights kept in [0, 1] (sound; <= composition)")
class FdpFeasibleAccountant(FdpAccountant):
    name = "fdp_feasible"
    bound = "feasible"
