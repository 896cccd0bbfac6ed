"""Accountant ``rdp``: Renyi-DP composition by dp-accounting's ``RdpAccountant`` (Mironov 2017; conversion
to (eps, delta) with the improved bound of Balle et al. 2020 that dp-accounting implements).

Each round that uses data is one ``GaussianDpEvent(z = sigma_eff / sensitivity)``, or
``PoissonSampledDpEvent(q, GaussianDpEvent(z))`` when ``sampling_prob = q < 1`` (see ``events.py``); rounds
without data cost nothing. Composition is incremental (one ``compose`` per round, O(#orders) for q = 1).
Orders: dp-accounting's defaults (1.1 .. 10.9 step 0.1, 11 .. 63, 128, 256, 512, 1024) plus a few large
orders (up to 4096) so that small epsilons (down to eps ~ 0.01 at delta = 1e-5) are not limited by the
order grid; override with context ``rdp_orders``. Cost: negligible for q = 1; a Poisson-subsampled round
takes dp-accounting 0.1-0.6 s (its fractional-order series), once per round thanks to the peek cache."""
from __future__ import annotations

import contextlib
import copy
import logging

from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import Accountant
from otafl_sdr.privacy.events import dp_event, event_key

from otafl_sdr.gaussian_rounds import EXTRA_ORDERS  # noqa: E402  (one list, shared with the closed forms)
DEFAULT_ORDERS = tuple(sorted(set(float(o) for o in list(_rdp.DEFAULT_RDP_ORDERS) + list(EXTRA_ORDERS))))


@contextlib.contextmanager
def quiet_absl():
    """dp-accounting logs one absl warning per fractional order whose series does not converge for a
    subsampled Gaussian (that order is then excluded, which is safe); keep them out of run logs."""
    log = logging.getLogger("absl")
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


@ACCOUNTANTS.register("rdp", "dp-accounting RdpAccountant: Gaussian / Poisson-subsampled Gaussian per round")
class RdpAccountant(Accountant):
    """Incremental RDP composition; ``peek`` composes into a copy and ``step`` reuses that copy when the
    same round follows (check-then-record costs one composition)."""

    name = "rdp"

    def _reset(self) -> None:
        self.orders = tuple(self.context.get("rdp_orders", DEFAULT_ORDERS))
        self._acc = _rdp.RdpAccountant(orders=self.orders)
        self._version = 0                       # bumped by every round that costs something
        self._pending: tuple | None = None      # (version, event key, composed accountant)

    def _composed(self, mech: Mechanism):
        """A copy of the accountant with ``mech`` composed (cached for the following ``step``)."""
        key = event_key(mech)
        if self._pending is not None and self._pending[:2] == (self._version, key):
            return self._pending[2]
        acc = copy.deepcopy(self._acc)
        with quiet_absl():
            acc.compose(dp_event(mech))
        self._pending = (self._version, key, acc)
        return acc

    def step(self, mech: Mechanism) -> None:
        key = event_key(mech)
        super().step(mech)
        if key == ("noop",):
            return
        if self._pending is not None and self._pending[:2] == (self._version, key):
            self._acc = self._pending[2]
        else:
            with quiet_absl():
                self._acc.compose(dp_event(mech))
        self._version += 1
        self._pending = None

    def epsilon(self, delta: float | None = None) -> float:
        return float(self._acc.get_epsilon(self.delta if delta is None else delta))

    def peek(self, mech: Mechanism, delta: float | None = None) -> float:
        if event_key(mech) == ("noop",):
            return self.epsilon(delta)
        return float(self._composed(mech).get_epsilon(self.delta if delta is None else delta))

    def rdp(self):
        """(orders, rdp) arrays of the composition so far."""
        return self._acc.orders, self._acc.rdp
