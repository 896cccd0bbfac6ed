"""Results folders shared by a test session: a test that only reads (or tampers with) a finished or
interrupted run takes a copy of one made once per session (per pytest-xdist worker) instead of running its
own. The copy is a run of its own: a new run id (ledger.id) whose key is the original's key copied under
that id (with its config hash and anchor), so a test that hides, moves or deletes its key touches no other test's copy.

    out = shared_runs.copy_of("interrupted-6", make_interrupted_run, tmp_path / "run")

``make(out)`` runs the experiment into ``out`` (a folder under the session's shared root, which
tests/conftest.py sets and whose runs the tier check does not count against the test that first asks)."""
from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Callable

from otafl_sdr.configure.load import load_config
from otafl_sdr.privacy import ledger_keys

ROOT: Path | None = None            # set by tests/conftest.py (a session temporary folder)
_made: dict[str, Path] = {}


def made(name: str, make: Callable[[Path], object]) -> Path:
    """The session's run ``name``, made by ``make(folder)`` on first use; read it, never change it."""
    if name not in _made:
        assert ROOT is not None, "tests/conftest.py sets shared_runs.ROOT"
        folder = ROOT / name
        make(folder)
        _made[name] = folder
    return _made[name]


def copy_of(name: str, make: Callable[[Path], object], dst: Path) -> Path:
    """A private copy at ``dst`` of the session's run ``name``, with its own run id and key."""
    src = made(name, make)
    shutil.copytree(src, dst, symlinks=True)
    rid = ledger_keys.read_run_id(src)
    if rid is not None:                 # a keyed ledger: the copy's key (and anchor) are the original's, under a new id
        folder = ledger_keys.key_dir(load_config(src / "config.toml"))
        new = secrets.token_hex(16)
        assert (folder / f"{rid}.key").is_file(), f"the shared run's key is not in {folder}"
        for old in folder.glob(f"{rid}.*"):                       # .key, .config, .anchor
            fd = os.open(folder / f"{new}{old.suffix}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(old.read_bytes())
        (dst / ledger_keys.RUN_ID_FILE).write_text(new + "\n", encoding="ascii")
    return dst
