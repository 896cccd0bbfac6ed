"""The dotted keys of the implementations' option tables (``power.options.rho``, ``algorithm.options.sigma``)
for `config --explain`: each option's type, meaning (the comment beside its field in the implementation's
``Options`` dataclass), its default per implementation, and its range (what the implementation's own check
says of out-of-bounds values)."""
from __future__ import annotations

import dataclasses
import inspect
import re
from functools import lru_cache
from typing import get_type_hints

from otafl_sdr.errors import ConfigError

TABLES = ("power.options", "algorithm.options")
_PROBES = {int: (-(2**31 - 1), -1, 0, 2**31 - 1), float: (-1e12, -1.0, 0.0, 1e12), str: ("?",)}


def _registry(table: str):
    from otafl_sdr.registry import ALGORITHMS, POWER_POLICIES
    return {"power.options": POWER_POLICIES, "algorithm.options": ALGORITHMS}[table]


def _field_comments(cls) -> dict[str, str]:
    """{field: the comment beside it}, from the class and the classes it extends."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        for m in re.finditer(r"^\s+(\w+): [^=\n]+=[^#\n]*#\s*(.*)$", source, re.M):
            out[m.group(1)] = m.group(2).strip()
    return out


@lru_cache(maxsize=1)
def option_keys() -> dict[str, dict]:
    """{'power.options.rho': {type, meaning, defaults: {implementation: default}, owners: [cls, ...]}}."""
    from otafl_sdr.configure.plugins import load_plugins
    load_plugins()
    out: dict[str, dict] = {}
    for table in TABLES:
        reg = _registry(table)
        for name in reg.names():
            impl = reg.get(name)
            opts = getattr(impl, "Options", None)
            if opts is None or not dataclasses.is_dataclass(opts):
                continue
            comments, hints = _field_comments(opts), get_type_hints(opts)
            for f in dataclasses.fields(opts):
                info = out.setdefault(f"{table}.{f.name}", {"type": hints.get(f.name), "meaning": "",
                                                             "defaults": {}, "owners": []})
                info["meaning"] = info["meaning"] or comments.get(f.name, "")
                info["defaults"][name] = _default(f)
                info["owners"].append(impl)
    return out


def _default(f):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return "(required)"


def option_range(key: str) -> str:
    """What the implementations' checks say of out-of-bounds values of the option (their own words)."""
    info = option_keys()[key]
    name = key.rpartition(".")[2]
    said: list[str] = []
    for impl in info["owners"]:
        for v in _PROBES.get(info["type"], ()):
            try:
                impl.validate_options({name: v})
            except ConfigError as e:
                if e.key == key:
                    msg = re.sub(r",? got .*$", "", str(e).split(": ", 1)[1]).strip().rstrip(";,")
                    if msg and msg not in said:
                        said.append(msg)
            except Exception:  # noqa: BLE001 - a probe the check does not take as a config error says nothing
                pass
    return "; ".join(said[:1]) or {bool: "true or false", list: "a list", dict: "a table"}.get(
        info["type"], "any value of its type (checked when the run is built)")
