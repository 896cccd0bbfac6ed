"""Block flat fading: one complex gain per link per round (paper 000 sec. V: h ~ CN(0, 1), independent
across rounds)."""
from __future__ import annotations

import numpy as np


class BlockFading:
    """Draws per-round channel gains.

    Parameters: kind 'rayleigh' (CN(0,1)) or 'awgn' (h = 1).
    Call: ``(rng, n) -> (n,) complex128``."""

    def __init__(self, kind: str = "rayleigh"):
        if kind not in ("rayleigh", "awgn"):
            raise ValueError(f"unknown fading '{kind}'")
        self.kind = kind

    def __call__(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "awgn":
            return np.ones(n, dtype=np.complex128)
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)) / np.sqrt(2.0)


def rayleigh_amplitude_quantile(q: float) -> float:
    """|h| quantile for h ~ CN(0,1): |h|^2 ~ Exp(1), so |h|_q = sqrt(-ln(1-q))."""
    return float(np.sqrt(-np.log1p(-q)))
