"""The rollback attacker of issue 35: write access to a results folder, none to the key folder. It drops the
last ledger entries (a valid chain prefix: no key needed), the rows of those rounds and their sent-journal
lines, deletes summary.json and rewrites the weights-only checkpoint's counters to match, so that every
check inside the folder holds; only the anchor beside the key (privacy/ledger_anchor.py) knows better."""
import json
from pathlib import Path

import torch


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def roll_back(out: Path, entries: int) -> int:
    """Roll ``out`` back by ``entries`` ledger entries, consistently; returns the iteration it now ends at."""
    led = out / "privacy_ledger.jsonl"
    recs = [json.loads(x) for x in _lines(led)]
    keep = recs[:-entries]
    assert keep, "roll back fewer entries than the ledger holds"
    led.write_text("".join(json.dumps(r) + "\n" for r in keep))
    last = max(int(r["round"]) for r in keep)
    if any(int(r["round"]) == last for r in recs[len(keep):]):      # a round cut in the middle: drop it whole
        keep = [r for r in keep if int(r["round"]) < last]
        led.write_text("".join(json.dumps(r) + "\n" for r in keep))
        last -= 1
    rows = out / "rounds.jsonl"
    rows.write_text("".join(x + "\n" for x in _lines(rows) if json.loads(x)["round"] <= last))
    sent = out / "privacy_ledger.sent"
    if sent.exists():
        ids = {r.get("release") for r in keep}
        sent.write_text("".join(x + "\n" for x in _lines(sent) if json.loads(x)["release"] in ids))
    (out / "summary.json").unlink(missing_ok=True)
    ck_path = out / "checkpoint.pt"
    ck = torch.load(ck_path, weights_only=True)
    ck.update(iteration=last, rows=last, ledger_count=len(keep), ledger_head=keep[-1]["hash"])
    torch.save(ck, ck_path)
    return last
