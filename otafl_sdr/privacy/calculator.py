"""The privacy calculator behind `otafl-sdr account`: T identical rounds of a (Poisson-subsampled) Gaussian
mechanism, composed in one step per accountant rather than round by round.

* ``paper`` (paper 000, Theorems 1/3): S = T Delta^2 / (2 sigma^2), closed form (q = 1 only).
* ``rdp``: dp-accounting's RdpAccountant on ``SelfComposedDpEvent(event, T)`` (RDP of T identical rounds
  is T times one round's), with the ledger's order grid.
* ``pld``: q = 1, the exact curve of the merged Gaussian, noise multiplier z / sqrt(T) (``pld.gaussian_epsilon``);
  q < 1, dp-accounting's PLDAccountant self-composing the subsampled Gaussian (log T convolutions).
* any other registered accountant: the ledger's round-by-round path (it may be slow for large T).
The same numbers as recording T rounds in a PrivacyLedger (tests compare them), in O(1) or O(log T)."""
from __future__ import annotations

import math

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant as _pld
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.paper000 import paper_epsilon
from otafl_sdr.privacy.pld import DEFAULT_INTERVAL, gaussian_epsilon
from otafl_sdr.privacy.rdp import DEFAULT_ORDERS, quiet_absl

FAST = ("paper", "rdp", "pld")


def _event(z: float, q: float) -> dp_accounting.DpEvent:
    g = dp_accounting.GaussianDpEvent(noise_multiplier=z)
    return g if q >= 1 else dp_accounting.PoissonSampledDpEvent(sampling_probability=q, event=g)


def epsilon_of_rounds(name: str, noise_multiplier: float, rounds: int, delta: float,
                      sampling: float = 1.0) -> float | None:
    """Epsilon of ``rounds`` identical rounds (noise multiplier z = sigma / sensitivity, participation q)
    by accountant ``name``; None where the accountant's analysis does not cover the mechanism."""
    z, T, q = float(noise_multiplier), int(rounds), float(sampling)
    if name == "paper":
        return None if q < 1 else paper_epsilon(T / (2.0 * z * z), delta)
    if name == "rdp":
        acc = _rdp.RdpAccountant(orders=DEFAULT_ORDERS)
        with quiet_absl():
            acc.compose(_event(z, q), T)
        return float(acc.get_epsilon(delta))
    if name == "pld":
        if q >= 1:
            return gaussian_epsilon(z / math.sqrt(T), delta)
        acc = _pld.PLDAccountant(value_discretization_interval=DEFAULT_INTERVAL)
        acc.compose(_event(z, q), T)
        return float(acc.get_epsilon(delta))
    return _by_ledger(name, z, T, delta, q)


def _by_ledger(name: str, z: float, T: int, delta: float, q: float) -> float | None:
    from otafl_sdr.config.schema import PrivacyConfig
    from otafl_sdr.privacy.ledger import PrivacyLedger
    pc = PrivacyConfig(eps=float("inf"), delta=delta, accountant=name, report=[name], enforce=False)
    ledger = PrivacyLedger(pc, None)
    for t in range(1, T + 1):
        ledger.accountants[name].step(Mechanism(round=t, sensitivity=1.0, sigma_eff=z, sampling_prob=q))
    return ledger.accountants[name].epsilon()


def noise_for_target(name: str, target_eps: float, rounds: int, delta: float, sampling: float = 1.0,
                     rel_tol: float = 1e-4) -> float | None:
    """The smallest noise multiplier whose ``rounds`` rounds spend at most ``target_eps`` (bisection on
    log z; epsilon decreases in z), as Opacus' ``get_noise_multiplier``. None if the accountant does not
    cover the mechanism."""
    def eps(z):
        return epsilon_of_rounds(name, z, rounds, delta, sampling)
    lo, hi = 1e-3, 1.0
    if eps(hi) is None:
        return None
    while eps(hi) > target_eps:
        lo, hi = hi, hi * 2.0
        if hi > 1e7:
            raise ValueError(f"no noise multiplier up to 1e7 reaches eps {target_eps:g}")
    while eps(lo) <= target_eps and lo > 1e-6:
        hi, lo = lo, lo / 2.0
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        if eps(mid) > target_eps:
            lo = mid
        else:
            hi = mid
    return hi
