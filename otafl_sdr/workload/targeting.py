"""Privacy targeting over a built run (privacy.targeting = "target"), for the orchestrator and every
testbed node alike: the run's data-using rounds are planned and booked as the run will plan and book them
(workload/round_plan.plan_round: a copy of the policy, the run's seeded channels and plan stream, a zero
payload, each round's own multipath stretch), and the run's one privacy knob is solved by
privacy/targeting.py. The knob (privacy/knobs.py) is the algorithm's ``privacy_knob()`` (paper 002's clients' noise), else the policy's: a ClosedFormKnob (paper
000, LAPA's filter) or a PrivacyKnob (bisection). A mechanism with none keeps its own rule (reported).

``solve_privacy_target(run, jammer_gain)`` returns the summary's fields and sets the knob on the run.
``solve_raised_target(run, eps, from_round, client_rounds, records, jammer_gain)``: the same knob solved again
for a raised budget (`run --resume DIR --extend N --eps E`): the rounds from ``from_round`` to the end of the
extended run, after the ledger's ``records`` (composed first, as the ledger's accountants hold them), spend E."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np

from otafl_sdr.airs import air_capabilities
from otafl_sdr.errors import UserError
from otafl_sdr.privacy.knobs import ClientNoiseKnob, ClosedFormKnob
from otafl_sdr.privacy.targeting import (PlannedRound, calibration_accountant, compose, planned_epsilon,
                                 planned_epsilon_of_sigma, solve_after, solve_knob, solve_sigma)
from otafl_sdr.workload.booking import csi_gain_margin
from otafl_sdr.workload.round_plan import plan_round, round_channels, seeded_plan_rng, zero_round


AS_BUILT = "policy_as_built"        # RunParts.extra: the power policy before its first target (a raised budget's start)


@dataclasses.dataclass
class _Goal:
    """What a solve aims at: ``eps`` over the data rounds ``round_indices``, after the rounds ``prior``
    [(z_t, q_t)] already booked (none for a fresh target)."""
    eps: float
    round_indices: list
    prior: list


def booked_prior(records: list) -> list[tuple[float, float]]:
    """The ledger lines' rounds as the accountants compose them: [(z, q)] of each costing one (a raised
    budget's line and free rounds left out; a noiseless release: z = 0, which no target can follow)."""
    from otafl_sdr.privacy.base import mech_from_dict
    from otafl_sdr.privacy.events import event_key
    from otafl_sdr.privacy.ledger import is_raise
    out = []
    for rec in records:
        if is_raise(rec):
            continue
        key = event_key(mech_from_dict(rec))
        if key[0] == "gauss":
            out.append((float(key[1]), float(key[2])))
        elif key[0] == "nonprivate":
            out.append((0.0, 1.0))
    return out


def raised_rounds(run, from_round: int, client_rounds: int) -> list[int]:
    """The data rounds a raised budget covers: iterations ``from_round`` .. the last of ``client_rounds``."""
    alg = run.algorithm
    return [i for i in range(int(from_round), alg.iterations(int(client_rounds)) + 1) if alg.uses_clients(i)]


def solve_raised_target(run, eps: float, from_round: int, client_rounds: int, records: list,
                        jammer_gain: float | None = None) -> dict:
    """The run's knob solved again for a raised budget ``eps`` (module docstring): set on the run, its
    summary fields returned (a target the knob cannot reach is refused, UserError, before anything is
    written). A run without a target calibration (``privacy.targeting = "paper"``, no knob) keeps its rule."""
    rounds = raised_rounds(run, from_round, client_rounds)
    if not rounds:
        raise UserError("--eps: the extended run plans no further round that uses client data")
    if run.cfg.privacy.targeting == "target" and run.algorithm.privacy_knob() is None \
            and run.policy.privacy_knob() is not None:
        if run.policy.state_dict() is not None:
            raise UserError(f"--eps: power policy '{run.cfg.power.policy}' keeps a state its privacy knob depends on "
                            f"(what it learnt from the rounds run); its target is not solved again mid-run: start a "
                            f"new run with the larger privacy.eps")
        built = run.extra.get(AS_BUILT)
        if built is None:
            raise UserError("--eps: the run's policy as built before its first target is not known")
        run.policy.__dict__.update(copy.deepcopy(built).__dict__)    # the knob solved afresh, as before round 1
    return solve_privacy_target(run, jammer_gain, _Goal(float(eps), rounds, booked_prior(records)))


def solve_privacy_target(run, jammer_gain: float | None = None, goal: _Goal | None = None) -> dict:
    """Solve the run's privacy knob for privacy.eps (see the module docstring); ``run``: RunParts;
    ``jammer_gain``: the jammer's delivered power gain the air measured (None: not measured), as booked;
    ``goal``: a raised budget's (solve_raised_target), else privacy.eps over the planned data rounds."""
    cfg, pr = run.cfg, run.cfg.privacy
    if goal is None:
        goal = _Goal(pr.eps, _data_rounds(run), [])
        if run.policy is not None:
            run.extra.setdefault(AS_BUILT, copy.deepcopy(run.policy))     # a raised budget solves from it again
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
        return _solve_client_noise(run, knob, jammer_gain, goal)
    if isinstance(knob, ClosedFormKnob):
        return _solve_closed_form(run, knob, goal)
    return _solve_policy_knob(run, knob, jammer_gain, goal)


def _data_rounds(run) -> list[int]:
    alg = run.algorithm
    return [round_index for round_index in range(1, alg.iterations(run.cfg.run.rounds) + 1) if alg.uses_clients(round_index)]


def _planned_channels(run, round_indices: list[int]) -> dict:
    """{iteration: RoundChannels}: the run's seeded channels of the planned rounds, as round 1.. sees them."""
    return {round_index: round_channels(run, round_index) for round_index in round_indices}


def _refuse_if_other_accountant_stops(pr, acc: str, spent: float, what: str, eps: float | None = None) -> None:
    eps = pr.eps if eps is None else eps
    if pr.enforce and pr.accountant != acc and spent > eps:
        raise UserError(f"privacy.accountant = '{pr.accountant}' would stop the run: it bounds the {what} "
                        f"calibrated to privacy.eps = {eps:g} by '{acc}' at {spent:.4g}; enforce with pld "
                        f"or rdp, or set privacy.enforce = false")


def _solve_closed_form(run, knob: ClosedFormKnob, goal: _Goal) -> dict:
    """paper 000: z for the planned rounds (privacy/targeting.solve), mapped to the policy's knob by its
    closed form (``knob.solve``) on the run's seeded channels and the calibrated-CSI margin."""
    cfg, pr, policy = run.cfg, run.cfg.privacy, run.policy
    if air_capabilities(cfg.air.name).calibrated_jammer_path and cfg.power.jammer:
        raise UserError("privacy.targeting = 'target' with a jammer on a calibrated jammer path (air "
                        f"'{cfg.air.name}') is not supported (the ledger counts the calibrated jammer path): set "
                        "power.jammer = false or privacy.targeting = 'paper'")
    round_indices = goal.round_indices
    q = float(getattr(policy, "sampling_prob", 1.0))
    target = solve_after(goal.eps, pr.delta, len(round_indices), calibration_accountant(pr.accountant), q, goal.prior)
    csi_margin = 1.0 if run.csi is None else csi_gain_margin(run.csi)
    planned = {round_index: (ch.known, ch.h_cj) for round_index, ch in _planned_channels(run, round_indices).items()}
    stretch = _covering_stretch(run, round_indices, target, planned, csi_margin)
    fields = knob.solve(target, planned, csi_margin * stretch)
    if goal.prior:           # the closed form spends target.eps (what is left of goal.eps) on the new rounds alone
        new = fields.pop("eps_planned", None)
        fields = {**fields, "planned_eps_new_rounds": new, "target_eps_new_rounds": target.eps}
    if pr.enforce and pr.accountant != target.accountant and not goal.prior:
        spent = planned_epsilon(pr.accountant, target.noise_multiplier, target.rounds, pr.delta, q)
        _refuse_if_other_accountant_stops(pr, target.accountant, spent, "mechanism")
    return fields


def _covering_stretch(run, round_indices: list[int], target, planned: dict, csi_margin: float) -> float:
    """The multipath stretch a closed-form knob is solved with: it applies one stretch to every round, so it
    must bound each round's booked one. RunParts.planned_multipath_gain plans with every link sending the
    reference; on single-carrier multipath with a linear receiver the round's booked stretch is that of
    the plan's reference senders (channel/multipath_rx.sensitivity_gain), which can be larger (measured on
    sim, TDL-C at 2 samples RMS, K = 8, cj_adaptive: 4.23 booked against 3.05 planned over 20 rounds, seed 0;
    a 1-round run, seed 3, spent 2.04 for privacy.eps = 2). The knob is solved on a copy of the policy, its rounds planned as the run will
    (round_plan.plan_round), and the stretch raised to the largest booked one until it bounds them all."""
    from otafl_sdr.channel.multipath import Multipath
    stretch = run.planned_multipath_gain(round_indices)
    if run.cfg.phy.waveform == "ofdm" or run.multipath_at_capture() or not Multipath.from_config(run.cfg).enabled:
        return stretch                 # OFDM: per subcarrier, within the flat plan; capture: senders do not enter
    for _ in range(8):
        policy = copy.deepcopy(run.policy)
        policy.privacy_knob().solve(target, planned, csi_margin * stretch)
        worst = max((plan_round(run, round_index, zero_round(run), seeded_plan_rng(run.cfg, round_index), policy=policy)
                     .plan.extra["multipath_gain"] for round_index in round_indices), default=1.0)
        if worst <= stretch:
            return stretch
        stretch = worst
    raise UserError(f"privacy.targeting = 'target' with channel.multipath = '{run.cfg.channel.multipath}': the "
                    "rounds' multipath stretch does not settle under the calibrated power plan; set "
                    "privacy.targeting = 'paper' or phy.waveform = 'ofdm'")


def _refuse_hand_set(cfg, names, knob_name: str, section_values: dict) -> None:
    pr = cfg.privacy
    for name in names:
        section, _, key = name.rpartition(".")
        if key in section_values:
            what = "" if name == knob_name else f" (it sets {knob_name})"
            raise UserError(f"{name} is set by hand{what} and privacy.targeting = 'target' would solve "
                            f"{knob_name} for privacy.eps = {pr.eps:g}: remove one (set privacy.targeting = "
                            f"'paper' to keep your value)")


def _solve_policy_knob(run, knob, jammer_gain: float | None, goal: _Goal) -> dict:
    """A policy's PrivacyKnob: for a candidate value a copy of the policy plans every data-using round on
    the run's seeded channels, restated as the ledger books them; the value is bisected
    (privacy/targeting.solve_knob) and set on the real policy. A knob also set by hand is refused."""
    cfg, pr = run.cfg, run.cfg.privacy
    _refuse_hand_set(cfg, [n for n in (knob.name, *knob.hand_keys) if n.rpartition(".")[0] == "power.options"],
                     knob.name, cfg.power.options or {})
    round_indices = goal.round_indices

    def rounds_at(value: float) -> list:
        policy = copy.deepcopy(run.policy)                   # the real policy starts untouched
        policy.privacy_knob().set(value)
        rounds = []
        for round_index in round_indices:                                       # planned and booked as the run will (round_plan)
            m = plan_round(run, round_index, zero_round(run), seeded_plan_rng(cfg, round_index), policy=policy).booked(jammer_gain)
            if m.uses_data and m.sensitivity > 0:
                rounds.append((m.noise_multiplier, float(min(m.sampling_prob, 1.0))))
        return rounds

    acc = calibration_accountant(pr.accountant)
    cal = solve_knob(goal.eps, pr.delta, acc, knob, rounds_at, goal.prior)
    knob.set(cal.value)
    if pr.enforce and pr.accountant != acc:
        _refuse_if_other_accountant_stops(pr, acc, compose(pr.accountant, [*goal.prior, *rounds_at(cal.value)],
                                                           pr.delta), "mechanism", goal.eps)
    return cal.summary(acc)


def _solve_client_noise(run, knob: ClientNoiseKnob, jammer_gain: float | None, goal: _Goal) -> dict:
    """paper 002's Noisy-FedAvg/FedProx: the power policy keeps its own rule and is planned (a copy, zero
    payload) on the run's seeded channels; the clients' noise std sigma (algorithm.options.sigma) is solved
    so the ledger's rounds spend the target (privacy/targeting.solve_sigma)."""
    cfg, pr, alg = run.cfg, run.cfg.privacy, run.algorithm
    _refuse_hand_set(cfg, [knob.name], knob.name, cfg.algorithm.options or {})
    if run.csi is not None:
        csi_gain_margin(run.csi)                             # refused when unbounded
    round_indices = goal.round_indices
    policy = copy.deepcopy(run.policy)                       # stateful policies: the real one starts untouched
    planned = []
    for round_index in round_indices:                                           # planned as the run will, not yet finished:
        round_ = plan_round(run, round_index, zero_round(run), seeded_plan_rng(cfg, round_index), policy=policy, finish=False)
        plan = round_.plan                                   # sigma is what is solved (round_terms)
        sending, gains, _, weight, sens, sigma_air = alg.round_terms(plan, round_index)

        def finish(d, s, round_=round_):                     # as the ledger books it (CSI margin, multipath)
            round_.plan.mechanism = dataclasses.replace(round_.plan.mechanism, sensitivity=d, sigma_eff=s)
            m = round_.booked(jammer_gain)
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
    cal = solve_sigma(goal.eps, pr.delta, acc, planned, goal.prior)
    if pr.enforce and pr.accountant != acc:
        _refuse_if_other_accountant_stops(pr, acc, planned_epsilon_of_sigma(pr.accountant, planned, cal.sigma,
                                                                            pr.delta, goal.prior), "client noise",
                                          goal.eps)
    knob.set(cal.sigma)
    q = min((p.q for p in planned), default=1.0)
    return cal.summary(goal.eps, pr.delta, acc, len(round_indices), q)
