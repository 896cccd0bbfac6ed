"""Gaussian-DP (f-DP) mathematics of paper 002 (Sun, Shen, Tao: "Convergent differential privacy analysis
for general federated learning: the f-DP perspective"), kept apart from the bookkeeping in ``fdp.py``
(the Opacus split: ``analysis`` holds the formulas, the accountant holds the state).

Notation (extract sec. 1): V clip norm of every local gradient step, K local steps, T rounds, m clients,
sigma the std of the Gaussian noise each client adds to its uploaded model, L the smoothness constant,
alpha the FedProx proximal weight, ``lr`` the paper's learning-rate coefficient mu. mu_GDP is the Gaussian-DP
parameter (smaller = more private). Where this module says "aggregate noise" ``sigma_agg`` it means the
per-coordinate std of the noise in the averaged model the server releases: sigma / sqrt(m) for Algorithm 1,
the effective air noise for the over-the-air variant.

Three bounds on mu_GDP from the same per-round sensitivities rho_t (model) and gamma_t (data), Theorem 10:

* ``paper``: eqs. (15)-(16) with the closed-form minimiser of appendix A.3,
  mu^2 = (sum_t P_t gamma_t)^2 / sum_t P_t^2 sigma_t^2, P_t = prod_{j=t+1}^{T-1} rho_j. Eqs. (17)-(21) are
  this formula for the rho/gamma of Table 3.
* ``composition``: the same rounds composed as T Gaussian mechanisms, mu^2 = sum_t gamma_t^2 / sigma_t^2.
* ``feasible``: the minimum of eq. (15) over interpolation weights that respect eq. (41)'s own condition
  0 <= lambda_t <= 1. The paper's minimiser puts lambda_1 = r^(T-1) (r+1) / (r^T + 1) > 1 whenever
  rho = r > 1 and T >= 2 (``paper_lambdas``), i.e. it shifts further than the gap it closes, and the
  recursion ||w_{t+1} - w~_{t+1}|| = (1 - lambda)(...) then turns negative. With 0 <= lambda <= 1 the
  problem is a weighted isotonic regression (solved exactly by pool-adjacent-violators below); its value
  lies between ``paper`` and ``composition`` and equals ``composition`` whenever
  rho_{t+1} gamma_{t+1} >= gamma_t for all t (e.g. constant learning rate, FedProx). A symptom of the
  same problem: ``paper`` falls when rho is overestimated ((r+1)/(r-1) decreases in r), ``feasible`` is
  monotone in rho and gamma as a bound must be. **(inferred; not in the paper.)** So ``paper`` reproduces the published convergent numbers, ``feasible`` is what the
  published argument supports once its constraint is enforced.

Everything that multiplies many rho's is done in log space, so T in the millions does not overflow.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import optimize, special

from otafl_sdr.errors import UserError

__all__ = [
    "tradeoff_gdp", "compose_gdp", "gdp_to_delta", "gdp_to_eps", "gdp_to_rdp", "gdp_to_rdp_curve",
    "harmonic_c", "contdecay_z", "fedavg_rho_gamma", "fedprox_rho_gamma", "table3_fedavg", "table3_fedprox",
    "paper_mu", "composition_mu", "feasible_mu", "paper_lambdas", "h0",
    "gdp_mu_fedavg_const", "gdp_mu_fedavg_cyclic", "gdp_mu_fedavg_stagewise", "gdp_mu_fedavg_contdecay",
    "gdp_mu_fedprox", "gdp_mu_composition_const", "sigma_for_target_mu",
]


# ------------------------------------------------------------------------------------------------
# Gaussian DP basics (sec. 2.3 of paper 002; Dong, Roth & Su 2022)
def tradeoff_gdp(mu: float, alpha):
    """T_G(mu)(alpha) = Phi(Phi^{-1}(1 - alpha) - mu): the smallest type-II error at type-I error alpha."""
    return special.ndtr(special.ndtri(1.0 - np.asarray(alpha, dtype=float)) - mu)


def compose_gdp(mus: Sequence[float]) -> float:
    """T_G(mu_1) (x) ... (x) T_G(mu_n) = T_G(sqrt(sum mu_i^2))  (Lemma 6 for Gaussian trade-offs)."""
    return float(np.sqrt(np.sum(np.square(np.asarray(mus, dtype=float)))))


def _log_delta(mu: float, eps: float) -> float:
    """log delta(eps) of Lemma 7, without cancellation: delta = Phi(a) (1 - exp(eps + log Phi(b) - log Phi(a)))."""
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la, lb = special.log_ndtr(a), special.log_ndtr(b)
    x = eps + lb - la                     # < 0 for mu > 0
    return float(la + np.log(-np.expm1(x))) if x < 0 else -math.inf


def gdp_to_delta(mu: float, eps: float) -> float:
    """Lemma 7: mu-GDP => (eps, delta(eps))-DP with
    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu < 0 or eps < 0:
        raise UserError(f"gdp_to_delta needs mu >= 0 and eps >= 0, got mu={mu}, eps={eps}")
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    return float(math.exp(_log_delta(mu, eps)))


def gdp_to_eps(mu: float, delta: float) -> float:
    """The smallest eps >= 0 with delta(eps) <= delta (Lemma 7 inverted). delta(eps) decreases in eps, so a
    bracketing root finder (Brent) on log delta(eps) - log delta converges; 0 if delta(0) <= delta."""
    if not 0 < delta < 1:
        raise UserError(f"delta must be in (0, 1), got {delta}")
    if mu < 0 or math.isnan(mu):
        raise UserError(f"mu must be >= 0, got {mu}")
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    target = math.log(delta)
    f = lambda e: _log_delta(mu, e) - target   # noqa: E731 - decreasing in e
    if f(0.0) <= 0:
        return 0.0
    hi = max(1.0, mu * mu)
    while f(hi) > 0:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    return float(optimize.brentq(f, 0.0, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500))


def gdp_to_rdp(mu: float, zeta: float) -> float:
    """Lemma 8: mu-GDP => (zeta, zeta mu^2 / 2)-RDP for every order zeta > 1."""
    if zeta <= 1:
        raise UserError(f"RDP order must be > 1, got {zeta}")
    return 0.5 * zeta * mu * mu


def gdp_to_rdp_curve(mu: float, orders: Sequence[float]) -> np.ndarray:
    return np.array([gdp_to_rdp(mu, z) for z in orders])


# ------------------------------------------------------------------------------------------------
# Per-round sensitivities (Theorem 10; Lemmas 20-23; Table 3)
def harmonic_c(K: int) -> float:
    """c with sum_{k<K} 1/(k+1) = c ln(K+1): c = H_K / ln(K+1), 1 <= c < 1.543 (sec. 2.1 of the extract)."""
    return float(special.digamma(K + 1) + np.euler_gamma) / math.log(K + 1)


def contdecay_z(K: int) -> float:
    """z for the continuously decaying schedule: the round-0 ratio H_K / ln 2, the largest over rounds, so
    sum_k 1/(tK+k+1) <= z ln((t+2)/(t+1)) for every t (the paper leaves z open; inferred)."""
    return float(special.digamma(K + 1) + np.euler_gamma) / math.log(2.0)


def _as_rounds(lrs) -> np.ndarray:
    a = np.asarray(lrs, dtype=float)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] < 1 or np.any(a < 0) or not np.all(np.isfinite(a)):
        raise UserError("learning rates must be a finite, non-negative (T, K) array")
    return a


def fedavg_rho_gamma(lrs, L: float, V: float, weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact Lemma 20/21 sensitivities of Noisy-FedAvg from the per-step learning rates.

    lrs: (T, K) eta_{k,t} (or (K,) for one round); weight: the aggregation weight of the differing client
    (1/m in paper 002). Returns (log rho_t, gamma_t), each (T,):
    gamma_t = 2 V weight sum_k eta_{k,t}  (Lemma 20);
    rho_t = 1 + eta(K,t) L = prod_k (1 + eta_{k,t} L)  (Lemma 21; the two forms are equal)."""
    a = _as_rounds(lrs)
    return np.sum(np.log1p(a * L), axis=1), 2.0 * V * weight * np.sum(a, axis=1)


def fedprox_rho_gamma(lrs, alpha: float, L: float, V: float, weight: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact Lemma 22/23 sensitivities of Noisy-FedProx (eq. 4) from the per-step learning rates, before the
    paper bounds them by their K -> infinity values. With b_k = |1 - eta_k alpha| (the paper writes 1 - eta_k alpha,
    assuming eta_k alpha <= 1) and beta_k = b_k + eta_k L:
    gamma_t = 2 V weight sum_k eta_k prod_{j>k} b_j                       (Lemma 22)
    rho_t  = prod_k beta_k + alpha sum_k eta_k prod_{j>k} beta_j          (Lemma 23)."""
    a = _as_rounds(lrs)
    T, K = a.shape
    log_rho = np.empty(T)
    gamma = np.empty(T)
    for t in range(T):
        e = a[t]
        b = np.abs(1.0 - e * alpha)
        beta = b + e * L
        g = 0.0
        r_sum = 0.0
        pb = 1.0
        pbeta = 1.0
        for k in range(K - 1, -1, -1):      # products over j > k, built from the end
            g += e[k] * pb
            r_sum += e[k] * pbeta
            pb *= b[k]
            pbeta *= beta[k]
        gamma[t] = 2.0 * V * weight * g
        log_rho[t] = math.log(pbeta + alpha * r_sum)
    return log_rho, gamma


def table3_fedavg(schedule: str, T: int, K: int, lr: float, L: float, V: float, m: float,
                  c: float | None = None, z: float | None = None, restore_lr: bool = False):
    """Table 3's closed-form (log rho_t, gamma_t), t = 0..T-1, for Noisy-FedAvg.

    schedule: 'constant' (eta = lr), 'cyclic' (lr/(k+1)), 'stagewise' (lr/(t+1)), 'continuous' (lr/(tK+k+1)).
    restore_lr: Table 3 prints gamma_t = 2cV ln(K+1)/m (cyclic) and 2zV ln((t+2)/(t+1))/m (continuous),
    but Lemma 20 with the appendix's own sums gives an extra factor lr; True puts it back (the bound the
    proof supports), False reproduces the printed Eqs. (18)/(20)."""
    t = np.arange(T, dtype=float)
    if schedule == "constant":
        return np.full(T, K * math.log1p(lr * L)), np.full(T, 2 * lr * V * K / m)
    if schedule == "cyclic":
        c = harmonic_c(K) if c is None else c
        f = lr if restore_lr else 1.0
        return np.full(T, c * lr * L * math.log(K + 1)), np.full(T, 2 * c * f * V * math.log(K + 1) / m)
    if schedule == "stagewise":
        return K * np.log1p(lr * L / (t + 1)), 2 * lr * V * K / (m * (t + 1))
    if schedule == "continuous":
        z = contdecay_z(K) if z is None else z
        f = lr if restore_lr else 1.0
        lr_ratio = np.log((t + 2) / (t + 1))
        return z * lr * L * lr_ratio, 2 * z * f * V * lr_ratio / m
    raise UserError(f"unknown learning-rate schedule '{schedule}'; allowed: constant, cyclic, stagewise, continuous")


def table3_fedprox(T: int, alpha: float, L: float, V: float, m: float):
    """Table 3 for Noisy-FedProx: rho = alpha/(alpha - L), gamma = 2V/(m alpha); needs alpha > L (Theorem 15)."""
    if not alpha > L:
        raise UserError(f"Theorem 15 needs alpha > L, got alpha={alpha}, L={L}")
    return np.full(T, math.log(alpha / (alpha - L))), np.full(T, 2 * V / (m * alpha))


# ------------------------------------------------------------------------------------------------
# The three bounds on mu_GDP
def _prep(log_rho, gamma, sigma):
    lr_ = np.asarray(log_rho, dtype=float).ravel()
    g = np.asarray(gamma, dtype=float).ravel()
    T = g.size
    if lr_.size != T or T == 0:
        raise UserError("log_rho and gamma must be non-empty and of equal length")
    s = np.broadcast_to(np.asarray(sigma, dtype=float), (T,)).astype(float)
    if np.any(g < 0) or np.any(~np.isfinite(g)):
        raise UserError("gamma must be finite and >= 0")
    if np.any(s <= 0) or np.any(np.isnan(s)):
        raise UserError("sigma must be > 0")
    return _log_P(lr_), g, s


def _log_P(log_rho: np.ndarray) -> np.ndarray:
    """S_t = log P_t - log P_{t*}, P_t = prod_{j=t+1}^{T-1} rho_j, t* = argmax P_t. Every bound below is
    invariant to a common factor in P, and summing outwards from t* keeps the dominant terms accurate to a
    few ulps even when log P_0 is in the millions (a plain cumulative sum loses ~1e-9 relative there)."""
    T = log_rho.size
    F = np.concatenate([[0.0], np.cumsum(log_rho[1:])])        # F_t = sum_{j=1}^t log rho_j; S_t = F_{T-1} - F_t
    ts = int(np.argmin(F))
    S = np.zeros(T)
    if ts + 1 < T:
        S[ts + 1:] = -np.cumsum(log_rho[ts + 1:])             # S_t - S_ts = -(sum_{j=ts+1}^t log rho_j)
    if ts > 0:
        S[:ts][::-1] = np.cumsum(log_rho[ts:0:-1])             # S_t - S_ts = sum_{j=t+1}^{ts} log rho_j
    return S


def _logsumexp_pos(x: np.ndarray, w: np.ndarray) -> float:
    """log sum_i w_i exp(x_i) for w_i >= 0 (returns -inf when all w_i == 0)."""
    mask = w > 0
    if not mask.any():
        return -math.inf
    return float(special.logsumexp(x[mask], b=w[mask]))


def paper_mu(log_rho, gamma, sigma) -> float:
    """Eq. (16) with appendix A.3's H_0 generalised to a per-round aggregate noise sigma_t:
    mu^2 = (sum_t P_t gamma_t)^2 / sum_t P_t^2 sigma_t^2. With sigma_t = sigma/sqrt(m) this is
    sqrt(m H_0)/sigma. Log space: P_t = exp(S_t) is never formed."""
    S, g, s = _prep(log_rho, gamma, sigma)
    la = _logsumexp_pos(S, g)
    if la == -math.inf:
        return 0.0
    lw = float(special.logsumexp(2 * S + 2 * np.log(s)))
    return float(math.exp(la - 0.5 * lw))


def h0(log_rho, gamma) -> float:
    """Appendix A.3: H_0 = (sum_t P_t gamma_t)^2 / sum_t P_t^2 (unit noise)."""
    return paper_mu(log_rho, gamma, 1.0) ** 2


def composition_mu(gamma, sigma) -> float:
    """GDP composition of the T rounds: sqrt(sum_t (gamma_t / sigma_t)^2)  (inferred baseline)."""
    g = np.asarray(gamma, dtype=float).ravel()
    s = np.broadcast_to(np.asarray(sigma, dtype=float), g.shape)
    return float(np.sqrt(np.sum((g / s) ** 2)))


def feasible_mu(log_rho, gamma, sigma) -> float:
    """Minimum of eq. (15) over 0 <= lambda <= 1 (the condition of eq. 41), exactly.

    With s_t the shift paid at round t and carries r_t = a_t - s_t >= 0, minimising sum s_t^2/sigma_t^2
    is a weighted isotonic regression: u_t = P_t s_t / (P_t^2 sigma_t^2) must be non-decreasing in t,
    constant on blocks whose carries are positive. Pool-adjacent-violators gives the blocks; a block B
    costs (sum_B P_t gamma_t)^2 / sum_B P_t^2 sigma_t^2, i.e. ``paper_mu`` of that block alone. All in logs."""
    S, g, s = _prep(log_rho, gamma, sigma)
    with np.errstate(divide="ignore"):
        lA = np.where(g > 0, S + np.log(np.where(g > 0, g, 1.0)), -np.inf)
    lW = 2 * S + 2 * np.log(s)
    blocks: list[list[float]] = []          # [log A_B, log W_B]
    for t in range(S.size):
        a, w = float(lA[t]), float(lW[t])
        # merge while the previous block's level exceeds this one's (a violation of monotonicity)
        while blocks and (blocks[-1][0] - blocks[-1][1]) > (a - w):
            pa, pw = blocks.pop()
            a, w = float(np.logaddexp(pa, a)), float(np.logaddexp(pw, w))
        blocks.append([a, w])
    total = 0.0
    for a, w in blocks:
        if a > -math.inf:
            total += math.exp(2 * a - w)
    return float(math.sqrt(total))


def paper_lambdas(log_rho, gamma, sigma=1.0) -> np.ndarray:
    """The interpolation weights lambda_{t+1}, t = 0..T-1, at which the paper's H_0 is attained (eq. 41):
    s_t = G P_t sigma_t^2 / sum P^2 sigma^2 with G = sum P gamma, lambda_{t+1} = s_t / a_t,
    a_t = rho_t (a_{t-1} - s_{t-1}) + gamma_t, a_0 = gamma_0. Values outside [0, 1] mean that the paper's
    minimiser is not an admissible interpolation (see the module docstring). Scaled by exp(-max S)."""
    S, g, s = _prep(log_rho, gamma, sigma)
    Pn = np.exp(S - S.max())                 # P_t / max P
    G = float(Pn @ g)
    D = float((Pn * Pn) @ (s * s))
    shift = G * Pn * s * s / D               # P-normalised s_t
    lam = np.full(S.size, np.nan)
    b = 0.0                                   # P-normalised a_t * P_t
    for t in range(S.size):
        b += Pn[t] * g[t]
        if t > 0:
            b -= Pn[t - 1] * shift[t - 1]
        denom = b
        if denom != 0 and Pn[t] > 0:
            lam[t] = Pn[t] * shift[t] / denom
    return lam


# ------------------------------------------------------------------------------------------------
# Closed forms (Theorem 12 a-d, Theorem 15). T may be math.inf for the T -> infinity limit.
def _tanh_ratio(log_r: float, T: float) -> float:
    """((r+1)/(r-1)) ((r^T - 1)/(r^T + 1)) = tanh(T ln r / 2) / tanh(ln r / 2), overflow-free; -> T as r -> 1."""
    if log_r <= 0:
        raise UserError(f"the closed forms need rho > 1, got log rho = {log_r}")
    num = 1.0 if math.isinf(T) else math.tanh(T * log_r / 2)
    return num / math.tanh(log_r / 2)


def _check_T(T) -> float:
    if not (math.isinf(T) or (float(T).is_integer() and T >= 1)):
        raise UserError(f"T must be a positive integer or math.inf, got {T}")
    return float(T)


def gdp_mu_fedavg_const(T, K: int, lr: float, L: float, V: float, m: float, sigma: float) -> float:
    """Eq. (17): 2 lr V K / (sqrt(m) sigma) * sqrt(((1+lr L)^K + 1)/((1+lr L)^K - 1) * ((1+lr L)^{KT} - 1)/((1+lr L)^{KT} + 1))."""
    T = _check_T(T)
    return 2 * lr * V * K / (math.sqrt(m) * sigma) * math.sqrt(_tanh_ratio(K * math.log1p(lr * L), T))


def gdp_mu_fedavg_cyclic(T, K: int, lr: float, L: float, V: float, m: float, sigma: float,
                         c: float | None = None, restore_lr: bool = False) -> float:
    """Eq. (18) with r = (1+K)^{c lr L}; restore_lr multiplies by lr (the factor Lemma 20 gives, dropped in print)."""
    T = _check_T(T)
    c = harmonic_c(K) if c is None else c
    f = lr if restore_lr else 1.0
    return 2 * c * f * V * math.log(K + 1) / (math.sqrt(m) * sigma) * math.sqrt(
        _tanh_ratio(c * lr * L * math.log(K + 1), T))


def gdp_mu_fedavg_stagewise(T, K: int, lr: float, V: float, m: float, sigma: float) -> float:
    """Eq. (19): 2 lr V K / (sqrt(m) sigma) * sqrt(2 - 1/T) (strict bound, from sum 1/(t+1)^2 <= 2 - 1/T)."""
    T = _check_T(T)
    return 2 * lr * V * K / (math.sqrt(m) * sigma) * math.sqrt(2 - 1 / T)


def gdp_mu_fedavg_contdecay(T, K: int, lr: float, V: float, m: float, sigma: float,
                            z: float | None = None, restore_lr: bool = False) -> float:
    """Eq. (20): 2 z V / (sqrt(m) sigma) * sqrt(2 - 1/T); z defaults to H_K/ln 2; restore_lr multiplies by lr."""
    T = _check_T(T)
    z = contdecay_z(K) if z is None else z
    f = lr if restore_lr else 1.0
    return 2 * z * f * V / (math.sqrt(m) * sigma) * math.sqrt(2 - 1 / T)


def gdp_mu_fedprox(T, alpha: float, L: float, V: float, m: float, sigma: float) -> float:
    """Eq. (21): 2V/(sqrt(m) alpha sigma) sqrt((2 alpha - L)/L (1 - 2/((alpha/(alpha-L))^T + 1))); alpha > L."""
    T = _check_T(T)
    if not alpha > L > 0:
        raise UserError(f"Theorem 15 needs alpha > L > 0, got alpha={alpha}, L={L}")
    return 2 * V / (math.sqrt(m) * alpha * sigma) * math.sqrt(_tanh_ratio(math.log(alpha / (alpha - L)), T))


def gdp_mu_composition_const(T, K: int, lr: float, V: float, m: float, sigma: float) -> float:
    """Composition baseline for the constant schedule: sqrt(T) * 2 lr V K / (sqrt(m) sigma)  (diverges in T)."""
    return math.sqrt(_check_T(T)) * 2 * lr * V * K / (math.sqrt(m) * sigma)


def sigma_for_target_mu(mu_target: float, mu_at_unit_sigma: float) -> float:
    """Every bound is proportional to 1/sigma, so sigma = mu(sigma=1) / mu_target."""
    if mu_target <= 0:
        raise UserError(f"target mu must be > 0, got {mu_target}")
    return mu_at_unit_sigma / mu_target
