"""The power-policy interface: from clients' updates and channels to a RoundPlan (+ its Mechanism).

A power policy is one privacy mechanism's transmit side (issue 14): ``plan`` says what every radio sends
and the round's Gaussian mechanism for the ledger (RoundPlan.mechanism: sensitivity, effective noise,
sampling); ``privacy_knob`` names its one privacy knob, which privacy.targeting = "target" solves before
round 1 (privacy/targeting.py). The remaining methods are no-op hooks with a default here, so the
orchestrator calls them on every policy (no hasattr probing).

A policy declares its capabilities on its class, never in a central table (issue 33 item 3); the run asks
the class: ``ofdm_refusal`` (can ``phy.waveform = "ofdm"`` carry it per subcarrier: ``ofdm_carried`` /
``ofdm_reason``), ``rederivable`` (can ``verify`` re-plan its ledger entries from the config) with
``restore_recorded_inputs`` (what it learnt from released aggregates, read back from the ledger), and
``privacy_knob`` (what privacy.targeting = "target" solves)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from otafl_sdr.config.options import build_options
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.transmission import RoundPlan


@dataclass
class SystemInfo:
    """What is fixed for a run and known to the policy.

    p: (K,) aggregation weights p_i = |D_i| / |D|; sizes: (K,) |D_i|; power: (K,) P_i (energy per round);
    dim: d; sigma_c2: channel noise per real coordinate; rounds: privacy-consuming rounds M;
    eps, delta: the target; unit: the neighbouring relation (privacy/sensitivity.py); bound: (K,) how far
    one neighbouring change moves client i's payload u_i/tau under that unit (None: derived from the unit
    alone, without the training schedule)."""

    p: np.ndarray
    sizes: np.ndarray
    power: np.ndarray
    dim: int
    sigma_c2: float
    rounds: int
    eps: float
    delta: float
    unit: str = "client"
    jammer_power: float = float("inf")
    bound: np.ndarray | None = None

    def payload_bound(self) -> np.ndarray:
        """(K,) b_i of privacy/sensitivity.py; a policy's round sensitivity is max_i gain_i b_i."""
        if self.bound is not None:
            return np.asarray(self.bound, dtype=float)
        from otafl_sdr.privacy.sensitivity import payload_bounds
        return payload_bounds(self.unit, self.sizes)

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
    needs_run_context = False     # True: ``attach`` needs the whole run (data, trainer): in-process airs only

    # -- capabilities (the run asks these, never the policy's name) -----------------------------------------
    ofdm_carried: ClassVar[bool] = False
    """True: its flat plan inverts each client's gain to a common level and books noise that is the same on
    every subcarrier, so power/ofdm_plan.plan_ofdm carries it per subcarrier (phy.waveform = "ofdm")."""
    ofdm_reason: ClassVar[str] = ""
    """Why ``phy.waveform = "ofdm"`` cannot carry it (one line, read after "it ..."); "" when not said."""
    small_run: ClassVar[tuple[str, ...]] = ()
    """Config overrides (``key=value``, beyond selecting it) that a small run of it needs, e.g. options
    without a usable default: the contract tests every registered mechanism must pass
    (tests/privacy/test_mechanism_contracts.py) run it with these."""
    rederivable: ClassVar[bool] = False
    """True: its plan depends on the config, the round's seeded channels and what ``restore_recorded_inputs``
    reads back from the ledger only, so `verify` re-derives every booking (workload/rederive.py); False:
    chain-checked only."""

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None):
        self.cfg = cfg
        self.info = info
        self.options = build_options(self.Options, options or {}, "power.options", f"policy '{self.name}'")

    @classmethod
    def validate_options(cls, options: dict) -> None:
        build_options(cls.Options, options, "power.options", f"policy '{cls.name}'")

    def plan(self, round_index: int, payload: np.ndarray, h: np.ndarray, h_cj: complex,
             rng: np.random.Generator, csi: np.ndarray | None = None) -> RoundPlan:
        """payload: (K, d) normalised updates u_i / tau (norm <= 1); h: true channels; csi: what each
        client believes its channel is (None = perfect CSI, i.e. h)."""
        raise NotImplementedError

    @classmethod
    def ofdm_refusal(cls, options: dict | None) -> str | None:
        """None when ``phy.waveform = "ofdm"`` plans per subcarrier on top of this policy with ``options``
        (power/ofdm_plan.plan_ofdm), else the one-line reason it cannot (configure/validation.py)."""
        if cls.ofdm_carried:
            return None
        return cls.ofdm_reason or (f"has not said how it plans per subcarrier (set ofdm_carried or ofdm_reason "
                                   f"on {cls.__name__} in {defined_in(cls)})")

    def restore_recorded_inputs(self, entries: list[dict], where: str) -> None:
        """Before re-deriving a round (workload/rederive.py): set on this copy of the policy what it learnt from
        released aggregates, as the round's ledger ``entries`` (first booking first) record it; raise
        UserError naming ``where`` when they do not. Default: nothing learnt."""

    # -- hooks with defaults (override where the mechanism needs them) --------------------------------
    def privacy_knob(self) -> PrivacyKnob | None:
        """The policy's one privacy knob (privacy/knobs.py: a PrivacyKnob, bisected, or a ClosedFormKnob)
        that privacy.targeting = "target" solves before round 1; None: the policy keeps its own rule."""
        return None

    def attach(self, context) -> None:
        """The run's context (workload.parts.RunContext: label counts, algorithm options) for policies
        that need it, before round 1."""

    def observe(self, round_index: int, aggregate) -> None:
        """Feedback after a round (the server's received aggregate, None if the round was lost)."""

    def state_dict(self) -> dict | None:
        """State that a checkpoint must keep for resume (None: stateless)."""
        return None

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state_dict``'s state on resume."""


def defined_in(cls: type) -> str:
    """The file that defines ``cls`` (relative to the package's parent where it lies inside it), for
    messages that tell a plugin author which file to edit."""
    try:
        path = inspect.getsourcefile(cls) or "?"
    except TypeError:
        return "?"
    marker = "/otafl_sdr/"
    return path[path.rindex(marker) + 1:] if marker in path else path
