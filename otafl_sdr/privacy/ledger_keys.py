"""Where a run's ledger key lives: OUTSIDE its results folder, so that whoever can rewrite the folder
cannot re-key the ledger's chain (privacy/ledger.py: each line's ``hash`` is HMAC-SHA256 under this key).

A run gets a random run id (stored in the results folder, ``ledger.id``: it names the key, it is not the
key) and a random 256-bit key in ``key_dir(cfg)/<run id>.key`` (mode 0600, in a 0700 folder): the
testbed's node keys folder ``net.keys_dir``/ledger-keys when one is configured, else
``$OTAFL_LEDGER_KEYS``, else ``$XDG_DATA_HOME/otafl-sdr/ledger-keys`` (~/.local/share/...). A folder with
no ``ledger.id`` holds a legacy (unkeyed, SHA-256) ledger. Beside the key: ``<run id>.config`` (the run's
config hash) and ``<run id>.anchor``, what the folder held last (privacy/ledger_anchor.py: a rolled-back
folder is refused)."""
from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.ledger_anchor import SUFFIX as ANCHOR_SUFFIX, LedgerAnchor

RUN_ID_FILE = "ledger.id"
_ID = re.compile(r"^[0-9a-f]{32}$")


def key_dir(cfg=None) -> Path:
    """The folder of the ledger keys (see the module docstring)."""
    keys = getattr(getattr(cfg, "net", None), "keys_dir", "") if cfg is not None else ""
    if keys:
        return Path(keys) / "ledger-keys"
    if os.environ.get("OTAFL_LEDGER_KEYS"):
        return Path(os.environ["OTAFL_LEDGER_KEYS"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "otafl-sdr" / "ledger-keys"


def read_run_id(out: Path) -> str | None:
    """The run id stored in results folder ``out`` (None: a legacy, unkeyed ledger)."""
    path = Path(out) / RUN_ID_FILE
    if not path.exists():
        return None
    try:
        rid = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        rid = ""
    if not _ID.match(rid):
        raise UserError(f"'{path}' is not a ledger run id (32 hex digits); it is corrupt")
    return rid


def create(out: Path, cfg=None, config_hash: str | None = None) -> tuple[str, bytes]:
    """A new run id (written to ``out``/ledger.id) and its key (written to key_dir, 0600 in 0700); the
    run's config hash (``config_hash``: ledger.config_genesis) beside the key as ``<run id>.config``, so
    a keyed ledger rewritten as a legacy one is recognised (``keyed_runs_of``)."""
    rid, key = secrets.token_hex(16), secrets.token_bytes(32)
    folder = key_dir(cfg)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if stat.S_IMODE(folder.stat().st_mode) & 0o077:
            os.chmod(folder, 0o700)
        fd = os.open(folder / f"{rid}.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.hex() + "\n")
            f.flush()
            os.fsync(f.fileno())
        if config_hash:
            fd = os.open(folder / f"{rid}.config", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(str(config_hash) + "\n")
        anchor(rid, cfg).start()
    except (OSError, UserError) as e:
        forget(rid, cfg)
        if isinstance(e, UserError):
            raise
        raise UserError(f"cannot store the ledger key in '{folder}' ({e.strerror or type(e).__name__}); set "
                        f"OTAFL_LEDGER_KEYS to a writable private folder") from None
    tmp = Path(out) / (RUN_ID_FILE + ".tmp")
    try:
        tmp.write_text(rid + "\n", encoding="ascii")
        os.replace(tmp, Path(out) / RUN_ID_FILE)
    except OSError as e:                     # the results folder is full or read-only: no key left behind
        try:
            tmp.unlink()
        except OSError:
            pass
        forget(rid, cfg)
        raise UserError(f"cannot write '{Path(out) / RUN_ID_FILE}' ({e.strerror or type(e).__name__}); "
                        f"nothing was run") from None
    return rid, key


def load(run_id: str, cfg=None) -> bytes | None:
    """The key of ``run_id`` (None when this machine, or this user, does not hold it)."""
    path = key_dir(cfg) / f"{run_id}.key"
    try:
        text = path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, PermissionError):      # not here, or not this user's: verify says so
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"ledger key '{path}' is unreadable ({getattr(e, 'strerror', None) or type(e).__name__})") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise UserError(f"ledger key '{path}' is not a 256-bit hex key; it is corrupt")
    return key


def keyed_runs_of(config_hash: str, cfg=None) -> list[str]:
    """The run ids whose key this machine holds for a run of the config with hash ``config_hash``."""
    folder = key_dir(cfg)
    try:
        found = [p for p in folder.glob("*.config") if _ID.match(p.stem)]
    except OSError:
        return []
    out = []
    for p in found:
        try:
            if p.read_text(encoding="ascii").strip() == config_hash and (folder / f"{p.stem}.key").exists():
                out.append(p.stem)
        except (OSError, UnicodeDecodeError):
            continue
    return sorted(out)


def where(run_id: str, cfg=None) -> Path:
    return key_dir(cfg) / f"{run_id}.key"


def anchor(run_id: str, cfg=None) -> LedgerAnchor:
    """The anchor of run ``run_id``, beside its key (privacy/ledger_anchor.py)."""
    return LedgerAnchor(key_dir(cfg) / f"{run_id}{ANCHOR_SUFFIX}")


def forget(run_id: str, cfg=None) -> None:
    """Remove the key of a run that never recorded anything (a start refused before round 1), with its
    config hash and its anchor."""
    for suffix in (".key", ".config", ".anchor"):
        try:
            (key_dir(cfg) / f"{run_id}{suffix}").unlink()
        except OSError:
            pass
