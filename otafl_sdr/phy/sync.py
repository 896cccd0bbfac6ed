"""Receiver synchronisation on the common reference: preamble detection and timing by correlation,
carrier-frequency offset from the preamble's two halves, fractional timing, and phase tracking over the
pilots with a two-state (phase, frequency) Kalman filter and Rauch-Tung-Striebel smoother.

Only what is common to the superposition can be corrected here (the receiver's own timing, CFO and
phase noise); per-client offsets must be pre-compensated at the clients (see DESIGN, "Physics")."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal

DETECT_SCORE = 25.0        # normalised correlation x preamble length: ~ -ln(false alarm per lag)
DETECT_MIN_RHO = 0.05      # and at least this normalised correlation (|<r,t>|^2 / (|r|^2 |t|^2))


@dataclass
class Detection:
    lag: int               # sample where the template starts in the searched samples
    rho: float             # normalised correlation at the peak, in [0, 1]
    corr: complex          # <r, t> at the peak
    found: bool


def detect(samples: np.ndarray, template: np.ndarray, n_lags: int, preamble_len: int) -> Detection:
    """Correlate ``samples[l : l + len(template)]`` with the template for l = 0..n_lags-1; the peak of
    the normalised correlation rho is the timing, significant when rho * preamble_len >= DETECT_SCORE (under noise alone
    rho * N_p is ~ Exp(1) per lag, so this keeps false alarms ~ e^-25 per lag)."""
    Lt = len(template)
    region = samples[: n_lags + Lt - 1]
    corr = signal.correlate(region, template, mode="valid", method="fft" if n_lags > 64 else "direct")
    p = np.abs(region) ** 2
    cs = np.concatenate([[0.0], np.cumsum(p)])
    energy = cs[Lt:Lt + n_lags] - cs[:n_lags]
    et = float(np.sum(np.abs(template) ** 2))
    den = et * energy
    rho_all = np.abs(corr) ** 2 / np.where(den > 0, den, np.inf)
    lag = int(np.argmax(rho_all))      # normalised: a strong (jammed) payload next to the preamble
    rho = float(rho_all[lag])          # has large |corr| but small rho
    found = rho * preamble_len >= DETECT_SCORE and rho >= DETECT_MIN_RHO
    return Detection(lag=lag, rho=rho, corr=complex(corr[lag]), found=found)


def repeat_cfo(samples: np.ndarray, start: int, copy_template: np.ndarray, period: int) -> float:
    """CFO in cycles/sample from the phase advance between two identical preamble copies ``period``
    samples apart (Schmidl-Cox; independent of a fractional timing error; |f| < 1 / (2 period))."""
    Lc = len(copy_template)
    c1 = np.vdot(copy_template, samples[start:start + Lc])
    c2 = np.vdot(copy_template, samples[start + period:start + period + Lc])
    return float(np.angle(c2 * np.conj(c1)) / (2 * np.pi * period))


def refine_fraction(segment_fn, lo: float = -1.0, hi: float = 1.0, iters: int = 24) -> float:
    """Golden-section maximiser of a unimodal score on [lo, hi] (fractional timing in samples)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = segment_fn(x1), segment_fn(x2)
    for _ in range(iters):
        if f1 < f2:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = segment_fn(x2)
        else:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = segment_fn(x1)
    return 0.5 * (a + b)


def track_phase(t: np.ndarray, meas: np.ndarray, r_var: np.ndarray, q_theta: float, q_omega: float,
                omega_var0: float) -> tuple[np.ndarray, np.ndarray]:
    """Smoothed phase and frequency at the measurement times.

    State (theta, omega) in rad and rad/symbol: theta_{j+1} = theta_j + omega_j D + w, random-walk phase
    noise of variance q_theta per symbol and frequency drift q_omega per symbol. Measurement j is the
    unit-ish phasor meas_j ~ exp(j theta_j) with phase variance r_var_j; innovations are wrapped angles,
    the state is unwrapped. t: (J,) symbol indices, increasing. Returns (theta (J,), omega (J,))."""
    J = len(t)
    xf = np.zeros((J, 2))
    Pf = np.zeros((J, 3))            # P00, P01, P11
    Pp = np.zeros((J, 3))
    xp = np.zeros((J, 2))
    th, om = float(np.angle(meas[0])), 0.0
    p00, p01, p11 = float(r_var[0]), 0.0, float(omega_var0)
    xf[0] = th, om
    Pf[0] = p00, p01, p11
    xp[0] = th, om
    Pp[0] = p00, p01, p11
    for j in range(1, J):
        D = float(t[j] - t[j - 1])
        # predict
        th_p, om_p = th + om * D, om
        a00 = p00 + 2 * D * p01 + D * D * p11 + q_theta * D + q_omega * D ** 3 / 3
        a01 = p01 + D * p11 + q_omega * D * D / 2
        a11 = p11 + q_omega * D
        xp[j] = th_p, om_p
        Pp[j] = a00, a01, a11
        # update with the wrapped innovation
        innov = float(np.angle(meas[j] * np.exp(-1j * th_p)))
        s = a00 + float(r_var[j])
        k0, k1 = a00 / s, a01 / s
        th, om = th_p + k0 * innov, om_p + k1 * innov
        p00, p01, p11 = a00 - k0 * a00, a01 - k0 * a01, a11 - k1 * a01
        xf[j] = th, om
        Pf[j] = p00, p01, p11
    xs = xf.copy()
    for j in range(J - 2, -1, -1):   # Rauch-Tung-Striebel
        D = float(t[j + 1] - t[j])
        f00, f01, f11 = Pf[j]
        # P_f F^T
        b00, b01 = f00 + D * f01, f01
        b10, b11 = f01 + D * f11, f11
        a00, a01, a11 = Pp[j + 1]
        det = a00 * a11 - a01 * a01
        if det <= 0:
            continue
        i00, i01, i11 = a11 / det, -a01 / det, a00 / det
        c00, c01 = b00 * i00 + b01 * i01, b00 * i01 + b01 * i11
        c10, c11 = b10 * i00 + b11 * i01, b10 * i01 + b11 * i11
        d0, d1 = xs[j + 1, 0] - xp[j + 1, 0], xs[j + 1, 1] - xp[j + 1, 1]
        xs[j, 0] = xf[j, 0] + c00 * d0 + c01 * d1
        xs[j, 1] = xf[j, 1] + c10 * d0 + c11 * d1
    return xs[:, 0], xs[:, 1]
