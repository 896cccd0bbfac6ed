"""The in-process transport: every client trains in this process (the workload's local step) and the
round goes over one Air (sim, loopback, in-process zmq, uhd). Protective noise is drawn by
``noise_source.protective_rng``: seeded on simulated airs, OS entropy where the air's noise is secret."""
from __future__ import annotations

from otafl_sdr.airs import air_capabilities
from otafl_sdr.errors import UserError
from otafl_sdr.noise_source import protective_rng
from otafl_sdr.registry import AIRS
from otafl_sdr.transport import Attempt, Transport


class AirTransport(Transport):
    """``AirTransport(cfg)``; the air is built at ``bind`` (or is the in-session calibration's link)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.air = None
        self.parts = None

    def calibration_link(self, parts=None):
        """The run's own radios, opened for an in-session calibration; they then carry the rounds."""
        if self.air is None:
            from otafl_sdr.radio.calibration_flowgraphs import make_link
            self.air = make_link(self.cfg, "uhd")
        return self.air

    def calibrated(self, path) -> None:
        self.air.use_calibration(path)

    def bind(self, parts) -> None:
        self.parts = parts
        if air_capabilities(self.cfg.air.name).testbed:
            raise UserError(f"air '{self.cfg.air.name}' runs as one process per radio: start it with "
                            f"`otafl-sdr run` or otafl_sdr.run() (they start the testbed), or use air "
                            f"'zmq_inproc' in process")
        if self.air is None:
            self.air = AIRS.get(self.cfg.air.name)(self.cfg)

    def start(self) -> None:
        self.air.start()

    def close(self) -> None:
        if self.air is not None:
            self.air.close()

    def describe(self) -> dict:
        return self.air.describe() if self.air is not None else {}

    def delivered_jammer_gain(self) -> float | None:
        return self.air.delivered_jammer_gain() if self.air is not None else None

    def plan_rng(self, round_index: int):
        return protective_rng(self.cfg, "policy", round_index)

    def local_round(self, round_index: int, w):
        return self.parts.workload.local(self.parts, round_index, w)

    def preflight(self, plan, local) -> dict:
        return self.air.preflight(plan)

    def recalibration_due(self) -> tuple[str, str]:
        """The air's own (a uhd air's per-client sounding: radio/uhd_air.UhdAir.recalibration_due), else none."""
        due = getattr(self.air, "recalibration_due", None)
        return due() if due is not None else ("", "")

    def row_fields(self) -> dict:
        fields = getattr(self.air, "round_fields", None)         # the air's link figures (no client data)
        return fields() if fields is not None else {}

    def attempt(self, plan, round_index: int, attempt: int) -> Attempt:
        return Attempt(self.air.transmit(plan, protective_rng(self.cfg, "noise", round_index, attempt)))
