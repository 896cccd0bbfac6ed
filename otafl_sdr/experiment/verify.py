"""`otafl-sdr verify DIR [--head HEX]`: check a results folder offline and print a one-line verdict.

The checks are `run --resume`'s, one function (workload/ledger_checks.py): the ledger's chain (keyed HMAC-SHA256
under the run's key kept outside the folder; without the key on this machine only the links, said in the
verdict as reduced assurance; legacy folders: SHA-256, "unkeyed (legacy)"), the checkpoint against the
config, the ledger's entry count and head and the rows' count, every client round in rounds.jsonl present
in the ledger, each entry's booked figures re-derived by re-planning its round from the config and the
entry's recorded inputs (workload/rederive.py: every built-in family; not in-session calibrations), and every epsilon recomputed by replaying the ledger; then summary.json's
epsilons (a raised budget's line, `run --resume --extend N --eps E`, re-derived with the rest). ``--head HEX``: the head an operator wrote down at the end of the run must be in the ledger
(the last entry, or an earlier one when the run was resumed since). Exit 0 when all hold, 1 when one
does not (the line says which), 2 when DIR is not a results folder. Changes nothing."""
from __future__ import annotations

import math
import re
from pathlib import Path

from otafl_sdr.errors import UserError


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if not isinstance(a, (int, float)) or isinstance(a, bool):
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a))


def rebuild_run(cfg, out: Path):
    """The run as its resume would build it (data, policy, privacy target; no radio opened), or the
    reason it cannot be (then the booked figures are not re-derived)."""
    from otafl_sdr.workload.build import build_run
    from otafl_sdr.workload.targeting import solve_privacy_target
    cal = out / "calibration.json"
    try:
        parts = build_run(cfg, session_cal=cal if cal.is_file() else None)
        solve_privacy_target(parts)
    except (UserError, ValueError, OSError, RuntimeError) as e:
        return None, (str(e).splitlines() or [type(e).__name__])[0][:200]
    return parts, ""


def _check_head(records: list, head: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{64}", head or ""):
        raise UserError(f"--head {head!r} is not a 64-digit hex ledger head")
    for i, r in enumerate(records, 1):
        if str(r.get("hash", "")).lower() == head.lower():
            since = len(records) - i
            return f"head {head[:12]}... is entry {i} of {len(records)}" + (f" ({since} entries since)" if since else "")
    raise UserError(f"the head {head[:12]}... is not in the ledger (rewritten, or not this run's)")


def verify(out: Path, head: str | None = None) -> str:
    """The verdict's details when everything holds; raises UserError with what does not."""
    from otafl_sdr.configure.plugins import load_plugins
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.results.safe_files import load_json
    from otafl_sdr.workload.ledger_checks import audit, describe_chain
    load_plugins()
    out = Path(out)
    cfg = load_config(out / "config.toml")
    parts, why = rebuild_run(cfg, out)
    a = audit(out, cfg, parts)
    if parts is None:
        a.rederive_note = f"the run could not be rebuilt: {why}"
    eps = a.eps
    summ = out / "summary.json"
    if summ.exists():
        s = load_json(summ, "summary")
        if not isinstance(s, dict):
            raise UserError(f"'{summ}' is not a JSON object")
        for name, v in eps.items():
            if f"eps_{name}" in s and not _close(s[f"eps_{name}"], v if v is None or math.isfinite(v) else None):
                raise UserError(f"summary.json says eps_{name} = {s[f'eps_{name}']} but the ledger gives {v}")
    heads = f", {_check_head(a.records, head)}" if head is not None else ""
    enforcing = cfg.privacy.accountant
    tail = " (a torn last line, left by an interrupted write, is not counted)" if a.torn else ""
    at = f", checkpoint at iteration {a.checkpoint['iteration']}" if a.checkpoint is not None else ""
    from otafl_sdr.privacy.ledger import is_raise
    raised = "".join(f", budget raised to eps {r.get('eps_budget'):g} from iteration {r.get('from_round')}"
                     for r in a.records if is_raise(r))
    return (f"{len(a.records)} ledger entries, {describe_chain(a, cfg)}{heads}{at}, {len(a.rows)} rows, "
            f"eps_{enforcing} {eps.get(enforcing)} recomputed{raised}{tail}")


def add_arguments(p) -> None:
    p.add_argument("dir", help="a results folder, or a sweep / compare folder (every cell is verified)")
    p.add_argument("--head", metavar="HEX", default=None,
                   help="the ledger head printed at the end of the run: it must be in the ledger")


def main(args) -> int:
    out = Path(args.dir)
    from otafl_sdr.results.folders import cells, is_sweep
    if is_sweep(out) and not (out / "config.toml").is_file():   # a sweep / compare folder: every cell
        if getattr(args, "head", None):
            raise UserError("--head checks one run's ledger: give that cell's folder, not the sweep's")
        found = cells(out)
        if not found:
            raise UserError(f"'{out}' is a sweep folder without any cell yet (run the sweep first)")
        bad = sum(main(type(args)(dir=str(c), head=None)) != 0 for c in found)
        print(f"verify {out}: {len(found) - bad}/{len(found)} cells OK" + (f", {bad} FAILED" if bad else ""))
        return 1 if bad else 0
    if not (out / "config.toml").is_file():
        raise UserError(f"'{out}' holds no config.toml (not a results folder)")
    try:
        detail = verify(out, getattr(args, "head", None))
    except UserError as e:
        print(f"verify {out}: FAILED: {e}")
        return 1
    print(f"verify {out}: OK: {detail}")
    return 0
