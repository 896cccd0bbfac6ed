"""`run --resume DIR --extend N [--eps E]`: every check of an extension, before anything is written.

A refused extension leaves the folder byte for byte as it was (no extension.json, no summary, no figures, no
ledger line, no anchor line), so every refusal is decided here from what the folder already holds:

* a targeted run spends its target eps (within 1 %) by design: without ``--eps E`` no round is left;
* ``--eps E`` must raise the budget, the ledger may book nothing after the checkpoint, and the knob must be
  solvable for what is left of E after the rounds booked (workload.targeting.solve_raised_target);
* an untargeted run (privacy.targeting = "paper") whose next client round the budget already refuses (it
  stopped at the budget): the round is planned as the dry run plans it (workload.round_plan.plan_round on a
  zero payload with the round's seeded stream; the booking is data-independent) and checked against the
  ledger, so the extension is refused instead of written and stopped at once.
"""
from __future__ import annotations

import copy

from otafl_sdr.errors import BudgetExceeded, UserError
from otafl_sdr.privacy.ledger import is_raise
from otafl_sdr.workload.round_plan import plan_round, seeded_plan_rng, zero_round


def prepare_extension(exp, ck: dict | None) -> dict | None:
    """Check `--extend N [--eps E]` on the resumed Experiment ``exp`` (its ledger loaded, its checkpoint
    ``ck`` read, nothing written); with ``--eps`` the knob is solved for E and set on ``exp.calibration``.
    Returns the raised budget's ledger fields, or None without ``--eps``. Raises UserError (nothing changed)."""
    budget = exp.ledger.budget
    if exp.raise_eps is None:
        if str(exp.calibration.get("calibration", "")).startswith("target"):
            raise UserError(f"cannot extend '{exp.out}': a targeted run spends its target eps {budget:g} "
                            f"(within 1 %) by design, so no round is left to run; raise the budget with "
                            f"--extend {exp.extend} --eps E (E > {budget:g}); nothing was changed")
        refuse_if_next_round_over_budget(exp, ck)
        return None
    eps = exp.raise_eps
    if not eps > budget:
        raise UserError(f"--eps {eps:g} must be above the run's current target eps {budget:g} (a raised "
                        f"budget is further composition on the same ledger); nothing was changed")
    done = int(ck["iteration"]) if ck is not None else 0
    records = exp.ledger.records()
    if any(int(r["round"]) > done for r in records if not is_raise(r)):
        raise UserError(f"cannot raise the budget of '{exp.out}': its ledger books a round after its "
                        f"checkpoint (iteration {done}); finish it with --resume first; nothing was changed")
    total = exp.cfg.run.rounds + exp.extra_rounds + exp.extend
    from otafl_sdr.workload.targeting import solve_raised_target
    gain = exp.transport.delivered_jammer_gain()
    try:
        cal = solve_raised_target(exp.parts, eps, done + 1, total, records, gain)
    except UserError as e:
        why = str(e).replace("privacy.eps = ", "their share eps ")
        raise UserError(f"cannot raise the budget to eps {eps:g} (the rounds added must spend what is left of it "
                        f"after those booked): {why}; nothing was changed") from None
    exp.calibration = cal
    return {"from_round": done + 1, "client_rounds": exp.extend, "client_rounds_total": total,
            "extension": exp.extra_rounds + exp.extend, "jammer_gain": gain, "calibration": cal}


def refuse_if_next_round_over_budget(exp, ck: dict | None) -> None:
    """An enforcing ledger that would refuse the next client round after the checkpoint ``ck`` refuses the
    extension now (UserError, nothing written). The round is planned with a copy of the policy in its
    checkpointed state, on the round's seeded stream (the planned booking is the one the round books: the
    plan never reads the payload); a real lab's measured CSI may still differ, and then the run stops at the
    budget as before, having written its extension."""
    if not exp.cfg.privacy.enforce:
        return
    done = int(ck["iteration"]) if ck is not None else 0
    alg = exp.algorithm
    round_index = next((i for i in range(done + 1, exp.iterations() + 1) if alg.uses_clients(i)), None)
    if round_index is None:
        return
    policy = copy.deepcopy(exp.policy)
    if ck is not None and ck.get("policy") is not None:
        policy.load_state_dict(ck["policy"])
    planned = plan_round(exp.parts, round_index, zero_round(exp.parts), seeded_plan_rng(exp.cfg, round_index),
                         policy=policy)
    try:
        exp.ledger.check(planned.booked(exp.transport.delivered_jammer_gain()))
    except BudgetExceeded as e:
        raise UserError(f"cannot extend '{exp.out}': its budget is spent ({e}); raise it with "
                        f"--extend {exp.extend} --eps E (E > {exp.ledger.budget:g}); nothing was changed") from None
