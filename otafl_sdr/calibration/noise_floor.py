"""The noise floor sigma_c2 from a silent capture (every transmitter off).

sigma_c2 is the noise per real coordinate as the demodulator sees it: after the (unit-energy) matched
filter, at the symbol rate (channel noise z ~ CN(0, 2 sigma_c2) per symbol, eq. 10 of paper 000). The
capture's mean (a receiver's DC offset / LO leakage) is removed first and reported. Matched-filter
outputs one symbol apart are uncorrelated for white noise (the RRC pair is Nyquist), so the estimate
mean(|y_k|^2) / 2 over n symbols has the standard error sigma_c2 / sqrt(n). The unfiltered per-sample
figure is reported next to it: the two agree for white noise; a gap shows a coloured noise floor."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass
class NoiseFloor:
    sigma_c2: float           # per real coordinate, symbol level (after the matched filter)
    sigma_c2_std: float       # its standard error
    sigma_c2_raw: float       # per real coordinate per sample, no filter
    dc: complex               # the capture's mean, removed before the estimate
    symbols: int              # matched-filter outputs used


def estimate_noise(samples: np.ndarray, taps: np.ndarray, sps: int) -> NoiseFloor:
    """Noise floor of a silent capture (``taps``: the modem's unit-energy RRC taps)."""
    x = np.asarray(samples).astype(np.complex128, copy=False)
    if len(x) < 4 * len(taps):
        raise ValueError(f"a silent capture of {len(x)} samples is too short for the noise floor")
    dc = complex(np.mean(x))
    x = x - dc
    y = np.convolve(x, np.asarray(taps, dtype=np.float64), mode="valid")[::int(sps)]
    s = float(np.mean(np.abs(y) ** 2)) / 2
    return NoiseFloor(sigma_c2=s, sigma_c2_std=s / math.sqrt(len(y)),
                      sigma_c2_raw=float(np.mean(np.abs(x) ** 2)) / 2, dc=dc, symbols=len(y))
