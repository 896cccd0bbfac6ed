"""UHD 4.3's device simulator (a simulated E320 behind the MPM daemon) as a device a run or a test can use.

``UhdSimulator`` starts :mod:`otafl_sdr.radio.uhd_sim_daemon` under the simulator's interpreter
(``.venv-uhdsim``, built by ``make setup`` / ``scripts/setup_uhd_sim.sh``) in its own process group on
127.0.0.1, waits until UHD's discovery sees it, and stops the whole group. With ``loopback=True`` the
simulator's sample streams are joined by :mod:`otafl_sdr.radio.uhd_sim_loopback` (what is transmitted is
received, plus white receiver noise), so a round goes through real UHD streamers, gr-uhd blocks and the
simulator's CHDR transport. ``bind_addr="127.0.0.N"`` binds it to that address only (several simulators
at once, each with its own ``serial``); ``listen`` / ``forward`` join several of them by one cable
(:mod:`otafl_sdr.radio.uhd_sim_lab` builds such a lab).

What the simulator cannot show (see firmware_notes/uhd_simulator.md): device time stays 0 (timed
commands run at once), no asynchronous messages (no burst_ack, underflow or late-command reports), no RF
(no channel, noise, LO phase or carrier offset), one stream command per capture (the air stops the stream
after each capture, which the simulator needs to accept the next one).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from otafl_sdr.errors import AirError

DEVICE_ARGS = "addr=127.0.0.1"
SERIAL = "FA4EDE7"
NOISE_RMS = 0.01            # the cable's receiver noise per real coordinate (fraction of full scale)
_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent.parent


def simulator_python() -> Path:
    """The interpreter that runs the simulator: $OTAFL_UHD_SIM_PYTHON, else <repo>/.venv-uhdsim/bin/python."""
    env = os.environ.get("OTAFL_UHD_SIM_PYTHON")
    return Path(env) if env else _ROOT / ".venv-uhdsim" / "bin" / "python"


SIM_PORTS = ((socket.SOCK_DGRAM, 49600), (socket.SOCK_DGRAM, 49153), (socket.SOCK_STREAM, 49601))
"""The sockets a simulator binds on its address (uhd_sim_daemon.py: discovery UDP, CHDR UDP, RPC TCP)."""
GROUP_EXIT_S = 5.0          # stop(): how long the stopped simulator's whole process group may take to exit


def _port_free(host: str, kind: int, port: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        if kind == socket.SOCK_STREAM:        # a closed RPC connection in TIME_WAIT is no simulator; a listener is
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def ports_free(host: str) -> bool:
    """No process holds any of a simulator's ports on ``host`` ("127.0.0.N"; "0.0.0.0": on any address). A
    bind probe answers at once, where UHD's discovery waits out its timeout (about 0.5 s) for a free address.
    It is only as good as "gone" means gone: :meth:`UhdSimulator.stop` returns once every process of the
    simulator's group has exited (a discovery child outliving its parent would otherwise answer for a new
    simulator on the same address before that one is up: "No CHDR connection available!")."""
    return all(_port_free(host, kind, port) for kind, port in SIM_PORTS)


def group_running(pgid: int) -> bool:
    """Some process of process group ``pgid`` still runs (a zombie, which holds no socket, does not count:
    a container's PID 1 may never reap the orphans of a killed group)."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":        # fields: state, ppid, pgrp, ...
                return True
    return False


def _find(args: str) -> list[dict]:
    from otafl_sdr.radio.uhd_device import find_usrps
    return find_usrps(args) or []


class UhdSimulator:
    """Start / stop the simulator; ``device_args`` is the address radios use to open it.

    ``bind_addr``: bind discovery, RPC and CHDR to this loopback address only (None: every address, device
    args ``addr=127.0.0.1``, one simulator per machine); ``serial``: its serial number (distinct per
    simulator of a lab). With the cable (``loopback``): ``listen`` makes it the hub that hears other
    simulators' transmit streams forwarded to the UNIX socket at that path; ``forward`` sends its own
    transmit streams to the hub listening there instead of its own receive stream."""

    device_args = DEVICE_ARGS

    def __init__(self, *, loopback: bool = True, noise_rms: float = NOISE_RMS, lead_samples: int = 0,
                 idle_s: float | None = None,
                 log_path: Path | None = None, start_timeout_s: float = 60.0, tx1_gain: float = 1.0,
                 bind_addr: str | None = None, serial: str = SERIAL, forward: str | None = None,
                 listen: str | None = None, cable: str | None = None, tx_gain_ref: float | None = None,
                 radio: int | None = None, oscillators: str | None = None):
        if (forward or listen) and not loopback:
            raise ValueError("UhdSimulator: forward / listen need the cable (loopback=True)")
        self.bind_addr = bind_addr
        self.serial = str(serial)
        self.forward, self.listen = forward, listen
        self.cable = cable            # JSON file of an injected drift of this radio's path (uhd_sim_loopback)
        self.radio = radio            # this radio's index in a lab (whose oscillator its forwarded stream carries)
        self.oscillators = oscillators   # the hub: the lab's oscillator description (uhd_sim_oscillator.py)
        self.device_args = f"addr={bind_addr}" if bind_addr else DEVICE_ARGS
        self.loopback = loopback
        self.tx1_gain = float(tx1_gain)         # the cable's amplitude gain on TX channel 1 (an attenuator)
        self.tx_gain_ref = tx_gain_ref          # TX gain (dB) of a unity cable; others scale it (None: ignored)
        self.noise_rms = float(noise_rms)
        self.lead_samples = int(lead_samples)
        self.idle_s = idle_s          # how long a capture waits for a stream that has not sent yet (None: 0.3 s)
        self.start_timeout_s = float(start_timeout_s)
        self._tmp = tempfile.TemporaryDirectory(prefix="otafl-uhdsim-")
        self.log_path = Path(log_path) if log_path else Path(self._tmp.name) / "simulator.log"
        self.proc: subprocess.Popen | None = None
        self._deadline = 0.0

    def _config(self) -> Path:
        lines = ["[hardware]", "preset = E320", f"serial_num = {self.serial}", ""]
        if self.loopback:
            mod = _HERE / "uhd_sim_loopback.py"
            listen = [f"listen = {self.listen}"] if self.listen else []
            osc = [f"oscillators = {self.oscillators}"] if self.oscillators else []
            lines += ["[sample.source]", "class = LoopbackSource", f"import_path = {mod}",
                      f"lead_samples = {self.lead_samples}", f"noise_rms = {self.noise_rms!r}", *listen, *osc,
                      *([f"idle_s = {float(self.idle_s)!r}"] if self.idle_s is not None else []), "",
                      "[sample.sink]", "class = LoopbackSink", f"import_path = {mod}", *listen, *osc,
                      *([f"radio = {int(self.radio)}"] if self.radio is not None else []),
                      *([f"forward = {self.forward}"] if self.forward else []),
                      *([f"cable = {self.cable}"] if self.cable else []), ""]
        path = Path(self._tmp.name) / "simulator.ini"
        path.write_text("\n".join(lines))
        return path

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return " | ".join(ln.strip() for ln in lines[-n:])

    def start(self) -> "UhdSimulator":
        self.launch()
        return self.wait_up()

    def launch(self) -> None:
        """Start the simulator's process (``wait_up`` waits until discovery sees it)."""
        py = simulator_python()
        if not py.exists():
            raise AirError(f"UHD simulator: {py} is missing; build it with `make setup` "
                           f"(scripts/setup_uhd_sim.sh)")
        addr = self.bind_addr or "127.0.0.1"
        if not ports_free(self.bind_addr or "0.0.0.0"):
            raise AirError(f"UHD simulator: something already holds a simulator's ports on {addr} (another "
                           "simulator?); stop it first (its ports 49600/49601/49153 are fixed)")
        log = open(self.log_path, "ab")
        where = (["--discovery-addr", "127.0.0.255", "--bind-addr", self.bind_addr] if self.bind_addr
                 else ["--discovery-addr", "127.0.0.1"])       # UHD asks from 127.0.0.1: accept 127.0.0.*
        self.proc = subprocess.Popen([str(py), str(_HERE / "uhd_sim_daemon.py"), *where,
                                      "--exit-with-parent", "--tx1-gain", repr(self.tx1_gain),
                                      *(["--tx-gain-ref", repr(float(self.tx_gain_ref))]
                                        if self.tx_gain_ref is not None else []),
                                      "--config", str(self._config())], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self._deadline = time.monotonic() + self.start_timeout_s

    def wait_up(self) -> "UhdSimulator":
        """Wait until UHD's discovery sees this simulator (its serial at its address)."""
        while time.monotonic() < self._deadline:
            if self.proc.poll() is not None:
                raise AirError(f"UHD simulator exited ({self.proc.returncode}) while starting: {self.log_tail()}")
            if any(d.get("serial") == self.serial for d in _find(self.device_args)):
                return self
            time.sleep(0.3)
        self.stop()
        raise AirError(f"UHD simulator: not discoverable after {self.start_timeout_s:g} s: {self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole simulator (a USRP losing power)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        """Stop the simulator's whole process group; returns once none of its processes runs (or after
        GROUP_EXIT_S), so its address is free for the next simulator (:func:`ports_free`)."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        if self.proc.poll() is None:
            try:
                os.killpg(pgid, signal.SIGTERM)
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(pgid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        try:                                   # children left in the group (rpc / discovery processes)
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + GROUP_EXIT_S
        while group_running(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.proc = None

    def close(self) -> None:
        self.stop()
        self._tmp.cleanup()

    def __enter__(self) -> "UhdSimulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
