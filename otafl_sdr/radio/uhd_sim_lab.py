"""A lab of simulated USRPs joined by one cable: ``n`` UHD simulators, one per loopback address, whose
transmissions all reach one receiver (the testbed's per-host radio nodes, each with its own USRP).

Radio ``i`` (0-based) is a simulated E320 bound to 127.0.0.{i+1} with serial FA4EDE7, FA4EDE8, ...
(``uhd_device.is_simulator`` accepts them all). Radio 0 is the *hub*, the receiver's USRP: its receive streams
hear its own transmit streams and every other radio's, which forward theirs to it over a UNIX socket in a
temporary folder (:mod:`otafl_sdr.radio.uhd_sim_loopback`); only the hub adds receiver noise. The hub starts
first, the others then start together.

The hub accepts forwarded streams once it has constructed its first sample source or sink (its receiver
armed a capture, or something opened its TX): a transmitter whose stream opened before that is heard from
its next packet on, so arm the receiver before opening (or priming) the transmitters.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from otafl_sdr.radio.uhd_sim_device import NOISE_RMS, SERIAL, UhdSimulator

MAX_RADIOS = 64


def lab_address(i: int) -> str:
    return f"127.0.0.{i + 1}"


def lab_serial(i: int) -> str:
    """FA4EDE7 for the hub, then FA4EDE8, FA4EDE9, FA4EDEA, ... (hexadecimal, as E320 serials are)."""
    return f"{SERIAL[:-1]}{int(SERIAL[-1], 16) + i:X}"


# a capture on the hub waits this long for a known transmitter that has not sent yet this round: the
# radios are driven by separate processes (testbed nodes), whose bursts follow the receiver's 'armed' over
# the control plane and may start seconds apart on a loaded machine (2 s lost the jammer's first burst
# under a full test run). Only exchanges with a silent transmitter pay it: the nodes pad their bursts on
# the simulator to cover the whole capture, so a capture whose streams all sent ends without waiting.
LAB_IDLE_S = 6.0


class SimulatedLab:
    """``n`` simulated USRPs on 127.0.0.1 .. 127.0.0.n, joined by one cable into the first (the hub, the
    receiver's). ``device_args[i]`` opens radio i; ``close()`` stops them all."""

    def __init__(self, n: int, *, noise_rms: float = NOISE_RMS, lead_samples: int = 0, idle_s: float = LAB_IDLE_S,
                 log_dir: Path | None = None, start_timeout_s: float = 60.0, tx_gain_ref: float | None = None):
        if not 1 <= int(n) <= MAX_RADIOS:
            raise ValueError(f"SimulatedLab: n must be in [1, {MAX_RADIOS}], not {n}")
        self.n = int(n)
        self._tmp = tempfile.TemporaryDirectory(prefix="otafl-lab-")     # short: a UNIX socket path
        self.socket_path = str(Path(self._tmp.name) / "cable.sock")
        logs = Path(log_dir) if log_dir else Path(self._tmp.name)
        logs.mkdir(parents=True, exist_ok=True)
        self.simulators = [
            UhdSimulator(bind_addr=lab_address(i), serial=lab_serial(i), lead_samples=lead_samples,
                         tx_gain_ref=tx_gain_ref,      # each radio's cable follows its TX gain (None: ignored)
                         idle_s=idle_s if i == 0 else None,
                         noise_rms=noise_rms if i == 0 else 0.0, start_timeout_s=start_timeout_s,
                         log_path=logs / f"simulator-{lab_address(i)}.log",
                         listen=self.socket_path if i == 0 else None,
                         forward=None if i == 0 else self.socket_path,
                         cable=str(Path(self._tmp.name) / f"cable-{i}.json"))
            for i in range(self.n)]
        self.device_args = [s.device_args for s in self.simulators]
        self.serials = [s.serial for s in self.simulators]

    @property
    def hub(self) -> UhdSimulator:
        """The receiver's simulator (radio 0): it hears every radio's transmissions."""
        return self.simulators[0]

    @property
    def receiver_args(self) -> str:
        return self.device_args[0]

    def set_cable(self, i: int, gain_db: float = 0.0, phase_rad: float = 0.0) -> None:
        """Inject a drift into radio ``i``'s path: everything it transmits from now on is multiplied by
        10^(gain_db / 20) exp(j phase_rad) (a PA warming, a cable moved, an LO phase step); 0, 0 restores it."""
        path = Path(self._tmp.name) / f"cable-{int(i)}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"gain_db": float(gain_db), "phase_rad": float(phase_rad)}))
        os.replace(tmp, path)

    def start(self) -> "SimulatedLab":
        t0 = time.monotonic()
        try:
            self.hub.start()
            others = self.simulators[1:]
            for s in others:
                s.launch()
            for s in others:
                s.wait_up()
        except BaseException:
            self.close()
            raise
        self.start_s = time.monotonic() - t0
        return self

    def alive(self) -> bool:
        return all(s.alive() for s in self.simulators)

    def log_tail(self, n: int = 3) -> str:
        return " || ".join(f"{s.device_args}: {s.log_tail(n)}" for s in self.simulators if not s.alive())

    def stop(self) -> None:
        for s in reversed(self.simulators):
            s.stop()

    def close(self) -> None:
        for s in reversed(self.simulators):
            s.close()
        self._tmp.cleanup()

    def __enter__(self) -> "SimulatedLab":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["SimulatedLab", "lab_address", "lab_serial"]
