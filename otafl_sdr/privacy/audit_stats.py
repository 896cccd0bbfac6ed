"""The statistics of an empirical privacy audit (``otafl-sdr audit``): pure maths, no radio, no torch.

A canary audit observes, for each trial (canary), a test statistic with a private coin: inserted or not.
Two ways turn the two samples into a lower bound on epsilon:

- **Gaussian (f-DP) fit**, the one-shot estimate of Andrew et al. 2024 ("One-shot empirical privacy
  estimation for federated learning", sec. 3): the two samples are modelled as N(m0, s^2) and N(m1, s^2);
  mu_hat = (m1 - m0) / s is the GDP parameter of the trade-off curve G_mu(a) = Phi(Phi^-1(1 - a) - mu)
  (Dong, Roth and Su 2022, eq. 6); its one-sided lower confidence limit is turned into epsilon at delta by
  the mu-GDP duality delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (ibid., Corollary 2.13).
- **Clopper-Pearson** (rigorous, no distributional assumption; Jagielski et al. 2020, Nasr et al. 2021,
  the counting argument of Steinke, Nasr and Jagielski 2023): a threshold classifier picked on one half of
  the trials, its false positive / negative rates on the other half bounded above at the confidence level,
  and any (eps, delta)-DP mechanism has FPR + e^eps FNR >= 1 - delta (and symmetrically).

For an honest Gaussian mechanism composed over rounds t with sensitivity s_t and noise sigma_t the trade-off
is exactly G_mu with mu = sqrt(sum_t (s_t / sigma_t)^2) (Dong et al., Corollary 3.3), attained by the
Neyman-Pearson statistic sum_t (s_t / sigma_t^2) <r_t, v_t>."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

EPS_MAX = 1000.0          # eps reported for a statistic whose two samples do not overlap at all (Gaussian fit)


def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth and Su 2022, Corollary 2.13)."""
    if mu <= 0:
        return 0.0
    a = stats.norm.cdf(-eps / mu + mu / 2)
    # e^eps Phi(-eps/mu - mu/2) in logs: no overflow at large eps
    b = math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2))
    return float(max(a - b, 0.0))


def gdp_eps(mu: float, delta: float) -> float:
    """The smallest eps with delta(eps) <= delta for mu-GDP; 0 for mu <= 0; EPS_MAX past it."""
    if not mu > 0:
        return 0.0
    if not math.isfinite(mu) or gdp_delta(EPS_MAX, mu) > delta:
        return EPS_MAX
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    return float(optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, EPS_MAX, xtol=1e-12))


def gdp_mu(sensitivities, sigmas) -> float:
    """mu of the composed Gaussian mechanisms: sqrt(sum (s_t / sigma_t)^2) (Dong et al., Corollary 3.3)."""
    s = np.asarray(sensitivities, float)
    g = np.asarray(sigmas, float)
    return float(np.sqrt(np.sum((s / g) ** 2)))


def gdp_tradeoff(alpha, mu: float) -> np.ndarray:
    """G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu): the smallest type-II error at type-I error alpha."""
    return stats.norm.cdf(stats.norm.ppf(1 - np.asarray(alpha, float)) - mu)


@dataclass
class GaussianFit:
    mu_hat: float
    mu_lower: float
    mean_in: float
    mean_out: float
    std: float
    n_in: int
    n_out: int


def gaussian_fit(inserted, absent, confidence: float) -> GaussianFit:
    """mu_hat = (mean_in - mean_out) / pooled std and its one-sided lower limit at ``confidence``
    (standardised mean difference, SE sqrt(1/n1 + 1/n0 + mu^2 / (2 (n1 + n0))), Hedges and Olkin 1985,
    eq. 5.14, with a Student t quantile). Two samples that do not overlap give mu = inf."""
    x1 = np.asarray(inserted, float)
    x0 = np.asarray(absent, float)
    n1, n0 = len(x1), len(x0)
    if n1 < 2 or n0 < 2:
        raise ValueError("a Gaussian fit needs at least two trials on each side")
    m1, m0 = float(x1.mean()), float(x0.mean())
    pooled = math.sqrt((((x1 - m1) ** 2).sum() + ((x0 - m0) ** 2).sum()) / (n1 + n0 - 2))
    diff = m1 - m0
    scale = max(abs(m1), abs(m0), 1e-300)
    if pooled <= 1e-9 * scale or (x1.min() > x0.max() and pooled == 0):
        mu = math.inf if diff > 0 else 0.0
        return GaussianFit(mu, mu, m1, m0, pooled, n1, n0)
    mu = diff / pooled
    se = math.sqrt(1 / n1 + 1 / n0 + mu ** 2 / (2 * (n1 + n0)))
    q = float(stats.t.ppf(confidence, n1 + n0 - 2))
    return GaussianFit(mu, mu - q * se, m1, m0, pooled, n1, n0)


def cp_upper(k: int, n: int, confidence: float) -> float:
    """Clopper-Pearson one-sided upper limit of a binomial rate (k of n) at ``confidence``."""
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(confidence, k + 1, n - k))


def eps_from_rates(fpr: float, fnr: float, delta: float) -> float:
    """The largest eps that a test with these (upper-bounded) error rates refutes (>= 0)."""
    out = 0.0
    for a, b in ((fpr, fnr), (fnr, fpr)):
        if a > 0 and 1 - delta - b > 0:
            out = max(out, math.log((1 - delta - b) / a))
    return out


def _cp_upper_vec(k: np.ndarray, n: int, confidence: float) -> np.ndarray:
    k = np.asarray(k)
    out = np.ones(k.shape)
    m = k < n
    out[m] = stats.beta.ppf(confidence, k[m] + 1, n - k[m])
    return out


def _best_threshold(x1, x0, delta: float, confidence: float) -> tuple[float, float]:
    """(threshold, eps) of the threshold classifier 'inserted if x >= t' best on these trials; the
    candidate thresholds are the midpoints between consecutive observed values (robust to rounding)."""
    v = np.unique(np.concatenate([x1, x0]))
    cands = np.concatenate([[v[0] - 1.0], (v[:-1] + v[1:]) / 2, [v[-1] + 1.0]])
    s1, s0 = np.sort(x1), np.sort(x0)
    fn = np.searchsorted(s1, cands, side="left")                 # inserted below t
    fp = len(s0) - np.searchsorted(s0, cands, side="left")       # absent at or above t
    fpr = _cp_upper_vec(fp, len(s0), confidence)
    fnr = _cp_upper_vec(fn, len(s1), confidence)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where((fpr > 0) & (1 - delta - fnr > 0), np.log(np.maximum(1 - delta - fnr, 1e-300) / fpr), 0.0)
        e2 = np.where((fnr > 0) & (1 - delta - fpr > 0), np.log(np.maximum(1 - delta - fpr, 1e-300) / fnr), 0.0)
    e = np.maximum(np.maximum(e1, e2), 0.0)
    j = int(np.argmax(e))
    return float(cands[j]), float(e[j])


def clopper_pearson_eps(inserted, absent, delta: float, confidence: float) -> dict:
    """Rigorous eps lower bound of a threshold classifier: the threshold is chosen on the even-indexed
    trials, its error rates counted on the odd-indexed ones and bounded by Clopper-Pearson (each at
    1 - (1 - confidence) / 2, so that both hold at ``confidence``). The trials are in a random order (the
    canaries' directions and coins are drawn independently), so the split is a random one."""
    x1 = np.asarray(inserted, float)
    x0 = np.asarray(absent, float)
    if len(x1) < 2 or len(x0) < 2:
        return {"eps": 0.0, "threshold": None, "fpr_upper": 1.0, "fnr_upper": 1.0}
    c2 = 1 - (1 - confidence) / 2
    t, _ = _best_threshold(x1[0::2], x0[0::2], delta, c2)
    e1, e0 = x1[1::2], x0[1::2]
    fn, fp = int(np.sum(e1 < t)), int(np.sum(e0 >= t))
    fpr_u, fnr_u = cp_upper(fp, len(e0), c2), cp_upper(fn, len(e1), c2)
    return {"eps": eps_from_rates(fpr_u, fnr_u, delta), "threshold": t, "fpr_upper": fpr_u, "fnr_upper": fnr_u,
            "false_positives": fp, "false_negatives": fn, "n_in": len(e1), "n_out": len(e0)}


def perfect_distinguishing_eps(n_in: int, n_out: int, delta: float, confidence: float) -> float:
    """The Clopper-Pearson eps of a classifier that makes no error on the evaluation half: the most a
    one-run audit of this size can certify."""
    c2 = 1 - (1 - confidence) / 2
    return eps_from_rates(cp_upper(0, n_out, c2), cp_upper(0, n_in, c2), delta)


def correlation_z(a, b) -> float:
    """sqrt(n) x the sample correlation of two residual vectors: ~N(0, 1) when they are independent (fresh
    noise), ~sqrt(n) when one regenerates the other."""
    a = np.asarray(a, float) - np.mean(a)
    b = np.asarray(b, float) - np.mean(b)
    den = math.sqrt(float(a @ a) * float(b @ b))
    return 0.0 if den == 0 else float(a @ b) / den * math.sqrt(len(a))
