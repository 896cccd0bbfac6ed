"""What `sweep` and `compare` take from the command line over their spec: ``--seeds N`` (the spec's first N
seeds) and ``--set KEY=VALUE`` (an extra fixed override of every cell, after the spec's ``sweep.set``), each
refused in one line where it could not act as asked (a key the grid or an arm sets in every cell it reaches)."""
from __future__ import annotations

from otafl_sdr.errors import UserError


def grid_keys(spec) -> list[str]:
    """The config keys the spec's [grid] sets ("a.x,b.y" keys that move together split)."""
    return [s for k in spec.grid for s in k.split(",")]


def add_override_arguments(p) -> None:
    p.add_argument("--seeds", type=int, default=None, help="use only the spec's first N seeds")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="extra fixed override for every cell (e.g. run.rounds=5), repeatable")


def refuse_shadowed_sets(spec, sets: list) -> None:
    """A --set whose key the grid or an arm sets would be overridden in every cell it reaches: refused."""
    arm_keys = {s.split("=", 1)[0].strip(): a for a, over in spec.arms.items() for s in over}
    for s in sets:
        key = s.split("=", 1)[0].strip()
        if key in grid_keys(spec):
            raise UserError(f"--set {s}: '{key}' is a grid key of the spec (each cell takes it from [grid]); "
                            f"edit the spec's [grid] instead")
        if key in arm_keys:
            raise UserError(f"--set {s}: '{key}' is set by arm '{arm_keys[key]}' (the arm's value wins in its "
                            f"cells); edit the spec's [arms] instead")


def apply_overrides(spec, seeds: int | None, sets: list) -> None:
    """``spec`` with only its first ``seeds`` seeds and ``sets`` after its fixed overrides (in place)."""
    if seeds is not None:
        if seeds < 1:
            raise UserError("--seeds must be >= 1")
        spec.seeds = spec.seeds[:seeds]
    if any("=" not in s for s in sets):
        raise UserError("--set takes KEY=VALUE")
    refuse_shadowed_sets(spec, sets)
    spec.fixed = spec.fixed + list(sets)
