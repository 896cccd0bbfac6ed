"""Starting a new run's results folder (issue 28): its lock and its ``config.toml``, the file that makes a
folder a results folder (``--resume`` and ``verify`` need it). A failure there (full disk, a file-size
limit, a read-only folder) leaves nothing of the run behind (no folder holding only ``.lock``, which
neither ``run --out`` nor ``--resume`` would accept): the lock is released, ``.lock`` and the temporary
file removed, the folder removed if nothing else is in it, and one line names the file and the cause."""
from __future__ import annotations

import os
from pathlib import Path

from otafl_sdr.results import files as results
from otafl_sdr.errors import UserError

CONFIG = "config.toml"


def lock_new(out: Path) -> None:
    """``results.lock_out_dir`` for a folder ``prepare_out_dir`` just accepted for a new run (absent or
    empty): a write failure of the lock file (its PID) leaves nothing behind and is one UserError."""
    try:
        results.lock_out_dir(out)
    except OSError as e:
        _abandon(out)
        raise UserError(_message(out, ".lock", e)) from None


def write_new_config(out: Path, text: str) -> None:
    """Write a new run's ``out/config.toml`` (tmp, fsync, rename). On failure nothing of the run is left
    in ``out`` (``_abandon``) and a one-line UserError says so; the same command can be run again."""
    out = Path(out)
    try:
        results.replace_fsynced(out / CONFIG, text)
    except OSError as e:
        _abandon(out)
        raise UserError(_message(out, CONFIG, e)) from None


def _message(out: Path, name: str, e: OSError) -> str:
    gone = "the folder was removed" if not out.exists() else "the run's files were removed from the folder"
    return (f"cannot start the run: cannot write '{out / name}' ({e.strerror or type(e).__name__}); nothing "
            f"was run and {gone}: free some space (or fix the folder) and run the same command again")


def _abandon(out: Path) -> None:
    """Undo a new run's start: ``.lock`` unlinked while still held (so no second writer locks a file that is
    going), the lock released, ``config.toml(.tmp)`` removed, the folder removed if it is then empty."""
    for name in (".lock", CONFIG + ".tmp", CONFIG):
        try:
            os.unlink(out / name)
        except OSError:
            pass
    results.unlock_out_dir(out)
    try:
        out.rmdir()                  # only if empty: anything else in it stays
    except OSError:
        pass
