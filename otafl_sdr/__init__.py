"""otafl-sdr: a GNU Radio / SDR testbed for differentially private over-the-air federated learning.

    import otafl_sdr
    result = otafl_sdr.run({"run": {"rounds": 5}, "air": {"name": "sim"}})   # the default experiment + keys
    result.rounds          # pandas DataFrame, one row per round
    result.summary         # dict (summary.json)
    rounds, ledger, summary = otafl_sdr.load(result.out)      # DataFrames (a sweep / compare folder too)
    frame = otafl_sdr.compare("sim_loopback/compare/SPEC.toml", workers=2)   # tidy: one row per metric
    fig = otafl_sdr.plot(otafl_sdr.load(result.out), kind="epsilon", figure="ieee-single")  # a matplotlib Figure

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


def sweep(spec, **kw):
    """Run a sweep spec; the cells' rounds as a tidy long-format DataFrame (see :func:`otafl_sdr.api.sweep`)."""
    from otafl_sdr.api import sweep as _sweep
    return _sweep(spec, **kw)


def compare(spec, **kw):
    """Run a compare spec; the cells' rounds as a tidy long-format DataFrame (see :func:`otafl_sdr.api.compare`)."""
    from otafl_sdr.api import compare as _compare
    return _compare(spec, **kw)


def plot(loaded, kind=None, figure="screen"):
    """One figure of ``otafl_sdr.load(DIR)`` as a matplotlib Figure at a preset's size (see
    :func:`otafl_sdr.api.plot`)."""
    from otafl_sdr.api import plot as _plot
    return _plot(loaded, kind=kind, figure=figure)


__all__ = ["__version__", "compare", "load", "plot", "run", "sweep"]
