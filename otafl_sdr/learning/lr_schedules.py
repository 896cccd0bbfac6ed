"""The four local learning-rate schedules of paper 002 (Table 1, Theorem 12; Fig. 3), eta_{k,t} for local
step k = 0..K-1 of round t = 0..T-1 with coefficient ``lr`` (the paper's mu):

constant    eta = lr                       (C)
cyclic      eta = lr / (k + 1)             (CD, cyclically decaying: restarts every round, "cross-device")
stagewise   eta = lr / (t + 1)             (SD, stage-wise decaying, "cross-silo")
continuous  eta = lr / (t K + k + 1)       (ID, continuously decaying over all local steps)

Pure numpy: the privacy accountant receives the resulting per-step rates, never this module."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import ConfigError

SCHEDULES = ("constant", "cyclic", "stagewise", "continuous")


def check_schedule(name: str, key: str = "algorithm.options.schedule") -> None:
    if name not in SCHEDULES:
        raise ConfigError(key, f"unknown learning-rate schedule '{name}'; allowed: {', '.join(SCHEDULES)}")


def round_lrs(schedule: str, lr: float, t: int, K: int) -> np.ndarray:
    """(K,) eta_{k,t}, k = 0..K-1, for 0-based round t."""
    check_schedule(schedule)
    if K < 1 or t < 0 or not lr > 0:
        raise ConfigError("algorithm.options", f"need K >= 1, t >= 0, lr > 0; got K={K}, t={t}, lr={lr}")
    k = np.arange(K, dtype=float)
    if schedule == "constant":
        return np.full(K, float(lr))
    if schedule == "cyclic":
        return lr / (k + 1)
    if schedule == "stagewise":
        return np.full(K, lr / (t + 1))
    return lr / (t * K + k + 1)


def schedule_lrs(schedule: str, lr: float, T: int, K: int) -> np.ndarray:
    """(T, K) eta_{k,t} for rounds 0..T-1."""
    return np.stack([round_lrs(schedule, lr, t, K) for t in range(T)])
