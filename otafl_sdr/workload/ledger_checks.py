"""Every check of a results folder, in one function (``audit``) that `verify` and `run --resume` share; it
reads and never writes, so a refused resume leaves the folder as it was.

1. The ledger's chain (privacy/ledger.read_chain): keyed (HMAC-SHA256 under the run's key, found through
   the folder's ``ledger.id``; privacy/ledger_keys.py), keyless (the key is not on this machine: only the
   links are checked, reduced assurance) or legacy (no ``ledger.id``: SHA-256 from the config).
2. The checkpoint (tensors and plain data only) against the config's hash, the ledger's entry count and
   head, and rounds.jsonl's row count: a counted ledger entry or row that is missing or torn is refused.
3. Every row's round that used client data has its ledger entry (a dropped entry, rewritten consistently);
   a row charged for its jammer's shortfall has the charge line (privacy/jammer_shortfall.py).
4. The booked figures re-derived (workload/rederive.py): each round planned again from the config on the
   run's seeded channels and stream, with the inputs the entry records where the config cannot give them
   (paper 004's PID error and DDPG action), and restated as the ledger books it; every entry of the round
   must book that mechanism, its whole ``extra`` (what each family's accountant reads) included. Every
   built-in family is covered (paper 000, 001 with its baselines, 002, 003, 004); an in-session
   calibration and a plug-in policy are chain-checked only (the verdict says so).
5. Every entry's epsilons recomputed by replaying the ledger into fresh accountants (dp-accounting); a
   raised budget's line (`run --resume --extend N --eps E`) composes nothing, raises the budget above the
   one before it, and every entry books against the budget in force (its ``eps_budget``).
6. The anchor (privacy/ledger_anchor.py, beside the key, outside the folder): a folder behind it (fewer
   ledger entries, another entry at its head, a release it holds as sent that the sent-journal lacks,
   another extension.json, an anchored journal such as iq_attacks.jsonl shortened) was rolled back and is
   refused."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.privacy import ledger_keys
from otafl_sdr.privacy.ledger_anchor import complete_lines, journal_releases, problems
from otafl_sdr.privacy.ledger import PrivacyLedger, config_genesis, is_raise, keyed_genesis, read_chain
from otafl_sdr.workload.rederive import rederivable, rederive

LEDGER, ROWS, CHECKPOINT = "privacy_ledger.jsonl", "rounds.jsonl", "checkpoint.pt"
SENT, EXTENSION = "privacy_ledger.sent", "extension.json"   # the releases sent; client rounds --extend added
REL = 1e-9


@dataclass
class Audit:
    records: list
    torn: bool
    checkpoint: dict | None
    rows: list
    eps: dict
    run_id: str | None
    key: bytes | None
    chain: str                       # "keyed", "keyless" (key not found: links only) or "legacy"
    rederived: int = 0
    rederive_note: str = ""
    anchored: bool = False           # checked against its anchor outside the folder


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or isinstance(a, bool):
        return False
    if math.isinf(a) or math.isinf(b) or math.isnan(a) or math.isnan(b):
        return a == b
    return abs(a - b) <= REL * max(1.0, abs(a), abs(b))


def open_chain(out: Path, cfg) -> tuple[str | None, bytes | None, str]:
    """(run id, key, chain kind) of a results folder."""
    rid = ledger_keys.read_run_id(out)
    if rid is None:
        keyed = ledger_keys.keyed_runs_of(config_genesis(cfg), cfg)
        if keyed:
            raise UserError(f"'{out}' has no {ledger_keys.RUN_ID_FILE} (an unkeyed, legacy ledger), but this machine "
                            f"holds the ledger key of a keyed run of the same config (run {keyed[0]}): a keyed ledger "
                            f"rewritten as unkeyed is refused (if this folder truly predates keyed ledgers, move "
                            f"'{ledger_keys.where(keyed[0], cfg)}' and its .config out of the key folder)")
        return None, None, "legacy"
    key = ledger_keys.load(rid, cfg)
    return rid, key, "keyed" if key is not None else "keyless"


def read_extension(out: Path) -> int:
    """Client rounds that `--extend` (or a re-run of a lost round) added to the run in ``out`` (0: none)."""
    from otafl_sdr.results.safe_files import load_json
    path = Path(out) / EXTENSION
    if not path.is_file():
        return 0
    d = load_json(path, "extension")
    n = d.get("client_rounds") if isinstance(d, dict) else None
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 100_000:
        raise UserError(f"'{path}' is corrupt (client_rounds {n!r}); nothing was changed")
    return n


def check_anchor(out: Path, cfg, run_id: str | None, records: list) -> bool:
    """Refuse a folder behind its anchor (privacy/ledger_anchor.py); True when it was checked (False: a
    legacy folder, or a keyed run from before anchors, or one whose anchor is not on this machine)."""
    if run_id is None:
        return False
    anchor = ledger_keys.anchor(run_id, cfg).read()
    if anchor is None:
        return False
    lines = {name: complete_lines(Path(out) / name) for name in anchor.journals}
    problem = problems(anchor, records, journal_releases(Path(out) / SENT), read_extension(out), lines)
    if problem:
        raise UserError(f"'{out}': {problem}; nothing was changed")
    return True


def load_checkpoint(path: Path) -> dict | None:
    """The checkpoint as tensors and plain data (weights_only: nothing in a results folder runs code)."""
    if not path.exists():
        return None
    import torch
    try:
        ck = torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001 - a corrupt or unsafe checkpoint is a user-facing error
        raise UserError(f"checkpoint '{path}' is unreadable or holds more than tensors and plain data "
                        f"({type(e).__name__}); refusing to load it") from None
    if not isinstance(ck, dict) or not {"iteration", "w", "w_prev"} <= set(ck):
        raise UserError(f"checkpoint '{path}' is not an otafl-sdr checkpoint")
    return ck


def _int(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise UserError(f"checkpoint.pt: {what} is {v!r}, not a count; it is corrupt")
    return int(v)


def _check_checkpoint(out: Path, cfg, ck: dict, records: list, torn: bool, rows: list) -> None:
    led = out / LEDGER
    if ck.get("config_hash") != config_genesis(cfg):
        raise UserError(f"'{out / 'config.toml'}' changed since the checkpoint was written")
    n = _int(ck.get("ledger_count", 0), "ledger_count")
    if n > 0 and not led.exists():
        raise UserError(f"'{led}' is missing but the checkpoint counts {n} ledger entries")
    if len(records) < n:
        if torn and len(records) == n - 1:
            raise UserError(f"'{led}' entry {n}, which the checkpoint counts, is torn (its round was released); "
                            f"restore the ledger from a backup, nothing was changed")
        raise UserError(f"'{led}' holds {len(records)} entries but the checkpoint counts {n} (entries were removed)")
    if n > 0 and records[n - 1].get("hash") != ck.get("ledger_head"):
        raise UserError(f"'{led}' entry {n} is not the one the checkpoint recorded")
    if "rows" in ck:
        want, round_index = _int(ck["rows"], "rows"), _int(ck["iteration"], "iteration")
        have = sum(1 for r in rows if r["round"] <= round_index)
        if have < want:
            what = "is missing" if not (out / ROWS).exists() else f"holds {have} of them"
            raise UserError(f"'{out / ROWS}' {what} but the checkpoint counts {want} rows (a counted row is missing "
                            f"or torn); restore rounds.jsonl from a backup, nothing was changed")
        rounds = sorted(r["round"] for r in rows if r["round"] <= round_index)
        if want == round_index and rounds != list(range(1, round_index + 1)):
            gap = next((i for i in range(1, round_index + 1) if rounds.count(i) != 1), "?")
            raise UserError(f"'{out / ROWS}': the row of iteration {gap} is missing or repeated although the "
                            f"checkpoint counts {want} rows; restore rounds.jsonl from a backup, nothing was changed")


def _read_rows(out: Path) -> list:
    from otafl_sdr.results.files import read_rounds
    path = out / ROWS
    if not path.exists():
        return []
    if path.is_dir():
        raise UserError(f"'{path}' is a directory, not a file")
    return read_rounds(path)


def replay_eps(records: list, cfg) -> dict:
    """Every entry's epsilons recomputed by replaying the ledger into fresh accountants (dp-accounting);
    refused where one differs from what the entry says."""
    from otafl_sdr.privacy.base import mech_from_dict, validate
    replay = PrivacyLedger(cfg.privacy, None)
    seen: dict = {}
    budget = float(cfg.privacy.eps)
    for i, rec in enumerate(records, 1):
        if is_raise(rec):
            budget = _check_raise(i, rec, budget, replay.epsilons())
            continue
        if "eps_budget" in rec and not _close(rec["eps_budget"], budget):
            raise UserError(f"ledger entry {i}: books against eps_budget {rec['eps_budget']} but the budget in "
                            f"force is {budget:g}")
        try:
            mech = mech_from_dict(rec)
            validate(mech)
        except (ValueError, TypeError) as e:
            raise UserError(f"ledger entry {i}: {e}") from None
        extra = mech.extra or {}
        k = (mech.round, int(extra.get("attempt", 0)), bool(extra.get("fault")))    # as the ledger keys it
        core = {n: rec.get(n) for n in ("sensitivity", "sigma_eff", "uses_data", "sampling_prob", "extra")}
        if k in seen:
            if seen[k] != core:
                raise UserError(f"ledger entry {i}: round {k[0]} (attempt {k[1]}) is booked twice, differently")
            continue
        seen[k] = core
        for acc in replay.accountants.values():
            acc.step(mech)
        eps = replay.epsilons()
        for name, v in (rec.get("eps") or {}).items():
            if name in eps and not _close(v, eps[name]):
                raise UserError(f"ledger entry {i}: eps_{name} recomputes to {eps[name]} but the ledger says {v}")
    return replay.epsilons()


def _check_raise(i: int, rec: dict, budget: float, eps: dict) -> float:
    """A raised budget's line against the replay so far: above the budget in force, recorded with it, and
    with the epsilons spent when it was raised. Returns the new budget."""
    new, before = rec.get("eps_budget"), rec.get("eps_budget_before")
    if isinstance(new, bool) or not isinstance(new, (int, float)) or not math.isfinite(new) or new <= budget:
        raise UserError(f"ledger entry {i}: raises the budget to {new!r}, not above the budget in force {budget:g}")
    if not _close(before, budget):
        raise UserError(f"ledger entry {i}: raises the budget from {before!r} but the budget in force is {budget:g}")
    if rec.get("sensitivity") != 0 or rec.get("sigma_eff") != 0:
        raise UserError(f"ledger entry {i}: a raised budget's line books a mechanism")
    for name, v in (rec.get("eps") or {}).items():
        if name in eps and not _close(v, eps[name]):
            raise UserError(f"ledger entry {i}: eps_{name} recomputes to {eps[name]} but the ledger says {v}")
    return float(new)


def audit(out: Path, cfg, parts=None) -> Audit:
    """All the checks (module docstring) of results folder ``out`` with config ``cfg``; ``parts``: the
    built run with its privacy target solved (None: booked figures not re-derived). Reads only."""
    out = Path(out)
    rid, key, chain = open_chain(out, cfg)
    led = out / LEDGER
    records, torn = [], False
    if led.exists():
        genesis = keyed_genesis(config_genesis(cfg), key) if chain != "keyless" else None
        records, torn = read_chain(led, genesis, key, macs=chain != "keyless")
    rows = _read_rows(out)
    ck = load_checkpoint(out / CHECKPOINT)
    if ck is not None:
        _check_checkpoint(out, cfg, ck, records, torn, rows)
    recorded = {(int(r["round"]), int(r.get("attempt", 0))) for r in records if not is_raise(r)}
    alg = parts.algorithm if parts is not None else None
    for row in rows:
        used = row.get("uses_clients") or (alg is not None and alg.uses_clients(int(row["round"])))
        if used and (int(row["round"]), 0) not in recorded:
            raise UserError(f"round {row['round']} used client data but has no ledger entry")
    charged = {int(r["round"]) for r in records if isinstance(r.get("extra"), dict) and "jammer_shortfall" in r["extra"]}
    for row in rows:                   # a round its row says was charged for its jammer's shortfall
        if row.get("jammer_charged_bound") is not None and int(row["round"]) not in charged:
            raise UserError(f"round {row['round']}: its row says the jammer delivered less than booked, but the "
                            f"ledger holds no charge for it (privacy/jammer_shortfall.py)")
    result = Audit(records=records, torn=torn, checkpoint=ck, rows=rows, eps={}, run_id=rid, key=key, chain=chain)
    result.rederive_note = rederivable(cfg, parts)
    if not result.rederive_note:
        result.rederived = rederive(records, cfg, parts, read_extension(out))
    result.eps = replay_eps(records, cfg)
    result.anchored = check_anchor(out, cfg, rid, records)    # last: a consistent rollback passes all the above
    return result


def check_resume(out: Path, cfg, parts=None) -> Audit:
    """``audit`` as `run --resume` (and `run --dry-run --resume`) needs it: every failure is "cannot resume:
    ...", and a keyed ledger whose key is not on this machine is refused (it is only extended with its key)."""
    try:
        a = audit(out, cfg, parts)
    except UserError as e:
        raise UserError(f"cannot resume: {e}") from None
    if a.chain == "keyless":
        raise UserError(f"cannot resume: the ledger key of run {a.run_id} is not on this machine "
                        f"({ledger_keys.where(a.run_id, cfg)}); a keyed ledger is only extended with its key")
    return a


def describe_chain(a: Audit, cfg) -> str:
    """The verdict's words for the chain and what was re-derived."""
    if a.chain == "keyed":
        c = "chain intact (keyed: HMAC-SHA256)"
    elif a.chain == "keyless":
        c = (f"chain links intact, HMACs NOT checked: the ledger key of run {a.run_id} is not readable here "
             f"({ledger_keys.where(a.run_id, cfg)}; reduced assurance)")
    else:
        c = "chain intact, unkeyed (legacy)"
    if a.chain != "legacy":
        c += ", at its anchor" if a.anchored else ", no anchor to check it against (a run from before anchors)"
    d = f"{a.rederived} entries' booked figures re-derived" if not a.rederive_note else \
        f"booked figures not re-derived ({a.rederive_note})"
    return f"{c}, {d}"
