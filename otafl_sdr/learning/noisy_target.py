"""Paper 002's Noisy-FedAvg / Noisy-FedProx calibrated to a target (privacy.calibrate = "target";
privacy/target.py for the band and the accountants).

The knob is the clients' noise std sigma (Algorithm 1: each client uploads w_{i,K,t} + n_i, n_i ~ N(0,
sigma^2 I_d)). Round t's mechanism as the ledger records it (``NoisyFedAvg.finish_plan``) is a Gaussian of
sensitivity Delta_t = 2 V max_i g_i sum_k eta_{k,t} / tau (Lemma 20; Lemma 22 for FedProx, eq. 4) and std
sigma_t(sigma) = sqrt(sigma_air,t^2 + (sigma / tau)^2 sum_i g_i^2), participation q_t from the power policy.
Delta_t, sigma_air,t, g_i and q_t do not depend on sigma and are known before round 1 (the policy is
planned on the run's seeded channels), so the run's epsilon is a decreasing function of sigma alone:

* q_t = 1: full-participation Gaussian rounds compose exactly into one Gaussian, mu^2 = sum_t (Delta_t /
  sigma_t)^2 (pld: its exact curve; rdp: the same sum of RDP curves);
* q_t < 1: dp-accounting composes PoissonSampledDpEvent(q_t, GaussianDpEvent(sigma_t / Delta_t)) (rounds
  with the same mechanism in one self-composition).

``solve_sigma`` bisects on log sigma so the planned rounds spend AIM x eps and checks the band [(1 - TOL)
eps, eps]. A target below what the air's own noise already gives (sigma = 0) cannot be met (the clients can
only add noise) and is refused. The fdp accountant (Theorem 5's last-model bound) is not used: the server
sees every round."""
from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant as _pld
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from ..errors import UserError
from ..privacy.calculator import epsilon_of_rounds
from ..privacy.pld import DEFAULT_INTERVAL
from ..privacy.rdp import DEFAULT_ORDERS, quiet_absl
from ..privacy.target import AIM, TOL


def compose(accountant: str, rounds: list[tuple[float, float]], delta: float) -> float:
    """Epsilon of the rounds [(noise multiplier z_t, participation q_t)] by ``accountant`` (inf if a round
    has z_t = 0)."""
    if not rounds:
        return 0.0
    if any(z <= 0 for z, _ in rounds):
        return math.inf
    if all(q >= 1 for _, q in rounds) or accountant not in ("pld", "rdp"):
        if any(q < 1 for _, q in rounds):
            return math.inf                                   # no subsampled path for this accountant
        mu2 = sum(1.0 / (z * z) for z, _ in rounds)
        v = epsilon_of_rounds(accountant, 1.0 / math.sqrt(mu2), 1, delta)
        return math.inf if v is None else float(v)
    groups: dict[tuple[float, float], int] = {}
    for z, q in rounds:
        key = (float(z), float(min(q, 1.0)))
        groups[key] = groups.get(key, 0) + 1
    if accountant == "pld":
        acc = _pld.PLDAccountant(value_discretization_interval=DEFAULT_INTERVAL)
    else:
        acc = _rdp.RdpAccountant(orders=DEFAULT_ORDERS)
    with quiet_absl():
        for (z, q), n in groups.items():
            ev = dp_accounting.GaussianDpEvent(noise_multiplier=z)
            acc.compose(ev if q >= 1 else dp_accounting.PoissonSampledDpEvent(sampling_probability=q, event=ev), n)
        return float(acc.get_epsilon(delta))


@dataclass
class PlannedRound:
    """The sigma-free parts of a planned round's mechanism (ledger units): ``sens`` Delta_t, ``sigma_air``,
    ``gain_sq`` sum_i g_i^2 of the sending clients, ``q`` participation, ``tau`` the payload scale;
    ``finish`` maps (sensitivity, sigma_eff) to what the ledger records (CSI margins), identity if None."""

    sens: float
    sigma_air: float
    gain_sq: float
    q: float
    tau: float
    finish: object = None

    def z(self, sigma: float) -> float:
        s = math.sqrt(self.sigma_air ** 2 + (sigma / self.tau) ** 2 * self.gain_sq)
        sens = self.sens
        if self.finish is not None:
            sens, s = self.finish(sens, s)
        return math.inf if sens <= 0 else s / sens


def planned_epsilon(accountant: str, planned: list[PlannedRound], sigma: float, delta: float) -> float:
    return compose(accountant, [(p.z(sigma), p.q) for p in planned if p.sens > 0], delta)


@dataclass
class NoisyCalibration:
    sigma: float
    eps_planned: float
    noise_multiplier: float      # the smallest z_t of the planned rounds

    def summary(self, eps: float, delta: float, accountant: str, rounds: int, q: float) -> dict:
        return {"calibration": f"target ({accountant})", "eps_planned": self.eps_planned,
                "calibrated_rounds": rounds, "calibrated_noise_multiplier": self.noise_multiplier,
                "calibration_accountant": accountant, "calibrated_knob": "client noise sigma",
                "calibrated_sigma": self.sigma, "calibrated_sampling": q}


def solve_sigma(eps: float, delta: float, accountant: str, planned: list[PlannedRound]) -> NoisyCalibration:
    """sigma >= 0 whose planned rounds spend [(1 - TOL) eps, eps] by ``accountant`` (bisection on log sigma
    aiming at AIM x eps). UserError when no sigma can: the air alone already spends less."""
    if not any(p.sens > 0 for p in planned):
        raise UserError("privacy.calibrate = 'target': the run plans no round that uses client data")
    if any(p.sens > 0 and p.gain_sq <= 0 for p in planned):
        raise UserError("privacy.calibrate = 'target': a planned round has no transmitting client whose noise "
                        "could carry the target")
    lo_eps, aim = (1.0 - TOL) * eps, AIM * eps

    def f(s):
        return planned_epsilon(accountant, planned, s, delta)

    e0 = f(0.0)
    if e0 <= eps:
        if e0 < lo_eps:
            raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be met by client noise: the air's own "
                            f"noise already limits the run to eps {e0:.4g} by '{accountant}' (clients can only add "
                            f"noise); lower privacy.eps or set privacy.calibrate = 'paper'")
        sigma = 0.0
    else:
        p0 = max((p for p in planned if p.sens > 0), key=lambda p: p.sens / math.sqrt(p.gain_sq))
        hi = p0.tau * p0.sens / math.sqrt(p0.gain_sq)           # z ~ 1 on the most sensitive round
        lo = hi
        while f(hi) > aim:
            lo, hi = hi, hi * 2.0
            if hi > 1e12:
                raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be calibrated by accountant "
                                f"'{accountant}': no client noise sigma up to 1e12 reaches it")
        if lo == hi:
            while f(lo) <= aim and lo > hi * 1e-12:
                hi, lo = lo, lo / 2.0
        while hi / lo > 1 + 1e-7:
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if f(mid) <= aim else (mid, hi)
        sigma = hi
    spent = f(sigma)
    if not lo_eps <= spent <= eps:
        raise UserError(f"privacy.eps = {eps:g}: calibration of the client noise by '{accountant}' reached "
                        f"{spent:.6g}, outside [{lo_eps:.6g}, {eps:g}]")
    z = min(p.z(sigma) for p in planned if p.sens > 0)
    return NoisyCalibration(sigma=float(sigma), eps_planned=float(spent), noise_multiplier=float(z))
