"""LAPA's Gaussian privacy filter for privacy.targeting = "target" (paper 004 has no such mode; issue 14):
the run's total mu^2 is fixed before round 1 and each round's aggregate noise z_t sens comes from the share
left (``LapaFilter.calibrate_to``); LAPA's budgets decide how the noise is split over the devices, and eq.
(12)'s exp(-e) how much of its share a round takes (``_round_factor``). A mixin
of power/lapa.LapaPolicy (it reads the policy's options, info, ds, C, t and mu2 fields)."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.knobs import ClosedFormKnob
from otafl_sdr.power.lapa_maths import amplitude_bound, ota_alpha_u


class LapaFilter:
    """The filter's methods of LapaPolicy (see the module docstring)."""

    def privacy_knob(self) -> ClosedFormKnob:
        """privacy.targeting = "target": a closed form (``calibrate_to``) of the solved noise multiplier."""
        return ClosedFormKnob(name="the Gaussian privacy filter (LAPA)", solve=self.calibrate_to)

    def calibrate_to(self, target, planned: dict, sens_scale: float = 1.0) -> dict:
        """privacy.targeting = "target" (issue 14): LAPA's budgets and dynamic noise control follow the
        training's feedback (eqs. 10-16, 23), which no plan made before round 1 can foresee, so its noise
        schedule is calibrated as a Gaussian privacy filter: the run's total mu^2 = sum_t (Delta_t /
        sigma_t)^2 is fixed before round 1 from the target (mu*^2 = T / z*^2, z* the noise multiplier of T
        identical rounds that spend 0.995 eps by the tight accountant; Gaussian rounds compose exactly by
        adding their mu_t^2, adaptively chosen mu_t included: Dong, Roth & Su 2022, Thm. 3.2 / Smith &
        Thakurta's filters). Each round then needs z_t = 1/sqrt(lambda_t), lambda_t the water level of the mu^2
        left over the planned rounds' channels (_z_required: the even share mu_rem^2/n_left unless a fade caps a
        round below it; eq. (12)'s exp(-e) scales a round's share: _round_factor); LAPA's personalised budgets
        keep deciding how the noise is SPLIT over devices (sigma_k proportional to c Delta s_k / eps_k), and one
        scale s >= 0 on all sigma_k sets how much there is, s = 0 when the channel noise alone suffices (the dynamic noise control of sec. IV-A). A round whose channel noise is more than it
        needs leaves its unspent mu^2 to the remaining rounds, so the booked epsilon is the target."""
        if self.options.budget == "none":
            raise UserError("power.options.budget = 'none' sends no privacy noise: privacy.targeting = 'target' has "
                            "nothing to calibrate; set privacy.targeting = 'paper' (or another budget)")
        if self.options.clip <= 0:
            raise UserError("power.options.clip must be > 0 for a target")
        self._refuse_unspendable(target, planned, float(sens_scale))
        self.rounds_target = len(planned)
        self.mu2_target = target.rounds / target.noise_multiplier ** 2
        self.planned_h = [np.asarray(hk) for hk, _ in planned.values()]
        self.sens_scale = float(sens_scale)
        return {**target.summary(), "calibrated_knob": "noise schedule (Gaussian filter: total mu^2)",
                "calibrated_value": float(self.mu2_target)}

    def _refuse_unspendable(self, target, planned: dict, sens_scale: float) -> None:
        """A target above what the rounds can spend with no device noise at all is refused before round 1
        (else the filter would leave it unspent). Whatever the weights G and amplitudes p_k <= sqrt(P_k) the
        training feedback picks, a round's mu_t = sens_scale max_k(G_k Ds_k) alpha_u / sigma_eff with
        alpha_u <= |h_j| p_j / (G_j C) for the device j of the max and sigma_eff >= sigma_c / alpha_u, so
        mu_t <= sens_scale max_j Ds_j |h_j| sqrt(P_j) / (C sigma_c) on the planned channels: an upper bound
        (a target below it may still be under-spent; the summary's eps says by how much)."""
        from otafl_sdr.privacy.targeting import TOL, planned_epsilon
        top = np.asarray(self.ds, float) * np.sqrt(np.asarray(self.info.power, float)) / self.C
        mu2 = sum((sens_scale * float(np.max(top * np.abs(hk))) / math.sqrt(self.info.sigma_c2)) ** 2
                  for hk, _ in planned.values())
        most = planned_epsilon(target.accountant, 1.0 / math.sqrt(mu2), 1, target.delta) if mu2 > 0 else 0.0
        if most < (1.0 - TOL) * target.eps:
            raise UserError(f"privacy.eps = {target.eps:g} (delta {target.delta:g}) cannot be spent: with no device "
                            f"noise (every device at full power, the channel noise only) the planned rounds spend at "
                            f"most {most:.4g} by '{target.accountant}'; lower privacy.eps or set privacy.targeting = "
                            f"'paper'")

    def max_amplitudes(self, h_known: np.ndarray, G: np.ndarray) -> np.ndarray:
        """The largest amplitudes p_k this policy uses on channel h (lapa: sqrt(power_fraction P_k))."""
        return np.sqrt(self.options.power_fraction * np.asarray(self.info.power, float))

    def _mu2_caps(self, t: int, G: np.ndarray | None) -> np.ndarray | None:
        """Forecast of the most mu_u^2 = (sens_scale max_k(G_k Ds_k) alpha_u / sigma_c)^2 each round u = t..T
        of the filter can spend: no device noise, the policy's largest amplitudes, on the planned channels and
        this round's weights G (a forecast: it steers how the rest is shared, never how much is booked).
        None without planned channels or weights."""
        if self.planned_h is None or G is None or not np.any(G > 0):
            return None
        sens = self.sens_scale * float(np.max(G * self.ds))
        bound = np.full(len(G), self.C)
        caps = []
        for u in range(t, self.rounds_target + 1):
            if not 1 <= u <= len(self.planned_h):
                caps.append(math.inf)
                continue
            h = self.planned_h[u - 1]
            a = ota_alpha_u(np.abs(h), self.max_amplitudes(h, G), G, bound)
            caps.append((sens * a) ** 2 / self.info.sigma_c2)
        return np.asarray(caps, float)

    def _z_required(self, t: int | None = None, G: np.ndarray | None = None) -> float:
        """The noise multiplier z_t = 1/sqrt(lambda) round t (default: the round being planned, self.t) needs
        under the filter, lambda = the water level of the mu^2 not yet spent over the rounds t..T: each round
        gets min(its forecast cap, lambda) (_mu2_caps; lambda = mu_rem^2 / n_left, the even share, when no
        cap binds), so rounds whose channel noise alone is more than the even share (deep fades at the power
        the policy may use) leave their shortfall to the others instead of leaving it unspent (if the caps
        cannot take it all, lambda = the largest cap: the pool is never emptied before the last round).
        lambda <= mu_rem^2 always: a round never books more than what is left (inf once it is spent).
        With the budgets of eq. (12) (``budget`` = 'lapa' or 'arb') the round then takes exp(-e^[t-1]) of its
        share (_round_factor), as eq. (12) takes exp(-e) of the even share of the eps left: what it saves goes
        to the later rounds (no more than their forecast caps can take), and the last round takes all that is
        left, so the booked total is the target."""
        t = self.t if t is None else t
        n_left = max(self.rounds_target - t + 1, 1)
        rem = self.mu2_target - self.mu2_spent
        if rem <= 1e-12 * self.mu2_target:
            return math.inf
        lam = rem / n_left
        caps = self._mu2_caps(t, G)
        if caps is not None and len(caps):
            c, left, lam = np.sort(caps), rem, math.inf
            for i, ci in enumerate(c):
                if ci * (len(c) - i) >= left:
                    lam = left / (len(c) - i)
                    break
                left -= ci
            if not math.isfinite(lam):      # the caps cannot take it all: each round its cap (the last: the rest)
                lam = float(c[-1]) if len(c) > 1 else rem
        if n_left > 1:
            # what the round saves must fit in the later rounds' forecast caps (else it would go unspent)
            room = math.inf if caps is None or not len(caps) else float(np.sum(caps[1:])) - max(rem - lam, 0.0)
            lam = max(lam * self._round_factor(t), lam - max(room, 0.0))
        return math.sqrt(1.0 / min(lam, rem)) if lam > 0 else math.sqrt(n_left / rem)

    def _round_factor(self, t: int) -> float:
        """The share of its water level round t takes: exp(-e^[t-1]) for the budgets of eq. (12) ('lapa':
        LAPA, 'arb': Benchmark 4, ARB's adaptive round budget with an equal split), e^[t-1] the error of the
        released global updates (eq. 11; 0 before round 2, as round_budget's); 1 for 'uniform' (Benchmark 3:
        the same noise every round, Abadi et al.). Without it the filter gave ARB and uniform DP the same
        schedule and the same equal split: the paper's two benchmarks were one arm (issue 37). A function of
        released aggregates only (power/lapa_public.py), and <= 1: the round books no more than its share."""
        if self.options.budget not in ("lapa", "arb") or t <= 1:
            return 1.0
        return float(math.exp(-max(float(self.e_last), 0.0)))

    def _filter_scale(self, habs, amp, G, base, sens: float, d: int) -> tuple[float, float]:
        """(s, alpha_u): the smallest scale s >= 0 of the devices' noise s * base_k that gives this round
        z_t = sigma_eff / (sens_scale Delta) >= its share of the remaining mu^2 (bisection; z rises with s:
        more noise and a smaller alpha_u, so more channel noise in payload units)."""
        z_req = self._z_required(G=G)

        def z_of(s):
            a = ota_alpha_u(habs, amp, G, amplitude_bound(self.C, s * base, d))
            var = float(np.sum(G ** 2 * (s * base) ** 2) + self.info.sigma_c2 / a ** 2)
            return math.sqrt(var) / (self.sens_scale * sens), a
        z0, a0 = z_of(0.0)
        if z0 >= z_req or not np.any(base > 0):
            return 0.0, a0
        hi = 1.0
        while z_of(hi)[0] < z_req:
            hi *= 2.0
            if hi > 1e12:
                raise UserError("privacy.targeting = 'target': LAPA cannot add enough noise in a round "
                                "(the devices' power is too small for the noise the target needs)")
        lo = 0.0
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if z_of(mid)[0] >= z_req:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-12 * hi:
                break
        return hi, z_of(hi)[1]
