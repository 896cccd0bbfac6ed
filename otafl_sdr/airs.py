"""The airs: how a RoundPlan becomes a received aggregate. One interface, several implementations,
picked by ``air.name``. GNU Radio and ZeroMQ airs are registered lazily (module paths) so the core
imports on a machine without GNU Radio."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .registry import AIRS
from .transmission import Reception, RoundPlan

if TYPE_CHECKING:
    from .config import Config


class Air:
    """Base class. ``transmit`` carries one round (all clients and the jammer at once)."""

    name = "base"

    def __init__(self, cfg: "Config"):
        self.cfg = cfg

    def start(self) -> None:
        """Acquire resources (devices, processes). Raise AirError with a clear message on failure."""

    def describe(self) -> dict:
        """What summary.json should record of the air's devices (actual settings, warnings); {} if nothing."""
        return {}

    def preflight(self, plan: RoundPlan) -> dict:
        """Check, before the round is accounted or sent, that the radios can carry the plan; raise AirError
        naming the limit if not. Returns what the round's row should record of the mapping (may be {})."""
        return {}

    def delivered_jammer_gain(self) -> float | None:
        """Lower confidence bound on the jammer path's measured power gain: the noise variance per real
        coordinate it delivers to the receiver per unit alpha_cj^2, in the units of the noise floor
        (calibration/jammer_noise.py). None where the air has not measured it (the ledger then counts
        the plan's jammer noise)."""
        return None

    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        raise NotImplementedError

    def close(self) -> None:
        """Release resources; safe to call twice."""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()


AIRS.register_lazy("sim", "otafl_sdr.channel.sim_air:SimAir",
                   "numpy reference channel: block fading + AWGN, no PHY (fast path for sweeps)")
AIRS.register_lazy("loopback", "otafl_sdr.radio.loopback_air:LoopbackAir",
                   "GNU Radio flowgraph with the loopback channel block (no hardware)")
AIRS.register_lazy("uhd", "otafl_sdr.radio.uhd_air:UhdAir", "real USRPs via gr-uhd, timed bursts")
AIRS.register_lazy("zmq", "otafl_sdr.radio.zmq_air:ZmqAir",
                   "one process per radio; IQ over GNU Radio ZeroMQ blocks into a channel-emulator process")
