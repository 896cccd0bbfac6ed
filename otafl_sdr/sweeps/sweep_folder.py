"""One writer per sweep / compare folder (issue 35, item 2): `sweep` and `compare` lock the folder they write
(the second process on it is refused in one line naming the holder's PID), and a cell is cleared or run only
under the cell's own lock, as a run takes it (results/files.lock_out_dir)."""
from __future__ import annotations

from pathlib import Path

from otafl_sdr.errors import UserError


def lock_sweep(out: Path) -> bool:
    """One writer per sweep / compare folder: ``out`` (created if absent) locked for this process, so a second
    `sweep` or `compare` on it is refused in one line naming the holder's PID; True when this call took the
    lock (False: this process already holds it). ``release_sweep`` gives it back."""
    from otafl_sdr.results.files import holds_lock, lock_out_dir
    out = Path(out)
    if holds_lock(out):
        return False
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the sweep folder '{out}' ({e.strerror or type(e).__name__}); "
                        f"choose a writable one with --out") from None
    try:
        lock_out_dir(out, "sweep folder")
    except UserError:
        _remove_if_empty(out)
        raise
    return True


def release_sweep(out: Path) -> None:
    """Give back ``lock_sweep``'s lock (its .lock goes); a folder left empty (a refused start) is removed."""
    from otafl_sdr.results.files import unlock_out_dir
    unlock_out_dir(Path(out))
    _remove_if_empty(Path(out))


def _remove_if_empty(out: Path) -> None:
    try:
        out.rmdir()
    except OSError:
        pass                      # not empty (or not ours to remove): kept


def clear_unstarted(out: Path) -> None:
    """Remove a cell folder that holds no round (a start that stopped before round 1), under the cell's lock
    as a run takes it: a run alive in it is never cleared (refused naming its PID)."""
    from otafl_sdr.results.files import lock_out_dir, unlock_out_dir
    lock_out_dir(out)
    try:
        if (out / "rounds.jsonl").exists():
            raise UserError(f"'{out}' started its rounds meanwhile; it is resumed, not cleared")
        for f in out.iterdir():
            if f.name != ".lock":
                f.unlink()
    finally:
        unlock_out_dir(out)                    # .lock goes while still held
    out.rmdir()


def finished_table(out: Path):
    """The table of a folder finished for its spec (sweep.is_finished): nothing runs, its cells and figures are
    left as they are; the status becomes this start's ("done (skipped)"), sweep.csv / sweep.parquet rewritten
    under the folder's lock only when they say otherwise (the start that ran the cells wrote "ran")."""
    from otafl_sdr.sweeps.folder_state import read_table, write_table_files
    table = read_table(out)
    if (table["status"] == "done (skipped)").all():
        return table
    table = table.assign(status="done (skipped)")
    taken = lock_sweep(out)
    try:
        write_table_files(out, table)
    finally:
        if taken:
            release_sweep(out)
    return table
