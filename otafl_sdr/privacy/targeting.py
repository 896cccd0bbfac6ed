"""Privacy targeting (privacy.targeting = "target"): the one solver that turns a run's planned
data-using rounds into the value of its one privacy knob, so that they spend the target (eps, delta) within
1 % and never above it by the tight accountant (pld, or rdp when it enforces). Three forms of one problem:

* identical rounds (``solve``): T rounds (the data-using ones: Upcycled-FL's even iterations are free,
  Lemma 1 of paper 000) of a (Poisson-subsampled, q) Gaussian of noise multiplier z = sigma_eff / Delta;
  bisection on log z (``calculator.noise_for_target``, exact composition, O(1) for q = 1); a policy maps z
  to its knob in closed form (power/cj_target.py, paper 000);
* a policy's ``PrivacyKnob`` (``solve_knob``; power/base.py): for a candidate value the run's rounds are
  planned (zero payload: the ledger's mechanism does not depend on the data) and composed exactly
  (``compose``: full-participation Gaussian rounds as one Gaussian of mu^2 = sum_t (Delta_t / sigma_t)^2,
  Poisson-subsampled rounds by dp-accounting); the value is bisected (on log value when positive);
* paper 002's clients' noise sigma (``solve_sigma``): round t is a Gaussian of sensitivity
  Delta_t = 2 V max_i g_i sum_k eta_k,t / tau (Lemma 20; Lemma 22 for FedProx) and std
  sigma_t(sigma) = sqrt(sigma_air,t^2 + (sigma / tau)^2 sum_i g_i^2); Delta_t, sigma_air,t, g_i and q_t do
  not depend on sigma, so eps is a decreasing function of sigma alone, bisected on log sigma. A target
  below what the air's own noise gives (sigma = 0) is refused (clients can only add noise); the fdp
  accountant (Theorem 5's last-model bound) is not used: the server sees every round.

Every solve aims at ``AIM`` x eps, the middle of the band [(1 - TOL) eps, eps] (pessimistic estimates of
the same curve, a PLD grid adds < 1e-4 relative, stay within the target), and checks the band; a target
outside the knob's reach is refused at start, naming the knob and its limit. The run-level driver
(workload/targeting.py) plans the rounds on the run's seeded channels and restates them as the ledger
books them (workload/booking.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant as _pld
from dp_accounting.rdp import rdp_privacy_accountant as _rdp

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.calculator import epsilon_of_rounds, noise_for_target
from otafl_sdr.privacy.pld import DEFAULT_INTERVAL
from otafl_sdr.privacy.rdp import DEFAULT_ORDERS, quiet_absl


TOL = 0.01             # eps_planned in [(1 - TOL) eps, eps]
AIM = 1.0 - TOL / 2    # bisection target, the middle of the band
TIGHT = ("pld", "rdp")


def calibration_accountant(enforcing: str) -> str:
    """The accountant a target is calibrated by: privacy.accountant if it is a tight one (pld, rdp), else pld."""
    return enforcing if enforcing in TIGHT else "pld"


@dataclass
class Target:
    """The solved per-round mechanism: ``noise_multiplier`` z for ``rounds`` data-using rounds of
    participation ``sampling``; ``eps_planned`` what accountant ``accountant`` says they spend."""

    eps: float
    delta: float
    accountant: str
    rounds: int
    sampling: float
    noise_multiplier: float
    eps_planned: float

    def summary(self) -> dict:
        return {"calibration": f"target ({self.accountant})", "eps_planned": self.eps_planned,
                "calibrated_rounds": self.rounds, "calibrated_noise_multiplier": self.noise_multiplier,
                "calibration_accountant": self.accountant}


def solve(eps: float, delta: float, rounds: int, accountant: str, sampling: float = 1.0) -> Target:
    """z such that ``rounds`` rounds spend eps_planned in [(1 - TOL) eps, eps] by ``accountant``."""
    if rounds < 1:
        raise UserError("privacy.targeting = 'target': the run plans no round that uses client data")
    try:
        z = noise_for_target(accountant, AIM * eps, rounds, delta, sampling, rel_tol=1e-5)
    except ValueError:
        z = None
    if z is None:
        raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be calibrated by accountant "
                        f"'{accountant}' over {rounds} rounds at sampling {sampling:g}")
    spent = planned_epsilon(accountant, z, rounds, delta, sampling)
    if not (1.0 - TOL) * eps <= spent <= eps:
        raise UserError(f"privacy.eps = {eps:g}: calibration by '{accountant}' reached {spent:.6g}, outside "
                        f"[{(1 - TOL) * eps:.6g}, {eps:g}]")
    return Target(eps=eps, delta=delta, accountant=accountant, rounds=rounds, sampling=sampling,
                  noise_multiplier=z, eps_planned=spent)


def solve_after(eps: float, delta: float, rounds: int, accountant: str, sampling: float,
                prior: list[tuple[float, float]]) -> Target:
    """``solve`` for the rounds that follow ``prior`` [(z_t, q_t)] (a raised budget, `run --resume --extend N
    --eps E`): the prior full-participation Gaussian rounds and the new ones compose exactly into one Gaussian
    (mu^2 adds up, for pld and rdp alike), so the new rounds get the Gaussian that is left of eps's,
    mu_new^2 = mu_eps^2 - mu_prior^2, stated as the epsilon ``eps_equiv`` of that Gaussian alone: the knob's
    closed form then meets [(1 - TOL) eps_equiv, eps_equiv] on the new rounds and the whole run spends at
    most eps. Prior subsampled rounds have no such closed form (refused)."""
    if not prior:
        return solve(eps, delta, rounds, accountant, sampling)
    if any(q < 1 for _, q in prior) or sampling < 1:
        raise UserError("--eps: a closed-form privacy knob continues only full-participation rounds; this run's "
                        "rounds are subsampled")
    mu2_prior = sum(math.inf if z <= 0 else 1.0 / (z * z) for z, _ in prior)
    try:
        z1 = noise_for_target(accountant, eps, 1, delta, 1.0, rel_tol=1e-7)
    except ValueError:
        z1 = None
    if z1 is None:
        raise UserError(f"--eps {eps:g} (delta {delta:g}) cannot be calibrated by accountant '{accountant}'")
    left = 1.0 / (z1 * z1) - mu2_prior
    if not left > 0 or not math.isfinite(left):
        spent = compose(accountant, prior, delta)
        raise UserError(f"--eps {eps:g}: the run has already spent eps {spent:.6g} by '{accountant}'; "
                        f"raise the target above it")
    eps_equiv = planned_epsilon(accountant, 1.0 / math.sqrt(left), 1, delta)
    return solve(eps_equiv, delta, rounds, accountant, sampling)


def planned_epsilon(accountant: str, z: float, rounds: int, delta: float, sampling: float = 1.0) -> float:
    """Epsilon of ``rounds`` identical rounds of noise multiplier z (inf for z = 0, None -> inf)."""
    if z <= 0:
        return math.inf
    v = epsilon_of_rounds(accountant, z, rounds, delta, sampling)
    return math.inf if v is None else float(v)


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


def planned_epsilon_of_sigma(accountant: str, planned: list[PlannedRound], sigma: float, delta: float,
                             prior: list = ()) -> float:
    """Epsilon of the rounds ``prior`` [(z_t, q_t)] already booked and then the planned ones at ``sigma``."""
    return compose(accountant, [*prior, *((p.z(sigma), p.q) for p in planned if p.sens > 0)], delta)


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


def solve_sigma(eps: float, delta: float, accountant: str, planned: list[PlannedRound],
                prior: list = ()) -> NoisyCalibration:
    """sigma >= 0 whose planned rounds spend [(1 - TOL) eps, eps] by ``accountant`` (bisection on log sigma
    aiming at AIM x eps). UserError when no sigma can: the air alone already spends less. ``prior``: the
    rounds [(z_t, q_t)] already booked before them (a raised budget), composed first."""
    if not any(p.sens > 0 for p in planned):
        raise UserError("privacy.targeting = 'target': the run plans no round that uses client data")
    if any(p.sens > 0 and p.gain_sq <= 0 for p in planned):
        raise UserError("privacy.targeting = 'target': a planned round has no transmitting client whose noise "
                        "could carry the target")
    lo_eps, aim = (1.0 - TOL) * eps, AIM * eps

    def f(s):
        return planned_epsilon_of_sigma(accountant, planned, s, delta, prior)

    e0 = f(0.0)
    if e0 <= eps:
        if e0 < lo_eps:
            raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be met by client noise: the air's own "
                            f"noise already limits the run to eps {e0:.4g} by '{accountant}' (clients can only add "
                            f"noise); lower privacy.eps or set privacy.targeting = 'paper'")
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


@dataclass
class KnobCalibration:
    knob: str
    value: float
    eps_planned: float
    noise_multiplier: float       # the smallest planned z_t
    rounds: int
    sampling: float               # the smallest planned q_t

    def summary(self, accountant: str) -> dict:
        return {"calibration": f"target ({accountant})", "eps_planned": self.eps_planned,
                "calibrated_rounds": self.rounds, "calibrated_noise_multiplier": self.noise_multiplier,
                "calibration_accountant": accountant, "calibrated_knob": self.knob,
                "calibrated_value": self.value, "calibrated_sampling": self.sampling}


def solve_knob(eps: float, delta: float, accountant: str, knob, rounds_at: Callable[[float], list],
               prior: list = ()) -> KnobCalibration:
    """Value v of ``knob`` (a power.base.PrivacyKnob) whose planned rounds ``rounds_at(v)`` -> [(z_t, q_t)]
    spend [(1 - TOL) eps, eps] by ``accountant`` (after the rounds ``prior`` already booked, a raised
    budget). eps(v) must be monotone on [knob.lo, knob.hi], decreasing when knob.private_when == "higher"."""

    lo_eps, aim = (1.0 - TOL) * eps, AIM * eps
    cache: dict = {}

    def f(v: float) -> float:
        if v not in cache:
            rounds = rounds_at(v)
            if not rounds:
                raise UserError("privacy.targeting = 'target': the run plans no round that uses client data")
            cache[v] = (compose(accountant, [*prior, *rounds], delta), rounds)
        return cache[v][0]

    a, b = float(knob.lo), float(knob.hi)
    private_end, open_end = (b, a) if knob.private_when == "higher" else (a, b)
    if f(private_end) > eps:
        raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be met: even {knob.name} = "
                        f"{private_end:g} ({knob.limit}) spends {f(private_end):.4g} by '{accountant}'; "
                        f"raise privacy.eps or set privacy.targeting = 'paper'")
    if f(open_end) <= aim:
        value = open_end                       # the least private end already meets the target
        if f(value) < lo_eps:
            raise UserError(f"privacy.eps = {eps:g} (delta {delta:g}) cannot be spent: even {knob.name} = "
                            f"{open_end:g} ({knob.limit}) spends only {f(open_end):.4g} by '{accountant}' (the mechanism's other "
                            f"noise is larger); lower privacy.eps or set privacy.targeting = 'paper'")
    else:
        geometric = a > 0 and b / a > 10
        lo, hi = open_end, private_end         # f(lo) > aim >= f(hi)
        for _ in range(200):
            mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
            if f(mid) <= aim:
                hi = mid
            else:
                lo = mid
            if abs(hi - lo) <= 1e-9 * max(abs(hi), abs(lo)) or abs(f(hi) - aim) <= 1e-3 * eps:
                break
        value = hi
    spent, rounds = f(value), cache[value][1]
    if not lo_eps <= spent <= eps:
        raise UserError(f"privacy.eps = {eps:g}: calibration of {knob.name} by '{accountant}' reached {spent:.6g}, "
                        f"outside [{lo_eps:.6g}, {eps:g}] (eps is not monotone in the knob here)")
    return KnobCalibration(knob=knob.name, value=float(value), eps_planned=float(spent),
                           noise_multiplier=float(min(z for z, _ in rounds)), rounds=len(rounds),
                           sampling=float(min(q for _, q in rounds)))
