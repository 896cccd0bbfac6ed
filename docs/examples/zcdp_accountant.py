"""docs/extending.md's example accountant, a whole plugin in one file: Gaussian rounds composed as zero-concentrated
DP (Bun & Steinke 2016, Prop. 1.6: a Gaussian round of sensitivity Delta and noise sigma is rho-zCDP with
rho = Delta^2 / (2 sigma^2); rho adds up over rounds; Prop. 1.3: rho-zCDP gives (rho + 2 sqrt(rho ln(1/delta)),
delta)-DP). It covers full-participation rounds only: a subsampled round voids it (``applies``; it then reports
None). tests/test_extending_doc.py imports this file and checks it against dp-accounting."""
import math

from otafl_sdr.privacy.base import CoveredAccountant, costs_nothing
from otafl_sdr.registry import ACCOUNTANTS


@ACCOUNTANTS.register("zcdp", "example (docs/extending.md): Gaussian rounds as zCDP, rho = sum Delta^2 / (2 sigma^2)")
class ZcdpAccountant(CoveredAccountant):
    name = "zcdp"

    def _reset(self) -> None:
        super()._reset()
        self.rho = 0.0

    def applies(self, mech) -> bool:
        return costs_nothing(mech) or mech.sampling_prob == 1

    def add(self, mech) -> None:
        self.rho += math.inf if mech.sigma_eff == 0 else mech.sensitivity ** 2 / (2 * mech.sigma_eff ** 2)

    def epsilon(self, delta: float | None = None) -> float | None:
        if self.uncovered_round is not None:
            return None
        d = self.delta if delta is None else delta
        return self.rho + 2 * math.sqrt(self.rho * math.log(1 / d))
