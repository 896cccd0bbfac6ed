"""A node's copy of the run: the orchestrator's own ``Experiment._build`` (data, partition, model,
trainer, SystemInfo, power policy, fading, CSI) on the config the server sent, without a results
folder. Every node thus holds the same seeded objects as the in-process run; nothing is written."""
from __future__ import annotations

from pathlib import Path

from ..orchestrator import Experiment
from ..registry import load_plugins


class NodeContext(Experiment):
    """``NodeContext(cfg)``: the built run (``trainer``, ``policy``, ``info``, ``K``, ``dim``, ...)."""

    def __init__(self, cfg, torch_threads: int = 1):
        # no Experiment.__init__: it prepares a results folder, which only the server has
        load_plugins()
        self.cfg = cfg
        self.out = Path("/nonexistent-otafl-node")       # the ledger object is built but never written
        self.resuming = False
        self.progress = False
        threads = cfg.run.torch_threads
        cfg.run.torch_threads = max(1, min(threads, torch_threads))
        try:
            self._build()
        finally:
            cfg.run.torch_threads = threads
        self.air = None                                  # the in-process air object is not used
