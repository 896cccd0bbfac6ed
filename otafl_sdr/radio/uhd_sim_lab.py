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

``oscillators="b210"`` (or ``"shared_ref"``, or a dict of :func:`~otafl_sdr.radio.uhd_sim_oscillator.oscillator_config`
settings with its ``model``) gives every radio an oscillator (issue 34: carrier offset, drift, a random LO
phase at each tune, phase noise, the lab's device time advancing ``advance_s`` per capture), seeded from
``seed``; :meth:`SimulatedLab.retune` and :meth:`SimulatedLab.step_carrier` inject events, and
:meth:`SimulatedLab.truth` reads the true relative offsets and phases the hub applied, round by round.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from otafl_sdr.radio.uhd_sim_device import NOISE_RMS, SERIAL, UhdSimulator
from otafl_sdr.radio.uhd_sim_oscillator import oscillator_config

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
                 log_dir: Path | None = None, start_timeout_s: float = 60.0, tx_gain_ref: float | None = None,
                 oscillators: str | dict | None = None, seed: int = 0, advance_s: float | None = None):
        if not 1 <= int(n) <= MAX_RADIOS:
            raise ValueError(f"SimulatedLab: n must be in [1, {MAX_RADIOS}], not {n}")
        self.n = int(n)
        self._tmp = tempfile.TemporaryDirectory(prefix="otafl-lab-")     # short: a UNIX socket path
        self.socket_path = str(Path(self._tmp.name) / "cable.sock")
        logs = Path(log_dir) if log_dir else Path(self._tmp.name)
        logs.mkdir(parents=True, exist_ok=True)
        self.oscillator_file = self._write_oscillators(oscillators, seed, advance_s, logs)
        self.simulators = [
            UhdSimulator(bind_addr=lab_address(i), serial=lab_serial(i), lead_samples=lead_samples,
                         tx_gain_ref=tx_gain_ref,      # each radio's cable follows its TX gain (None: ignored)
                         idle_s=idle_s if i == 0 else None,
                         noise_rms=noise_rms if i == 0 else 0.0, start_timeout_s=start_timeout_s,
                         log_path=logs / f"simulator-{lab_address(i)}.log",
                         listen=self.socket_path if i == 0 else None,
                         forward=None if i == 0 else self.socket_path,
                         cable=str(Path(self._tmp.name) / f"cable-{i}.json"),
                         radio=i, oscillators=self.oscillator_file if i == 0 else None)
            for i in range(self.n)]
        self.device_args = [s.device_args for s in self.simulators]
        self.serials = [s.serial for s in self.simulators]

    def _write_oscillators(self, oscillators, seed: int, advance_s: float | None, logs: Path) -> str | None:
        """The hub's oscillator description (uhd_sim_loopback's module doc), or None for an ideal cable."""
        if oscillators is None:
            self.oscillators = None
            return None
        spec = dict(oscillators) if isinstance(oscillators, dict) else {"model": str(oscillators)}
        spec.setdefault("seed", int(seed))
        if advance_s is not None:
            spec["advance_s"] = float(advance_s)
        self.oscillators = oscillator_config(**spec)
        self._events = {"retunes": {}, "steps_hz": {}}
        self.events_path = Path(self._tmp.name) / "oscillator-events.json"
        self.truth_path = logs / "oscillator-truth.jsonl"
        self.truth_path.write_text("")
        path = Path(self._tmp.name) / "oscillators.json"
        path.write_text(json.dumps({"n": self.n, "config": self.oscillators, "events": str(self.events_path),
                                    "truth": str(self.truth_path)}))
        return str(path)

    def _write_events(self) -> None:
        tmp = self.events_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._events))
        os.replace(tmp, self.events_path)

    def retune(self, i: int) -> None:
        """Radio ``i`` is tuned again from the next round on: new random TX / RX LO phases (an AD9361 retune)."""
        self._need_oscillators()
        key = str(int(i))
        self._events["retunes"][key] = self._events["retunes"].get(key, 0) + 1
        self._write_events()

    def step_carrier(self, i: int, hz: float) -> None:
        """Radio ``i``'s carrier ``hz`` off its oscillator from the next round on (an injected jump; 0 undoes it)."""
        self._need_oscillators()
        self._events["steps_hz"][str(int(i))] = float(hz)
        self._write_events()

    def truth(self) -> list[dict]:
        """Every round's true relative carrier offsets (Hz) and phases (rad) of each radio against the
        receiver's, as the hub applied them (one dict per capture, oldest first)."""
        self._need_oscillators()
        return [json.loads(ln) for ln in self.truth_path.read_text().splitlines() if ln.strip()]

    def _need_oscillators(self) -> None:
        if self.oscillators is None:
            raise ValueError("SimulatedLab: this lab has no oscillators (SimulatedLab(..., oscillators='b210'))")

    @property
    def hub(self) -> UhdSimulator:
        """The receiver's simulator (radio 0): it hears every radio's transmissions."""
        return self.simulators[0]

    @property
    def receiver_args(self) -> str:
        return self.device_args[0]

    def set_cable(self, i: int, gain_db: float = 0.0, phase_rad: float = 0.0, taps=None) -> None:
        """Inject a drift into radio ``i``'s path: everything it transmits from now on is multiplied by
        10^(gain_db / 20) exp(j phase_rad) (a PA warming, a cable moved, an LO phase step); 0, 0 restores it.
        ``taps`` (complex, tap n delayed n samples): the path is also that multipath FIR (None: flat)."""
        path = Path(self._tmp.name) / f"cable-{int(i)}.json"
        tmp = path.with_suffix(".tmp")
        fir = None if taps is None else [[float(complex(t).real), float(complex(t).imag)] for t in taps]
        tmp.write_text(json.dumps({"gain_db": float(gain_db), "phase_rad": float(phase_rad),
                                   **({"taps": fir} if fir else {})}))
        os.replace(tmp, path)

    def start(self) -> "SimulatedLab":
        t0 = time.monotonic()
        try:               # all at once: a forwarding simulator connects to the hub only when it streams
            for s in self.simulators:
                s.launch()
            for s in self.simulators:
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
