"""What LAPA's noise may depend on (paper 004 over the air, issue 24 item 3): public quantities only.

The ledger books each round as ONE Gaussian mechanism N(sum_k G_k u_k, sigma_eff^2 I_d) with the
sensitivity max_k G_k Delta s_k. That analysis needs G, sigma_eff and alpha_u to be the same for a data set D and
every neighbour D'; otherwise the two releases are Gaussians of different covariance, which no (sensitivity,
sigma) pair covers: with d coordinates, variances v and v' are told apart at mu ~ sqrt(d/2) |ln(v'/v)|
(for d = 5e4 and the 0.17 % gap first seen in a ledger, 0.0014130 vs 0.0014154, mu ~ 0.5, several rounds'
worth). Two quantities of the paper made them data-dependent:

* The reliable-aggregation weights (eqs. 20-21) come from each device's label counts. One sample's label
  moves two counts by 1, which moves W_k by up to (n_classes - 1)/|D_k| and the softmax of 1/W_k without
  bound (measured on the 3 IID + 12 non-IID preset: ||G' - G||_1 = 1.33 for one sample; a worst-case
  booking would be the client-level 2C). Here the counts are RELEASED once, before the first round's
  weights are formed, through a Gaussian mechanism (``release_label_counts``: sensitivity
  ``label_sensitivity``, noise power_options.label_noise x that), and W, G are computed from the released
  counts (post-processing). Its privacy loss, mu_h = 1/label_noise, is booked with the first round
  (``fold_release``: Gaussian mechanisms compose exactly by adding mu^2, Dong, Roth & Su 2022 Cor. 3.3,
  so the round is booked as one Gaussian with mu^2 = mu_round^2 + mu_h^2). label_noise = 0 keeps the
  paper's assumption that the BS knows the label PMFs (sec. III-C): the counts are then declared public and
  the guarantee covers only neighbours with the same label counts (recorded in the ledger).
* The per-device budgets (eqs. 13-16) come from angles between each device's own update and the aggregate.
  Over the air only the superposition is released, so those angles use values nobody released (the paper's
  BS decodes every device by SIC, eq. 6; ours does not). The round's TOTAL noise is therefore set from
  public quantities: the variance the equal split of the same round budget gives (eq. 16 with f = const,
  b_t of eq. 12 from released aggregates only), and the personalised split only decides how that total is
  shared among the devices (one common scale on the personalised sigma_k, ``match_variance``). The pool
  (eps_c of eq. 12), the switch round (eq. 23) and the post-switch cap use the same public split.
  Consequence: the released aggregate's law no longer depends on the split (only how each device's share of
  the noise is drawn does), which is the most a data-dependent split can do without being released."""
from __future__ import annotations

import math

import numpy as np

SAMPLE_UNITS = ("sample", "sample_paper")


def label_sensitivity(unit: str, sizes) -> float:
    """L2 sensitivity of the (K, n_classes) label-count table to one neighbouring change: sqrt(2) when one
    sample is replaced (one count -1, one +1), sqrt(2) max_k |D_k| when a client's data is replaced or
    removed (all its counts move: at most |D_k| out of one class and |D_k| into another)."""
    if unit in SAMPLE_UNITS:
        return math.sqrt(2.0)
    return math.sqrt(2.0) * float(np.max(np.asarray(sizes, dtype=np.float64)))


def release_label_counts(counts, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """counts + N(0, sigma^2) per entry, then clipped at 0 (post-processing); a row left empty gets a uniform
    floor so that its PMF exists. sigma = 0 returns the counts (declared public)."""
    counts = np.asarray(counts, dtype=np.float64)
    if sigma <= 0:
        return counts.copy()
    out = np.maximum(counts + sigma * rng.standard_normal(counts.shape), 0.0)
    empty = out.sum(axis=1) <= 0
    out[empty] = 1.0
    return out


def fold_release(sens: float, sigma_eff: float, mu2_extra: float, sens_scale: float = 1.0) -> float:
    """The sensitivity to book so that a Gaussian round with noise sigma_eff also carries another Gaussian
    release of privacy loss mu_extra (exact composition: mu^2 adds): (sens_scale s')^2 / sigma^2 =
    (sens_scale sens)^2 / sigma^2 + mu_extra^2, sens_scale being the ledger's CSI margin on the sensitivity."""
    if mu2_extra <= 0 or not np.isfinite(sigma_eff) or sigma_eff <= 0:
        return sens
    return float(math.sqrt(sens ** 2 + mu2_extra * sigma_eff ** 2 / sens_scale ** 2))


def match_variance(var_of, target: float, tol: float = 1e-13) -> float:
    """The least s >= 0 with var_of(s) >= target, var_of increasing in s (bisection, upper end returned, so
    the realised variance is never below the target); 0 if var_of(0) already reaches it."""
    if var_of(0.0) >= target:
        return 0.0
    hi = 1.0
    while var_of(hi) < target:
        hi *= 2.0
        if hi > 1e15:
            raise ValueError("match_variance: the target variance is out of reach")
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if var_of(mid) >= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= tol * hi:
            break
    return hi
