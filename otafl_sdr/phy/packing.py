"""Analog packing: d reals onto ceil(d/2) complex channel uses, I and Q both carrying values.

Paper 000 eq. (10): client i sends x_i = alpha_i s(u_i) where s() maps the d-dimensional update onto the
channel uses; two reals per complex use is the air efficiency the testbed promises (issue 3). The map is
exact (a reshape, no quantisation): unpack(pack(x), d) == x bit for bit."""
from __future__ import annotations

import numpy as np


def pack_reals(x: np.ndarray) -> np.ndarray:
    """(..., d) reals -> (..., ceil(d/2)) complex: pairs (x[2k], x[2k+1]) become I + jQ; an odd d pads
    the last Q with 0."""
    x = np.asarray(x)
    d = x.shape[-1]
    if d % 2:
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1)
    return x[..., 0::2] + 1j * x[..., 1::2]


def unpack_reals(s: np.ndarray, d: int) -> np.ndarray:
    """(..., n) complex -> (..., d) float64 with d <= 2n: the inverse of :func:`pack_reals`."""
    s = np.asarray(s)
    if d > 2 * s.shape[-1]:
        raise ValueError(f"cannot unpack {d} reals from {s.shape[-1]} complex symbols")
    out = np.empty(s.shape[:-1] + (2 * s.shape[-1],), dtype=np.float64)
    out[..., 0::2] = s.real
    out[..., 1::2] = s.imag
    return out[..., :d]


def symbols_for(d: int) -> int:
    """Complex channel uses needed for d reals: ceil(d/2)."""
    return (int(d) + 1) // 2
