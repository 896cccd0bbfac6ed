"""`otafl-sdr sweep SPEC`: a grid of ordinary runs (trials x privacy levels x mechanisms), resumable.

SPEC is a small TOML file::

    [sweep]
    name = "paper000-cj"                      # default: the spec file's stem
    base = "presets/paper000_fedavg_cj_eps1.toml"   # a config file (relative to the spec); default: the
                                              # default experiment (as `otafl-sdr run` without --config)
    seeds = [1, 2, 3]                         # run.seed of each trial (default [0])
    out = "results/sweep-paper000-cj"         # default results/sweeps/NAME (relative to the cwd)
    set = ["run.rounds=5", "air.name=sim"]    # fixed overrides for every cell, optional
    dirs = "{arm}-eps{privacy_eps:g}-seed{seed}"   # optional: the cells' folder names (str.format over arm,
                                              # seed and the grid keys, dots as '_'); default: every key=value

    [grid]                                    # dotted keys -> lists; the cells are their product
    "privacy.eps" = [1.0, 0.5, 0.1]
    "algorithm.name" = ["fedavg", "fedprox"]
    "privacy.eps,privacy.delta" = [[6.52, 1e-5], [4.4, 0.01]]   # keys that move together (not a product)

    [arms.jammer]                             # optional: named mechanisms, several keys each; the cells are
    set = ["power.policy=cj_adaptive"]        # arms x grid x seeds (`otafl-sdr compare` reads [[claims]] too)
    [arms.cdpb]
    set = ["power.policy=cdpb_idle", "power.jammer=false"]

Each cell (one point of the grid and one seed) is an ordinary results folder (the results contract is
unchanged) named by its keys, e.g. ``algorithm.name=fedavg,privacy.eps=0.5,seed=1``. A cell whose
``summary.json`` says it finished (all planned rounds, or stopped at its privacy budget) is skipped when
the sweep is started again; a cell that crashed or was interrupted is resumed from its checkpoint with
its ledger intact. Every cell's config is validated before anything runs (a bad key fails the whole
sweep at once, exit 2).

Engines: ``local`` (default): ``--workers`` processes (spawned), each with ``run.torch_threads`` =
cores // workers so the cores are used without oversubscription; ``ray``: one Ray task per cell on a local
Ray instance or the cluster at ``--address`` (Ray does the scheduling; nothing of ours beyond the pool).

Outputs in the sweep folder: ``sweep.csv`` and ``sweep.parquet`` (one row per cell: every swept key, the
seed, final accuracy and loss, eps per accountant, rounds, wall time, status, folder), ``sweep.toml``
(the spec as resolved) and the figures (``sweep_plots``, PNG + PDF + SVG): ``final_accuracy`` (mean and 95 %
t-interval over seeds), ``accuracy_rounds`` (test accuracy against client rounds, mean and 95 % band; a panel
per grid point) and, when the grid moves ``privacy.eps``, ``accuracy_vs_eps``."""
from __future__ import annotations

import itertools
import json
import os
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import tomli_w

from otafl_sdr.errors import UserError, did_you_mean
from otafl_sdr.results.figure_presets import add_figure_argument, preset
from otafl_sdr.sweeps.plots import read_summary
from otafl_sdr.sweeps.sweep_folder import clear_unstarted, lock_sweep, release_sweep
from otafl_sdr.sweeps.cell_overrides import add_override_arguments, apply_overrides

RESULT_FIELDS = ("final_accuracy", "final_loss", "eps_paper", "eps_rdp", "eps_pld", "eps_target", "delta",
                 "rounds", "rounds_planned", "client_rounds", "jammer_rounds", "capped_jammer_rounds", "lost_rounds",
                 "over_target", "eps_planned", "calibration", "wall_s")


@dataclass
class Cell:
    """One run of the sweep: the grid point ``values`` (dotted key -> value) and ``seed``."""

    values: dict
    seed: int
    out: Path
    overrides: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.out.name

    def arm(self) -> str:
        return ",".join(f"{k}={_fmt(v)}" for k, v in self.values.items()) or "base"


@dataclass
class SweepSpec:
    name: str
    base: Path | None
    seeds: list
    out: Path
    fixed: list
    grid: dict
    arms: dict = field(default_factory=dict)      # name -> list of 'key=value' overrides (a mechanism)
    labels: dict = field(default_factory=dict)    # name -> label for tables and plots
    claims: list = field(default_factory=list)    # [[claims]] (read by `otafl-sdr compare`)
    compare: dict = field(default_factory=dict)   # [compare] options (last_k, alpha) and the reference arms
    dirs: str = ""                                # folder-name pattern (str.format: arm, seed, grid keys with
                                                  # '.' as '_'); "" = every key=value, then seed=N
    title: str = ""                               # the figures' title ("" = the sweep's name)
    figure: str = "screen"                        # the figure preset (--figure; not part of the spec's file)

    def cells(self) -> list[Cell]:
        keys = list(self.grid)
        cells = []
        seen: dict = {}
        for arm in (list(self.arms) or [None]):
            for combo in itertools.product(*(self.grid[k] for k in keys)):
                values = {"arm": arm} if arm is not None else {}
                for k, v in zip(keys, combo):          # "a.x,b.y" = [[x1, y1], ...]: keys that move together
                    values |= dict(zip(k.split(","), v)) if "," in k else {k: v}
                for seed in self.seeds:
                    name = (self._dir_name(values, seed) if self.dirs else
                            ",".join([f"{k}={_fmt(v)}" for k, v in values.items()] + [f"seed={seed}"]))
                    if _safe(name) in seen:
                        raise UserError(f"sweep {self.name}: cells {seen[_safe(name)]} and {values | {'seed': seed}} "
                                        f"would share the folder '{_safe(name)}' (sweep.dirs = '{self.dirs}')")
                    seen[_safe(name)] = values | {"seed": seed}
                    over = (list(self.fixed) + list(self.arms.get(arm, []))
                            + [f"{k}={_toml_value(v)}" for k, v in values.items() if k != "arm"] + [f"run.seed={seed}"])
                    cells.append(Cell(values, seed, self.out / _safe(name), over))
        return cells

    def _dir_name(self, values: dict, seed: int) -> str:
        fields = {k.replace(".", "_"): v for k, v in values.items()} | {"seed": seed}
        fields.setdefault("arm", "base")
        try:
            return self.dirs.format(**fields)
        except (KeyError, IndexError, ValueError) as e:
            raise UserError(f"sweep {self.name}: sweep.dirs = '{self.dirs}' cannot be filled from "
                            f"{sorted(fields)}: {type(e).__name__}: {e}") from None


def _fmt(v) -> str:
    return json.dumps(v) if isinstance(v, (list, dict, bool)) else str(v)


def _toml_value(v) -> str:
    return tomli_w.dumps({"v": v}).split("=", 1)[1].strip()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "=,.-_+" else "_" for c in name)[:200]


SPEC_TABLES = ("sweep", "grid", "arms", "claims", "compare")
SWEEP_KEYS = ("name", "base", "seeds", "out", "set", "dirs", "title")
ARM_KEYS = ("set", "label", "reference")
CLAIM_KEYS = ("source", "more", "less", "metric", "where", "arm", "more_at", "less_at", "paper_effect",
              "paper_effect_source")
COMPARE_KEYS = ("last_k", "last_rounds", "alpha", "power", "reference")


def refuse_unknown_keys(path: Path, prefix: str, table: dict, allowed) -> None:
    """A spec key that is not one of ``allowed``: one line naming it as written (``arms.jammer.sett``), with the
    closest allowed key (difflib)."""
    for k in table:
        if k not in allowed:
            raise UserError(f"sweep spec '{path}': unknown key {prefix}{k}{did_you_mean(k, allowed, prefix)}; "
                            f"allowed: {', '.join(prefix + a for a in allowed)}")


def load_spec(path: str | Path, out: str | None = None) -> SweepSpec:
    """Read and check a sweep spec (one-line UserError naming what is wrong)."""
    from otafl_sdr.results.safe_files import load_toml
    p = Path(path)
    if not p.exists():
        raise UserError(f"sweep spec '{p}' not found")
    data = load_toml(p, "sweep spec")
    refuse_unknown_keys(p, "", data, SPEC_TABLES)
    for table in ("sweep", "grid", "arms", "compare"):
        if not isinstance(data.get(table, {}), dict):
            raise UserError(f"sweep spec '{p}': [{table}] must be a table")
    sw = data.get("sweep", {})
    refuse_unknown_keys(p, "sweep.", sw, SWEEP_KEYS)
    if not isinstance(sw.get("dirs", ""), str):
        raise UserError(f"sweep spec '{p}': sweep.dirs must be a string (a folder-name pattern)")
    if not isinstance(sw.get("title", ""), str):
        raise UserError(f"sweep spec '{p}': sweep.title must be a string (the figures' title)")
    name = sw.get("name", p.stem)
    if not isinstance(name, str) or not name:
        raise UserError(f"sweep spec '{p}': sweep.name must be a non-empty string")
    base = None
    if sw.get("base"):
        base = Path(sw["base"])
        if not base.is_absolute():
            base = (p.parent / base) if (p.parent / base).is_file() else base
        if not base.is_file():
            raise UserError(f"sweep spec '{p}': sweep.base '{sw['base']}' not found")
    seeds = sw.get("seeds", [0])
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                      for s in seeds)) or len(set(seeds)) != len(seeds):
        raise UserError(f"sweep spec '{p}': sweep.seeds must be a non-empty list of distinct integers >= 0")
    fixed = sw.get("set", [])
    if not (isinstance(fixed, list) and all(isinstance(s, str) and "=" in s for s in fixed)):
        raise UserError(f"sweep spec '{p}': sweep.set must be a list of 'key=value' strings")
    grid = data.get("grid", {})
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise UserError(f"sweep spec '{p}': grid.\"{k}\" must be a non-empty list")
        if k == "run.seed":
            raise UserError(f"sweep spec '{p}': put seeds in sweep.seeds, not in [grid]")
        if "," in k and not all(isinstance(x, list) and len(x) == len(k.split(",")) for x in v):
            raise UserError(f"sweep spec '{p}': grid.\"{k}\" names {len(k.split(','))} keys that move together: "
                            f"each value must be a list of {len(k.split(','))}")
    arms, labels, compare = {}, {}, dict(data.get("compare", {}))
    for a, body in (data.get("arms") or {}).items():
        if isinstance(body, dict):
            refuse_unknown_keys(p, f"arms.{a}.", body, ARM_KEYS)
        if not (isinstance(body, dict) and set(body) <= {"set", "label", "reference"}
                and isinstance(body.get("set", []), list) and isinstance(body.get("reference", False), bool)
                and all(isinstance(s, str) and "=" in s for s in body.get("set", []))):
            raise UserError(f"sweep spec '{p}': arms.{a} must be a table with set = ['key=value', ...], an "
                            f"optional label and an optional reference = true (a no-DP reference arm)")
        arms[a] = list(body.get("set", []))
        labels[a] = str(body.get("label", a))
        compare.setdefault("reference", []).extend([a] if body.get("reference") else [])
    if "arm" in grid:
        raise UserError(f"sweep spec '{p}': 'arm' is reserved for [arms]; rename the grid key")
    claims = data.get("claims", [])
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise UserError(f"sweep spec '{p}': claims must be an array of tables ([[claims]])")
    for i, c in enumerate(claims):
        refuse_unknown_keys(p, f"claims[{i}].", c, CLAIM_KEYS)
    refuse_unknown_keys(p, "compare.", compare, COMPARE_KEYS)
    out_dir = Path(out or sw.get("out") or f"results/sweeps/{name}")
    return SweepSpec(name=name, base=base, seeds=list(seeds), out=out_dir, fixed=list(fixed), grid=dict(grid),
                     arms=arms, labels=labels, claims=list(claims), dirs=sw.get("dirs", ""), compare=compare,
                     title=sw.get("title", ""))


# ------------------------------------------------------------------------------------------------
def cell_status(out: Path) -> str:
    """'done' (finished, or stopped at its privacy budget), 'resume' (has a checkpoint to go on from),
    'restart' (folder without a resumable state) or 'new'."""
    if not out.exists():
        return "new"
    summ = out / "summary.json"
    if summ.is_file():
        s = read_summary(summ)
        reason = str(s.get("stopped_reason") or "")
        if s and (not reason or "budget" in reason or "would raise eps" in reason):
            return "done"
    if (out / "config.toml").is_file() and (out / "checkpoint.pt").is_file():
        return "resume"
    if (out / "config.toml").is_file() and not (out / "rounds.jsonl").exists():
        return "restart"
    return "restart" if not any(out.iterdir()) else "resume"


def run_cell(base: str | None, overrides: list, out: str, threads: int) -> dict:
    """Run (or resume) one cell in this process; returns its row (summary figures + status)."""
    import torch

    from otafl_sdr.configure.load import default_experiment, load_config
    from otafl_sdr.experiment.orchestrator import make_experiment, resume_experiment

    torch.set_num_threads(threads)
    out_p = Path(out)
    status = cell_status(out_p)
    t0 = time.perf_counter()
    try:
        if status == "done":
            return {**summary_row(read_summary(out_p / "summary.json")), "status": "done (skipped)"}
        if status == "restart" and out_p.exists() and not (out_p / "rounds.jsonl").exists():
            clear_unstarted(out_p)            # only a config.toml (or nothing) was written: start afresh
            status = "new"
        if status == "resume":
            exp = resume_experiment(out_p, progress=False)
        else:
            sets = list(overrides) + [f"run.torch_threads={threads}", "run.progress=false"]
            cfg = load_config(base, sets) if base else default_experiment(sets)
            exp = make_experiment(cfg, out_p, progress=False)
        outcome = exp.run()
        row = summary_row(outcome.summary)
        row["status"] = ("resumed" if status == "resume" else "ran") + (
            f" (stopped: {outcome.stopped_reason})" if outcome.stopped_reason else "")
        return row
    except Exception as e:  # noqa: BLE001 - one failed cell must not stop the sweep; it is reported
        return {"status": f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                "wall_s": time.perf_counter() - t0}


def summary_row(summary: dict) -> dict:
    """A cell's row of the sweep table from its summary (the RESULT_FIELDS, each as the table keeps it)."""
    return {k: _num(summary.get(k)) for k in RESULT_FIELDS}


def _num(v):
    """A summary figure as the table keeps it (a garbled summary's lists, tables, huge text or ints: None)."""
    ok = v is None or isinstance(v, (bool, float)) or (isinstance(v, int) and abs(v) < 2**63)
    return v if ok or (isinstance(v, str) and len(v) <= 200) else None


def _ray_run_cell(*args):
    return run_cell(*args)


# ------------------------------------------------------------------------------------------------
def validate_cells(spec: SweepSpec, cells: list[Cell]) -> None:
    from otafl_sdr.configure.load import default_experiment, load_config
    for c in cells:
        try:
            load_config(spec.base, c.overrides) if spec.base else default_experiment(c.overrides)
        except UserError as e:
            raise UserError(f"sweep cell {c.label}: {e}") from None


def stale_cells(spec: SweepSpec, cells: list[Cell] | None = None) -> list[Cell]:
    """The cells whose folder holds a run of another configuration than the cell's overrides give now
    (run.torch_threads and run.progress aside, which ``run_cell`` sets): e.g. an arm whose overrides changed
    under the same name, which ``run_sweep`` would otherwise skip or resume as if it were that cell."""
    from otafl_sdr.config.schema import to_toml
    from otafl_sdr.configure.load import default_experiment, load_config
    stale = []
    for c in (spec.cells() if cells is None else cells):
        path = c.out / "config.toml"
        if not path.is_file():
            continue
        try:
            saved = load_config(path)
        except UserError:
            stale.append(c)
            continue
        sets = list(c.overrides) + [f"run.torch_threads={saved.run.torch_threads}", "run.progress=false"]
        now = load_config(spec.base, sets) if spec.base else default_experiment(sets)
        if to_toml(now) != to_toml(saved):
            stale.append(c)
    return stale


def run_sweep(spec: SweepSpec, engine: str = "local", workers: int | None = None, address: str | None = None,
              progress: bool = True, command: str = "sweep", skip: dict | None = None,
              on_done=None) -> "pandas.DataFrame":  # noqa: F821
    """Run every cell not yet done; write sweep.csv / sweep.parquet / plots; return the table. The sweep
    folder has one writer (``lock_sweep``), every check of the folder made under its lock. A folder finished
    for this very spec (is_finished) runs nothing and draws nothing (``sweep_folder.finished_table``). ``command`` labels the
    bar. ``skip``: cell label -> its row, cells done elsewhere (a results page's compact data,
    sweeps/page_data.py) that are not run here; ``on_done(cell)``: called as each cell run here returns."""
    cells = spec.cells()
    if is_finished(spec, cells):
        from otafl_sdr.sweeps.sweep_folder import finished_table
        return finished_table(spec.out)
    validate_cells(spec, cells)
    taken = lock_sweep(spec.out)
    try:
        return _run_locked(spec, cells, engine, workers, address, progress, command, skip or {}, on_done)
    finally:
        if taken:
            release_sweep(spec.out)


def _run_locked(spec: SweepSpec, cells: list, engine: str, workers, address, progress: bool, command: str,
                skip: dict, on_done):
    from otafl_sdr.sweeps.engines import run_local, run_ray
    _refuse_other_settings(spec)
    stale = stale_cells(spec, cells)
    if stale:
        names = ", ".join(c.label for c in stale[:3]) + (", ..." if len(stale) > 3 else "")
        raise UserError(f"--out '{spec.out}' holds runs made with other settings under the same names ({names}: "
                        f"another configuration than the spec now gives); use another --out or remove those folders")
    _write_spec(spec)
    cores = os.cpu_count() or 1
    workers = max(1, min(workers or cores, len(cells)))
    threads = max(1, cores // workers)
    base = str(spec.base) if spec.base else None
    todo = [c for c in cells if c.label not in skip and cell_status(c.out) != "done"]
    rows: dict[str, dict] = {c.label: skip[c.label] if c.label in skip else
                             {**summary_row(read_summary(c.out / "summary.json")), "status": "done (skipped)"}
                             for c in cells if c not in todo}
    bar = None
    if progress and todo:                  # nothing to run: no bar (one born full prints its 100 % twice)
        from tqdm import tqdm
        bar = tqdm(total=len(cells), initial=len(cells) - len(todo), desc=f"{command} {spec.name} [{engine}]",
                   unit="cell", dynamic_ncols=True)
    try:
        if engine == "local":
            run_local(run_cell, todo, base, threads, workers, rows, bar, on_done)
        elif engine == "ray":
            run_ray(_ray_run_cell, todo, base, threads, address, rows, bar, on_done)
        else:
            raise UserError(f"unknown engine '{engine}'; allowed: local, ray")
    finally:
        if bar is not None:
            bar.close()
        table = sweep_table(spec, cells, rows)
        write_table(spec.out, table, spec)
    return table


# ------------------------------------------------------------------------------------------------
def sweep_table(spec: SweepSpec, cells: list[Cell], rows: dict):
    """The sweep table: one row per cell (its grid values, seed, ``rows[label]``'s figures and status; "not run"
    where ``rows`` has none)."""
    import pandas as pd
    recs = []
    for c in cells:
        r = rows.get(c.label, {"status": "not run"})
        recs.append({**({"mechanism": c.values["arm"]} if "arm" in c.values else {}),
                     **{k: _fmt(v) if isinstance(v, (list, dict)) else v for k, v in c.values.items() if k != "arm"},
                     "seed": c.seed, **{k: r.get(k) for k in RESULT_FIELDS}, "status": r.get("status"),
                     "arm": c.arm(), "dir": c.label})
    return pd.DataFrame.from_records(recs)


def write_table(out: Path, table, spec: SweepSpec | None = None) -> None:
    from otafl_sdr.sweeps.folder_state import write_table_files
    from otafl_sdr.sweeps.plots import plot_sweep
    write_table_files(out, table)
    if spec is None:
        plot_sweep(out, table)
    else:
        plot_sweep(out, table, spec.labels, figure_preset=spec.figure, title=spec.title)


def _refuse_other_settings(spec: SweepSpec) -> None:
    """A folder's done cells are skipped by name; refuse to mix in cells run with other fixed settings."""
    saved = spec.out / "sweep.toml"
    if not saved.is_file():
        return
    from otafl_sdr.results.safe_files import load_toml
    try:
        old = load_toml(saved, "saved sweep spec").get("sweep", {})
    except UserError:
        return
    if not isinstance(old, dict):
        return
    base = str(spec.base.resolve()) if spec.base else None
    if old.get("set", []) != spec.fixed or old.get("base") != base:
        raise UserError(f"sweep folder '{spec.out}' holds cells run with other fixed settings "
                        f"(set {old.get('set', [])}, base {old.get('base')}); use another --out")


def _write_spec(spec: SweepSpec) -> None:
    from otafl_sdr.results.files import atomic_write_text
    atomic_write_text(spec.out / "sweep.toml", spec_toml(spec))


def is_finished(spec, cells) -> bool:
    """True when ``spec.out`` holds this very spec (sweep.toml as the spec writes it now) and a sweep table,
    and every cell's summary says it finished (``cell_status`` 'done'): the folder answers from disk."""
    saved, table = Path(spec.out) / "sweep.toml", Path(spec.out) / "sweep.csv"
    if not (saved.is_file() and table.is_file()):
        return False
    try:
        same = saved.read_text() == spec_toml(spec)
    except (OSError, UnicodeDecodeError):
        return False
    return same and all(cell_status(c.out) == "done" for c in cells)


def spec_toml(spec: SweepSpec) -> str:
    """The spec as resolved, as the folder's sweep.toml holds it."""
    d = {"sweep": {"name": spec.name, "seeds": spec.seeds, "out": str(spec.out), "set": spec.fixed},
         "grid": spec.grid}
    if spec.arms:
        d["arms"] = {a: {"set": s, "label": spec.labels.get(a, a)} | ({"reference": True} if a in
                     spec.compare.get("reference", []) else {}) for a, s in spec.arms.items()}
    if spec.claims:
        d["claims"] = spec.claims
    if {k: v for k, v in spec.compare.items() if k != "reference"}:
        d["compare"] = {k: v for k, v in spec.compare.items() if k != "reference"}
    if spec.base:
        d["sweep"]["base"] = str(spec.base.resolve())
    if spec.dirs:
        d["sweep"]["dirs"] = spec.dirs
    if spec.title:
        d["sweep"]["title"] = spec.title
    return tomli_w.dumps(d)


# ------------------------------------------------------------------------------------------------
def failed_cells(table):
    """The rows of cells that failed or did not run."""
    return table[table["status"].astype(str).str.startswith(("failed", "not run"))]


def add_engine_arguments(p) -> None:
    """--engine, --workers, --address, --out, --quiet: shared by `sweep` and `compare`."""
    p.add_argument("--engine", choices=("local", "ray"), default="local", help="where the cells run")
    p.add_argument("--workers", type=int, default=None, help="local engine: worker processes (default: cores)")
    p.add_argument("--address", default=None, help="ray engine: address of an existing Ray cluster")
    p.add_argument("--out", default=None, help="sweep folder (default: the spec's sweep.out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_figure_argument(p)


def check_workers(workers: int | None) -> None:
    if workers is not None and workers < 1:
        raise UserError("--workers must be >= 1")


def add_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec (TOML: [sweep] base, seeds, out, set; [grid] dotted key -> list)")
    add_engine_arguments(p)
    add_override_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="list the cells and their state, run nothing")


def main(args) -> int:
    check_workers(args.workers)
    spec = load_spec(args.spec, args.out)
    spec.figure = preset(args.figure).name            # an unknown preset: refused before anything runs
    apply_overrides(spec, args.seeds, args.set)
    if args.dry_run:
        cells = spec.cells()
        validate_cells(spec, cells)
        for c in cells:
            print(f"{cell_status(c.out):8s} {c.out}")
        print(f"{len(cells)} cells")
        return 0
    table = run_sweep(spec, engine=args.engine, workers=args.workers, address=args.address,
                      progress=not args.quiet)
    failed = failed_cells(table)
    from otafl_sdr.sweeps.folder_state import cells_table
    print(cells_table(table, spec.out))
    print(f"sweep {spec.name}: {len(table) - len(failed)}/{len(table)} cells complete; table: {spec.out / 'sweep.csv'}")
    if len(failed):
        for _, r in failed.iterrows():
            print(f"otafl-sdr: cell {r['dir']}: {r['status']}", file=sys.stderr)
        return 1
    return 0
