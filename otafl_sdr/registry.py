"""Name -> implementation registries (the tables only; plugins/load_plugins fills them), so that a config string picks a data set, model, algorithm,
power policy, accountant or air, and a new paper adds a file rather than a branch.

Entries may be registered lazily as "module:attribute" so that, e.g., the GNU Radio airs are listed
without importing gnuradio (only ``otafl_sdr.radio`` may import it)."""
from __future__ import annotations

import importlib
from typing import Any, Callable

from otafl_sdr.errors import ConfigError, did_you_mean


class Registry:
    def __init__(self, kind: str, config_key: str):
        self.kind = kind
        self.config_key = config_key
        self._entries: dict[str, Any] = {}
        self._help: dict[str, str] = {}

    def register(self, name: str, help: str = "") -> Callable[[Any], Any]:
        def deco(obj: Any) -> Any:
            self._entries[name] = obj
            doc = (obj.__doc__ or "").strip()
            self._help[name] = help or (doc.splitlines()[0] if doc else "")
            return obj
        return deco

    def register_lazy(self, name: str, target: str, help: str = "") -> None:
        """Register ``target`` = "package.module:attr", imported on first ``get``."""
        self._entries[name] = target
        self._help[name] = help

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a plugin loaded for one experiment or test only)."""
        self._entries.pop(name, None)
        self._help.pop(name, None)

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
