"""The power-policy interface: from clients' updates and channels to a RoundPlan (+ its Mechanism)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from ..transmission import RoundPlan


@dataclass
class SystemInfo:
    """What is fixed for a run and known to the policy.

    p: (K,) aggregation weights p_i = |D_i| / |D|; sizes: (K,) |D_i|; power: (K,) P_i (energy per round);
    dim: d; sigma_c2: channel noise per real coordinate; rounds: privacy-consuming rounds M;
    eps, delta: the target; unit: 'sample' (paper 000) or 'client' neighbouring relation."""

    p: np.ndarray
    sizes: np.ndarray
    power: np.ndarray
    dim: int
    sigma_c2: float
    rounds: int
    eps: float
    delta: float
    unit: str = "sample"
    jammer_power: float = float("inf")

    @property
    def clients(self) -> int:
        return len(self.p)

    @property
    def total_size(self) -> int:
        return int(np.sum(self.sizes))


@dataclass
class NoOptions:
    pass


class PowerPolicy:
    """Base class. Subclasses set ``name``, ``Options`` (a dataclass) and implement ``plan``."""

    name = "base"
    Options: type = NoOptions

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None):
        self.cfg = cfg
        self.info = info
        self.options = self.Options(**(options or {}))

    @classmethod
    def validate_options(cls, options: dict) -> None:
        names = {f.name for f in dataclasses.fields(cls.Options)}
        for k in options:
            if k not in names:
                allowed = ", ".join(sorted(names)) or "none"
                raise ConfigError(f"power.options.{k}", f"unknown option for policy '{cls.name}'; allowed: {allowed}")
        try:
            opts = cls.Options(**options)
        except TypeError as e:
            raise ConfigError("power.options", str(e)) from None
        check = getattr(opts, "check", None)
        if check:
            check()

    def plan(self, round: int, payload: np.ndarray, h: np.ndarray, h_cj: complex,
             rng: np.random.Generator, csi: np.ndarray | None = None) -> RoundPlan:
        """payload: (K, d) normalised updates u_i / tau (norm <= 1); h: true channels; csi: what each
        client believes its channel is (None = perfect CSI, i.e. h)."""
        raise NotImplementedError
