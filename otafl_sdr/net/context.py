"""A node's copy of the run: ``build_run`` (workload/parts.py: data, partition, model, trainer, SystemInfo,
power policy, CSI) on the config the server sent, as the server builds it. Every node thus holds the same
seeded objects as the server; nothing is written. The privacy target is solved as the server solves it
(workload/targeting.py, planned and booked by workload/round_plan.py), so a node's knob is the server's. In a run that calibrates in session (air uhd) the
server's calibration file (sent in a ``calibration`` message) stands in for the measurement: the node's
CSI, noise floor and power plan are the server's."""
from __future__ import annotations

from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.workload.build import build_run
from otafl_sdr.workload.parts import RunParts
from otafl_sdr.workload.targeting import solve_privacy_target


def node_run(cfg, torch_threads: int = 1, session_cal: Path | None = None) -> RunParts:
    """The built run for a node (at most ``torch_threads`` torch threads)."""
    if cfg.calibration.session and session_cal is None:
        raise UserError("the run calibrates in session but the server sent no calibration")
    threads = cfg.run.torch_threads
    cfg.run.torch_threads = max(1, min(threads, torch_threads))
    try:
        parts = build_run(cfg, session_cal=session_cal)
        solve_privacy_target(parts)
        return parts
    finally:
        cfg.run.torch_threads = threads
