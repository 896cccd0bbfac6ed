"""The airs: how a RoundPlan becomes a received aggregate. One interface, several implementations,
picked by ``air.name``. GNU Radio and ZeroMQ airs are registered lazily (module paths) so the core
imports on a machine without GNU Radio."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from otafl_sdr.registry import AIRS
from otafl_sdr.transmission import Reception, RoundPlan

if TYPE_CHECKING:
    from otafl_sdr.config.schema import Config


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

    def round_fields(self) -> dict:
        """What the last round's row should record of the link (reference statistics only, never client
        data; e.g. uhd's ``link_health``); {} if nothing."""
        return {}

    def close(self) -> None:
        """Release resources; safe to call twice."""

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass(frozen=True)
class AirCapabilities:
    """What an air declares when it registers, so that the round never asks which air it is.

    secret_noise: its protective noise comes from OS entropy at each node (noise_source.py);
    calibrated_jammer_path: the jammer reaches the receiver over a measured path (a lab), which the ledger
    counts at its calibrated lower bound instead of the simulated draw;
    in_session_calibration: it can measure its own links before round 1 (calibration.session);
    testbed: ``otafl-sdr run`` / ``otafl_sdr.run`` start it as node processes (net/testbed.py);
    linear_receiver: its aggregate is linear in each client's payload given the plan (the sim air's
    symbol-level receiver model), so single-carrier multipath is booked on the aggregate
    (channel/multipath_rx.sensitivity_gain); otherwise the modem's estimates see the payload's ISI and it is
    booked at the capture (channel/capture_bound.py);
    iq: it carries sampled IQ that ``air.record_iq`` can record (SigMF); the sim air's symbol-level model has none."""

    secret_noise: bool = False
    calibrated_jammer_path: bool = False
    in_session_calibration: bool = False
    testbed: bool = False
    linear_receiver: bool = False
    iq: bool = True


CAPABILITIES: dict[str, AirCapabilities] = {}


def register_air(name: str, target: str, help: str, **capabilities) -> None:
    """Register an air lazily ("module:Class", imported on first use) with its capabilities."""
    AIRS.register_lazy(name, target, help)
    CAPABILITIES[name] = AirCapabilities(**capabilities)


def air_capabilities(name: str) -> AirCapabilities:
    return CAPABILITIES.get(name, AirCapabilities())


register_air("sim", "otafl_sdr.channel.sim_air:SimAir",
             "numpy reference channel: block fading + AWGN, no PHY (fast path for sweeps)", linear_receiver=True,
             iq=False)
register_air("loopback", "otafl_sdr.radio.loopback_air:LoopbackAir",
             "GNU Radio flowgraph with the loopback channel block (no hardware)")
register_air("uhd", "otafl_sdr.radio.uhd_air:UhdAir", "real USRPs via gr-uhd, timed bursts",
             secret_noise=True, calibrated_jammer_path=True, in_session_calibration=True)
register_air("zmq", "otafl_sdr.radio.zmq_air:ZmqAir",
             "the testbed: one process per radio; IQ over GNU Radio ZeroMQ blocks into a channel-emulator process",
             secret_noise=True, testbed=True)
register_air("zmq_inproc", "otafl_sdr.radio.zmq_air:ZmqAir",
             "the zmq air's IQ plane inside one process (ZeroMQ sockets on loopback; a test bench)",
             secret_noise=True)
