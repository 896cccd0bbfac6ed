"""Paper 004, sec. III-C: aggregation weights from data size, label-distribution distance and link quality.

eq. (20): W_k = Wasserstein-1 distance between device k's label PMF and the global label PMF. The paper
leaves the ground metric open; we use scipy.stats.wasserstein_distance on the class indices (|i - j|),
the 1-D earth mover's distance the paper's E||x - y|| reduces to for scalar labels.
eq. (21): G_k = |D_k| e^{1/W_k} / sum_j |D_j| e^{1/W_j}, computed as a softmax in the log domain; W_k is
floored at ``w_floor`` (W_k = 0, an exactly global-like device, makes e^{1/W_k} infinite).
eq. (22): devices whose SINR is below gamma_th get G_k = 0. As written, (22)'s denominator still counts the
dropped devices, so the weights would sum to < 1; we renormalise over the selected devices (decision).
The experiments state the threshold as a symbol-error rate eps_SER without naming the modulation; we
convert with QPSK (Gray) at the per-symbol SINR: SER = 1 - (1 - Q(sqrt(gamma)))^2 (decision).

SINR. ``sinr_sic``: eq. (6) for single-antenna links with r_k = h_k^H and decoding in order of decreasing
received power (perfect cancellation of the already decoded devices). ``sinr_ota``: the testbed's
over-the-air analogue, the device's own received SNR |h_k|^2 P_k / (d sigma_c2) (paper 000's SNR per
real coordinate times the fading gain); in over-the-air computation nothing is cancelled, and a device
with a weak link lowers the common receive scaling alpha_u for everyone, which selection avoids.

Angle weights (Benchmark 2 of paper 004, BEDA [36], "weights from the angle between local and global
gradients"; its exact rule is not given): the FedAdp form G_k ~ |D_k| exp(f(theta~_k)) with the Gompertz
map f of eq. (15), which is the same map LAPA uses. Stand-in, labelled as such in the figures."""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp
from scipy.stats import norm, wasserstein_distance


def label_pmfs(label_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(K, C) counts -> ((K, C) per-device PMFs, (C,) global PMF)."""
    counts = np.asarray(label_counts, dtype=np.float64)
    if counts.ndim != 2 or (counts < 0).any():
        raise ValueError("label_counts must be a (K, C) array of non-negative counts")
    tot = counts.sum(axis=1, keepdims=True)
    if (tot <= 0).any():
        raise ValueError("every device needs at least one labelled sample")
    glob = counts.sum(axis=0)
    return counts / tot, glob / glob.sum()


def wasserstein_to_global(label_counts: np.ndarray) -> np.ndarray:
    """W_k of eq. (20) for every device: (K,) >= 0."""
    pmf, glob = label_pmfs(label_counts)
    classes = np.arange(pmf.shape[1], dtype=np.float64)
    return np.array([wasserstein_distance(classes, classes, u_weights=row + 0.0, v_weights=glob)
                     if row.sum() > 0 else 0.0 for row in pmf])


def reliable_weights(sizes: np.ndarray, W: np.ndarray, selected: np.ndarray | None = None,
                     temperature: float = 1.0, w_floor: float = 1e-3) -> np.ndarray:
    """G_k of eqs. (21)/(22): softmax of log|D_k| + 1/(temperature W_k) over the selected devices, 0 elsewhere.
    temperature = 1 is the paper's rule."""
    sizes = np.asarray(sizes, dtype=np.float64)
    W = np.maximum(np.asarray(W, dtype=np.float64), w_floor)
    sel = np.ones(len(sizes), bool) if selected is None else np.asarray(selected, bool)
    if not sel.any():
        raise ValueError("no device selected")
    logits = np.log(sizes) + 1.0 / (temperature * W)
    logits = np.where(sel, logits, -np.inf)
    return np.exp(logits - logsumexp(logits[sel]))


def fedavg_weights(sizes: np.ndarray, selected: np.ndarray | None = None) -> np.ndarray:
    """G_k = |D_k| / sum over selected |D_j| (Benchmark 1)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    sel = np.ones(len(sizes), bool) if selected is None else np.asarray(selected, bool)
    g = np.where(sel, sizes, 0.0)
    return g / g.sum()


def gompertz(theta: np.ndarray, beta: float) -> np.ndarray:
    """f(theta) = beta (1 - exp(-exp(-beta (theta - 1))))  (eq. 15); decreasing in theta for beta > 0."""
    theta = np.asarray(theta, dtype=np.float64)
    return beta * (1.0 - np.exp(-np.exp(-beta * (theta - 1.0))))


def angle_weights(sizes: np.ndarray, theta_smooth: np.ndarray, beta: float = 5.0,
                  selected: np.ndarray | None = None) -> np.ndarray:
    """Angle-based weights (stand-in for BEDA [36]; FedAdp form): G_k ~ |D_k| exp(f(theta~_k))."""
    sizes = np.asarray(sizes, dtype=np.float64)
    sel = np.ones(len(sizes), bool) if selected is None else np.asarray(selected, bool)
    logits = np.where(sel, np.log(sizes) + gompertz(theta_smooth, beta), -np.inf)
    return np.exp(logits - logsumexp(logits[sel]))


def sinr_ota(h: np.ndarray, power: np.ndarray, dim: int, sigma_c2: float) -> np.ndarray:
    """Per-device received SNR |h_k|^2 P_k / (d sigma_c2) (over-the-air analogue of eq. 6)."""
    return np.abs(h) ** 2 * np.asarray(power, dtype=np.float64) / (dim * sigma_c2)


def sinr_sic(h: np.ndarray, power: np.ndarray, dim: int, sigma_c2: float) -> np.ndarray:
    """eq. (6), single antenna, r_k = h_k^H: gamma_k = p_k^2|h_k|^2 / (sum_{i decoded after k} p_i^2|h_i|^2
    + sigma^2), decoding the strongest received device first; p_k^2 = P_k / d per real coordinate."""
    rx = np.abs(h) ** 2 * np.asarray(power, dtype=np.float64) / dim
    order = np.argsort(-rx, kind="stable")
    out = np.empty_like(rx)
    rest = float(np.sum(rx))
    for k in order:
        rest -= rx[k]
        out[k] = rx[k] / (max(rest, 0.0) + sigma_c2)
    return out


def qpsk_ser(gamma: np.ndarray) -> np.ndarray:
    """QPSK (Gray) symbol-error rate at per-symbol SINR gamma: 1 - (1 - Q(sqrt(gamma)))^2."""
    q = norm.sf(np.sqrt(np.maximum(np.asarray(gamma, dtype=np.float64), 0.0)))
    return 1.0 - (1.0 - q) ** 2


def ser_to_sinr(ser: float) -> float:
    """The SINR threshold gamma_th whose QPSK SER equals ``ser`` (inverse of ``qpsk_ser``)."""
    if not 0 < ser < 0.75:
        raise ValueError(f"SER threshold must be in (0, 0.75), got {ser}")
    q = 1.0 - np.sqrt(1.0 - ser)
    return float(norm.isf(q) ** 2)


def select_devices(gamma: np.ndarray, gamma_th: float) -> np.ndarray:
    """Mask of devices with gamma_k >= gamma_th (eq. 22); if none passes, the best device is kept so that
    a round always carries a signal (decision)."""
    gamma = np.asarray(gamma, dtype=np.float64)
    sel = gamma >= gamma_th
    if not sel.any():
        sel[int(np.argmax(gamma))] = True
    return sel
