"""Accountant ``cdpb``: the Renyi-DP bound of paper 001 (Kim, Seo, Choi), Lemma 3 and Theorem 1.

One round is a Gaussian mechanism (Remark 2: (alpha, alpha Delta^2 / (2 sigma^2))-RDP) seen by a client
that takes part with probability p. Lemma 3 (Theorem 9 of Wang, Balle & Kasiviswanathan, AISTATS 2019,
the paper's missing ref. [23]) amplifies it, and eqs. (35)-(38) loosen that to the per-round bound

    eps_round(alpha) = [log 2 + alpha log(p E_(alpha-1) + 1)] / (alpha - 1),   E_x = exp(x r),   (37)

composed over the rounds by Remark 1 (Theorem 1: eps = tau eps_round for tau equal rounds).

What ``r`` is (open question 4 of the extract, decided here): the paper writes r = W^2 / sigma_q^2 with
sigma_q^2 the TOTAL received noise power and the signal's sqrt(rho) scaling left out. Remark 2 needs the
noise per coordinate and the sensitivity in the same units as that noise, so we use
    r = Delta^2 / (2 sigma^2) = 1 / (2 z^2),   z = Mechanism.sigma_eff / Mechanism.sensitivity,
i.e. Delta^2 = (the paper's 2 W^2 -> our sensitivity^2), both in units of the normalised aggregate
(the server's 1/alpha_u cancels in z). ``paper_literal_round`` keeps the printed form for comparison.
p is ``Mechanism.sampling_prob``. Theorem 1 is stated for integer alpha >= 2 (Lemma 3), so the orders
are integers. Conversion to (eps, delta): the paper gives none (open question 12); we use the improved
RDP conversion of Balle et al. 2020 (Prop. 12 of arXiv:2004.00010) via dp-accounting's
``compute_epsilon``, minimised over the orders. Any Gaussian record can be accounted (for q = 1,
eq. (37) still upper-bounds the plain Gaussian alpha r), so ``applies`` is always True; a noiseless data
round gives eps = inf."""
from __future__ import annotations

import math

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant as _rdp
from scipy.special import gammaln

from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.base import Accountant, costs_nothing

DEFAULT_ORDERS = tuple(range(2, 65)) + (80, 96, 128, 192, 256, 384, 512, 1024)
DEFAULT_REPORT_ORDER = 2


def _log_comb(n: int, k: int) -> float:
    return float(gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1))


def theorem1_round(alpha, p: float, r: float):
    """Per-round RDP of eq. (37): (log 2 + alpha log(p e^{(alpha-1) r} + 1)) / (alpha - 1).

    alpha: order(s) >= 2 (scalar or array); p: participation probability; r = Delta^2/(2 sigma^2)."""
    if np.ndim(alpha) == 0 and 0 < p <= 1 and 0 <= r < math.inf and alpha >= 2:   # scalar fast path
        x = math.log(p) + (alpha - 1) * r
        lae = x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))
        return (math.log(2) + alpha * lae) / (alpha - 1)
    a = np.asarray(alpha, dtype=float)
    if np.any(a < 2):
        raise ValueError(f"Theorem 1 of paper 001 needs alpha >= 2, got {alpha}")
    if not 0 <= p <= 1 or r < 0:
        raise ValueError(f"need 0 <= p <= 1 and r >= 0, got p={p}, r={r}")
    if math.isinf(r):
        out = np.full_like(a, math.inf) if p > 0 else np.log(2) / (a - 1)
    else:
        lp = math.log(p) if p > 0 else -math.inf
        out = (math.log(2) + a * np.logaddexp(lp + (a - 1) * r, 0.0)) / (a - 1)
    return float(out) if np.ndim(alpha) == 0 else out


def theorem1(alpha, p: float, r: float, rounds: int):
    """Theorem 1: tau rounds of the same mechanism, eps = tau eps_round (composition, Remark 1)."""
    return rounds * theorem1_round(alpha, p, r)


def lemma3_round(alpha: int, p: float, r: float) -> float:
    """Eq. (34) (Lemma 3 = Theorem 9 of Wang-Balle-Kasiviswanathan with base eps(j) = j r):
    1/(alpha-1) log(1 + p^2 C(alpha,2) min{4(E_2 - 1), 2 E_2} + sum_{j=3}^alpha p^j C(alpha,j) 2 E_{(j-1)j})."""
    if int(alpha) != alpha or alpha < 2:
        raise ValueError(f"Lemma 3 needs an integer alpha >= 2, got {alpha}")
    alpha = int(alpha)
    if p == 0:
        return 0.0
    lp = math.log(p)
    # log min{4(E2 - 1), 2 E2}
    log_m2 = min(math.log(4) + (2 * r + math.log(-math.expm1(-2 * r)) if r > 0 else -math.inf),
                 math.log(2) + 2 * r)
    terms = [0.0, 2 * lp + _log_comb(alpha, 2) + log_m2]
    for j in range(3, alpha + 1):
        terms.append(j * lp + _log_comb(alpha, j) + math.log(2) + (j - 1) * j * r)
    return float(np.logaddexp.reduce(np.asarray(terms)) / (alpha - 1))


def paper_literal_round(alpha, p: float, W: float, sigma_q2_total: float):
    """Eq. (37) with the paper's printed r = W^2 / sigma_q^2 (total received noise power, no rho):
    kept only to compare with the paper's numbers (see the module docstring)."""
    return theorem1_round(alpha, p, W * W / sigma_q2_total)


def ratio(mech: Mechanism) -> float:
    """r = sensitivity^2 / (2 sigma_eff^2) of one record (inf for a noiseless data round)."""
    if mech.sigma_eff == 0:
        return math.inf
    return mech.sensitivity ** 2 / (2.0 * mech.sigma_eff ** 2)


def rdp_to_epsilon(orders, rdp, delta: float) -> tuple[float, float]:
    """(eps, best order) from an RDP curve (Balle et al. 2020 conversion, dp-accounting)."""
    rdp = np.asarray(rdp, dtype=float)
    if np.any(np.isinf(rdp)) and np.all(np.isinf(rdp)):
        return math.inf, float(orders[0])
    eps, order = _rdp.compute_epsilon(list(orders), list(rdp), delta)
    return float(eps), float(order)


@ACCOUNTANTS.register("cdpb", "paper 001 Theorem 1: per-round RDP of Lemma 3/eq. (37) with participation p, composed; "
                              "(eps, delta) by the RDP conversion")
class CdpbAccountant(Accountant):
    """Context: ``cdpb_orders`` (integer orders >= 2). ``rdp_at(order)`` gives the RDP epsilon at one order
    (the order the policy designed for is in ``Mechanism.extra['rdp_order']``; ``report_order``)."""

    name = "cdpb"
    closed_form = True

    def _reset(self) -> None:
        orders = tuple(self.context.get("cdpb_orders", DEFAULT_ORDERS))
        if any(int(o) != o or o < 2 for o in orders):
            raise ValueError(f"cdpb orders must be integers >= 2, got {orders}")
        self.orders = np.asarray(orders, dtype=float)
        self._rdp = np.zeros(len(self.orders))
        self.nonprivate = False
        self.report_order = DEFAULT_REPORT_ORDER

    def step(self, mech: Mechanism) -> None:
        super().step(mech)
        if "rdp_order" in (mech.extra or {}):
            self.report_order = int(mech.extra["rdp_order"])
        if costs_nothing(mech):
            return
        r = ratio(mech)
        if math.isinf(r):
            self.nonprivate = True
            return
        self._rdp = self._rdp + theorem1_round(self.orders, float(mech.sampling_prob), r)

    def rdp_at(self, order: int | None = None) -> float:
        """RDP epsilon of the composition at ``order`` (default: the designed order), Theorem 1."""
        order = self.report_order if order is None else int(order)
        total = 0.0
        for m in self.history:
            if costs_nothing(m):
                continue
            total += theorem1_round(order, float(m.sampling_prob), ratio(m))
        return float(total)

    def rdp(self):
        return self.orders.copy(), (np.full_like(self._rdp, math.inf) if self.nonprivate else self._rdp.copy())

    def epsilon(self, delta: float | None = None) -> float:
        delta = self.delta if delta is None else delta
        if self.nonprivate:
            return math.inf
        if not np.any(self._rdp > 0):
            return 0.0
        return rdp_to_epsilon(self.orders, self._rdp, delta)[0]
