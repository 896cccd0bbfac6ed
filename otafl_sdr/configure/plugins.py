"""Loading the plugins: importing the rooms whose implementations register themselves by name
(registry.py holds only the tables), then every installed package's ``otafl_sdr.configure.plugins`` entry point
(docs/extending.md). Called by the run's config loader (configure/load.py) and the entry points, never by a
module the plugins themselves import."""
from __future__ import annotations

from importlib.metadata import entry_points

from otafl_sdr.errors import UserError

ENTRY_POINT_GROUP = "otafl_sdr.plugins"
_loaded = False


def load_plugins() -> None:
    """Import the built-in rooms, then each installed plugin (once per process)."""
    global _loaded
    from otafl_sdr import airs, channel, learning, power, privacy  # noqa: F401  (they register on import)
    if _loaded:
        return
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as e:  # noqa: BLE001 - a broken third-party plugin is the user's one-line error
            raise UserError(f"plugin '{ep.name}' ({ep.value}) failed to load: {type(e).__name__}: {e}") from None
    _loaded = True
