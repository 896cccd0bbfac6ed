"""Loading the plugins: importing the rooms whose implementations register themselves by name
(registry.py holds only the tables). Called by the run's config loader (run_config.py) and the entry
points, never by a module the plugins themselves import."""
from __future__ import annotations


def load_plugins() -> None:
    """Import the pure rooms so that their implementations register themselves."""
    from . import airs, channel, learning, power, privacy  # noqa: F401
