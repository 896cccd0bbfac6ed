"""Zadoff-Chu sequences: constant amplitude, zero cyclic autocorrelation off the peak (3GPP TS 36.211
sec. 5.5.1.1), the preamble that gives the receiver timing, phase and gain."""
from __future__ import annotations

import math

import numpy as np


def zadoff_chu(length: int, root: int = 1) -> np.ndarray:
    """(length,) complex128 ZC sequence x[n] = exp(-j pi u n (n + c) / N), c = N mod 2.

    ``root`` u must be coprime with ``length``; a prime length makes every root 1..N-1 valid."""
    if length < 2:
        raise ValueError(f"Zadoff-Chu length must be >= 2, got {length}")
    if math.gcd(root, length) != 1:
        raise ValueError(f"Zadoff-Chu root {root} is not coprime with length {length}")
    n = np.arange(length, dtype=np.float64)
    c = length % 2
    return np.exp(-1j * np.pi * root * n * (n + c) / length)


def cyclic_autocorrelation(x: np.ndarray) -> np.ndarray:
    """r[k] = sum_n x[n] conj(x[(n + k) mod N]) / N (1 at k = 0, 0 elsewhere for a ZC sequence)."""
    X = np.fft.fft(x)
    return np.fft.ifft(np.abs(X) ** 2).conj() / len(x)
