"""otafl-sdr: a GNU Radio / SDR testbed for differentially private over-the-air federated learning.

    import otafl_sdr
    result = otafl_sdr.run({"run": {"rounds": 5}, "air": {"name": "sim"}})   # the default experiment + keys
    result.rounds          # pandas DataFrame, one row per round
    result.summary         # dict (summary.json)

The command line is `otafl-sdr` (see README.md)."""
from __future__ import annotations

try:
    from importlib.metadata import version as _v
    __version__ = _v("otafl-sdr")
except Exception:  # noqa: BLE001 - a source tree that was never installed
    __version__ = "0+unknown"


def run(config=None, out=None, on_round=None, progress: bool = False):
    """Run one experiment; see :func:`otafl_sdr.api.run`."""
    from .api import run as _run
    return _run(config, out=out, on_round=on_round, progress=progress)


__all__ = ["__version__", "run"]
