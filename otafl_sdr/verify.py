"""`otafl-sdr verify DIR`: check a results folder offline and print a one-line verdict.

Checks: the privacy ledger's hash chain from the config (no line deleted, edited, reordered or foreign),
the checkpoint (loaded as tensors and plain data only) against the ledger's entry count and head hash,
every client round in rounds.jsonl present in the ledger, and every epsilon recomputed by replaying the
ledger into fresh accountants, equal to what the ledger and summary.json say. Exit 0 when all hold,
1 when one does not (the line says which), 2 when DIR is not a results folder. Changes nothing."""
from __future__ import annotations

import json
import math
from pathlib import Path

from .errors import UserError


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(1.0, abs(a))


def verify(out: Path) -> str:
    """The verdict's details when everything holds; raises UserError with what does not."""
    import torch

    from .run_config import load_config
    from .privacy.ledger import PrivacyLedger, config_genesis, read_chain
    from .plugins import load_plugins
    from .results import read_rounds
    load_plugins()
    cfg = load_config(out / "config.toml")
    ledger_path = out / "privacy_ledger.jsonl"
    records, torn = read_chain(ledger_path, config_genesis(cfg)) if ledger_path.exists() else ([], False)
    ck = None
    if (out / "checkpoint.pt").exists():
        try:
            ck = torch.load(out / "checkpoint.pt", weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise UserError(f"checkpoint.pt is unreadable or holds more than tensors and plain data ({type(e).__name__})")
        n = int(ck.get("ledger_count", 0))
        if len(records) < n:
            raise UserError(f"the ledger holds {len(records)} entries but the checkpoint counts {n}")
        if n and records[n - 1]["hash"] != ck.get("ledger_head"):
            raise UserError(f"ledger entry {n} is not the one the checkpoint recorded")
        if ck.get("config_hash") != config_genesis(cfg):
            raise UserError("config.toml changed since the checkpoint was written")
    rows = read_rounds(out / "rounds.jsonl") if (out / "rounds.jsonl").exists() else []
    recorded = {(int(r["round"]), int(r.get("attempt", 0))) for r in records}
    for row in rows:
        if row.get("uses_clients") and (int(row["round"]), 0) not in recorded:
            raise UserError(f"round {row['round']} used client data but has no ledger entry")
    replay = PrivacyLedger(cfg.privacy, None)
    replay.load_state_dict({"records": records})
    eps = replay.epsilons()
    if records:
        for name, v in (records[-1].get("eps") or {}).items():
            if name in eps and not _close(v, eps[name]):
                raise UserError(f"eps_{name} recomputes to {eps[name]} but the ledger says {v}")
    summ = out / "summary.json"
    if summ.exists():
        from .safe_files import load_json
        s = load_json(summ, "summary")
        for name, v in eps.items():
            if f"eps_{name}" in s and not _close(s[f"eps_{name}"], v if v is None or math.isfinite(v) else None):
                raise UserError(f"summary.json says eps_{name} = {s[f'eps_{name}']} but the ledger gives {v}")
    enforcing = cfg.privacy.accountant
    tail = " (a torn last line, left by an interrupted write, is not counted)" if torn else ""
    at = f", checkpoint at iteration {ck['iteration']}" if ck is not None else ""
    return (f"{len(records)} ledger entries, chain intact{at}, {len(rows)} rows, eps_{enforcing} "
            f"{eps.get(enforcing)} recomputed{tail}")


def add_arguments(p) -> None:
    p.add_argument("dir", help="a results folder")


def main(args) -> int:
    out = Path(args.dir)
    if not (out / "config.toml").is_file():
        raise UserError(f"'{out}' holds no config.toml (not a results folder)")
    try:
        detail = verify(out)
    except UserError as e:
        print(f"verify {out}: FAILED: {e}")
        return 1
    print(f"verify {out}: OK: {detail}")
    return 0
