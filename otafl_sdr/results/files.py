"""The results contract (other tools read it; keep the names):

DIR/config.toml      the resolved config (a run is reproducible from it)
DIR/rounds.jsonl     one JSON object per round (iteration): ROUND_FIELDS at least
DIR/summary.json     SUMMARY_FIELDS at least
DIR/privacy_ledger.jsonl  the ledger (written by privacy.ledger before each model release)
DIR/checkpoint.pt    the latest checkpoint (atomic replace)
DIR/accuracy.png, loss.png, epsilon.png, nmse.png   plots against client rounds, each with a .pdf and an
                     .svg beside it (run_plots; `report DIR` redraws them into DIR/report/, never over the
                     run's own files)
JSON has no infinity: an infinite value (e.g. an epsilon) is written as null, as is a figure not computed."""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from otafl_sdr.errors import UserError, signals_held

ROUND_FIELDS = ("round", "test_accuracy", "train_loss", "sensitivity", "sigma_eff", "alpha_u", "cj_active",
                "cj_power", "eps_paper", "eps_rdp", "eps_pld", "aggregate_nmse", "aggregate_nmse_theory", "wall_s")
SUMMARY_FIELDS = ("final_accuracy", "final_loss", "eps_paper", "eps_rdp", "eps_pld", "delta", "rounds", "clients",
                  "model_dim", "wall_s", "air")


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None          # JSON has no inf/nan: null (an infinite epsilon, or a figure not computed)
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if hasattr(v, "item") and callable(v.item) and getattr(v, "ndim", 1) == 0:
        return _clean(v.item())
    return v


def prepare_out_dir(out: Path, resume: bool = False) -> Path:
    """Refuse to write into an existing non-empty folder unless resuming (nothing is ever overwritten)."""
    out = Path(out)
    if resume:
        if not (out / "config.toml").is_file():
            raise UserError(f"cannot resume: '{out}' holds no config.toml (not a results folder)")
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"results folder '{out}' already exists and is not empty; choose another --out or --resume it")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create results folder '{out}' ({e.strerror or type(e).__name__})") from None
    return out


def replace_fsynced(path: Path, text: str) -> None:
    """Write PATH.tmp, fsync, rename over PATH; on an OSError the temporary file is removed (the old PATH
    stays) and the error is raised for the caller to word."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """``replace_fsynced``; on failure (full disk, read-only folder) the old file stays and a one-line
    UserError is raised."""
    try:
        replace_fsynced(path, text)
    except OSError as e:
        raise UserError(f"cannot write '{path}' ({e.strerror or type(e).__name__}); the previous version is kept") from None


class RoundLog:
    """Appends rounds to DIR/rounds.jsonl (flushed per round)."""

    def __init__(self, path: Path, keep_until: int | None = None):
        self.path = Path(path)
        self.rows: list[dict] = read_rounds(self.path) if self.path.exists() else []
        self.path.touch()
        if keep_until is not None:  # resume: drop rows after the checkpoint, they will be redone
            self.rows = [r for r in self.rows if r["round"] <= keep_until]
            atomic_write_text(self.path, "".join(json.dumps(_clean(r)) + "\n" for r in self.rows))

    def append(self, row: dict) -> None:
        """The row on disk and in ``rows`` together: a stop (Ctrl-C, SIGTERM) that arrives during the write is
        held until both hold it (a summary never counts fewer rows than the file)."""
        row = _clean(row)
        with signals_held():
            try:
                with open(self.path, "a") as f:
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise UserError(f"cannot write '{self.path}' ({e.strerror or type(e).__name__}); round "
                                f"{row.get('round')} is in the privacy ledger, resume once the disk is writable") from None
            self.rows.append(row)


def read_rounds(path: Path) -> list[dict]:
    """The rows of a rounds.jsonl. A torn last line (a crash mid-write) is dropped; a bad line before the
    last is a UserError naming it (never a silent truncation: the resume would lose the rows after it).
    A row is a JSON object whose "round" is an integer in [0, MAX_ROUND] (``true`` is not round 1); a folder in place of
    the file, a file too large or not UTF-8, or nesting deeper than any row is a one-line UserError."""
    from otafl_sdr.results.safe_files import loads, read_text
    path = Path(path)
    lines = read_text(path, "rounds file").splitlines()
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = loads(line, f"'{path}' line {i + 1}")
            round_index = row.get("round") if isinstance(row, dict) else None
            if not isinstance(round_index, int) or isinstance(round_index, bool) or not 0 <= round_index <= MAX_ROUND:
                raise ValueError
            rows.append(row)
        except (ValueError, UserError):
            if all(not x.strip() for x in lines[i + 1:]):
                break  # a torn last line from a crash
            raise UserError(f"'{path}' line {i + 1} is corrupt; nothing was changed. Repair that line by hand "
                            f"(or delete it if the round is in privacy_ledger.jsonl) and resume again") from None
    return rows


MAX_ROUND = 10**9           # no run has more iterations (run.rounds <= 1e5, two iterations per round at most)


_LOCKS: dict = {}


def holds_lock(out: Path) -> bool:
    """Whether this process holds ``out``'s lock (``lock_out_dir``)."""
    return str(Path(out).resolve()) in _LOCKS


def lock_out_dir(out: Path, what: str = "results folder") -> None:
    """An exclusive lock (fcntl) on a results folder (``what``: or a sweep / compare folder) for this
    process's lifetime: a second writer (a --resume while the run is alive, two runs into one folder, two
    sweeps into one sweep folder) is refused naming the holder's PID."""
    import fcntl
    out = Path(out).resolve()
    if str(out) in _LOCKS:
        return
    path = out / ".lock"
    for _ in range(100):           # a writer that ends removes the file (unlock_out_dir): lock the one at the path
        try:
            f = open(path, "a+")
        except OSError as e:
            raise UserError(f"cannot lock {what} '{out}': cannot write '{path}' "
                            f"({e.strerror or type(e).__name__}); a run or --resume needs a writable folder") from None
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = ""
            for _ in range(50):    # the holder writes its PID just after its lock: give it a second
                f.seek(0)
                pid = f.read().strip()
                if pid:
                    break
                time.sleep(0.02)
            f.close()
            pid = pid or "?"
            raise UserError(f"{what} '{out}' is in use by another otafl-sdr process (PID {pid})") from None
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()                  # locked a file its writer removed as it ended: open the path again
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    _LOCKS[str(out)] = f


def unlock_out_dir(out: Path, remove: bool = True) -> None:
    """Release the folder's lock; ``remove``: the .lock file goes too (removed while still held, so a
    second writer that opened it meanwhile sees it gone and locks the path afresh: lock_out_dir)."""
    f = _LOCKS.pop(str(Path(out).resolve()), None)
    if f is not None:
        if remove:
            try:
                os.unlink(Path(out).resolve() / ".lock")
            except OSError:
                pass               # a read-only folder keeps it: harmless, the next writer locks it as before
        f.close()


def write_summary(out: Path, summary: dict) -> None:
    atomic_write_text(Path(out) / "summary.json", json.dumps(_clean(summary), indent=2) + "\n")


from otafl_sdr.results.run_plots import plot_rounds  # noqa: E402,F401  (the run's figures: run_plots; re-exported for callers)


def _round_counts(summary: dict) -> list[tuple]:
    """run.rounds counts client rounds; Upcycled-FL runs two iterations per client round (one server-only):
    "client rounds" always, "iterations" beside it where the two differ."""
    done, round_indices = summary.get("client_rounds"), summary.get("rounds")
    planned = summary.get("client_rounds_planned")
    rows = [("client rounds", f"{done} of {planned}" if planned is not None and planned != done else done)]
    if round_indices is not None and round_indices != done:
        rows.append(("iterations", f"{round_indices} ({done} with clients, {round_indices - (done or 0)} server-only)"))
    return rows


def format_table(summary: dict) -> str:
    """The final table printed at the end of a run."""
    def fmt(v):
        if v is None:
            return "n/a"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    rows = [("air", summary.get("air")), ("algorithm", summary.get("algorithm")),
            ("privacy unit", summary.get("sensitivity_basis")), ("noise", summary.get("noise_source")),
            ("power policy", summary.get("power_policy")), *_round_counts(summary),
            ("clients", summary.get("clients")),
            ("model dim d", summary.get("model_dim")),
            ("final test accuracy", summary.get("final_accuracy")), ("final training loss", summary.get("final_loss"))]
    for k in sorted(summary):
        if k.startswith("eps_") and k not in ("eps_target", "eps_planned") and not k.endswith("_valid"):
            v = summary[k]
            if summary.get(f"{k}_valid") is False and isinstance(v, (int, float)) and not isinstance(v, bool):
                v = f"{v:.4g} (closed form below the exact PLD value: not a valid bound)"
            rows.append((f"epsilon ({k[4:]})", v))
    if summary.get("eps_target") is not None:
        over = " - OVER TARGET (tight PLD epsilon above it)" if summary.get("over_target") else ""
        planned = f", planned {fmt(summary['eps_planned'])}" if summary.get("eps_planned") is not None else ""
        rows.append(("epsilon target", f"{fmt(summary['eps_target'])} ({summary.get('calibration', 'n/a')}{planned}){over}"))
    rows += [("privacy", summary.get("private"))] if summary.get("private") else []
    rows += [("delta", summary.get("delta")), ("jammer active rounds", summary.get("jammer_rounds"))]
    rows += [("jammer capped rounds", summary.get("capped_jammer_rounds"))] if summary.get("capped_jammer_rounds") else []
    check = summary.get("coherence_check")           # the radios' check before the first round (uhd)
    if check and check.get("ratio") is not None:
        rows.append(("coherence check", f"{'passed' if check['passed'] else 'FAILED'} (NMSE / theory "
                     f"{check['ratio']:.3f}, tolerance 1 +- {check['tolerance']:.3f}"
                     f"{'' if check.get('sensitive') else '; blind to 0.1 rad at this SNR'})"))
    elif check and check.get("not_run"):
        rows.append(("coherence check", check["not_run"]))
    elif check:
        rows.append(("coherence check", "FAILED (no check round received)"))
    rows += [("lost rounds", summary.get("lost_rounds")), ("stopped", summary.get("stopped_reason") or "completed"),
             ("wall time [s]", summary.get("wall_s"))]
    w = max(len(k) for k, _ in rows)
    lines = ["-" * (w + 20)] + [f"{k:<{w}}  {fmt(v)}" for k, v in rows] + ["-" * (w + 20)]
    return "\n".join(lines)


def to_plain(obj):
    """A policy state as tensors and plain data (what torch.load(weights_only=True) accepts): numpy arrays
    become {"__ndarray__": tensor}, numpy scalars Python numbers, tuples and deques lists."""
    import numpy as np
    import torch
    if isinstance(obj, np.ndarray):
        return {"__ndarray__": torch.from_numpy(np.ascontiguousarray(obj))}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) or type(obj).__name__ == "deque":
        return [to_plain(v) for v in obj]
    return obj


def from_plain(obj):
    """Inverse of ``to_plain`` (arrays come back as numpy arrays)."""
    if isinstance(obj, dict):
        if set(obj) == {"__ndarray__"}:
            return obj["__ndarray__"].numpy()
        return {k: from_plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_plain(v) for v in obj]
    return obj


def atomic_torch_save(state: dict, path: Path) -> None:
    """torch.save to PATH.tmp, fsync, rename; a failure (full disk, read-only folder) removes the temporary
    file and raises a one-line UserError, leaving the previous checkpoint in place. SIGINT / SIGTERM are held
    during the write (errors.signals_held) and acted on after it: a stop is never reported as a disk failure."""
    import torch
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with signals_held():          # a stop during the write comes right after it, never as a torn file
            with open(tmp, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        reason = getattr(e, "strerror", None) or (str(e).splitlines() or [type(e).__name__])[0][:100]
        try:       # torch reports a full disk as "file write failed": say how much room there is
            import shutil
            reason += f"; {shutil.disk_usage(path.parent).free} bytes free on its disk"
        except OSError:
            pass
        raise UserError(f"cannot write checkpoint '{path}' ({reason}); the previous checkpoint, the ledger and "
                        f"the rows are kept: resume with --resume once there is room") from None
