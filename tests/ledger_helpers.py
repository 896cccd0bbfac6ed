"""Helpers for the ledger-forgery and resume-refusal tests: a small interrupted run of the default
experiment's family (paper 000's cj_adaptive with Upcycled-FL, sample-level DP, air=sim), a forger who
rewrites the ledger consistently (eps recomputed, chain rehashed, checkpoint patched), and a folder digest."""
import hashlib
import json
from pathlib import Path

import torch

import shared_runs

from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.privacy import ledger_keys
from otafl_sdr.privacy.base import mech_from_dict
from otafl_sdr.privacy.ledger import PrivacyLedger, config_genesis, keyed_genesis, line_hash
from otafl_sdr.configure.load import default_experiment, load_config

SETS = ["run.progress=false", "data.dataset=digits", "data.clients=3", "model.hidden=8", "air.name=sim",
        "run.rounds=6", "run.checkpoint_every=1"]


def interrupted_run(tmp_path: Path, after: int = 6, extra=()) -> Path:
    """The default experiment's family, stopped (as by a kill between rounds) after iteration ``after``: a
    private copy (tmp_path/run) of the one run the session makes for these arguments (tests/shared_runs.py)."""
    name = f"interrupted-{after}-{hashlib.sha256(repr(tuple(extra)).encode()).hexdigest()[:12]}"
    return shared_runs.copy_of(name, lambda out: _interrupt(out, after, extra), tmp_path / "run")


def _interrupt(out: Path, after: int, extra) -> None:
    exp = Experiment(default_experiment(SETS + list(extra)), out)

    def stop(row):
        if row["round"] == after:
            raise KeyboardInterrupt
    exp.on_round = stop
    assert exp.run().stopped_reason.startswith("interrupted")


def ledger(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]


def rewrite(out: Path, records: list[dict], key: bytes | None, checkpoint: str = "patched") -> None:
    """Write ``records`` back as a consistent ledger: every epsilon recomputed by replaying them (fresh
    accountants), the chain rehashed (under ``key``; None: SHA-256, as a legacy ledger), and the checkpoint
    patched to the new count and head ("patched") or removed ("deleted")."""
    cfg = load_config(out / "config.toml")
    replay = PrivacyLedger(cfg.privacy, None)
    prev = keyed_genesis(config_genesis(cfg), key)
    lines = []
    for rec in records:
        rec = dict(rec)
        for acc in replay.accountants.values():
            acc.step(mech_from_dict(rec))
        rec["eps"] = replay.epsilons()
        rec["prev"] = prev
        rec.pop("hash", None)
        rec["hash"] = prev = line_hash(rec, key)
        lines.append(json.dumps(rec) + "\n")
    (out / "privacy_ledger.jsonl").write_text("".join(lines))
    ck_path = out / "checkpoint.pt"
    if checkpoint == "deleted":
        ck_path.unlink()
    elif ck_path.exists():
        ck = torch.load(ck_path, weights_only=True)
        ck["ledger_count"] = len(records)
        ck["ledger_head"] = prev
        torch.save(ck, ck_path)
    if (out / "summary.json").exists():
        s = json.loads((out / "summary.json").read_text())
        s.update({f"eps_{k}": v for k, v in replay.epsilons().items()})
        (out / "summary.json").write_text(json.dumps(s))


def run_key(out: Path) -> bytes:
    cfg = load_config(out / "config.toml")
    return ledger_keys.load(ledger_keys.read_run_id(out), cfg)


def to_legacy(out: Path, records: list[dict] | None = None, checkpoint: str = "patched") -> None:
    """The folder as an otafl-sdr before keyed ledgers wrote it: no ledger.id, a SHA-256 chain."""
    (out / ledger_keys.RUN_ID_FILE).unlink()
    rewrite(out, ledger(out) if records is None else records, None, checkpoint)


def digest(out: Path) -> dict:
    """{relative path: sha256} of every file (the lock file, which holds the last holder's PID, aside)."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".lock"}
