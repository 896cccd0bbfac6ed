"""Loading the plugins: importing the rooms whose implementations register themselves by name
(registry.py holds only the tables), then every installed package's ``otafl_sdr.configure.plugins`` entry point
(docs/extending.md). Called by the run's config loader (configure/load.py) and the entry points, never by a
module the plugins themselves import."""
from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from otafl_sdr import registry
from otafl_sdr.errors import UserError

ENTRY_POINT_GROUP = "otafl_sdr.plugins"
_loaded = False


ROOMS = ("learning", "power", "privacy")   # every module of these rooms is imported: a new one registers itself


def load_plugins() -> None:
    """Import the built-in rooms (every module of ``ROOMS``, so a new policy, algorithm or accountant file
    registers without an ``__init__.py`` to edit), then each installed plugin (once per process)."""
    global _loaded
    from otafl_sdr import airs, channel, learning, power, privacy  # noqa: F401  (they register on import)
    if _loaded:
        return
    for room in ROOMS:
        package = importlib.import_module(f"otafl_sdr.{room}")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"otafl_sdr.{room}.{module.name}")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            with registry.loading_entry_point(f"entry point '{ep.name}' ({ep.value})"):
                ep.load()
        except UserError:
            raise                   # e.g. a name another implementation holds: already one line
        except Exception as e:  # noqa: BLE001 - a broken third-party plugin is the user's one-line error
            raise UserError(f"plugin '{ep.name}' ({ep.value}) failed to load: {type(e).__name__}: {e}") from None
    _loaded = True


def plugin_origins(cfg) -> dict[str, dict[str, str]]:
    """The run's non-builtin implementations, {config key: {name: origin}} (registry.Registry.origin), for the
    summary: which module (and entry point) supplied each plugin the config selects; {} for a built-in run."""
    chosen = {
        "data.dataset": [cfg.data.dataset], "data.partition": [cfg.data.partition], "model.name": [cfg.model.name],
        "algorithm.name": [cfg.algorithm.name], "power.policy": [cfg.power.policy], "air.name": [cfg.air.name],
        "privacy.accountant": [cfg.privacy.accountant, *cfg.privacy.report],
    }
    out: dict[str, dict[str, str]] = {}
    for table in registry.ALL.values():
        for name in chosen.get(table.config_key, []):
            if name in table.names() and not table.builtin(name):
                out.setdefault(table.config_key, {})[name] = table.origin(name)
    return out
