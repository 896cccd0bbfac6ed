"""The radios' phase noise in a pilot's carrier-offset estimate (issue 34): how much of the offset's error is
the synthesizers' wander, estimated from the pilot's own block phases and pooled over a calibration's bursts.

A pilot's residual frequency is the least-squares slope of its block phases phi_b (b = 0 .. nb - 1, one block
= PHASE_BLOCK symbols; calibration/estimation.py): phi = th + w b + n + p, n the thermal error (white,
variance v per block, known from the pilot's residual), p the TX and RX synthesizers' phase noise, a Wiener
phase with increments of variance q per block. A block's phase is the phase of its sum, i.e. the Wiener
phase's mean over the block, so Cov(p_a, p_b) = q (min(a, b) + 1/2) between blocks and q (a + 1/3) within one:
q C_ab with C = min(a, b) + 1 - I / 6 (the constant the line fit removes; :func:`block_covariance`). Taking
the blocks as point samples (C = min(a, b) + 1) put the wander's -q/6 per block in the white part: q^ came out
8 % low and the offset's z-scores' rms 1.07 on the simulated lab's phase noise
(benchmarks/bench_calibration_offsets.py). The slope g^T phi, g = (b - mean b) / sum (b - mean b)^2, has
variance v g^T g + q g^T C g: the thermal error the pilot always stated and the wander's, 6 q / (5 nb) for
large nb. The white part dominates each block's step (the simulated lab's pilots: q is 30 % of v, the hub
model's median) but not the slope's error: the simulated lab's 1.2e-4 rad / sqrt(sample) per synthesizer moves
a 4k-symbol pilot's offset ~0.3 Hz at 1 MS/s, where its thermal error is 0.04 Hz; stating the thermal error
alone, a shared reference's offset 0 passed the 3-sigma gate (offset_gate.significant_cfo), was pre-compensated
and referred to device time, and one client of the node lab arrived radians off.

q from one pilot: its fit residuals r = P phi (P the projection off [1, b]) are, in an orthonormal basis of
P's range that diagonalises P C P (eigenvalues lam_i), independent N(0, v + q lam_i); q^ maximises that
likelihood (:func:`wander_variance`). One pilot's q^ is unbiased but wide (its few low-frequency components
carry it), so a calibration pools it: the radios' phase noise is a property of the lab, and every burst of
a calibration (every transmitter, every repeat; one receiver) measures it (:func:`pooled`), unless a link's
own repeats reject the common value (a radio of another class: :func:`link_wander`)."""
from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

LOG_RATIO_BOUNDS = (-25.0, 10.0)     # q / v searched over e^-25 .. e^10 (below: no wander)


def wander_variance(resids, var_blocks) -> float:
    """q^ (rad^2 per block): the maximum-likelihood Wiener variance common to one or more pilots' residual
    block phases ``resids`` (each (nb,), of a line fit) given their white variances ``var_blocks`` (module
    doc); 0 when none is seen. One pilot: ``wander_variance([r], [v])``."""
    return _fit(_terms(resids, var_blocks))[0]


def _terms(resids, var_blocks) -> list:
    """Each usable pilot's (v, lam, u^2): its white variance, P C P's eigenvalues, its residuals' squared
    coordinates in their eigenbasis (module doc)."""
    terms = []
    for r, v in zip(resids, var_blocks):
        r = np.asarray(r, dtype=np.float64)
        if r.size < 4 or not float(v) > 0 or not np.all(np.isfinite(r)):
            continue
        basis, lam = _residual_basis(int(r.size))
        terms.append((float(v), lam, (basis.T @ r) ** 2))
    return terms


def _nll(terms: list, q: float) -> float:
    """The pilots' negative log-likelihood (up to a constant) at wander q."""
    return float(sum(np.sum(np.log(v + q * lam) + u2 / (v + q * lam)) for v, lam, u2 in terms))


def _fit(terms: list) -> tuple[float, float]:
    """(q^, the negative log-likelihood at q^) over ``terms``; (0, nll at 0) when no wander is seen."""
    from scipy.optimize import minimize_scalar
    if not terms:
        return 0.0, 0.0
    v0 = float(np.median([t[0] for t in terms]))
    best = minimize_scalar(lambda lq: _nll(terms, v0 * math.exp(lq)), bounds=LOG_RATIO_BOUNDS, method="bounded",
                           options={"xatol": 1e-3})
    at_zero = _nll(terms, 0.0)
    if at_zero <= float(best.fun):
        return 0.0, at_zero
    return v0 * math.exp(float(best.x)), float(best.fun)


@functools.lru_cache(maxsize=8)
def slope_variance_per_wander(nb: int) -> float:
    """g^T C g: the line fit's slope variance (per block^2) per unit of q over nb blocks (module doc)."""
    b = np.arange(nb, dtype=np.float64)
    g = (b - b.mean()) / float(np.sum((b - b.mean()) ** 2))
    return float(g @ block_covariance(nb) @ g)


@functools.lru_cache(maxsize=8)
def block_covariance(nb: int) -> np.ndarray:
    """(nb, nb) C: the covariance of nb consecutive block-mean phases of a Wiener phase per unit of its
    per-block increment variance q, up to a constant matrix (module doc): min(a, b) + 1 - I / 6."""
    b = np.arange(nb, dtype=np.float64)
    return np.minimum.outer(b + 1, b + 1) - np.eye(nb) / 6.0


@functools.lru_cache(maxsize=8)
def _residual_basis(nb: int) -> tuple[np.ndarray, np.ndarray]:
    """((nb, nb - 2) an orthonormal basis of the residuals' space diagonalising P C P, its eigenvalues)."""
    b = np.arange(nb, dtype=np.float64)
    X = np.stack([np.ones(nb), b - b.mean()], axis=1)
    full, _ = np.linalg.qr(np.concatenate([X, np.eye(nb)], axis=1))
    Q = full[:, 2:nb]
    lam, V = np.linalg.eigh(Q.T @ block_covariance(nb) @ Q)
    return Q @ V, lam


def pooled(estimates: list[list]) -> list[list]:
    """A calibration's LinkEstimates (per transmitter, per repeat) with every offset's standard error restated
    with the wander q fitted jointly to all their bursts (module doc): cfo_std^2 = cfo_thermal_std^2 +
    q wander_scale. One q for the lab while its links agree with it; a link whose own repeats reject the
    common q (likelihood ratio beyond chi^2_1 at HETEROGENEITY_ALPHA: a transmitter of another class, a
    B210 among X310s, or a noisier synthesizer) keeps its own q (:func:`link_wander`)."""
    usable = [[e for e in link if _usable(e)] for link in estimates]
    if not any(usable):
        return estimates
    qs = link_wander(usable)
    return [[replace(e, wander_q=q, cfo_std=math.sqrt(e.cfo_thermal_std ** 2 + q * e.wander_scale))
             if _usable(e) else e for e in link] for link, q in zip(estimates, qs)]


HETEROGENEITY_ALPHA = 1e-3     # a link is taken to differ from the lab's common wander at this false rate


def link_wander(links: list[list]) -> list[float]:
    """Each link's wander q (rad^2 per block): the common q of the bursts of the links that agree with it, or,
    for a link whose bursts show more wander than that and reject it (2 (nll(q_common) - nll(q_link)) beyond
    chi^2_1's quantile at HETEROGENEITY_ALPHA), its own. Links are set apart one at a time, the most
    rejecting first, the common q refitted without them (a noisy link inflates the common q until every
    link seems to reject it). A link quieter than the common keeps it: its error is then overstated, never
    understated."""
    from scipy.stats import chi2
    per_link = [_terms([e.block_resid for e in link], [e.block_var for e in link]) for link in links]
    own = [_fit(terms) for terms in per_link]
    limit = float(chi2.ppf(1.0 - HETEROGENEITY_ALPHA, 1))
    apart: set[int] = set()
    while True:
        q_common, _ = _fit([t for i, terms in enumerate(per_link) if i not in apart for t in terms])
        lr = {i: 2.0 * (_nll(terms, q_common) - own[i][1]) for i, terms in enumerate(per_link)
              if i not in apart and terms and own[i][0] > q_common}
        worst = max(lr, key=lr.get, default=None)
        if worst is None or lr[worst] <= limit or len(per_link) - len(apart) <= 1:
            return [own[i][0] if i in apart else q_common for i in range(len(per_link))]
        apart.add(worst)


def _usable(e) -> bool:
    return bool(e.found) and e.block_resid is not None and math.isfinite(e.cfo_thermal_std)
