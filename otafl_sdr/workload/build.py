"""``build_run(cfg)``: what every entry point builds (the in-process experiment, the testbed's server and
its nodes) in one order: algorithm and workload, data, model, trainer, (an in-session calibration), CSI,
SystemInfo, the power policy and its run context."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from otafl_sdr.config.schema import Config
from otafl_sdr.registry import ALGORITHMS, POWER_POLICIES
from otafl_sdr.workload.parts import RunContext, RunParts, csi_for_run
from otafl_sdr.workload.workloads import workload_for


def build_run(cfg: Config, session_cal: Path | None = None,
              calibrate: Callable[[RunParts], Path | None] | None = None) -> RunParts:
    """Build the run. ``calibrate(parts)`` (calibration.session) measures with the run's radios once the
    data and trainer exist and returns the calibration file the CSI, noise unit and policy are built on."""
    from otafl_sdr.learning.federated_data import load_federated
    from otafl_sdr.learning.models import build_model
    torch.set_num_threads(cfg.run.torch_threads)
    algorithm = ALGORITHMS.get(cfg.algorithm.name)(cfg)
    workload = workload_for(algorithm)
    data = load_federated(cfg)
    model = build_model(cfg, data.input_shape, data.num_classes)
    trainer = workload.make_trainer(cfg, data, model, algorithm)
    parts = RunParts(cfg=cfg, data=data, trainer=trainer, algorithm=algorithm, workload=workload,
                     dim=workload.payload_dim(trainer, data), K=len(data.sizes), session_cal=session_cal)
    if calibrate is not None:
        parts.session_cal = calibrate(parts)
    planner(parts)
    workload.after_policy(parts)
    return parts


def planner(parts: RunParts, cfg: Config | None = None) -> RunParts:
    """The CSI, SystemInfo and power policy of a built run (in place), or, given another ``cfg``, of a copy
    that plans under it with the run's data, model and calibration (the run's coherence check at its own
    power settings: experiment/coherence_gate.py); the workload's ``after_policy`` is build_run's alone."""
    if cfg is not None:
        parts = dataclasses.replace(parts, cfg=cfg, extra={}, _sensitivity_gains={})
    cfg = parts.cfg
    parts.csi = csi_for_run(cfg, parts.K, parts.session_cal)
    parts.info = parts.workload.system_info(parts)
    parts.policy = POWER_POLICIES.get(cfg.power.policy)(cfg, parts.info, cfg.power.options)
    parts.policy.attach(run_context(parts))
    return parts


def run_context(parts: RunParts) -> RunContext:
    data = parts.data
    n = int(data.num_classes)
    counts = np.stack([np.bincount(np.asarray(y), minlength=n) for y in data.client_y])
    return RunContext(label_counts=counts, num_classes=n, workload=parts.workload.name,
                      algorithm_options=getattr(parts.algorithm, "options", None))
