"""Paper 004's per-round maths for LAPA (power/lapa.py): the Gaussian constant c (eq. 19), clipping
(eq. 17), per-device sensitivities (eq. 18), the PID risk estimate (eqs. 10-11), the round budget (eq. 12)
and its split (eqs. 13-16), the over-the-air receive scaling with artificial noise inside each device's
amplitude, the channel's per-device noise and the switch rule (eq. 23). Pure numpy, no state."""
from __future__ import annotations

import numpy as np

from otafl_sdr.power.base import SystemInfo


NORM_TAIL = 5.0   # ||N(0, s^2 I_d)|| <= s (sqrt(d) + 5) except with probability exp(-12.5)
BUDGETS = ("lapa", "arb", "uniform", "none")
WEIGHTS = ("reliable", "fedavg", "angle")


def gauss_c(delta: float) -> float:
    """c = sqrt(2 ln(1.25/delta)) of the classic Gaussian mechanism (sec. III-B)."""
    return float(np.sqrt(2.0 * np.log(1.25 / delta)))


def clip_rows(x: np.ndarray, C: float) -> np.ndarray:
    """g <- g / max(1, ||g||/C) per row (eq. 17)."""
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(1.0, n / C)


def sensitivities(info: SystemInfo, C: float) -> np.ndarray:
    """(K,) Delta s_k after LAPA's clip to C (eq. 17; a projection, so it only shrinks differences):
    min(b_k, 2C) for a replacement with b_k of privacy/sensitivity.py, C to remove a client, and the
    paper's eq. (18) 2C/|D_k| only under privacy.unit = 'sample_paper' (its premise, not enforced)."""
    if info.unit == "client":
        return np.full(info.clients, float(C))
    if info.unit == "sample_paper":
        return 2.0 * C / np.asarray(info.sizes, dtype=np.float64)
    return np.minimum(info.payload_bound(), 2.0 * C)


def pid_error(history, m: int, kp: float, ks: float, rng: np.random.Generator,
              noise_var=None, cap: float = np.inf) -> float:
    """e^[t] of eqs. (10)-(11) on the stored aggregates (oldest first); 0 with fewer than two.
    noise_var (optional, per stored aggregate): per-coordinate noise variance v_i the BS planned; then
    E = min(sqrt(max(||g_a - g_b||^2 - d (v_a + v_b), 0)), cap), the denoised change ('denoised' error;
    cap = 2C, the largest change of two clean aggregates of norm <= C)."""
    n = len(history)
    if n < 2:
        return 0.0
    lo = max(0, n - 1 - m)
    earlier = np.arange(lo, n - 1)
    k = min(m - 1, len(earlier))
    picks = np.sort(rng.choice(earlier, size=k, replace=False)) if k > 0 else earlier[-1:]
    idx = np.concatenate([picks, [n - 1]])
    def change(a: int, b: int) -> float:
        sq = float(np.sum((history[a] - history[b]) ** 2))
        if noise_var is not None:
            sq = max(sq - len(history[a]) * (noise_var[a] + noise_var[b]), 0.0)
        return float(min(np.sqrt(sq), cap))
    E = [change(idx[s], idx[s - 1]) for s in range(1, len(idx))]
    return float(kp * E[-1] + ks * np.mean(E))


def round_budget(e: float, eps_total: float, spent: float, T: int, t: int) -> float:
    """b_t = exp(-e) (eps^T - eps_c) / (T - t + 1)  (eq. 12); 0 once the pool is empty or t > T."""
    left = max(eps_total - spent, 0.0)
    return float(np.exp(-e) * left / max(T - t + 1, 1))


def split_budget(b: float, f: np.ndarray) -> np.ndarray:
    """eps_k = f_k / sum_j f_j * b  (eq. 16)."""
    f = np.asarray(f, dtype=np.float64)
    return b * f / f.sum()


def angles(g: np.ndarray, local: np.ndarray) -> np.ndarray:
    """theta_k = arccos(<g, g_k>/(||g|| ||g_k||))  (eq. 13); pi/2 when a norm is zero."""
    gn = np.linalg.norm(g)
    ln = np.linalg.norm(local, axis=1)
    cos = np.divide(local @ g, gn * ln, out=np.zeros(len(local)), where=(gn * ln) > 0)
    return np.arccos(np.clip(cos, -1.0, 1.0))


def amplitude_bound(C: float, sigma: np.ndarray, dim: int) -> np.ndarray:
    """Data-independent bound on ||u_k + eta_k||: C + sigma_k (sqrt(d) + 5)."""
    return C + np.asarray(sigma) * (np.sqrt(dim) + NORM_TAIL)


def ota_alpha_u(habs: np.ndarray, amp: np.ndarray, G: np.ndarray, bound: np.ndarray) -> float:
    """Largest alpha_u with |alpha_k| = alpha_u G_k/|h_k| and |alpha_k| bound_k <= amp_k for all G_k > 0."""
    on = G > 0
    return float(np.min(habs[on] * amp[on] / (G[on] * bound[on])))


def channel_sigma(sigma_c2: float, alpha_u: float, G: np.ndarray) -> np.ndarray:
    """Per-device channel-noise std in payload units: sigma_c / (alpha_u G_k) (the paper's sigma_n0/(p_k||h_k||))."""
    with np.errstate(divide="ignore"):
        return np.where(G > 0, np.sqrt(sigma_c2) / (alpha_u * np.where(G > 0, G, 1.0)), np.inf)


def switch_ok(sig_ch: np.ndarray, sig_req: np.ndarray, rule: str) -> bool:
    """Dynamic noise control (eq. 23): does channel noise alone meet the required noise?"""
    if rule == "sum":
        return bool(np.sum(sig_ch) >= np.sum(sig_req))
    return bool(np.all(sig_ch >= sig_req))
