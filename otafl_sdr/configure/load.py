"""The config of a run: parsed (config/schema.py), then checked against the registered plugins and every room's
rules (configure/validation.py). Entry points and scripts load their configs here."""
from __future__ import annotations

from pathlib import Path

import copy

from otafl_sdr.config.schema import DEFAULT_EXPERIMENT, Config, apply_values, parse_config, parse_overrides, rename_old_keys
from otafl_sdr.configure.validation import validate

__all__ = ["load_config", "default_experiment", "config_from_dict", "with_overrides", "validate"]


def load_config(path: str | Path | None = None, overrides: list[str] | tuple = (),
                validate_now: bool = True) -> Config:
    """``config.parse_config`` and, unless ``validate_now`` is False, ``config_validation.validate``."""
    cfg = parse_config(path, overrides)
    if validate_now:
        validate(cfg)
    return cfg


def default_experiment(overrides: list[str] | tuple = ()) -> Config:
    """The default experiment (`make run`, `otafl-sdr run` and `otafl-sdr config` without --config): the
    packaged copy of sim_loopback/default.toml (a test keeps the two equal)."""
    return load_config(DEFAULT_EXPERIMENT, overrides)


def config_from_dict(data: dict) -> Config:
    """A validated Config from nested dicts (the API's ``otafl_sdr.run({...})``)."""
    cfg = Config()
    apply_values(cfg, rename_old_keys(data))
    validate(cfg)
    return cfg


def with_overrides(cfg: Config, overrides: list[str] | tuple) -> Config:
    """A validated copy of ``cfg`` with ``overrides`` ("section.key=value", as --set) on top; ``cfg`` is left
    as it was."""
    out = copy.deepcopy(cfg)
    apply_values(out, rename_old_keys(parse_overrides(overrides)))
    validate(out)
    return out
