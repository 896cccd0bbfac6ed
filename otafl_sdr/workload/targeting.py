"""TEMPORARY (the lead's shim until the targeting module lands): the orchestrator's old target solving
over a built run."""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import seeding
from ..errors import UserError
from ..power.base import PowerPolicy


class _Shim:
    def __init__(self, run, ledger_mechanism):
        self.run = run
        self.cfg, self.algorithm, self.policy, self.csi, self.K = run.cfg, run.algorithm, run.policy, run.csi, run.K
        self.info, self.dim = run.info, run.dim
        self._csi_safe = ledger_mechanism
        self._draw_channels = run.draw_channels

    def _calibrate_privacy(self) -> dict:
        """privacy.calibrate: "paper" keeps the policy's own rule; "target" solves the policy's one privacy
        knob so that the planned data-using rounds (Upcycled-FL's server-only iterations are free) spend
        privacy.eps within 1 % and never above (privacy/target.py), by the tight accountant: the algorithm's
        noise knob (paper 002), else the policy's own ``calibrate_to`` (paper 000), else the policy's
        ``privacy_knob`` solved by planning the rounds (privacy/knob_target.py). A mechanism with none of
        them keeps its own rule (reported). Returns the summary's fields."""
        from ..privacy.target import calibration_accountant, planned_epsilon, solve
        cfg, pr = self.cfg, self.cfg.privacy
        if pr.calibrate == "paper":
            return {"calibration": "paper rule"}
        if self.algorithm.noise_knob:                   # paper 002: the clients' noise sigma is the knob
            return self._calibrate_client_noise()
        knob = self.policy.privacy_knob()
        if knob is not None:
            return self._calibrate_knob(knob)
        if type(self.policy).calibrate_to is PowerPolicy.calibrate_to:
            return {"calibration": f"policy rule (power policy '{cfg.power.policy}' has no target calibration)"}
        if cfg.air.name == "uhd" and cfg.power.jammer:
            raise UserError("privacy.calibrate = 'target' with a jammer on the uhd air is not supported (the ledger "
                            "counts the calibrated jammer path): set power.jammer = false or privacy.calibrate = 'paper'")
        its = [it for it in range(1, self.algorithm.iterations(cfg.run.rounds) + 1) if self.algorithm.uses_clients(it)]
        q = float(getattr(self.policy, "sampling_prob", 1.0))
        target = solve(pr.eps, pr.delta, len(its), calibration_accountant(pr.accountant), q)
        margin = 1.0 if self.csi is None else float(np.max(self.csi.gain_margin()))
        if not np.isfinite(margin):
            raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                            "(h_std >= |h| / 3); recalibrate with more pilot energy")
        planned = {}
        for it in its:                               # the run's seeded channels: what the rounds will see
            h, h_cj = self._draw_channels(it)
            planned[it] = (h if self.csi is None else self.csi.estimates(it, h), h_cj)
        fields = self.policy.calibrate_to(target, planned, margin)
        if pr.enforce and pr.accountant != target.accountant:
            spent = planned_epsilon(pr.accountant, target.noise_multiplier, target.rounds, pr.delta, q)
            if spent > pr.eps:
                raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the mechanism "
                                f"calibrated to privacy.eps = {pr.eps:g} by '{target.accountant}' at {spent:.4g}; "
                                f"enforce with pld or rdp, or set privacy.enforce = false")
        return fields

    def _planned_channels(self, its: list) -> dict:
        """{iteration: (h, csi, h_cj)}: the run's seeded channels of the planned rounds, as round 1.. will see them."""
        out = {}
        for it in its:
            h, h_cj = self._draw_channels(it)
            out[it] = (h, None if self.csi is None else self.csi.estimates(it, h), h_cj)
        return out

    def _calibrate_knob(self, knob) -> dict:
        """privacy.calibrate = "target" through the policy's PrivacyKnob: for a candidate value, a copy of the
        policy plans every data-using round on the run's seeded channels (zero payload: the ledger's mechanism
        does not depend on the data) and the planned mechanisms, restated as the ledger will record them
        (CSI margins), are composed by the tight accountant; the value is bisected (privacy/knob_target.py)
        and set on the real policy. A knob also set by hand is refused: which one wins is not guessed."""
        import copy

        from ..privacy.knob_target import solve_knob
        from ..privacy.target import calibration_accountant
        cfg, pr = self.cfg, self.cfg.privacy
        for name in (knob.name, *knob.hand_keys):
            section, _, key = name.rpartition(".")
            if section == "power.options" and key in (cfg.power.options or {}):
                what = "" if name == knob.name else f" (it sets {knob.name})"
                raise UserError(f"{name} is set by hand{what} and privacy.calibrate = 'target' would solve "
                                f"{knob.name} for privacy.eps = {pr.eps:g}: remove one (set privacy.calibrate = "
                                f"'paper' to keep your value)")
        its = [it for it in range(1, self.algorithm.iterations(cfg.run.rounds) + 1) if self.algorithm.uses_clients(it)]
        channels = self._planned_channels(its)
        zeros = np.zeros((self.K, int(self.info.dim)))            # the payload's size (C^2 for paper 003)

        def rounds_at(value: float) -> list:
            policy = copy.deepcopy(self.policy, {id(self): self})     # the real policy starts untouched
            policy.privacy_knob().set(value)
            rounds = []
            for it in its:
                h, csi, h_cj = channels[it]
                plan = policy.plan(it, zeros, h, h_cj, seeding.rng(cfg.run.seed, "calibration_plan", it), csi=csi)
                m = plan.mechanism if self.csi is None else self._csi_safe(plan)
                if m.uses_data and m.sensitivity > 0:
                    rounds.append((m.noise_multiplier, float(min(m.sampling_prob, 1.0))))
            return rounds

        acc = calibration_accountant(pr.accountant)
        cal = solve_knob(pr.eps, pr.delta, acc, knob, rounds_at)
        knob.set(cal.value)
        if pr.enforce and pr.accountant != acc:
            from ..learning.noisy_target import compose
            spent = compose(pr.accountant, rounds_at(cal.value), pr.delta)
            if spent > pr.eps:
                raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the mechanism "
                                f"calibrated to privacy.eps = {pr.eps:g} by '{acc}' at {spent:.4g}; enforce with pld "
                                f"or rdp, or set privacy.enforce = false")
        return cal.summary(acc)

    def _calibrate_client_noise(self) -> dict:
        """privacy.calibrate = "target" for paper 002's Noisy-FedAvg/FedProx: the power policy keeps its own
        rule and is planned (on a copy, zero payload) on the run's seeded channels of the data-using rounds;
        the clients' noise std sigma (algorithm.options.sigma) is then solved so the ledger's rounds spend
        the target (learning/noisy_target.py). Returns the summary's fields."""
        import copy

        from ..learning.noisy_target import PlannedRound, planned_epsilon, solve_sigma
        from ..privacy.target import calibration_accountant
        cfg, pr, alg = self.cfg, self.cfg.privacy, self.algorithm
        key = str(alg.noise_knob).rpartition(".")[2]
        if key in (cfg.algorithm.options or {}):
            raise UserError(f"{alg.noise_knob} is set by hand and privacy.calibrate = 'target' would solve it for "
                            f"privacy.eps = {pr.eps:g}: remove one (set privacy.calibrate = 'paper' to keep your value)")
        if self.csi is not None:
            margin = float(np.max(self.csi.gain_margin()))
            if not np.isfinite(margin):
                raise UserError("the calibration's channel estimates are too uncertain to bound the clients' gains "
                                "(h_std >= |h| / 3); recalibrate with more pilot energy")
        its = [it for it in range(1, alg.iterations(cfg.run.rounds) + 1) if alg.uses_clients(it)]
        policy = copy.deepcopy(self.policy, {id(self): self})   # stateful policies: the real one starts untouched
        zeros = np.zeros((self.K, int(self.dim)))
        planned = []
        for it in its:
            h, h_cj = self._draw_channels(it)
            csi = None if self.csi is None else self.csi.estimates(it, h)
            plan = policy.plan(it, zeros, h, h_cj, seeding.rng(cfg.run.seed, "calibration_plan", it), csi=csi)
            _, gains, _, _, sens, sigma_air = alg.round_terms(plan, it)
            finish = None
            if self.csi is not None:                      # the ledger's CSI-safe restatement (_csi_safe)
                def finish(d, s, plan=plan):
                    plan.mechanism = dataclasses.replace(plan.mechanism, sensitivity=d, sigma_eff=s)
                    m = self._csi_safe(plan)
                    return m.sensitivity, m.sigma_eff
            planned.append(PlannedRound(sens=sens, sigma_air=sigma_air, gain_sq=float(np.sum(gains ** 2)),
                                        q=float(plan.mechanism.sampling_prob), tau=alg.tau, finish=finish))
        acc = calibration_accountant(pr.accountant)
        cal = solve_sigma(pr.eps, pr.delta, acc, planned)
        if pr.enforce and pr.accountant != acc:
            spent = planned_epsilon(pr.accountant, planned, cal.sigma, pr.delta)
            if spent > pr.eps:
                raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the client "
                                f"noise calibrated to privacy.eps = {pr.eps:g} by '{acc}' at {spent:.4g}; enforce "
                                f"with pld or rdp, or set privacy.enforce = false")
        alg.options.sigma = cal.sigma
        q = min((p.q for p in planned), default=1.0)
        return cal.summary(pr.eps, pr.delta, acc, len(its), q)



def solve_privacy_target(run, ledger_mechanism) -> dict:
    return _Shim(run, ledger_mechanism)._calibrate_privacy()
