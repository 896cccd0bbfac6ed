"""Name -> implementation registries (the tables only; plugins/load_plugins fills them), so that a config string picks a data set, model, algorithm,
power policy, accountant or air, and a new paper adds a file rather than a branch.

Entries may be registered lazily as "module:attribute" so that, e.g., the GNU Radio airs are listed
without importing gnuradio (only ``otafl_sdr.radio`` may import it).

A name is taken once: registering a name another implementation holds is refused (``replace=True`` to
replace it on purpose), so a plugin cannot silently swap, e.g., the enforcing ``pld`` accountant. Each entry
keeps its origin (the module that registered it, and the entry point it came through,
configure/plugins.py), which the run's summary records for every plugin that is not built in."""
from __future__ import annotations

import contextlib
import importlib
from typing import Any, Callable, Iterator

from otafl_sdr.errors import ConfigError, UserError, did_you_mean


_ENTRY_POINT: list[str] = []        # the entry point being loaded (configure/plugins.py), innermost last


@contextlib.contextmanager
def loading_entry_point(label: str) -> Iterator[None]:
    """Registrations inside the block record ``label`` (e.g. "entry point 'x' (pkg.mod)") as their origin."""
    _ENTRY_POINT.append(label)
    try:
        yield
    finally:
        _ENTRY_POINT.pop()


def _origin_of(obj: Any) -> str:
    """Where ``obj`` comes from: "module:qualname" ("module:attr" for a lazy target)."""
    if isinstance(obj, str):
        return obj
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"


class Registry:
    def __init__(self, kind: str, config_key: str):
        self.kind = kind
        self.config_key = config_key
        self._entries: dict[str, Any] = {}
        self._help: dict[str, str] = {}
        self._origin: dict[str, str] = {}     # name -> "module:qualname" of its implementation
        self._via: dict[str, str] = {}        # name -> the entry point that registered it ("" none)

    def register(self, name: str, help: str = "", *, replace: bool = False) -> Callable[[Any], Any]:
        """Decorator: ``obj`` under ``name``. A name held by another implementation is refused (UserError
        naming both origins) unless ``replace``; the same implementation registered again (its module
        re-imported) is a no-op."""
        def deco(obj: Any) -> Any:
            self._claim(name, _origin_of(obj), replace)
            self._entries[name] = obj
            doc = (obj.__doc__ or "").strip()
            self._help[name] = help or (doc.splitlines()[0] if doc else "")
            return obj
        return deco

    def register_lazy(self, name: str, target: str, help: str = "", *, replace: bool = False) -> None:
        """Register ``target`` = "package.module:attr", imported on first ``get`` (refused as ``register``)."""
        self._claim(name, target, replace)
        self._entries[name] = target
        self._help[name] = help

    def _claim(self, name: str, origin: str, replace: bool) -> None:
        held = self._origin.get(name)
        if held is not None and held != origin and not replace:
            raise UserError(f"{self.kind} '{name}' ({self.config_key}) is already registered by {held}; "
                            f"{origin} may not take its name (register(..., replace=True) replaces it on purpose)")
        self._origin[name] = origin
        self._via[name] = _ENTRY_POINT[-1] if _ENTRY_POINT else ""

    def origin(self, name: str) -> str:
        """Where ``name``'s implementation comes from ("module:qualname", plus "via entry point ..." when an
        installed package's entry point registered it)."""
        via = self._via.get(name, "")
        return self._origin.get(name, "") + (f" via {via}" if via else "")

    def builtin(self, name: str) -> bool:
        """True when ``name`` was registered by this package's own modules (not a plugin)."""
        return self._origin.get(name, "").startswith("otafl_sdr.") and not self._via.get(name)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a plugin loaded for one experiment or test only)."""
        self._entries.pop(name, None)
        self._help.pop(name, None)
        self._origin.pop(name, None)
        self._via.pop(name, None)

    def names(self) -> list[str]:
        return sorted(self._entries)

    def help(self, name: str) -> str:
        return self._help.get(name, "")

    def check(self, name: str, key: str | None = None) -> None:
        if name not in self._entries:
            raise ConfigError(key or self.config_key,
                              f"unknown {self.kind} '{name}'{did_you_mean(name, self.names())}; "
                              f"allowed: {', '.join(self.names())}")

    def get(self, name: str, key: str | None = None) -> Any:
        self.check(name, key)
        obj = self._entries[name]
        if isinstance(obj, str):
            module, attr = obj.split(":")
            obj = getattr(importlib.import_module(module), attr)
            self._entries[name] = obj
        return obj


DATASETS = Registry("data set", "data.dataset")
PARTITIONS = Registry("partition", "data.partition")
MODELS = Registry("model", "model.name")
ALGORITHMS = Registry("algorithm", "algorithm.name")
POWER_POLICIES = Registry("power policy", "power.policy")
ACCOUNTANTS = Registry("accountant", "privacy.accountant")
AIRS = Registry("air", "air.name")

ALL = {
    "datasets": DATASETS, "partitions": PARTITIONS, "models": MODELS, "algorithms": ALGORITHMS,
    "power policies": POWER_POLICIES, "accountants": ACCOUNTANTS, "airs": AIRS,
}
