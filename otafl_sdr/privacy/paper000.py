"""Accountant ``paper``: the closed form of paper 000 (Mao, Yin, Yener, Liu), Theorems 1 and 3.

Per round m that uses client data, the moments accountant of Appendix A gives the log-moment
alpha_m(lambda) = lambda (lambda + 1) Delta_m^2 / (2 sigma_m^2), with Delta_m = ``mech.sensitivity`` and
sigma_m = ``mech.sigma_eff``. Summing over rounds, S = sum_m Delta_m^2 / (2 sigma_m^2), and
  eps = 2 sqrt(S log(1/delta)) + S                                        (Theorems 1 / 3 of paper 000)
With Delta_m = 1 / (s_i^m |D|) this is the paper's (1/(2|D|^2)) sum_m 1/((s_i^m)^2 (sigma^m)^2).
Rounds without client data cost nothing (Lemma 1: even iterations of Upcycled-FL are post-processing).
The analysis does not cover client subsampling: ``applies`` is False for sampling_prob < 1, and from such
a round on the accountant reports None."""
from __future__ import annotations

import math

from otafl_sdr.gaussian_rounds import paper_epsilon  # noqa: F401  (one copy)
from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import Accountant, costs_nothing


def round_cost(sensitivity: float, sigma_eff: float) -> float:
    """Delta^2 / (2 sigma^2): the round's term of S (Appendix A of paper 000)."""
    if sensitivity == 0:
        return 0.0
    if sigma_eff == 0:
        return math.inf
    return sensitivity ** 2 / (2.0 * sigma_eff ** 2)


@ACCOUNTANTS.register("paper", "paper 000 Theorems 1/3: eps = 2 sqrt(S log(1/delta)) + S, S = sum Delta^2/(2 sigma^2)")
class PaperAccountant(Accountant):
    """Closed form of paper 000; exact bookkeeping of S, O(1) per round."""

    name = "paper"
    closed_form = True

    def _reset(self) -> None:
        self.S = 0.0
        self.uncovered_round: int | None = None    # first composed round outside the analysis

    def applies(self, mech: Mechanism) -> bool:
        return costs_nothing(mech) or mech.sampling_prob == 1

    def _cost(self, mech: Mechanism) -> float | None:
        if costs_nothing(mech):
            return 0.0
        if not self.applies(mech):
            return None
        return round_cost(mech.sensitivity, mech.sigma_eff)

    def step(self, mech: Mechanism) -> None:
        super().step(mech)
        c = self._cost(mech)
        if c is None:
            if self.uncovered_round is None:
                self.uncovered_round = mech.round
        else:
            self.S += c

    def epsilon(self, delta: float | None = None) -> float | None:
        if self.uncovered_round is not None:
            return None
        return paper_epsilon(self.S, self.delta if delta is None else delta)

    def peek(self, mech: Mechanism, delta: float | None = None) -> float | None:
        c = self._cost(mech)
        if c is None or self.uncovered_round is not None:
            return None
        return paper_epsilon(self.S + c, self.delta if delta is None else delta)
