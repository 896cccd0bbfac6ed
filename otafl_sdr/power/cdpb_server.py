"""Paper 001 (Kim, Seo, Choi), server side: rho and the number of rounds from channel STATISTICS only
(Sec. IV, Lemmas 1-2, Theorem 3, Algorithms 2-3), and the server's normalisation and ledger record.

The server knows: each client's power-gain distribution (``ChannelStats``), the powers P_k, the model
dimension d, the channel noise sigma_c2, the update bound W (= 1: payloads are normalised by tau), the
per-client sensitivity and the strategy of unreliable clients. It never sees a round's channels nor who
took part (paper 001, Sec. I: no CSI feedback); ``CDPBServer`` has no argument through which it could,
except the explicit ``oracle_count`` of the sim-only comparison option.

Units: everything is per real coordinate at the receiver, before the server's 1/alpha_u. With x_k =
rho W^2 / P_k (eq. 7's h_th for client k) and h = |h_k|^2 (the paper's h_{k,t}):
  p_k(rho) = Pr(h >= x_k)                                     eq. (52); Rayleigh: exp(-x_k / Omega_k)
  K_t(rho) = sum_k p_k                                        eq. (53)
  own noise of a reliable client  E[(h P_k - rho W^2) 1{h >= x_k}] / d      eqs. (55), (58)
  own noise of a noisy unreliable client  P_k E[h 1{h < x_k}] / d           eq. (55), second sum
  sigma^2(rho) = sum_k own_k + sigma_c2      ((56) for CDPB-n, (60) for CDPB-i, divided by d; mixed adds
                                              portion x the noisy term: open question 13, exact in mean)
Omega_k = E|h_k|^2 is the paper's 2 sigma_k^2 (open question 2: the printed pdf and eqs. (53)-(60) are those
of an exponential power gain with mean 2 sigma^2; the testbed's CN(0, 1) fading has Omega = 1).

Design objective (Algorithm 3), open questions 6-10 decided here:
  gamma(rho, tau) = (6 / tau) (A / K_t + d sigma^2 / (K_t^2 rho))   App. C's approximation of Theorem 2
        (A = 4 M^2 G, option ``grad_const``, in units of W^2; we use 4 M^2 G as everywhere except eq. (27),
        and, like App. C, drop the 1/mu and the initial-distance term, so Theorem 2's undefined b (and H)
        and the constants mu, E||theta_0 - theta*||^2 of a neural network are never needed; Q7, Q8, Q9)
  eps(rho, tau) = tau eps_round(alpha, p, r),  r = rho Delta_u^2 / (2 sigma_others^2)   Theorem 1 with the
        per-coordinate ratio of ``privacy.cdpb_rdp`` (Q4); sigma_others^2 is sigma^2 without the largest
        own contribution (a client's own noise depends on its own coin, so it is not counted for it)
  G = lambda1 gamma + lambda2 eps                                        eq. (24)
  Stage I: tau_gamma_min = ceil(6 min_rho g(rho) / gamma_bar) (Lemma 1, g the bracket of gamma, minimised
        numerically with sigma_c2 included; eqs. (28)/(29) are the sigma_c2 = 0 closed forms, kept as
        functions); tau_eps_max = floor(eps_bar / min_rho eps_round(rho)) (Lemma 2 read as max tau with some
        feasible rho: eq. (31) as printed is circular (Q6); the paper's rho_eps = P/W^2 is where p is
        smallest, but with rho in r the minimiser can be interior, so we minimise).
  Stage II: for each tau in T, rho_tau by Theorem 3 (CDPB-i, eq. (33), K_t in its a and b taken at the
        fixed point K_t = K_t(rho); clipped to P/W^2 where (32d) binds; if its radicand is <= 0 it does not
        apply and we fall back to bisection) or by Algorithm 2 (CDPB-n, mixed: bisection of
        f(rho) = dG/drho, the Lagrangian's stationarity with no active constraint (Q10), on [0, P/W^2]
        rather than the printed [0, P] (Q8); tolerance Psi = ``tol`` P/W^2, N_max = ``max_iter``), then
        the pair with the smallest G (P4, eq. 32). When |T| > 300 the line search visits 300 log-spaced
        tau, then narrows to the best one's neighbours in rounds of 40 until it visits every tau there. (25c) holds in expectation for any rho.
  The gamma_bar baseline stops after Stage I: (rho_gamma, tau_gamma_min)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize_scalar

from otafl_sdr.errors import ConfigError
from otafl_sdr.privacy.cdpb_rdp import theorem1_round
from otafl_sdr.transmission import Mechanism

TAU_LINE_SEARCH_MAX = 300
TAU_REFINE = 40


@dataclass
class ChannelStats:
    """Distribution of each client's power gain |h_k|^2 (the server's only channel knowledge, eq. 52).

    kind: 'rayleigh' (|h_k|^2 ~ Exp with mean omega_k) or 'awgn' (|h_k|^2 = omega_k always)."""

    kind: str
    omega: np.ndarray

    def __post_init__(self):
        if self.kind not in ("rayleigh", "awgn"):
            raise ValueError(f"unknown fading '{self.kind}'")
        self.omega = np.asarray(self.omega, dtype=float)

    @classmethod
    def from_config(cls, cfg, clients: int) -> "ChannelStats":
        """The testbed's BlockFading: 'rayleigh' is CN(0, 1) (Omega = 1), 'awgn' is h = 1."""
        kind = "rayleigh" if cfg is None else cfg.channel.fading
        return cls(kind, np.ones(clients))

    def p_above(self, x: np.ndarray) -> np.ndarray:
        """Pr(|h_k|^2 >= x_k)."""
        if self.kind == "awgn":
            return (self.omega >= x).astype(float)
        return np.exp(-x / self.omega)

    def mean_above(self, x: np.ndarray) -> np.ndarray:
        """E[|h_k|^2 1{|h_k|^2 >= x_k}]; Rayleigh: (x + Omega) exp(-x / Omega)."""
        if self.kind == "awgn":
            return np.where(self.omega >= x, self.omega, 0.0)
        return (x + self.omega) * np.exp(-x / self.omega)

    def mean_below(self, x: np.ndarray) -> np.ndarray:
        return self.omega - self.mean_above(x)


@dataclass
class CDPBModel:
    """The expected-value model of one CDPB strategy (what the server can compute).

    power: (K,) P_k; dim: d; sigma_c2; W; delta_u: per-client sensitivity in payload units; portion:
    share of unreliable clients that send noise (0 = CDPB-i, 1 = CDPB-n); artificial: reliable clients
    fill their power with noise (eq. 11; False = the Noise-Free baseline); amplify: p may be used for
    the participation amplification (client-level neighbours only, see ``power.cdpb``)."""

    stats: ChannelStats
    power: np.ndarray
    dim: int
    sigma_c2: float
    W: float = 1.0
    delta_u: float = 1.0
    portion: float = 0.0
    artificial: bool = True
    amplify: bool = True

    def __post_init__(self):
        self.power = np.asarray(self.power, dtype=float)

    @property
    def clients(self) -> int:
        return len(self.power)

    @property
    def rho_max(self) -> float:
        """0 <= rho <= P / W^2 (eq. 26d; the weakest budget when P_k differ)."""
        return float(np.min(self.power) / self.W ** 2)

    def thresholds(self, rho: float) -> np.ndarray:
        """x_k = rho W^2 / P_k: client k is reliable iff |h_k|^2 >= x_k (eqs. 6-7)."""
        return rho * self.W ** 2 / self.power

    def p(self, rho: float) -> np.ndarray:
        return self.stats.p_above(self.thresholds(rho))

    def _moments(self, rho: float) -> tuple[float, float, float, float]:
        """(max_k p_k, K_t, sigma^2, sigma_others^2) at rho, memoised (the design evaluates each rho often)."""
        cache = self.__dict__.setdefault("_memo", {})
        hit = cache.get(rho)
        if hit is None:
            p = self.p(rho)
            own = self.own_noise(rho)
            total = float(np.sum(own))
            hit = (float(np.max(p)), float(np.sum(p)), total + self.sigma_c2,
                   total - float(np.max(own)) + self.sigma_c2)
            if len(cache) > 100_000:
                cache.clear()
            cache[rho] = hit
        return hit

    def sampling_prob(self, rho: float) -> float:
        """The largest participation probability (amplification is monotone in p)."""
        return self._moments(rho)[0] if self.amplify else 1.0

    def count(self, rho: float) -> float:
        """Expected number of participants K_t(rho), eq. (53)."""
        return self._moments(rho)[1]

    def own_noise(self, rho: float) -> np.ndarray:
        """(K,) expected artificial-noise variance each client adds per coordinate at the receiver."""
        if not self.artificial:
            return np.zeros(self.clients)
        x = self.thresholds(rho)
        rel = (self.power * self.stats.mean_above(x) - rho * self.W ** 2 * self.stats.p_above(x)) / self.dim
        noisy = self.power * self.stats.mean_below(x) / self.dim
        return np.maximum(rel, 0.0) + self.portion * noisy

    def noise(self, rho: float) -> float:
        """sigma^2(rho): expected received noise per coordinate, (13)/(17) in expectation = (56)/(60)/d."""
        return self._moments(rho)[2]

    def noise_others(self, rho: float) -> float:
        return self._moments(rho)[3]

    def ratio(self, rho: float) -> float:
        """r = (sqrt(rho) Delta_u)^2 / (2 sigma_others^2) (Remark 2 per coordinate)."""
        return rho * self.delta_u ** 2 / (2.0 * self.noise_others(rho))

    def eps_round(self, rho: float, order: int) -> float:
        return theorem1_round(order, self.sampling_prob(rho), self.ratio(rho))

    def gamma_bracket(self, rho: float, A: float) -> float:
        """A / K_t + d sigma^2 / (K_t^2 rho): gamma = 6/tau x this (App. C)."""
        k = self.count(rho)
        if k <= 0 or rho <= 0:
            return math.inf
        return A / k + self.dim * self.noise(rho) / (k * k * rho)


# ------------------------------------------------------------------------------------------------
def bisection(f, a: float, b: float, tol: float, n_max: int) -> float:
    """Algorithm 2 (with the empty branch of its line 5 read as 'stop')."""
    n, c = 0, a
    fa = f(a)
    while n < n_max:
        c = (a + b) / 2
        fc = f(c)
        if fc == 0 or (b - a) / 2 < tol:
            break
        n += 1
        if np.sign(fc) == np.sign(fa):
            a, fa = c, fc
        else:
            b = c
    return c


def argmin_1d(f, lo: float, hi: float, n_grid: int = 200) -> float:
    """Global-ish minimiser on [lo, hi]: log grid, then a bounded Brent step in the best bracket."""
    grid = np.geomspace(lo, hi, n_grid)
    vals = np.array([f(x) for x in grid])
    i = int(np.nanargmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, n_grid - 1)]
    if b > a:
        res = minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-10 * hi})
        if res.success and f(res.x) <= vals[i]:
            return float(res.x)
    return float(grid[i])


def rho_gamma_idle_closed(P: float, omega: float, A: float, W: float = 1.0) -> float:
    """Eq. (29) (sigma_c2 = 0, identical clients): rho = P Omega (sqrt(4 a_i + 1) - 1) / (2 a_i W^2),
    a_i = A / W^2 (P sigma^2 with sigma^2 = Omega/2). Exact minimiser of the bracket for CDPB-i."""
    ai = A / W ** 2
    if ai == 0:
        return P * omega / W ** 2
    return P * omega * (math.sqrt(4 * ai + 1) - 1) / (2 * ai * W ** 2)


def rho_gamma_noisy_closed(P: float, omega: float, A: float, W: float = 1.0) -> float:
    """Eq. (28) with units made consistent: rho = P Omega (sqrt(4 a_n / W^2 + 9) - 1) / (2 (a_n + 2 W^2)),
    a_n = A - W^2; equals the printed form at W = 1. It uses e^y ~ 1 + y (App. C), so it is approximate."""
    an = A - W ** 2
    return P * omega * (math.sqrt(max(4 * an / W ** 2 + 9, 0.0)) - 1) / (2 * (an + 2 * W ** 2))


def theorem3_rho(tau: int, count: float, order: int, lam1: float, lam2: float, A: float,
                 P: float, omega: float, W: float = 1.0) -> float:
    """Eq. (33): rho_tau = (Omega P / W^2) sqrt(a / (W^2 (alpha-1) / (Omega P) + b - 1)),
    a = lambda1 / (lambda2 tau^2 K_t W^2), b = 4 lambda1 M^2 G / (lambda2 tau^2 K_t) (A = 4 M^2 G).
    NaN when the radicand is not positive (the theorem does not apply)."""
    a = lam1 / (lam2 * tau * tau * count * W * W)
    b = A * lam1 / (lam2 * tau * tau * count)
    den = W * W * (order - 1) / (omega * P) + b - 1
    if not den > 0 or not a > 0:
        return math.nan
    return omega * P / W ** 2 * math.sqrt(a / den)


@dataclass
class DesignOptions:
    order: int = 2
    lambda1: float = 1.0
    lambda2: float = 1e-5
    gamma_bar: float = 1e-2
    eps_bar: float = 100.0
    grad_const: float = 1.0
    rho: float = 0.0
    rounds: int = 0
    rho_rule: str = "bisection"       # 'closed_form' (Theorem 3, CDPB-i) | 'bisection' (Algorithm 2)
    tol: float = 1e-6
    max_iter: int = 100
    stage: str = "full"               # 'full' (Algorithm 3) | 'gamma' (Stage I only: gamma_bar baseline)


@dataclass
class Design:
    rho: float
    rounds: int
    count: float
    p: float
    sigma2: float
    sigma2_others: float
    r: float
    eps_round: float
    gamma: float
    utility: float
    tau_gamma_min: int
    tau_eps_max: int
    rho_gamma: float
    method: str
    extra: dict = field(default_factory=dict)


class CDPBDesigner:
    """Algorithm 3 on a ``CDPBModel``."""

    def __init__(self, model: CDPBModel, opts: DesignOptions, key: str = "power.options"):
        self.m = model
        self.o = opts
        self.key = key
        self.rho_lo = model.rho_max * 1e-6

    # objective -----------------------------------------------------------------------------------
    def gamma(self, rho: float, tau: int) -> float:
        return 6.0 / tau * self.m.gamma_bracket(rho, self.o.grad_const)

    def eps(self, rho: float, tau: int) -> float:
        return tau * self.m.eps_round(rho, self.o.order)

    def utility(self, rho: float, tau: int) -> float:
        """G(rho, tau) = lambda1 gamma + lambda2 eps, eq. (24)."""
        return self.o.lambda1 * self.gamma(rho, tau) + self.o.lambda2 * self.eps(rho, tau)

    def dG(self, rho: float, tau: int) -> float:
        """f(rho) = dG/drho (central difference), the function Algorithm 2 bisects."""
        h = 1e-6 * max(rho, self.rho_lo)
        lo, hi = max(rho - h, self.rho_lo * 0.5), min(rho + h, self.m.rho_max)
        return (self.utility(hi, tau) - self.utility(lo, tau)) / (hi - lo)

    # Stage I -------------------------------------------------------------------------------------
    def rho_gamma(self) -> float:
        return argmin_1d(lambda r: self.m.gamma_bracket(r, self.o.grad_const), self.rho_lo, self.m.rho_max)

    def tau_gamma_min(self, rho_g: float) -> int:
        """Lemma 1, eq. (27)."""
        return max(1, math.ceil(6.0 * self.m.gamma_bracket(rho_g, self.o.grad_const) / self.o.gamma_bar - 1e-12))

    def tau_eps_max(self) -> int:
        """Lemma 2 (fixed): the most rounds some rho keeps within eps_bar."""
        rho_e = argmin_1d(lambda r: self.m.eps_round(r, self.o.order), self.rho_lo, self.m.rho_max)
        e = self.m.eps_round(rho_e, self.o.order)
        return int(math.floor(self.o.eps_bar / e + 1e-12)) if e > 0 else 10 ** 9

    # Stage II ------------------------------------------------------------------------------------
    def rho_bisection(self, tau: int) -> float:
        f = lambda r: self.dG(r, tau)  # noqa: E731
        lo, hi = self.rho_lo, self.m.rho_max
        flo, fhi = f(lo), f(hi)
        if np.sign(flo) == np.sign(fhi):            # no stationary point inside: a bound is active
            return lo if self.utility(lo, tau) <= self.utility(hi, tau) else hi
        return bisection(f, lo, hi, self.o.tol * self.m.rho_max, self.o.max_iter)

    def rho_closed_form(self, tau: int) -> tuple[float, str]:
        """Theorem 3 with K_t at its fixed point; falls back to bisection when it does not apply."""
        m, o = self.m, self.o
        P, omega = float(np.mean(m.power)), float(np.mean(m.stats.omega))
        count = float(m.clients)
        rho = math.nan
        for _ in range(200):
            rho_new = theorem3_rho(tau, count, o.order, o.lambda1, o.lambda2, o.grad_const, P, omega, m.W)
            if not math.isfinite(rho_new):
                return self.rho_bisection(tau), "bisection (Theorem 3 radicand <= 0)"
            rho_new = min(rho_new, m.rho_max)
            if math.isfinite(rho) and abs(rho_new - rho) <= 1e-12 * m.rho_max:
                rho = rho_new
                break
            rho = rho_new if not math.isfinite(rho) else 0.5 * (rho + rho_new)   # damped fixed point
            count = m.count(rho)
        return rho, ("closed_form (clipped to P/W^2)" if rho >= m.rho_max else "closed_form")

    def rho_for(self, tau: int) -> tuple[float, str]:
        if self.o.rho > 0:
            return min(self.o.rho, self.m.rho_max), "fixed"
        if self.o.rho_rule == "closed_form":
            return self.rho_closed_form(tau)
        return self.rho_bisection(tau), "bisection"

    def design(self) -> Design:
        """Algorithm 3 (or Stage I only for the gamma_bar baseline; fixed rho/rounds when given)."""
        m, o = self.m, self.o
        rho_g = self.rho_gamma()
        t_min = self.tau_gamma_min(rho_g)
        if o.stage == "gamma":
            rho = min(o.rho, m.rho_max) if o.rho > 0 else rho_g
            tau = o.rounds if o.rounds > 0 else t_min
            return self._result(rho, tau, t_min, -1, rho_g, "stage I (gamma_bar only)")
        t_max = self.tau_eps_max()
        if o.rounds > 0:
            taus = [o.rounds]
        else:
            if t_min > t_max:
                raise ConfigError(self.key + ".eps_bar",
                                  f"CDPB design infeasible: tau_gamma_min = {t_min} > tau_eps_max = {t_max} "
                                  f"(Lemmas 1-2); raise gamma_bar or eps_bar")
            taus = self._taus(t_min, t_max)
        best = None
        for tau in taus:
            cand = self._evaluate(tau)
            if best is None or cand[0] < best[0]:
                best = cand
        if o.rounds <= 0 and len(taus) < t_max - t_min + 1:         # refine around the best grid tau
            while True:
                i = taus.index(best[2])
                lo = taus[i - 1] if i > 0 else t_min
                hi = taus[i + 1] if i + 1 < len(taus) else t_max
                taus = self._taus(lo, hi, TAU_REFINE)
                for tau in taus:
                    cand = self._evaluate(tau)
                    if cand[0] < best[0]:
                        best = cand
                if len(taus) == hi - lo + 1:
                    break
        _, rho, tau, how = best
        d = self._result(rho, tau, t_min, t_max, rho_g, how)
        if o.rho_rule == "closed_form" and o.rho <= 0:
            rb = self.rho_bisection(tau)
            d.extra.update(rho_bisection=rb, utility_bisection=self.utility(rb, tau))
        return d

    def _evaluate(self, tau: int) -> tuple:
        rho, how = self.rho_for(tau)
        return self.utility(rho, tau), rho, tau, how

    @staticmethod
    def _taus(t_min: int, t_max: int, n_max: int = None) -> list[int]:
        n_max = n_max or TAU_LINE_SEARCH_MAX
        if t_max - t_min + 1 <= n_max:
            return list(range(t_min, t_max + 1))
        grid = np.unique(np.round(np.geomspace(t_min, t_max, n_max)).astype(int))
        return sorted(set(int(t) for t in grid) | {t_min, t_max})

    def _result(self, rho, tau, t_min, t_max, rho_g, how) -> Design:
        m, o = self.m, self.o
        return Design(rho=float(rho), rounds=int(tau), count=m.count(rho), p=m.sampling_prob(rho),
                      sigma2=m.noise(rho), sigma2_others=m.noise_others(rho), r=m.ratio(rho),
                      eps_round=m.eps_round(rho, o.order), gamma=self.gamma(rho, tau),
                      utility=self.utility(rho, tau), tau_gamma_min=int(t_min), tau_eps_max=int(t_max),
                      rho_gamma=float(rho_g), method=how)


class CDPBServer:
    """The server of a CDPB round: alpha_u and the ledger record, from the design and its own model alone
    (the model may differ from the one designed with: noise_free uses CDPB-i's design without noise).

    alpha_u = sqrt(rho) K_t(rho) (eq. 18 with the expected count of eq. (53): open question 1), so that
    unpack(y)/alpha_u = (1/K_t(rho)) sum_{k in K_t} (u_k + r_k) + noise, an unbiased estimate of the mean
    update over the participation coins. ``oracle_count`` (sim comparison only) divides by the true count
    instead; the server then learns the count, so the record claims no amplification (q = 1)."""

    def __init__(self, model: CDPBModel, design: Design, order: int, name: str):
        self.model = model
        self.design = design
        self.order = int(order)
        self.name = name

    @property
    def rho(self) -> float:
        return self.design.rho

    def alpha_u(self, oracle_count: int | None = None) -> float:
        count = self.design.count if oracle_count is None else max(int(oracle_count), 1)
        return float(math.sqrt(self.rho) * count)

    def mechanism(self, round_index: int, oracle_count: int | None = None) -> Mechanism:
        """Per round: a Gaussian with z = sigma_others / (sqrt(rho) Delta_u), Poisson-sampled with
        q = max_k p_k(rho) (client-level neighbours) -- expected noise over fading, as Theorem 1 uses."""
        d, m = self.design, self.model
        extra = {"rdp_order": self.order, "policy": self.name, "rho": d.rho, "p": d.p,
                 "k_expected": d.count, "noise_model": "expected over fading (eqs. 56/60 per coordinate)",
                 "paper_literal_r": m.W ** 2 / (m.dim * m.noise(d.rho))}
        if oracle_count is not None and oracle_count == 0:
            return Mechanism(round=round_index, sensitivity=0.0, sigma_eff=0.0, uses_data=False, extra=extra)
        count = d.count if oracle_count is None else float(oracle_count)
        sens = m.delta_u / count
        sigma = math.sqrt(m.noise_others(d.rho)) / (math.sqrt(d.rho) * count)
        q = d.p if oracle_count is None else 1.0
        return Mechanism(round=round_index, sensitivity=float(sens), sigma_eff=float(sigma), sampling_prob=float(q),
                         extra=extra)
