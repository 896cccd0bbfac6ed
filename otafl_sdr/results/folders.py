"""What kind of folder a path is: a run's results folder, or a sweep / compare folder of such cells (for
`otafl-sdr report` and `verify`, and the notebook API's ``load``)."""
from __future__ import annotations

from pathlib import Path

from otafl_sdr.errors import UserError

SWEEP_MARKERS = ("sweep.toml", "sweep.csv")      # written by `otafl-sdr sweep` and `compare` (sweeps/sweep.py)


def is_run(path: Path) -> bool:
    return (Path(path) / "config.toml").is_file()


def is_sweep(path: Path) -> bool:
    return any((Path(path) / m).is_file() for m in SWEEP_MARKERS) and not is_run(path)


def cells(path: Path) -> list[Path]:
    """The run folders of a sweep / compare folder (its cells, one or two levels down), sorted."""
    path = Path(path)
    found = sorted({p.parent for pattern in ("*/config.toml", "*/*/config.toml") for p in path.glob(pattern)})
    return [p for p in found if p.is_dir()]


def kind(path: Path, command: str) -> str:
    """'run' or 'sweep'; anything else is a one-line UserError naming ``command``."""
    path = Path(path)
    if is_run(path):
        return "run"
    if is_sweep(path):
        return "sweep"
    raise UserError(f"{command}: '{path}' is neither a results folder (config.toml) nor a sweep / compare folder "
                    f"(sweep.toml)")
