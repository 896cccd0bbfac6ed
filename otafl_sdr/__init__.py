"""otafl-sdr: a GNU Radio / SDR testbed for differentially private over-the-air federated learning.

    import otafl_sdr
    result = otafl_sdr.run({"run": {"rounds": 5}, "air": {"name": "sim"}})   # the default experiment + keys
    result.rounds          # pandas DataFrame, one row per round
    result.summary         # dict (summary.json)
    rounds, ledger, summary = otafl_sdr.load(result.out)      # DataFrames (a sweep / compare folder too)
    frame = otafl_sdr.sweeps.compare("sim_loopback/compare/SPEC.toml", workers=2)   # tidy: one row per metric

The command line is `otafl-sdr` (see README.md)."""
from __future__ import annotations

try:
    from importlib.metadata import version as _v
    __version__ = _v("otafl-sdr")
except Exception:  # noqa: BLE001 - a source tree that was never installed
    __version__ = "0+unknown"


def run(config=None, out=None, on_round=None, progress: bool = False):
    """Run one experiment; see :func:`otafl_sdr.api.run`."""
    from otafl_sdr.api import run as _run
    return _run(config, out=out, on_round=on_round, progress=progress)


def load(path):
    """A results folder (or a sweep / compare folder) as DataFrames: ``rounds, ledger, summary =
    otafl_sdr.load(DIR)``; see :mod:`otafl_sdr.results.tidy`."""
    from otafl_sdr.results.tidy import load as _load
    return _load(path)


def _callable_command(name: str):
    """``otafl_sdr.sweeps.sweep(spec)`` / ``otafl_sdr.sweeps.compare(spec)``: the package's attribute of that name is the
    submodule (Python sets it whenever ``otafl_sdr.sweeps.sweep`` is imported), so the submodule itself is made
    callable: calling it runs :func:`otafl_sdr.api.sweep` / :func:`otafl_sdr.api.compare`; its contents
    (``otafl_sdr.sweeps.sweep.load_spec``, ...) are unchanged."""
    import importlib
    import types

    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except Exception:  # noqa: BLE001 - a broken command module must not break `import otafl_sdr`: a function
        def command(spec, **kw):                          # that raises its import error once called
            from otafl_sdr import api
            return getattr(api, name)(spec, **kw)
        return command

    class CallableCommand(types.ModuleType):
        def __call__(self, spec, **kw):
            from otafl_sdr import api
            return getattr(api, name)(spec, **kw)

    CallableCommand.__call__.__doc__ = f"Run a {name} spec; the cells' rounds as a tidy long-format DataFrame " \
                                       f"(otafl_sdr.api.{name})."
    module.__class__ = CallableCommand
    return module


sweep = _callable_command("sweep")
compare = _callable_command("compare")


__all__ = ["__version__", "compare", "load", "run", "sweep"]
