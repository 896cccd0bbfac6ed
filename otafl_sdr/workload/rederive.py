"""Every ledger entry's booked figures re-derived from the config and the entry's recorded plan inputs,
independent of any key (issue 28, item 3): `verify` and `run --resume` (workload/ledger_checks.audit)
refuse an entry whose figures differ, in one line naming it.

Each data round is planned again by the function that planned it in the run (workload/round_plan.plan_round),
on a copy of the run's policy as the privacy target solved it (the built run is left as it was): the
round's seeded channels and CSI, the policy's plan on a zero payload with the run's seeded plan stream
(``round_plan.seeded_plan_rng``, what the in-process transport and the testbed's server hand the policy on
seeded airs), the multipath stretch, the workload's finishing step (paper 002's client noise and Lemma
20/22 sensitivity; a zero payload: these mechanisms do not depend on the data) and the ledger's
restatement (``PlannedRound.booked``, with the jammer's measured gain the entry records, which can only
lower the noise booked); then every entry of the round (its attempts, a fault's charge, a jammer
shortfall's charge recomputed from its recorded measurement) is matched against it, extra included
(workload/rederive_match.py). Families:
  - paper 000 ``cj_adaptive``, paper 001 ``h_min``, ``cdpb_noisy`` / ``cdpb_idle`` / ``cdpb_mixed``
    (the realised noise of the noise the clients send, power/cdpb.CDPBPolicy.realised) and the baselines
    ``gamma_bar``, ``independent_sampling``, ``noise_free``, paper 003 ``otafd_prop1``: the config alone;
  - paper 002 ``noisy_fedavg`` / ``noisy_fedprox`` with any of those policies: the config alone (the
    clients' sigma as the target solved it, the schedule's learning rates, the plan's gains);
  - paper 004 ``lapa`` and ``ddpg``: the config and the inputs the base station learnt from released
    aggregates (the PID error e; DDPG's deployed action), recorded in the entry and put back by the policy's
    ``restore_recorded_inputs`` (power/lapa_replay.py).
A policy says so on its class (``PowerPolicy.rederivable``); no table here names them. Not re-derived (the
verdict says so): an in-session calibration (``calibration.session``, ``air.recalibrate_every``: the CSI of
each round is not in the folder) and a policy whose class does not declare itself rederivable."""
from __future__ import annotations

import copy
import math

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.ledger import is_raise
from otafl_sdr.workload.rederive_match import first_difference, match_entry
from otafl_sdr.workload.round_plan import PlannedRound, plan_round, seeded_plan_rng, zero_round


def rederivable(cfg, parts) -> str:
    """'' when ``rederive`` re-plans this run's entries, else why they are chain-checked only."""
    if parts is None:
        return "the run could not be rebuilt"
    if not type(parts.policy).rederivable:                   # the policy's class says (power/base.py)
        return f"power policy '{cfg.power.policy}' is chain-checked only"
    if cfg.calibration.session:              # air.recalibrate_every acts only within a session calibration
        return "an in-session calibration: chain-checked only"
    return ""


def _rounds(records: list, first: int = 1) -> list[tuple[int, list]]:
    """[(round, [(entry number, entry), ...])] in the order the rounds were first booked (``records`` hold
    no raised budget's line; ``first``: the entry number of records[0])."""
    out: dict[int, list] = {}
    for i, rec in enumerate(records, first):
        round_index = rec.get("round")
        if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index < 1:
            raise UserError(f"ledger entry {i}: round {round_index!r} is not an iteration number")
        out.setdefault(round_index, []).append((i, rec))
    return list(out.items())


def _where(i: int, rec: dict) -> str:
    return f"ledger entry {i} (round {rec['round']}, attempt {rec.get('attempt', 0)})"


def _gain(rec: dict, where: str) -> float | None:
    """The jammer's delivered power gain the air measured for this booking (privacy/delivered_jammer.py)."""
    jam = (rec.get("extra") or {}).get("jammer_noise") if isinstance(rec.get("extra"), dict) else None
    gain = jam.get("power_gain_lower") if isinstance(jam, dict) else None
    if gain is not None and (isinstance(gain, bool) or not isinstance(gain, (int, float))
                             or not math.isfinite(gain) or gain < 0):
        raise UserError(f"{where}: the jammer's recorded gain {gain!r} is not a finite number >= 0")
    return gain


def _clipped(rec: dict) -> bool:
    """Paper 002's one data-dependent flag, taken as recorded: an update clipped after local training
    (``extra["fdp"]["update_clipped"]``; never, by the train.tau check, unless rounding) makes the fdp
    accountant report None, so it can only be claimed away, which the config cannot refute."""
    fdp = (rec.get("extra") or {}).get("fdp") if isinstance(rec.get("extra"), dict) else None
    return isinstance(fdp, dict) and fdp.get("update_clipped") is True


def replan(parts, policy, round_index: int, clipped: bool = False) -> PlannedRound:
    """Round ``round_index`` planned as the run planned it (workload/round_plan.plan_round), on a zero payload."""
    return plan_round(parts, round_index, zero_round(parts, clipped), seeded_plan_rng(parts.cfg, round_index), policy=policy)


def _segments(records: list) -> list[tuple[int, list, tuple | None]]:
    """[(entry number of the first line, round lines, the raised budget's (entry number, line) ending them or
    None)]: the ledger cut at each raised budget."""
    out, start, seg = [], 1, []
    for i, rec in enumerate(records, 1):
        if is_raise(rec):
            out.append((start, seg, (i, rec)))
            start, seg = i + 1, []
        else:
            seg.append(rec)
    out.append((start, seg, None))
    return out


def _rederive_raise(view, i: int, rec: dict, before: list, after: list, extension: int | None) -> None:
    """A raised budget's line: from_round after every round booked before it and at or before every round
    after it; the knob solved again for its eps after the lines before it gives the recorded calibration
    (the knob is then set on ``view``'s copies)."""
    from otafl_sdr.workload.targeting import solve_raised_target
    where = f"ledger entry {i} (the budget raised to eps {rec.get('eps_budget')!r})"
    frm, total = rec.get("from_round"), rec.get("client_rounds_total")
    for v, what in ((frm, "from_round"), (total, "client_rounds_total")):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise UserError(f"{where}: its {what} {v!r} is not a round count")
    if any(int(r["round"]) >= frm for r in before) or any(int(r["round"]) < frm for r in after):
        raise UserError(f"{where}: from_round {frm} does not separate the rounds booked before and after it")
    if extension is not None and total > view.cfg.run.rounds + extension:
        raise UserError(f"{where}: it plans {total} client rounds, more than run.rounds and extension.json give")
    try:
        got = solve_raised_target(view, rec["eps_budget"], frm, total, before, rec.get("jammer_gain"))
    except (UserError, ValueError, ArithmeticError) as e:
        raise UserError(f"{where}: its knob cannot be solved again ({str(e)[:160]})") from None
    diff = first_difference(got, rec.get("calibration"), "calibration")
    if diff:
        raise UserError(f"{where}: {diff} differs from the knob solved again for that target")


def rederive(records: list, cfg, parts, extension: int | None = None) -> int:
    """Plan every recorded round again (module docstring); raises UserError naming the first entry whose
    booked figures differ. Returns how many entries were re-derived (a raised budget's line included).
    ``extension``: extension.json's client rounds (a raise may not plan beyond them)."""
    policy = copy.deepcopy(parts.policy)                   # the run's own policy keeps its state
    done, view, before = 0, parts, []
    for first, seg, raised in _segments(records):
        done += _rederive_rounds(seg, first, view, policy)
        before += seg
        if raised is not None:
            if view is parts:                              # the knob is re-solved on copies: the built run stays
                view = copy.copy(parts)
                view.algorithm = copy.deepcopy(parts.algorithm)
            view.policy = policy
            after = [r for r in records[raised[0]:] if not is_raise(r)]
            _rederive_raise(view, raised[0], raised[1], before, after, extension)
            done += 1
    return done


def _rederive_rounds(records: list, first_entry: int, parts, policy) -> int:
    alg = parts.algorithm
    done = 0
    for round_index, entries in _rounds(records, first_entry):
        first = _where(*entries[0])
        if not alg.uses_clients(round_index):
            for i, rec in entries:
                if rec.get("uses_data") is not False or rec.get("sensitivity") != 0:
                    raise UserError(f"{_where(i, rec)}: a server-only round booked as a data release")
            done += len(entries)
            continue
        policy.restore_recorded_inputs([r for _, r in entries], first)
        try:
            planned = replan(parts, policy, round_index, _clipped(entries[0][1]))
        except (ValueError, TypeError, ArithmeticError) as e:
            raise UserError(f"{first}: its round cannot be planned again from the config and the recorded "
                            f"inputs ({type(e).__name__}: {str(e)[:120]})") from None
        from otafl_sdr.privacy.jammer_shortfall import booked_jammer_share
        for i, rec in entries:
            where = _where(i, rec)
            booked = planned.booked(_gain(rec, where))
            match_entry(where, rec, booked, booked_jammer_share(planned.plan, booked), planned.plan)
            done += 1
    return done
