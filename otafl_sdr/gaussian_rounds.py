"""Closed forms for T identical full-participation Gaussian rounds (noise multiplier z = sigma / Delta),
with no dp-accounting import: the fast path of `otafl-sdr account` (importing dp-accounting costs ~0.7 s,
more than the whole command may take). tests/privacy/test_gaussian_rounds.py checks every figure here against
dp-accounting itself.

* ``paper``: paper 000, Theorems 1/3: eps = 2 sqrt(S log(1/delta)) + S, S = T / (2 z^2).
* ``pld``: the exact curve of the composed Gaussian, mu = sqrt(T) / z (Balle & Wang 2018, Thm. 8; Dong et
  al. 2022, Cor. 2.13): delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), solved for eps.
* ``rdp``: RDP of the Gaussian, T alpha / (2 z^2) (Mironov 2017), converted as dp-accounting's
  ``compute_epsilon`` does (Canonne, Kamath & Steinke 2020, Prop. 12), on the ledger's order grid."""
from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr

# dp-accounting's DEFAULT_RDP_ORDERS plus the ledger's extra orders (privacy/rdp.py; a test checks both)
DP_ACCOUNTING_ORDERS = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024])
EXTRA_ORDERS = (20.5, 48, 80, 96, 160, 192, 320, 384, 768, 1536, 2048, 4096)
ORDERS = tuple(sorted(set(float(o) for o in DP_ACCOUNTING_ORDERS + EXTRA_ORDERS)))
NAMES = ("paper", "rdp", "pld")
CLOSED_FORMS = ("paper",)       # paper 000's closed form: flagged where it falls below the exact value


def paper_epsilon(S: float, delta: float) -> float:
    """eps = 2 sqrt(S log(1/delta)) + S  (Theorems 1 / 3 of paper 000)."""
    if math.isinf(S):
        return math.inf
    return 2.0 * math.sqrt(S * math.log(1.0 / delta)) + S


def _log_delta_gaussian(eps: float, mu: float) -> float:
    la = log_ndtr(-eps / mu + mu / 2)
    lb = log_ndtr(-eps / mu - mu / 2)
    r = eps + lb - la
    return float(la + math.log1p(-math.exp(min(r, 0.0)))) if r < 0 else -math.inf


def gaussian_epsilon(noise_multiplier: float, delta: float) -> float:
    """Exact epsilon of one Gaussian mechanism with noise multiplier z (mu = 1/z) at ``delta``."""
    mu = 1.0 / noise_multiplier
    log_d = math.log(delta)
    if _log_delta_gaussian(0.0, mu) <= log_d:
        return 0.0
    hi = max(1.0, mu * mu)
    while _log_delta_gaussian(hi, mu) > log_d:
        hi *= 2.0
    return float(brentq(lambda e: _log_delta_gaussian(e, mu) - log_d, 0.0, hi, xtol=1e-12, rtol=1e-12))


def rdp_epsilon(rdp_per_order, delta: float, orders=ORDERS) -> float:
    """(eps, delta) from an RDP curve, exactly as dp-accounting's ``compute_epsilon``."""
    best = math.inf
    for a, r in zip(orders, rdp_per_order):
        if r < 0 or delta ** 2 + math.expm1(-r) > 0:
            e = 0.0
        elif a > 1.01:
            e = r + math.log1p(-1 / a) - math.log(delta * a) / (a - 1)
        else:
            e = math.inf
        best = min(best, e)
    return max(0.0, best)


def epsilon(name: str, noise_multiplier: float, rounds: int, delta: float) -> float:
    """Epsilon of ``rounds`` identical full-participation Gaussian rounds by ``name`` (one of NAMES)."""
    z, T = float(noise_multiplier), int(rounds)
    if name == "paper":
        return paper_epsilon(T / (2.0 * z * z), delta)
    if name == "pld":
        return gaussian_epsilon(z / math.sqrt(T), delta)
    if name == "rdp":
        return rdp_epsilon([T * a / (2.0 * z * z) for a in ORDERS], delta)
    raise ValueError(f"no closed form for accountant {name!r}")
