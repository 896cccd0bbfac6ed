"""Accountant ``lapa_sum``: paper 004's own accounting, the per-device budgets summed over rounds.

Paper 004 calibrates each device's noise with the classic Gaussian mechanism, sigma_k >= c Delta s_k / eps_k,
c = sqrt(2 ln(1.25/delta_r)), eps_k < 1 (sec. III-B), and adds the budgets up over rounds (eq. 12's
sum eps^[t] <= eps^T: basic sequential composition). For device k after the rounds so far:
    eps_k = sum_t eps_k^[t]   at   delta = sum_t delta_r
The LAPA policies put eps_k^[t] (list over devices) and delta_r into ``Mechanism.extra``; this accountant
reports max_k eps_k (the worst device: each device's data is a different neighbouring relation).
``epsilon(delta)`` is None when ``delta`` is below the delta spent (the sum is no guarantee there) or when
a round carried no per-device budgets (not a LAPA round; the paper's accounting does not cover it).
It reads only the budgets, not sigma_eff: the ledger's ``rdp``/``pld`` report the same rounds from the
noise actually in the aggregate, which is where the two analyses differ (local vs aggregate release,
basic vs RDP composition)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import CoveredAccountant, costs_nothing

DELTA_TOL = 1e-9


@ACCOUNTANTS.register("lapa_sum", "paper 004: per-device budgets eps_k^[t] summed over rounds (classic Gaussian "
                                  "bound + basic composition), worst device")
class LapaSumAccountant(CoveredAccountant):
    name = "lapa_sum"
    closed_form = True

    def _reset(self) -> None:
        super()._reset()
        self.totals: np.ndarray | None = None        # (K,) sum_t eps_k^[t] (allocated: the paper's figure)
        self.effective: np.ndarray | None = None     # (K,) sum_t of the classic-bound eps the actual noise gives
        self.delta_spent = 0.0
        self.max_round_eps = 0.0

    def applies(self, mech: Mechanism) -> bool:
        return costs_nothing(mech) or "eps_k" in (mech.extra or {})

    def add(self, mech: Mechanism) -> None:
        eps = np.asarray(mech.extra["eps_k"], dtype=np.float64)
        eff = np.asarray(mech.extra.get("eps_k_eff", eps), dtype=np.float64)
        if self.totals is None:
            self.totals, self.effective = np.zeros_like(eps), np.zeros_like(eps)
        self.totals = self.totals + eps
        self.effective = self.effective + eff
        self.delta_spent += float(mech.extra.get("delta_round", 0.0))
        self.max_round_eps = max(self.max_round_eps, float(np.max(eps)) if eps.size else 0.0)

    def epsilon(self, delta: float | None = None) -> float | None:
        delta = self.delta if delta is None else delta
        if self.uncovered_round is not None or self.delta_spent > delta * (1 + DELTA_TOL):
            return None
        return 0.0 if self.totals is None else float(np.max(self.totals))

    # -- extra reports ---------------------------------------------------------------------------
    def device_totals(self) -> np.ndarray:
        """(K,) sum_t eps_k^[t] per device (the allocated budgets)."""
        return np.zeros(0) if self.totals is None else self.totals.copy()

    def system_total(self) -> float:
        """sum_t sum_k eps_k^[t]: the paper's eps^T consumption (its budget is split over devices, eq. 16)."""
        return 0.0 if self.totals is None else float(np.sum(self.totals))

    @property
    def classic_bound_valid(self) -> bool:
        """The classic Gaussian bound c = sqrt(2 ln(1.25/delta)) holds only for eps < 1 per round."""
        return self.max_round_eps < 1.0 + 1e-12
