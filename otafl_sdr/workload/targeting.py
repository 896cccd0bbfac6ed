"""Privacy targeting over a built run (privacy.targeting = "target"), for the orchestrator and every
testbed node alike: the run's data-using rounds are planned on its seeded channels (a copy of the policy,
zero payload), restated as the ledger will book them (``book``: workload/booking.ledger_mechanism), and
the run's one privacy knob is solved by privacy/targeting.py. The knob (privacy/knobs.py) is the
algorithm's ``privacy_knob()`` (paper 002's clients' noise), else the policy's: a ClosedFormKnob (paper
000, LAPA's filter) or a PrivacyKnob (bisection). A mechanism with none keeps its own rule (reported).

``solve_privacy_target(run, book)`` returns the summary's fields and sets the knob on the run."""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.airs import air_capabilities
from otafl_sdr.errors import UserError
from otafl_sdr.privacy.knobs import ClientNoiseKnob, ClosedFormKnob
from otafl_sdr.privacy.targeting import (PlannedRound, calibration_accountant, compose, planned_epsilon,
                                 planned_epsilon_of_sigma, solve, solve_knob, solve_sigma)
from otafl_sdr.workload.booking import csi_gain_margin


def solve_privacy_target(run, book: Callable) -> dict:
    """Solve the run's privacy knob for privacy.eps (see the module docstring); ``run``: RunParts."""
    cfg, pr = run.cfg, run.cfg.privacy
    if pr.targeting == "paper":
        return {"calibration": "paper rule"}
    knob = run.algorithm.privacy_knob() or run.policy.privacy_knob()
    if knob is None:
        return {"calibration": f"policy rule (power policy '{cfg.power.policy}' has no target calibration)"}
    if run.multipath_at_capture() and (isinstance(knob, ClientNoiseKnob) or
                                       (isinstance(knob, ClosedFormKnob) and cfg.power.jammer)):
        what = "the clients' noise" if isinstance(knob, ClientNoiseKnob) else "the jammer's noise"
        raise UserError(f"privacy.targeting = 'target' with single-carrier channel.multipath = "
                        f"'{cfg.channel.multipath}' on air '{cfg.air.name}': its modem's estimates see the payload's "
                        f"ISI, so the round is booked at the capture where {what} does not count "
                        "(channel/capture_bound.py); set phy.waveform = 'ofdm', power.jammer = false (alpha_u is "
                        "then the knob), air.name = 'sim' or privacy.targeting = 'paper'")
    if isinstance(knob, ClientNoiseKnob):
        return _solve_client_noise(run, book, knob)
    if isinstance(knob, ClosedFormKnob):
        return _solve_closed_form(run, knob)
    return _solve_policy_knob(run, book, knob)


def _data_rounds(run) -> list[int]:
    alg = run.algorithm
    return [it for it in range(1, alg.iterations(run.cfg.run.rounds) + 1) if alg.uses_clients(it)]


def _planned_channels(run, its: list[int]) -> dict:
    """{iteration: (h, csi, h_cj)}: the run's seeded channels of the planned rounds, as round 1.. sees them."""
    out = {}
    for it in its:
        h, h_cj = run.draw_channels(it)
        out[it] = (h, None if run.csi is None else run.csi.estimates(it, h), h_cj)
    return out


def _refuse_if_other_accountant_stops(pr, acc: str, spent: float, what: str) -> None:
    if pr.enforce and pr.accountant != acc and spent > pr.eps:
        raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the {what} "
                        f"calibrated to privacy.eps = {pr.eps:g} by '{acc}' at {spent:.4g}; enforce with pld "
                        f"or rdp, or set privacy.enforce = false")


def _solve_closed_form(run, knob: ClosedFormKnob) -> dict:
    """paper 000: z for the planned rounds (privacy/targeting.solve), mapped to the policy's knob by its
    closed form (``knob.solve``) on the run's seeded channels and the calibrated-CSI margin."""
    cfg, pr, policy = run.cfg, run.cfg.privacy, run.policy
    if air_capabilities(cfg.air.name).calibrated_jammer_path and cfg.power.jammer:
        raise UserError("privacy.targeting = 'target' with a jammer on a calibrated jammer path (air "
                        f"'{cfg.air.name}') is not supported (the ledger counts the calibrated jammer path): set "
                        "power.jammer = false or privacy.targeting = 'paper'")
    its = _data_rounds(run)
    q = float(getattr(policy, "sampling_prob", 1.0))
    target = solve(pr.eps, pr.delta, len(its), calibration_accountant(pr.accountant), q)
    margin = (1.0 if run.csi is None else csi_gain_margin(run.csi)) * run.planned_multipath_gain(its)
    planned = {it: (h if csi is None else csi, h_cj) for it, (h, csi, h_cj) in _planned_channels(run, its).items()}
    fields = knob.solve(target, planned, margin)
    if pr.enforce and pr.accountant != target.accountant:
        spent = planned_epsilon(pr.accountant, target.noise_multiplier, target.rounds, pr.delta, q)
        _refuse_if_other_accountant_stops(pr, target.accountant, spent, "mechanism")
    return fields


def _refuse_hand_set(cfg, names, knob_name: str, section_values: dict) -> None:
    pr = cfg.privacy
    for name in names:
        section, _, key = name.rpartition(".")
        if key in section_values:
            what = "" if name == knob_name else f" (it sets {knob_name})"
            raise UserError(f"{name} is set by hand{what} and privacy.targeting = 'target' would solve "
                            f"{knob_name} for privacy.eps = {pr.eps:g}: remove one (set privacy.targeting = "
                            f"'paper' to keep your value)")


def _solve_policy_knob(run, book: Callable, knob) -> dict:
    """A policy's PrivacyKnob: for a candidate value a copy of the policy plans every data-using round on
    the run's seeded channels, restated as the ledger books them; the value is bisected
    (privacy/targeting.solve_knob) and set on the real policy. A knob also set by hand is refused."""
    cfg, pr = run.cfg, run.cfg.privacy
    _refuse_hand_set(cfg, [n for n in (knob.name, *knob.hand_keys) if n.rpartition(".")[0] == "power.options"],
                     knob.name, cfg.power.options or {})
    its = _data_rounds(run)
    channels = _planned_channels(run, its)
    zeros = np.zeros((run.K, int(run.info.dim)))            # the payload's size (C^2 for paper 003)
    stretch = run.planned_multipath_gain(its)                # channel.multipath: booked by ledger_mechanism

    def rounds_at(value: float) -> list:
        policy = copy.deepcopy(run.policy)                   # the real policy starts untouched
        policy.privacy_knob().set(value)
        rounds = []
        for it in its:
            h, csi, h_cj = channels[it]
            plan = policy.plan(it, zeros, h, h_cj, seeding.rng(cfg.run.seed, "calibration_plan", it), csi=csi)
            plan.extra["multipath_gain"] = run.multipath_gain(plan) if cfg.phy.waveform == "ofdm" else stretch  # per subcarrier
            if run.multipath_at_capture():
                plan.extra["multipath_capture"] = True
            m = book(plan)
            if m.uses_data and m.sensitivity > 0:
                rounds.append((m.noise_multiplier, float(min(m.sampling_prob, 1.0))))
        return rounds

    acc = calibration_accountant(pr.accountant)
    cal = solve_knob(pr.eps, pr.delta, acc, knob, rounds_at)
    knob.set(cal.value)
    if pr.enforce and pr.accountant != acc:
        _refuse_if_other_accountant_stops(pr, acc, compose(pr.accountant, rounds_at(cal.value), pr.delta),
                                          "mechanism")
    return cal.summary(acc)


def _solve_client_noise(run, book: Callable, knob: ClientNoiseKnob) -> dict:
    """paper 002's Noisy-FedAvg/FedProx: the power policy keeps its own rule and is planned (a copy, zero
    payload) on the run's seeded channels; the clients' noise std sigma (algorithm.options.sigma) is solved
    so the ledger's rounds spend the target (privacy/targeting.solve_sigma)."""
    cfg, pr, alg = run.cfg, run.cfg.privacy, run.algorithm
    _refuse_hand_set(cfg, [knob.name], knob.name, cfg.algorithm.options or {})
    if run.csi is not None:
        csi_gain_margin(run.csi)                             # refused when unbounded
    its = _data_rounds(run)
    policy = copy.deepcopy(run.policy)                       # stateful policies: the real one starts untouched
    zeros = np.zeros((run.K, int(run.dim)))
    planned = []
    for it, (h, csi, h_cj) in _planned_channels(run, its).items():
        plan = policy.plan(it, zeros, h, h_cj, seeding.rng(cfg.run.seed, "calibration_plan", it), csi=csi)
        if cfg.phy.waveform == "ofdm":                       # planned per subcarrier, as the round books it
            run.multipath_gain(plan)
        sending, gains, _, weight, sens, sigma_air = alg.round_terms(plan, it)
        finish = None
        if run.csi is not None:                              # the ledger's CSI-safe restatement
            def finish(d, s, plan=plan):
                plan.mechanism = dataclasses.replace(plan.mechanism, sensitivity=d, sigma_eff=s)
                m = book(plan)
                return m.sensitivity, m.sigma_eff
        kw = dict(sens=sens, sigma_air=sigma_air, gain_sq=float(np.sum(gains ** 2)),
                  q=float(plan.mechanism.sampling_prob), tau=alg.tau, finish=finish)
        if "ofdm" in plan.extra:                             # z(sigma) of the per-subcarrier booking
            from otafl_sdr.privacy.subcarrier_mechanism import SubcarrierPlannedRound
            planned.append(SubcarrierPlannedRound(**kw, plan=plan, bound=sens / weight if weight > 0 else 0.0,
                                                  sending=sending))
        else:
            planned.append(PlannedRound(**kw))
    acc = calibration_accountant(pr.accountant)
    cal = solve_sigma(pr.eps, pr.delta, acc, planned)
    if pr.enforce and pr.accountant != acc:
        _refuse_if_other_accountant_stops(pr, acc, planned_epsilon_of_sigma(pr.accountant, planned, cal.sigma,
                                                                            pr.delta), "client noise")
    knob.set(cal.sigma)
    q = min((p.q for p in planned), default=1.0)
    return cal.summary(pr.eps, pr.delta, acc, len(its), q)
