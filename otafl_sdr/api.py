"""The Python API: ``otafl_sdr.run(config, out=None, on_round=None)``.

config: a path to a TOML file, a dict of sections (``{"run": {"rounds": 5}}``, or dotted keys
``{"run.rounds": 5}``) applied over the default experiment, a :class:`~otafl_sdr.config.schema.Config`, or None
(the default experiment). Every form is validated exactly as the command line validates (ConfigError
naming the key). out: the results folder (None: a new temporary folder, kept and named in the result).
on_round: called with each round's row (a dict) as soon as it is written; an exception it raises stops the
run after that round with a checkpoint and a summary (``stopped_reason`` names the exception; the run
resumes with ``otafl-sdr run --resume``). Returns a :class:`RunResult`.
JSON results use null for infinite values (an infinite epsilon) and for figures not computed."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from otafl_sdr.config.schema import DEFAULT_EXPERIMENT, Config, apply_values, parse_config, rename_old_keys, to_toml
from otafl_sdr.configure.load import default_experiment, load_config, validate
from otafl_sdr.errors import ConfigError, UserError


@dataclass
class RunResult:
    """summary: summary.json as a dict; out: the results folder; stopped_reason: '' when completed."""

    summary: dict
    out: Path
    stopped_reason: str = ""

    @property
    def rounds(self):
        """rounds.jsonl as a pandas DataFrame (one row per round)."""
        import pandas as pd
        from otafl_sdr.results.files import read_rounds
        return pd.DataFrame.from_records(read_rounds(self.out / "rounds.jsonl"))


def _leaves(d: dict, prefix: str = "", depth: int = 0) -> dict:
    """{dotted key: value} of a dict of sections and / or dotted keys; ``options`` tables are values. A key
    given twice (``{"air.name": ..., "air": {"name": ...}}``) is refused as ambiguous, never silently picked."""
    if depth > 4:
        raise ConfigError(prefix.rstrip(".") or "config", "nested deeper than a config's sections go")
    out: dict = {}
    for k, v in d.items():
        if not isinstance(k, str):
            raise ConfigError(f"{prefix}{k!r}", f"config keys are strings, got {type(k).__name__}")
        key = f"{prefix}{k}"
        items = _leaves(v, key + ".", depth + 1) if isinstance(v, dict) and not key.endswith("options") else {key: v}
        for leaf, value in items.items():
            if leaf in out:
                raise ConfigError(leaf, "is given twice (as a dotted key and inside its section); give it once")
            out[leaf] = value
    return out


def _nested(leaves: dict) -> dict:
    data: dict = {}
    for dotted, value in leaves.items():
        *sections, name = dotted.split(".")
        cur = data
        for part in sections:
            cur = cur.setdefault(part, {})
            if not isinstance(cur, dict):
                raise ConfigError(dotted, "is not inside a section")
        cur[name] = value
    return data


def resolve(config) -> Config:
    """The validated Config of ``config`` (see the module's docstring); every bad value is a ConfigError
    naming its key (numpy scalars are read as the numbers they hold)."""
    if config is None:
        return default_experiment()
    if isinstance(config, Config):
        validate(config)
        return _roundtrip(config)
    if isinstance(config, (str, Path)):
        return load_config(config)
    if isinstance(config, dict):
        cfg = parse_config(DEFAULT_EXPERIMENT)
        apply_values(cfg, rename_old_keys(_nested(_leaves(config))))
        validate(cfg)
        return cfg
    raise UserError(f"config must be a path, a dict or a Config, got {type(config).__name__}")


def _roundtrip(cfg: Config) -> Config:
    """Validate a Config built in code the way a TOML file is (types coerced, ranges checked)."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(to_toml(cfg))
    try:
        return load_config(f.name)
    finally:
        Path(f.name).unlink(missing_ok=True)


def run(config=None, out=None, on_round=None, progress: bool = False) -> RunResult:
    from otafl_sdr.experiment.orchestrator import make_experiment
    if out is not None and not isinstance(out, (str, Path)):
        raise UserError(f"out must be a folder path (str or Path), got {type(out).__name__}")
    if on_round is not None and not callable(on_round):
        raise UserError(f"on_round must be callable, got {type(on_round).__name__}")
    cfg = resolve(config)
    if out is None:
        out = Path(tempfile.mkdtemp(prefix=f"otafl-{cfg.run.name}-")) / "run"
    from otafl_sdr.airs import air_capabilities
    if air_capabilities(cfg.air.name).testbed:        # as `otafl-sdr run`: one node process per radio
        return _run_testbed(cfg, Path(out), on_round, progress)
    exp = make_experiment(cfg, out, progress=progress)
    if on_round is not None:
        exp.on_round = on_round
    outcome = exp.run()
    return RunResult(summary=json.loads((Path(outcome.out) / "summary.json").read_text()), out=Path(outcome.out),
                     stopped_reason=outcome.stopped_reason)


def _run_testbed(cfg: Config, out: Path, on_round, progress: bool) -> RunResult:
    """The testbed (net/testbed.py) started as the command line starts it; its server is another process,
    so ``on_round`` gets the rows once the run has ended."""
    from otafl_sdr.net.testbed import run_testbed
    from otafl_sdr.results.files import read_rounds
    run_testbed(cfg, out, progress=progress)
    summary = json.loads((out / "summary.json").read_text())
    if on_round is not None:
        for row in read_rounds(out / "rounds.jsonl"):
            on_round(dict(row))
    return RunResult(summary=summary, out=out, stopped_reason=summary.get("stopped_reason", ""))


def _entry_point(module, argv: list[str], quiet: bool) -> int:
    """Run an `otafl-sdr` command's entry point (its own argument parser and ``main``) in this process; bad
    input raises UserError as it would print it. ``quiet``: its printed tables are kept off stdout."""
    import argparse
    import contextlib
    import io
    p = argparse.ArgumentParser(prog=f"otafl-sdr {module.__name__.rsplit('.', 1)[-1]}")
    module.add_arguments(p)
    p.error = lambda message: (_ for _ in ()).throw(UserError(message))     # a UserError, not SystemExit
    args = p.parse_args(argv)
    sink = io.StringIO() if quiet else None
    with contextlib.redirect_stdout(sink) if sink is not None else contextlib.nullcontext():
        return int(module.main(args) or 0)


def _engine_argv(spec, out, workers, engine, address, progress) -> list[str]:
    if not isinstance(spec, (str, Path)):
        raise UserError(f"spec must be the path of a sweep / compare spec (TOML), got {type(spec).__name__}")
    argv = [str(spec), "--engine", engine]
    if out is not None:
        argv += ["--out", str(out)]
    if workers is not None:
        argv += ["--workers", str(workers)]
    if address is not None:
        argv += ["--address", str(address)]
    return argv + ([] if progress else ["--quiet"])


def _finished(spec, out, command: str) -> bool:
    """The folder is finished for this spec (sweeps/sweep.is_finished; a comparison with its report
    too): read from disk as it is, no cell re-validated or re-checked."""
    from otafl_sdr.sweeps.sweep import is_finished
    from otafl_sdr.sweeps.sweep import load_spec
    if not isinstance(spec, (str, Path)):
        return False
    loaded = load_spec(spec, None if out is None else str(out))
    report = command != "compare" or (loaded.out / "compare.csv").is_file()
    return report and is_finished(loaded, loaded.cells())


def _tidy(module_name: str, spec, out, rc: int):
    from otafl_sdr.sweeps.sweep import load_spec
    from otafl_sdr.results.tidy import load_sweep, long_rounds
    folder = load_spec(spec, None if out is None else str(out)).out
    loaded = load_sweep(folder)
    frame = long_rounds(loaded.rounds)
    frame.attrs.update({"out": str(folder), "failed_cells": rc != 0, "command": module_name})
    return frame


def sweep(spec, out=None, workers: int | None = None, engine: str = "local", address: str | None = None,
          progress: bool = False):
    """`otafl-sdr sweep SPEC` (resumable: finished cells are skipped), then every cell's rounds as one tidy
    long-format DataFrame: the cell's folder (``dir``), arm, grid keys and seed, ``round``, ``client_round``,
    ``metric``, ``value``. ``frame.attrs['out']``: the sweep folder (``otafl_sdr.load(it).table`` is
    sweep.csv, one row per cell). Failed cells are kept out of the rows and flagged in
    ``frame.attrs['failed_cells']``."""
    import importlib
    sweep_module = importlib.import_module("otafl_sdr.sweeps.sweep")     # `from . import sweep` would be the package's
    if _finished(spec, out, "sweep"):
        return _tidy("sweep", spec, out, 0)
    rc = _entry_point(sweep_module, _engine_argv(spec, out, workers, engine, address, progress), quiet=not progress)
    return _tidy("sweep", spec, out, rc)


def compare(spec, out=None, workers: int | None = None, engine: str = "local", address: str | None = None,
            seeds: int | None = None, set: tuple | list = (), progress: bool = False, report_only: bool = False):
    """`otafl-sdr compare SPEC` (the cells, then compare.csv / claims.md and the figures), then the cells' rounds
    as one tidy long-format DataFrame as :func:`sweep` returns it (``mechanism`` / ``arm`` name the arms);
    the per-arm table and the claims are in the folder ``frame.attrs['out']`` (compare.csv, claims.md)."""
    import importlib
    compare_module = importlib.import_module("otafl_sdr.sweeps.compare_command")
    if not report_only and seeds is None and not set and _finished(spec, out, "compare"):
        return _tidy("compare", spec, out, 0)
    argv = _engine_argv(spec, out, workers, engine, address, progress)
    if seeds is not None:
        argv += ["--seeds", str(seeds)]
    for s in set:
        argv += ["--set", str(s)]
    if report_only:
        argv.append("--report-only")
    rc = _entry_point(compare_module, argv, quiet=not progress)
    return _tidy("compare", spec, out, rc)


def plot(loaded, kind: str | None = None, figure: str = "screen"):
    """One figure of a loaded folder as a matplotlib ``Figure`` (not shown, not saved: ``fig.savefig(...)``).

    loaded: what ``otafl_sdr.load(DIR)`` returns (or the folder's path). Of a run's folder, ``kind`` is one of
    accuracy (default), loss, epsilon, nmse; of a sweep / compare folder one of accuracy_rounds (default),
    final_accuracy, accuracy_last_k (a compare folder), accuracy_vs_eps (a grid over privacy.eps). figure: the
    preset (screen, ieee-single: 3.5 in, ieee-double: 7.16 in; fonts >= 7 pt at that size). The figures are
    the ones `otafl-sdr report DIR --figure PRESET` writes."""
    from otafl_sdr.results.figure_presets import preset
    from otafl_sdr.results.tidy import Loaded, load
    p = preset(figure)
    if isinstance(loaded, (str, Path)):
        loaded = load(loaded)
    if not isinstance(loaded, Loaded):
        raise UserError(f"plot takes what otafl_sdr.load(DIR) returns (or DIR), got {type(loaded).__name__}")
    out = Path(loaded.out)
    if loaded.cells or (out / "sweep.toml").is_file():
        return _plot_sweep_folder(out, loaded.table, kind or "accuracy_rounds", p)
    from otafl_sdr.results.files import read_rounds
    from otafl_sdr.results.run_plots import run_figure
    from otafl_sdr.results.safe_files import load_json
    rows = read_rounds(out / "rounds.jsonl") if (out / "rounds.jsonl").is_file() else []
    if not rows:
        raise UserError(f"plot: '{out}' holds no rounds yet (rounds.jsonl); nothing to draw")
    summary = load_json(out / "summary.json", "summary") if (out / "summary.json").is_file() else {}
    return run_figure(kind or "accuracy", rows, summary if isinstance(summary, dict) else {}, p)


def _plot_sweep_folder(out: Path, table, kind: str, p):
    from otafl_sdr.sweeps.cell_overrides import grid_keys
    from otafl_sdr.sweeps.compare import add_last_k, options
    from otafl_sdr.sweeps.plots import KINDS, sweep_figures
    from otafl_sdr.sweeps.sweep import load_spec
    if kind not in KINDS:
        raise UserError(f"kind {kind!r} is not a sweep's figure; known: {', '.join(KINDS)}")
    if not (out / "sweep.toml").is_file():
        raise UserError(f"plot: '{out}' holds no sweep.toml (the spec it was run with)")
    spec = load_spec(out / "sweep.toml", str(out))
    if table is None or not len(table):
        raise UserError(f"plot: '{out}' holds no sweep.csv rows yet; nothing to draw")
    if spec.arms:
        table = add_last_k(spec, table, options(spec))
    figs = sweep_figures(out, table, spec.labels, grid_keys(spec), p, spec.title, kinds=(kind,))
    if kind not in figs:
        raise UserError(f"plot: '{out}' has no data for {kind} (accuracy_last_k needs a compare folder, "
                        f"accuracy_vs_eps a grid over privacy.eps)")
    return figs[kind]
