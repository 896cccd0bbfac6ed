"""The radios' phase noise in a pilot's carrier-offset estimate (issue 34): how much of the offset's error is
the synthesizers' wander, estimated from the pilot's own block phases and pooled over a calibration's bursts.

A pilot's residual frequency is the least-squares slope of its block phases phi_b (b = 0 .. nb - 1, one block
= PHASE_BLOCK symbols; calibration/estimation.py): phi = th + w b + n + p, n the thermal error (white,
variance v per block, known from the pilot's residual), p the TX and RX synthesizers' phase noise, a Wiener
phase with increments of variance q per block (Cov(p_a, p_b) = q C_ab, C_ab = min(a, b) + 1). The slope
g^T phi, g = (b - mean b) / sum (b - mean b)^2, has variance v g^T g + q g^T C g: the thermal error the pilot
always stated and the wander's, 6 q / (5 nb) for large nb. The white part dominates each block's step (at
25 dB the wander is 7 % of it) but not the slope's error: the simulated lab's 1.2e-4 rad / sqrt(sample) per
synthesizer moves a 4k-symbol pilot's offset ~0.3 Hz at 1 MS/s, where its thermal error is 0.04 Hz; stating
the thermal error alone, a shared reference's offset 0 passed the 3-sigma gate (offset_gate.significant_cfo), was
pre-compensated and referred to device time, and one client of the node lab arrived radians off.

q from one pilot: its fit residuals r = P phi (P the projection off [1, b]) are, in an orthonormal basis of
P's range that diagonalises P C P (eigenvalues lam_i), independent N(0, v + q lam_i); q^ maximises that
likelihood (:func:`wander_variance`). One pilot's q^ is unbiased but wide (its few low-frequency components
carry it), so a calibration pools it: the radios' phase noise is a property of the lab, and every burst of
a calibration (every transmitter, every repeat; one receiver) measures it (:func:`pooled`)."""
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
    from scipy.optimize import minimize_scalar
    terms = []
    for r, v in zip(resids, var_blocks):
        r = np.asarray(r, dtype=np.float64)
        if r.size < 4 or not float(v) > 0 or not np.all(np.isfinite(r)):
            continue
        basis, lam = _residual_basis(int(r.size))
        terms.append((float(v), lam, (basis.T @ r) ** 2))
    if not terms:
        return 0.0
    v0 = float(np.median([t[0] for t in terms]))

    def nll(log_q: float) -> float:
        q = v0 * math.exp(log_q)
        return float(sum(np.sum(np.log(v + q * lam) + u2 / (v + q * lam)) for v, lam, u2 in terms))

    best = minimize_scalar(nll, bounds=LOG_RATIO_BOUNDS, method="bounded", options={"xatol": 1e-3})
    if nll(LOG_RATIO_BOUNDS[0]) <= float(best.fun):
        return 0.0
    return v0 * math.exp(float(best.x))


@functools.lru_cache(maxsize=8)
def slope_variance_per_wander(nb: int) -> float:
    """g^T C g: the line fit's slope variance (per block^2) per unit of q over nb blocks (module doc)."""
    b = np.arange(nb, dtype=np.float64)
    g = (b - b.mean()) / float(np.sum((b - b.mean()) ** 2))
    return float(g @ np.minimum.outer(b + 1, b + 1) @ g)


@functools.lru_cache(maxsize=8)
def _residual_basis(nb: int) -> tuple[np.ndarray, np.ndarray]:
    """((nb, nb - 2) an orthonormal basis of the residuals' space diagonalising P C P, its eigenvalues)."""
    b = np.arange(nb, dtype=np.float64)
    X = np.stack([np.ones(nb), b - b.mean()], axis=1)
    full, _ = np.linalg.qr(np.concatenate([X, np.eye(nb)], axis=1))
    Q = full[:, 2:nb]
    lam, V = np.linalg.eigh(Q.T @ np.minimum.outer(b + 1, b + 1) @ Q)
    return Q @ V, lam


def pooled(estimates: list[list]) -> list[list]:
    """A calibration's LinkEstimates (per transmitter, per repeat) with every offset's standard error restated
    with the wander q fitted jointly to all their bursts (module doc): cfo_std^2 = cfo_thermal_std^2 +
    q wander_scale. One q for the lab: its radios are taken as one class (a radio far noisier than the rest
    shows in the per-round sounding's offsets, not here)."""
    usable = [e for link in estimates for e in link if _usable(e)]
    if not usable:
        return estimates
    q = wander_variance([e.block_resid for e in usable], [e.block_var for e in usable])
    return [[replace(e, wander_q=q, cfo_std=math.sqrt(e.cfo_thermal_std ** 2 + q * e.wander_scale))
             if _usable(e) else e for e in link] for link in estimates]


def _usable(e) -> bool:
    return bool(e.found) and e.block_resid is not None and math.isfinite(e.cfo_thermal_std)
