"""Accountant ``otafd``: Theorem 2 of paper 003 (over-the-air federated distillation), and the per-round
noise multiplier that meets a target (eps, delta) over T rounds under each analysis the ledger reports.

Paper 003 calibrates per round (eq. (18) of its supplement, from Theorem 1 of Wei et al., TMC 2022)
    sigma = Delta sqrt(2 T ln(1/delta)) / eps,
i.e. T rounds of a Gaussian mechanism with noise multiplier z = sigma / Delta give
    eps = sqrt(2 ln(1/delta) T / z^2).
The accountant generalises this to rounds with different noise, as the composition of Gaussian mechanisms
does (1/z^2 adds up over rounds; Dong, Roth & Su, GDP Cor. 3.3):
    eps_otafd = sqrt(2 ln(1/delta) sum_t mu_t^2),   mu_t = sensitivity_t / sigma_eff_t,
which equals the paper's formula at constant noise. It is the leading term of the zCDP conversion
rho + 2 sqrt(rho ln(1/delta)) with rho = sum_t mu_t^2 / 2 (the ``paper`` accountant of paper 000) and is not
a valid bound in general: against the exact Gaussian epsilon (dp-accounting, ``pld``) it is conservative
for moderate privacy (total mu = 1, delta = 1e-5: 4.80 vs 4.38; mu = 0.2: 0.96 vs 0.73) and optimistic for
weak privacy (mu = 2: 9.60 vs 10.00; mu = 4: 19.2 vs 24.4). The ``rdp`` and ``pld`` figures the ledger keeps
beside it, for the same noise, are the rigorous ones. Rounds without data cost nothing; client sampling
(sampling_prob < 1) is outside the analysis (then the accountant reports None).

``required_multiplier(T, eps, delta, analysis)`` inverts each analysis: the z that T equal rounds need so
that ``analysis`` reports exactly eps (otafd and paper in closed form, pld with dp-accounting's exact
Gaussian, rdp with dp-accounting's calibration search), times (1 + margin) so that floating point never
lets the T-th round exceed the budget."""
from __future__ import annotations

import math

from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import CoveredAccountant, costs_nothing

ANALYSES = ("otafd", "paper", "rdp", "pld")
DEFAULT_MARGIN = 1e-4


def theorem2_epsilon(mu2: float, delta: float) -> float:
    """eps = sqrt(2 ln(1/delta) sum_t mu_t^2)  (eq. (18) of paper 003's supplement, solved for eps)."""
    if math.isinf(mu2):
        return math.inf
    return math.sqrt(2.0 * math.log(1.0 / delta) * mu2)


def required_multiplier(rounds: int, eps: float, delta: float, analysis: str = "otafd",
                        margin: float = DEFAULT_MARGIN) -> float:
    """Noise multiplier z* per round so that ``rounds`` equal Gaussian rounds meet (eps, delta) under
    ``analysis`` (one of ANALYSES), times (1 + margin)."""
    if rounds < 1 or not eps > 0 or not 0 < delta < 1:
        raise ValueError(f"need rounds >= 1, eps > 0, 0 < delta < 1; got {rounds}, {eps}, {delta}")
    L = math.log(1.0 / delta)
    if analysis == "otafd":                  # sigma = Delta sqrt(2 T ln(1/delta)) / eps  (eq. 18)
        z = math.sqrt(2.0 * rounds * L) / eps
    elif analysis == "paper":                # eps = S + 2 sqrt(S L), S = T / (2 z^2)  (paper 000 Thm 1/3)
        S = (math.sqrt(L + eps) - math.sqrt(L)) ** 2
        z = math.sqrt(rounds / (2.0 * S))
    elif analysis == "pld":                  # T Gaussian rounds = one Gaussian with z / sqrt(T) (exact)
        from dp_accounting import gaussian_mechanism
        z = math.sqrt(rounds) * gaussian_mechanism.get_sigma_gaussian(eps, delta)
    elif analysis == "rdp":
        import dp_accounting
        from dp_accounting import mechanism_calibration
        from dp_accounting.rdp import rdp_privacy_accountant
        from otafl_sdr.privacy.rdp import DEFAULT_ORDERS, quiet_absl
        with quiet_absl():
            z = mechanism_calibration.calibrate_dp_mechanism(
                lambda: rdp_privacy_accountant.RdpAccountant(orders=DEFAULT_ORDERS),
                lambda v: dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(v), rounds),
                eps, delta, mechanism_calibration.LowerEndpointAndGuess(1e-3, 1.0), tol=1e-9)
    else:
        raise ValueError(f"unknown analysis {analysis!r}; allowed: {', '.join(ANALYSES)}")
    return float(z) * (1.0 + margin)


@ACCOUNTANTS.register("otafd", "paper 003 Theorem 2 / eq. (18): eps = sqrt(2 ln(1/delta) sum_t (Delta_t/sigma_t)^2)")
class OtafdAccountant(CoveredAccountant):
    """Closed form of paper 003, O(1) per round: keeps mu2 = sum_t (sensitivity_t / sigma_eff_t)^2."""

    name = "otafd"
    closed_form = True

    def _reset(self) -> None:
        super()._reset()
        self.mu2 = 0.0

    def applies(self, mech: Mechanism) -> bool:
        return costs_nothing(mech) or mech.sampling_prob == 1

    def add(self, mech: Mechanism) -> None:
        self.mu2 += math.inf if mech.sigma_eff == 0 else (mech.sensitivity / mech.sigma_eff) ** 2

    def epsilon(self, delta: float | None = None) -> float | None:
        if self.uncovered_round is not None:
            return None
        return theorem2_epsilon(self.mu2, self.delta if delta is None else delta)
