"""Per-implementation option tables (``power.options``, ``algorithm.options``): each policy or algorithm
declares an ``Options`` dataclass; this checks a config table against it (unknown keys, types, and the
dataclass's own ``check()``), raising ConfigError naming the key."""
from __future__ import annotations

import dataclasses
from typing import get_type_hints

from otafl_sdr.errors import ConfigError, did_you_mean


def build_options(options_cls: type, options: dict, section: str, owner: str) -> object:
    """Instantiate ``options_cls`` from ``options`` (the ``section`` table, e.g. 'power.options')."""
    from otafl_sdr.config.schema import coerce_value  # the same coercion as every other config key

    fields = {f.name: f for f in dataclasses.fields(options_cls)}
    try:
        hints = get_type_hints(options_cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: skip coercion
        hints = {}
    values = {}
    for k, v in (options or {}).items():
        if k not in fields:
            allowed = ", ".join(sorted(fields)) or "none"
            raise ConfigError(f"{section}.{k}", f"unknown option for {owner}{did_you_mean(k, fields, section + '.')}; "
                                                 f"allowed: {allowed}")
        typ = hints.get(k)
        values[k] = coerce_value(f"{section}.{k}", typ, v) if typ in (bool, int, float, str, list, dict) else v
    try:
        opts = options_cls(**values)
    except (TypeError, ValueError) as e:
        raise ConfigError(section, str(e)) from None
    check = getattr(opts, "check", None)
    if callable(check):
        check()
    return opts
