"""A config made ready for a run: loaded over the default experiment (load), checked against the registered
plugins and every room's rules (validation), explained key by key (explain), plugins imported (plugins)."""
