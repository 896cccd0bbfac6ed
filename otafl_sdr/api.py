"""The Python API: ``otafl_sdr.run(config, out=None, on_round=None)``.

config: a path to a TOML file, a dict of sections (``{"run": {"rounds": 5}}``, or dotted keys
``{"run.rounds": 5}``) applied over the default experiment, a :class:`~otafl_sdr.config.Config`, or None
(the default experiment). Every form is validated exactly as the command line validates (ConfigError
naming the key). out: the results folder (None: a new temporary folder, kept and named in the result).
on_round: called with each round's row (a dict) as soon as it is written. Returns a :class:`RunResult`.
JSON results use null for infinite values (an infinite epsilon) and for figures not computed."""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .config import Config, to_toml
from .run_config import default_experiment, load_config, validate
from .errors import UserError


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
        from .results import read_rounds
        return pd.DataFrame.from_records(read_rounds(self.out / "rounds.jsonl"))


def _flatten(d: dict, prefix: str = "") -> list[str]:
    sets = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k != "options":
            sets += _flatten(v, key + ".")
        else:
            sets.append(f"{key}={_toml(v)}")
    return sets


def _toml(v) -> str:
    import tomli_w
    return tomli_w.dumps({"v": v}).split("=", 1)[1].strip()


def resolve(config) -> Config:
    if config is None:
        return default_experiment()
    if isinstance(config, Config):
        validate(config)
        return _roundtrip(config)
    if isinstance(config, (str, Path)):
        return load_config(config)
    if isinstance(config, dict):
        return default_experiment(_flatten(config))
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
    from .orchestrator import make_experiment
    cfg = resolve(config)
    if out is None:
        out = Path(tempfile.mkdtemp(prefix=f"otafl-{cfg.run.name}-")) / "run"
    from .airs import air_capabilities
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
    from .net.testbed import run_testbed
    from .results import read_rounds
    run_testbed(cfg, out, progress=progress)
    summary = json.loads((out / "summary.json").read_text())
    if on_round is not None:
        for row in read_rounds(out / "rounds.jsonl"):
            on_round(dict(row))
    return RunResult(summary=summary, out=out, stopped_reason=summary.get("stopped_reason", ""))
