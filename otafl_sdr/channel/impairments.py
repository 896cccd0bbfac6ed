"""Front-end impairments of one radio as numpy models on complex baseband samples (the reference that the
GNU Radio versions in radio/loopback_impairments.py are checked against). Not yet applied by the airs:
issue 26 item 1 wires multipath first; these are the models a per-radio impairment stage uses.

- IQ imbalance, gr-channels ``iqbal_gen`` convention (gain g = 10^(mag_db/20), phase phi):
  transmitter  y = g e^{j phi} I + j Q,                 receiver  y = g (cos phi I + sin phi Q) + j Q;
  both are y = mu x + nu x* with |mu|^2 / |nu|^2 = |1 + g e^{j phi}|^2 / |1 - g e^{j phi}|^2 the image
  rejection ratio (``image_rejection_db``).
- DC offset: y = x + c (LO leakage at the transmitter, self-mixing at the receiver).
- PA compression, Rapp's model (AM/AM only): y = x / (1 + (|x| / A_sat)^{2p})^{1/(2p)}; the output
  saturates at A_sat, smoothness p (p -> inf: an ideal limiter).
- Phase noise: a Wiener process, theta[n] = sum_{m <= n} w_m, w_m ~ N(0, s^2) (s rad per sqrt(sample);
  a free-running oscillator's Lorentzian spectrum, 3 dB linewidth s^2 / (2 pi) cycles/sample);
  y = x e^{j theta}.
- Carrier frequency offset: y[n] = x[n] e^{j 2 pi f n} (f cycles/sample)."""
from __future__ import annotations

import numpy as np


def iq_imbalance(x: np.ndarray, mag_db: float, phase_deg: float, receiver: bool = False) -> np.ndarray:
    """IQ imbalance as gr-channels' ``iqbal_gen(mag_db, phase_deg, mode)`` (mode 1 = receiver)."""
    x = np.asarray(x, dtype=np.complex128)
    g, phi = 10 ** (mag_db / 20), np.deg2rad(phase_deg)
    i, q = x.real, x.imag
    if receiver:
        return g * (np.cos(phi) * i + np.sin(phi) * q) + 1j * q
    return g * np.cos(phi) * i + 1j * (g * np.sin(phi) * i + q)


def image_rejection_db(mag_db: float, phase_deg: float) -> float:
    """10 log10 |mu|^2 / |nu|^2 of ``iq_imbalance`` (either mode): +inf for a perfect front end."""
    z = 10 ** (mag_db / 20) * np.exp(1j * np.deg2rad(phase_deg))
    den = abs(1 - z) ** 2
    return float("inf") if den == 0 else float(10 * np.log10(abs(1 + z) ** 2 / den))


def dc_offset(x: np.ndarray, dc: complex) -> np.ndarray:
    return np.asarray(x, dtype=np.complex128) + complex(dc)


def rapp(x: np.ndarray, a_sat: float, p: float) -> np.ndarray:
    """Rapp's PA model (module doc); a_sat > 0, p > 0."""
    x = np.asarray(x, dtype=np.complex128)
    return x / (1 + (np.abs(x) / a_sat) ** (2 * p)) ** (1 / (2 * p))


def wiener_phase(rng: np.random.Generator, n: int, std: float) -> np.ndarray:
    """(n,) phase-noise samples theta[n] (module doc)."""
    return np.cumsum(rng.normal(0.0, std, n))


def phase_noise(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.complex128) * np.exp(1j * np.asarray(theta))


def cfo(x: np.ndarray, f: float) -> np.ndarray:
    x = np.asarray(x, dtype=np.complex128)
    return x * np.exp(2j * np.pi * f * np.arange(len(x)))
