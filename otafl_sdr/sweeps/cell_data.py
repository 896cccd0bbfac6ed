"""One cell's compact run data, committed beside its results page (``docs/results/NAME/cells/<cell>/``): what
the page and the claims need, and what lets anyone check the cell's privacy books, and nothing else (no
checkpoint, model or figure).

A compact cell holds the run folder's ``config.toml`` (the resolved config), ``summary.json``, ``rounds.jsonl``
(as ``rounds.jsonl.gz`` above ``COMPRESS_ABOVE`` bytes, gzip without a time stamp: the same rows give the same
bytes), the ledger ``privacy_ledger.jsonl`` with ``ledger.id`` (which key chains it), the sent-journal, an
extension and a session calibration where the run has them, and ``cell.json``, its manifest: every file's
SHA-256 and size, the ledger's entry count and head, when the run started (config.toml written) and finished
(summary.json written), the cores of the machine that ran it and its 5-minute load average as the cell finished
(``load_5min``, where the cell was exported as it finished), and a seal: HMAC-SHA256 of the manifest under the
run's ledger key (kept outside the repository, on the machine that ran it; privacy/ledger_keys.py).

``check_cell`` (every read: a page regenerated, a campaign resumed) refuses, in one line, a cell whose files are
not the manifest's (edited, added, removed), whose config is not the one the spec gives that cell, whose ledger
chain is broken or does not end at the manifest's head, whose epsilons do not replay from the ledger into
its summary's, whose client rounds lack their ledger entry, whose summary's final accuracy is not its last
evaluated row's, or whose seal does not match where the key is.

What that proves, and where: on the machine holding the ledger key every byte is authenticated (the seal and
the ledger's HMACs); a forger without the key can change nothing there. Elsewhere (committed data on another
machine) the key is absent: the checks prove the data consistent (digests, chain links, epsilons replayed,
config as the spec gives it) but not authentic; a forger who rewrites a cell's accuracies (rows and summary), digests and the
ledger's links consistently is not caught by reading. `otafl-sdr verify cells/<cell>` re-derives every booked
figure from the config (the privacy books cannot be forged consistently); the accuracies' authenticity there
comes from re-running: a sim-air cell is a seeded simulation, `otafl-sdr run --config cells/<cell>/config.toml`
reproduces its rounds."""
from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

from otafl_sdr.errors import UserError

MANIFEST = "cell.json"
FORMAT = 1
ROWS, ROWS_GZ, LEDGER, RUN_ID = "rounds.jsonl", "rounds.jsonl.gz", "privacy_ledger.jsonl", "ledger.id"
REQUIRED = ("config.toml", "summary.json", ROWS, LEDGER, RUN_ID)
OPTIONAL = ("privacy_ledger.sent", "extension.json", "calibration.json")
COMPRESS_ABOVE = 64 << 10            # bytes of rounds.jsonl kept as text below this (readable in a diff)
MAX_ROWS_BYTES = 256 << 20           # a compressed rounds file never inflates past this when read
SEAL_DOMAIN = b"otafl-sdr compact cell\n"


@dataclass
class CompactCell:
    """A checked compact cell: its manifest, summary, rows (rounds.jsonl's text) and whether its seal was
    checked (False: the run's ledger key is not on this machine)."""

    label: str
    manifest: dict
    summary: dict
    rows_text: str
    sealed: bool


def canonical(manifest: dict) -> bytes:
    """The manifest as it is stored and sealed (sorted keys, one key a line)."""
    return (json.dumps(manifest, sort_keys=True, indent=1) + "\n").encode()


def seal(manifest: dict, key: bytes) -> str:
    """HMAC-SHA256 of the manifest (without its seal) under the run's ledger key."""
    body = canonical({k: v for k, v in manifest.items() if k != "seal"})
    return hmac.new(key, SEAL_DOMAIN + body, hashlib.sha256).hexdigest()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export_cell(run: Path, root: Path, label: str, load: float | None = None) -> dict:
    """Copy finished run folder ``run`` into ``root/label`` as a compact cell; returns its manifest. Written
    into ``root/label.tmp`` and renamed (a cell is there whole or not at all); an existing cell is never
    replaced (UserError). ``load``: the machine's 5-minute load average as the cell finished (kept as
    ``load_5min``: how busy the machine was that ran it; None when exported later, so not known)."""
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.privacy import ledger_keys
    from otafl_sdr.privacy.ledger import read_chain
    from otafl_sdr.results.safe_files import read_bytes
    run, root = Path(run), Path(root)
    dest, tmp = root / label, root / f"{label}.tmp"
    if dest.exists():
        raise UserError(f"page data '{dest}' exists; a compact cell is never replaced (remove it to re-export)")
    missing = [n for n in REQUIRED if not (run / n).is_file()]
    if missing:
        raise UserError(f"cell '{run}' lacks {', '.join(missing)}: not a finished, keyed run; it is not exported")
    files = {}
    try:
        if tmp.exists():
            shutil.rmtree(tmp)                         # an export killed midway: redone
        tmp.mkdir(parents=True)
        for name in REQUIRED + OPTIONAL:
            if not (run / name).is_file():
                continue
            data = read_bytes(run / name, name)
            stored = name
            if name == ROWS and len(data) > COMPRESS_ABOVE:
                data, stored = gzip.compress(data, compresslevel=9, mtime=0), ROWS_GZ
            (tmp / stored).write_bytes(data)
            files[stored] = {"sha256": _sha256(data), "bytes": len(data)}
        cfg = load_config(run / "config.toml")
        rid = ledger_keys.read_run_id(run)
        key = ledger_keys.load(rid, cfg)
        if key is None:
            raise UserError(f"cell '{run}': the ledger key of run {rid} is not on this machine; a cell is exported "
                            f"where it ran (its seal needs the key)")
        records, _ = read_chain(run / LEDGER, key=key)
        manifest = {"format": FORMAT, "cell": label, "files": files, "run_id": rid,
                    "ledger_entries": len(records), "ledger_head": records[-1]["hash"] if records else None,
                    "started": (run / "config.toml").stat().st_mtime,
                    "finished": (run / "summary.json").stat().st_mtime, "cpu_count": os.cpu_count()}
        if load is not None:
            manifest["load_5min"] = round(float(load), 2)
        manifest["seal"] = seal(manifest, key)
        (tmp / MANIFEST).write_bytes(canonical(manifest))
        tmp.replace(dest)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot write page data '{dest}' ({e.strerror or type(e).__name__}); the run folder "
                        f"is kept") from None
    except UserError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _refuse(folder: Path, what: str) -> UserError:
    return UserError(f"page data '{folder}': {what}; the cell is refused (it is evidence: restore it from the "
                     f"repository, or remove the folder and run the page's command to re-run the cell)")


def check_cell(folder: Path, expected_config: str) -> CompactCell:
    """Read and check compact cell ``folder`` (the module docstring says what); ``expected_config``: the
    config the spec gives the cell, as ``config.schema.to_toml`` writes it. One UserError for a refusal."""
    from otafl_sdr.config.schema import to_toml
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.privacy import ledger_keys
    from otafl_sdr.privacy.ledger import config_genesis, keyed_genesis, read_chain
    from otafl_sdr.results.safe_files import load_json, loads, read_bytes
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        raise _refuse(folder, "not a folder")
    manifest = load_json(folder / MANIFEST, "compact cell manifest")
    files = manifest.get("files")
    if manifest.get("format") != FORMAT or manifest.get("cell") != folder.name or not isinstance(files, dict):
        raise _refuse(folder, f"{MANIFEST} is not this cell's manifest (format {FORMAT}, cell '{folder.name}')")
    present = {p.name for p in folder.iterdir()} - {MANIFEST}
    if present != set(files):
        extra, gone = sorted(present - set(files)), sorted(set(files) - present)
        raise _refuse(folder, "files " + "; ".join(x for x in (f"added: {', '.join(extra)}" if extra else "",
                                                                f"removed: {', '.join(gone)}" if gone else "") if x))
    allowed = set(REQUIRED + OPTIONAL + (ROWS_GZ,))
    if not set(files) <= allowed or not (set(REQUIRED) - {ROWS}) <= set(files) or (ROWS in files) == (ROWS_GZ in files):
        raise _refuse(folder, f"its files ({', '.join(sorted(files))}) are not a compact cell's")
    data = {}
    for name, entry in files.items():
        path = folder / name
        if path.is_symlink() or not path.is_file():
            raise _refuse(folder, f"{name} is not a plain file")
        data[name] = read_bytes(path, name)
        if not isinstance(entry, dict) or entry.get("bytes") != len(data[name]) or \
                entry.get("sha256") != _sha256(data[name]):
            raise _refuse(folder, f"{name} is not the file its manifest lists (edited)")
    try:
        cfg = load_config(folder / "config.toml")
    except UserError as e:
        raise _refuse(folder, f"config.toml: {e}") from None
    if to_toml(cfg) != expected_config:
        raise _refuse(folder, "its config is not the one the spec gives this cell (another setting, or edited)")
    rid = ledger_keys.read_run_id(folder)
    if rid != manifest.get("run_id"):
        raise _refuse(folder, f"{RUN_ID} names run {rid}, the manifest {manifest.get('run_id')}")
    key = ledger_keys.load(rid, cfg)
    if key is not None and not hmac.compare_digest(str(manifest.get("seal", "")), seal(manifest, key)):
        raise _refuse(folder, "its seal does not match under the run's ledger key (the manifest was rewritten)")
    genesis = keyed_genesis(config_genesis(cfg), key) if key is not None else None
    try:
        records, torn = read_chain(folder / LEDGER, genesis, key, macs=key is not None)
    except UserError as e:
        raise _refuse(folder, str(e)) from None
    head = records[-1]["hash"] if records else None
    if torn or len(records) != manifest.get("ledger_entries") or head != manifest.get("ledger_head"):
        raise _refuse(folder, "its ledger does not end at the manifest's head")
    rows_text = _rows_text(folder, data)
    rows = [r for i, ln in enumerate(rows_text.splitlines()) if ln.strip()
            for r in [loads(ln, f"'{folder / ROWS}' line {i + 1}")]]
    _check_books(folder, cfg, records, rows, data["summary.json"])
    summary = loads(data["summary.json"], f"'{folder / 'summary.json'}'")
    return CompactCell(folder.name, manifest, summary, rows_text, key is not None)


def _rows_text(folder: Path, data: dict) -> str:
    if ROWS in data:
        raw = data[ROWS]
    else:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = d.decompress(data[ROWS_GZ], MAX_ROWS_BYTES)
        except zlib.error:
            raise _refuse(folder, f"{ROWS_GZ} is not gzip") from None
        if d.unconsumed_tail or not d.eof:
            raise _refuse(folder, f"{ROWS_GZ} is truncated or inflates past {MAX_ROWS_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(folder, "its rows are not UTF-8 text") from None


def _check_books(folder: Path, cfg, records: list, rows: list, summary_bytes: bytes) -> None:
    """Every epsilon replayed from the ledger into the summary's, every client round booked."""
    import math

    from otafl_sdr.privacy.ledger import is_raise
    from otafl_sdr.results.safe_files import loads
    from otafl_sdr.workload.ledger_checks import replay_eps
    try:
        eps = replay_eps(records, cfg)
    except UserError as e:
        raise _refuse(folder, str(e)) from None
    summary = loads(summary_bytes, f"'{folder / 'summary.json'}'")
    if not isinstance(summary, dict):
        raise _refuse(folder, "summary.json is not a JSON object")
    for name, v in eps.items():
        want = v if v is None or math.isfinite(v) else None
        got = summary.get(f"eps_{name}")
        same = (got is None and want is None) or (isinstance(got, (int, float)) and want is not None and
                                                  abs(got - want) <= 1e-9 * max(1.0, abs(want)))
        if f"eps_{name}" in summary and not same:
            raise _refuse(folder, f"summary.json says eps_{name} = {got} but its ledger replays to {want}")
    booked = {int(r["round"]) for r in records if not is_raise(r)}
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("round"), int):
            raise _refuse(folder, "a row of its rounds is not a round's row")
        if row.get("uses_clients") and row["round"] not in booked:
            raise _refuse(folder, f"round {row['round']} used client data but has no ledger entry")
    last = next((r for r in reversed(rows) if r.get("test_accuracy") is not None), {})   # as the run summarises
    if summary.get("final_accuracy") != last.get("test_accuracy"):
        raise _refuse(folder, f"summary.json's final_accuracy {summary.get('final_accuracy')!r} is not its last "
                              f"evaluated row's {last.get('test_accuracy')!r}")
