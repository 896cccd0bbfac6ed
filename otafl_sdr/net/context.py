"""A node's copy of the run: the orchestrator's own ``Experiment._build`` (data, partition, model,
trainer, SystemInfo, power policy, fading, CSI) on the config the server sent, without a results
folder. Every node thus holds the same seeded objects as the in-process run; nothing is written.
In a run that calibrates in session (air uhd) the server's calibration file (sent in a ``calibration``
message) stands in for the measurement: the node's CSI, noise floor and power plan are the server's."""
from __future__ import annotations

from pathlib import Path

from ..orchestrator import Experiment
from ..registry import load_plugins


class NodeContext(Experiment):
    """``NodeContext(cfg)``: the built run (``trainer``, ``policy``, ``info``, ``K``, ``dim``, ...)."""

    def __init__(self, cfg, torch_threads: int = 1, session_cal: Path | None = None):
        # no Experiment.__init__: it prepares a results folder, which only the server has
        load_plugins()
        self.cfg = cfg
        self.out = Path("/nonexistent-otafl-node")       # the ledger object is built but never written
        self.resuming = False
        self.progress = False
        self.session_cal = session_cal
        threads = cfg.run.torch_threads
        cfg.run.torch_threads = max(1, min(threads, torch_threads))
        try:
            self._build()
        finally:
            cfg.run.torch_threads = threads
        self.air = None                                  # the in-process air object is not used

    def _calibrate_in_session(self, steps: tuple) -> None:
        """The server measured; the node takes its file (no radios are opened here)."""
        from ..errors import UserError
        if self.session_cal is None:
            raise UserError("the run calibrates in session but the server sent no calibration")
        self._session_cal = self.session_cal

    def use_server_calibration(self, path: Path) -> None:
        """A newer calibration from the server (air.recalibrate_every): fresh channel estimates."""
        self.session_cal = self._session_cal = path
        self.csi = self._csi_provider()
