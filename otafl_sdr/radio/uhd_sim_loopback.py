"""A cable for UHD's device simulator: what the simulated E320 transmits comes back on its receive stream.

Loaded by the simulator itself (its ``.ini`` names these classes with ``import_path``), in the simulator's
own interpreter; standalone (numpy and the standard library only). The simulator keeps no device time and
ignores ``tx_time``, so the cable models one timed round the way the ``uhd`` air runs it:

- a receive stream (one timed capture, started by a stream command) opens a new *round*: the shared
  buffer is cleared (a second receive stream started within ``JOIN_S``, the E320's other RX channel in
  2 x 2 mode, joins that round: both channels receive the same superposition, each its own noise);
- every transmit stream (one per ``usrp_sink`` channel) adds its samples into the buffer from index 0 of
  the round, so bursts of several channels (clients, jammer) superpose sample-aligned, as bursts sent
  with the same ``tx_time`` do over the air;
- the capture delivers ``lead_samples`` zeros, then the superposed bursts, then zeros; it waits up to
  ``wait_s`` for the first burst to arrive, and for every transmit stream to have written what it reads
  (one stream may lag another: reading ahead of it would lose its samples): ``idle_s`` for a stream whose
  last packet ended its burst, ``OPEN_S`` for one whose burst is still open (the host sends the first part
  of a sounding-feedback-payload exchange without its end of burst and the rest once it has heard that
  part: UhdAir._capture; a loaded host takes longer than ``idle_s`` to turn it round);
- a burst that starts while no capture is reading (every capture of the round handed over) is the next
  capture's: held, it goes in from that round's index 0 when the capture opens (the host arms a capture
  before sending its bursts, but another simulator's forwarded packets may reach the hub before the hub's
  control thread has taken the stream command in); a stream's first burst (its primer) is never held, the
  rest of a burst left open stays in the round it began in, and of two bursts with no capture between them
  the newer waits;
- ``noise_rms`` (fraction of full scale per real coordinate) adds white Gaussian receiver noise, drawn from
  the operating system's entropy in the simulator's process, so calibration measures a noise floor and
  the privacy ledger counts noise that is really in the capture.

The hub's log (the simulator's stderr) gets a line for each held burst, each forwarded burst that starts
more than 0.5 s into its round, and each capture handed over without a known forwarded stream's burst.

Samples travel as sc16 (the over-the-wire format), so the cable is unity gain up to 16-bit quantisation
(TX channel 1 may be given another gain: ``UhdSimulator(tx1_gain=...)``, an attenuator on that channel).
A sink given ``cable = PATH`` multiplies what it transmits by the complex gain in that JSON file
(``{"gain_db": g, "phase_rad": p}``; absent: 1), re-read whenever the file changes: a drift of that radio's
path (a warming PA, a cable moved, an LO phase step) injected while a run goes on
(``SimulatedLab.set_cable``). With ``"taps": [[re, im], ...]`` the path is also that FIR (multipath: tap n
delays by n samples), run continuously over the stream's packets (the last len(taps) - 1 samples carried).

One cable across several simulators (``otafl_sdr.radio.uhd_sim_lab``: one simulated USRP per host of a
testbed, all heard by one receiver). The *hub* simulator's ``.ini`` gives ``listen = PATH`` (a UNIX socket)
on its source and/or sink section: the first source or sink constructed with it starts, once per process,
a listener; every other simulator's sink gives ``forward = PATH`` and, instead of adding its packets into
its own round, sends each packet's sc16 samples (after its gain) to the hub, length-prefixed
(``<u32 bytes>`` then little-endian int16 I/Q; a packet that ends no burst comes after the mark ``OPEN``).
The forwarding sink tries to connect when its stream opens and again at each packet while it is not
connected; packets the hub is not listening for are dropped silently. On the hub each accepted connection is one more transmit stream (registered with the local
ones): its packets are added into the current round exactly as a local sink's (the first packet after a
new round opened lands at index 0), a capture waits for it the same way, and it leaves when its connection
closes (its simulator's stream ended or the simulator stopped). A forwarded stream is known to the hub
from its connection on, so a capture cannot wait for a transmitter whose stream opened before the hub
listened and that has not sent since: open (or prime) transmitters once the receiver has armed a capture.

Oscillators (issue 34; :mod:`otafl_sdr.radio.uhd_sim_oscillator`): a hub given ``oscillators = PATH`` (a JSON
file ``{"n", "config", "events", "truth"}`` written by ``SimulatedLab``) keeps every radio's oscillator. A
forwarding sink given ``radio = i`` says so when it connects (a hello: the length ``HELLO`` then ``<u32 i>``),
and again when its host tunes the radio's TX (``LoopbackSink.tuned``); the hub then draws radio i's LO phases
anew (its stream was made, or its radio tuned: an AD9361 relocks at a random phase) and multiplies each of
its packets by radio i's carrier offset, phase and phase noise against the receiver's (the hub's own TX
streams are radio 0's); the hub's capture gets the receiver's phase noise. Each capture that opens a round
advances the lab's device time, applies the injected events (``events``: ``{"retunes": {i: count},
"steps_hz": {i: hz}}``, re-read when the file changes) and appends the round's true relative offsets and
phases to ``truth`` (JSON lines).
"""
from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time

import numpy as np

_LOCK = threading.Lock()
# the current round: its buffer, when a stream last wrote into it, when it opened, and its captures still reading
# (a round whose captures have all been handed over is "done": a burst that starts then is the next capture's)
_ROUND = {"epoch": 0, "buf": np.zeros(0, dtype=np.int32), "written": 0.0, "opened": -1.0, "reading": 0}
_SINKS: list = []   # every transmit stream, local or forwarded: a capture waits until each wrote past what it reads
JOIN_S = 0.05       # a capture started this soon after another is the same capture on the other RX channel
_HEADER = struct.Struct("<I")   # a forwarded packet: its payload's length in bytes, then the sc16 payload
_LISTENING: set = set()         # the socket paths this process listens on
HELLO = 0xFFFFFFFF              # a forwarded stream's first header: its radio index follows (never a length)
OPEN = 0xFFFFFFFE               # a forwarded packet's mark: the packet that follows ends no burst
PENDING_MAX = 1 << 26           # int16 values a stream may hold for a capture not yet armed (64 M: 16 M samples)
OPEN_S = 3.0                    # how long a capture waits, at most, for the rest of an open burst (idle_s if longer)
START_S = 3.0                   # how long a capture waits for a forwarded stream to start this round (idle_s if longer)
_OSC: dict = {"lab": None, "file": None, "events": None, "truth": None, "seen": None, "retunes": {}}


def _oscillators(path: str) -> None:
    """Keep the lab's oscillators (once per process) as the JSON file ``path`` describes (module doc)."""
    import importlib.util
    import sys
    with _LOCK:
        if _OSC["file"] == path:
            return
        with open(path) as f:
            desc = json.load(f)
        name = "otafl_uhd_sim_oscillator"
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__),
                                                                               "uhd_sim_oscillator.py"))
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        _OSC.update(lab=mod.LabOscillators(desc["config"], int(desc["n"])), file=path, events=desc.get("events"),
                    truth=desc.get("truth"), n=int(desc["n"]))


def _apply_events(lab) -> None:
    """Injected retunes and carrier steps (``SimulatedLab.retune`` / ``step_carrier``), read when changed."""
    path = _OSC["events"]
    try:
        stamp = os.stat(path).st_mtime_ns if path else None
    except OSError:
        return
    if stamp is None or stamp == _OSC["seen"]:
        return
    try:
        with open(path) as f:
            ev = json.load(f)
    except (OSError, ValueError):
        return
    _OSC["seen"] = stamp
    for i, count in (ev.get("retunes") or {}).items():
        done = _OSC["retunes"].get(i, 0)
        for _ in range(int(count) - done):
            lab.retune(int(i))
        _OSC["retunes"][i] = max(int(count), done)
    for i, hz in (ev.get("steps_hz") or {}).items():
        lab.set_step(int(i), float(hz))


def _tick_oscillators(now: float) -> None:
    """A new round (under _LOCK): the lab's device time advances, events apply, the truth is written."""
    lab = _OSC["lab"]
    if lab is None:
        return
    _apply_events(lab)
    lab.open_round(now)
    if _OSC["truth"]:
        try:
            with open(_OSC["truth"], "a") as f:
                f.write(json.dumps(lab.truth(list(range(_OSC["n"])))) + "\n")
        except OSError:
            pass


def _note(msg: str) -> None:
    """One line in the simulator's log (its stderr): what the cable did that a lost burst would be traced to."""
    import sys
    print(f"cable {time.monotonic():.3f}: {msg}", file=sys.stderr, flush=True)


def _new_round() -> int:
    """A capture starts: a new round (or, within JOIN_S of the last, the same one on the other RX channel).
    Bursts that streams started while no capture was reading (held: LoopbackSink._add) go in from index 0."""
    with _LOCK:
        now = time.monotonic()
        _ROUND["reading"] += 1
        if now - _ROUND["opened"] < JOIN_S:     # 2 x 2: both RX channels see the same superposed bursts
            return _ROUND["epoch"]
        _ROUND["epoch"] += 1
        _ROUND["buf"] = np.zeros(0, dtype=np.int32)
        _ROUND["written"] = 0.0
        _ROUND["opened"] = now
        _ROUND["reading"] = 1
        _tick_oscillators(now)
        for s in _SINKS:
            s._release_held()
        return _ROUND["epoch"]


def _capture_done(epoch: int) -> None:
    """A capture of round ``epoch`` has delivered its last sample (or was stopped)."""
    with _LOCK:
        if _ROUND["epoch"] == epoch and _ROUND["reading"] > 0:
            _ROUND["reading"] -= 1


def _listen(path: str) -> None:
    """Accept forwarded streams on the UNIX socket ``path`` (once per process and path)."""
    with _LOCK:
        if path in _LISTENING:
            return
        _LISTENING.add(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            os.unlink(path)                      # a socket file left by an earlier hub
        except FileNotFoundError:
            pass
        server.bind(path)
        server.listen(64)
    except OSError:
        server.close()
        with _LOCK:
            _LISTENING.discard(path)
        raise
    threading.Thread(target=_accept, args=(server,), daemon=True).start()


def _accept(server) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_RemoteStream(conn).serve, daemon=True).start()


def _recv_exactly(conn, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        part = conn.recv(min(left, 1 << 20))
        if not part:
            return None
        chunks.append(part)
        left -= len(part)
    return b"".join(chunks)


class LoopbackSink:
    """Simulator sample sink: adds each transmit stream's sc16 samples into the current round, or with
    ``forward = PATH`` sends them to the hub simulator listening there (``listen = PATH`` starts that)."""

    def __init__(self, log=None, forward=None, listen=None, cable=None, radio=None, oscillators=None):
        self.epoch = -1
        self.radio = 0 if radio is None else int(radio)   # whose oscillator this stream's samples carry
        self._pn = 0.0              # this stream's TX phase noise at the end of its last packet this round
        if oscillators:
            _oscillators(oscillators)
        self.pos = 0
        self.last = 0.0             # when this stream last wrote
        self.open = False           # its last packet ended no burst: more of it comes this round (OPEN_S)
        self.held: list = []        # (values, open) of a burst started while no capture was reading: the next one's
        self._held_size = 0         # int16 values in ``held``
        self.sent_before = False    # its first burst (a primer, sent when the stream opens) is never held
        self.gain = 1.0             # the cable's amplitude gain for this stream (set per TX channel)
        self.cable = cable or None  # JSON file with this radio's injected complex path gain (module doc)
        self._cable_seen = (None, 1.0 + 0j, None)   # (file stamp, complex gain, FIR taps or None)
        self._fir_hist = np.zeros(0, np.complex128)
        self.forward = forward or None
        self._sock = None
        self._conn_lock = threading.Lock()
        self._send_lock = threading.Lock()   # one writer at a time: the packet path and a tune's hello
        self._closed = False
        if listen:
            _listen(listen)
        if self.forward:
            if not self._connect():              # keep trying in the background: the hub must know this
                self._keep_connecting()          # stream before its first burst, or a capture reads past it
        else:
            with _LOCK:
                _SINKS.append(self)

    def accept_packet(self, packet):
        data = np.frombuffer(bytes(packet.get_payload_bytes()), dtype="<i2").astype(np.int32)
        open_burst = not packet.get_header().eob
        if self.gain != 1.0:
            data = np.rint(data * self.gain).astype(np.int32)
        g = self._cable_gain()
        taps = self._cable_seen[2]
        if g != 1.0 or taps is not None:
            iq = (data[0::2] + 1j * data[1::2]) * g
            if taps is not None:
                iq = self._fir(iq, taps)
            data = np.empty(data.size, dtype=np.int32)
            data[0::2], data[1::2] = np.rint(iq.real), np.rint(iq.imag)
        if self.forward:
            self._send(data, open_burst)
        else:
            self._add(data, open_burst)

    def _cable_gain(self) -> complex:
        """The injected complex gain of this radio's path (``cable`` file; 1 without one); its FIR taps, if
        any, in ``self._cable_seen[2]``."""
        if not self.cable:
            return 1.0
        try:
            stamp = os.stat(self.cable).st_mtime_ns
        except OSError:
            return 1.0
        if stamp != self._cable_seen[0]:
            try:
                with open(self.cable) as f:
                    c = json.load(f)
                g = 10 ** (float(c.get("gain_db", 0.0)) / 20) * np.exp(1j * float(c.get("phase_rad", 0.0)))
                t = c.get("taps")
                taps = None if not t else np.array([complex(float(a), float(b)) for a, b in t])
            except (OSError, ValueError, TypeError, AttributeError):
                g, taps = self._cable_seen[1], self._cable_seen[2]
            self._cable_seen = (stamp, complex(g), taps)
        return self._cable_seen[1]

    def _fir(self, iq: np.ndarray, taps: np.ndarray) -> np.ndarray:
        """``iq`` through the cable's FIR, continuing from the stream's previous packet."""
        keep = len(taps) - 1
        hist = self._fir_hist if len(self._fir_hist) == keep else np.zeros(keep, np.complex128)
        x = np.concatenate([hist, iq])
        self._fir_hist = x[len(x) - keep:] if keep else np.zeros(0, np.complex128)
        return np.convolve(x, taps)[keep:keep + len(iq)]

    def _add(self, data: np.ndarray, open_burst: bool = False) -> None:
        """Add int16 I/Q values into the current round after what this stream wrote in it (from index 0
        when this is its first packet since the round opened); ``open_burst``: the packet ended no burst.

        A burst that starts (the stream's first packet after an end of burst) while every capture of the round
        has been handed over is held, with the rest of it, for the next capture: the host sends a round's
        bursts after arming its capture, but the hub's control thread may take the stream command in after
        another simulator's forwarded packets of those bursts arrived (a loaded host: the first client sent
        lost the start of its burst to the round before, its pilot "not detected"). Not held: a stream's first
        burst (the primer a transmitter sends when its stream opens, which no capture is for: held, a rejoined
        node's 64-sample primer put its next pilot 64 samples late in a calibration), and the rest of a burst
        left open (a coherent round's payload after its sounding, after the primer), which goes where the burst
        began: after its capture is over, into that round, where nobody reads it (never into the next capture)."""
        with _LOCK:
            starts = not self.open and self.sent_before
            self.sent_before = True
            if self.held or (starts and _ROUND["reading"] <= 0 and _ROUND["opened"] >= 0):
                if starts:
                    self.held, self._held_size = [], 0      # a burst no capture heard is gone; the newest one waits
                if self._held_size + data.size <= PENDING_MAX:
                    self.held.append((data, bool(open_burst)))
                    self._held_size += data.size
                self.open = bool(open_burst)
                return
            self._place(data, open_burst)

    def _release_held(self) -> None:
        """A new round opened (the caller holds _LOCK): the held burst goes in from its index 0."""
        held, self.held, self._held_size = self.held, [], 0
        if held:
            _note(f"round {_ROUND['epoch']}: radio {self.radio}'s burst, sent before the round opened, starts it")
        for data, open_burst in held:
            self._place(data, open_burst)

    def _place(self, data: np.ndarray, open_burst: bool) -> None:
        """``_add`` into the current round (the caller holds _LOCK)."""
        if self.epoch != _ROUND["epoch"]:
            self.epoch, self.pos, self._pn = _ROUND["epoch"], 0, 0.0
            late = time.monotonic() - _ROUND["opened"]
            if isinstance(self, _RemoteStream) and late > 0.5:
                _note(f"round {self.epoch}: radio {self.radio}'s burst starts {late:.2f} s after the round opened")
        lab = _OSC["lab"]
        if lab is not None and data.size and self.radio < _OSC["n"]:
            rot, self._pn = lab.rotation(self.radio, self.pos // 2, data.size // 2, self._pn)
            iq = (data[0::2] + 1j * data[1::2]) * rot
            data = np.empty(data.size, dtype=np.int32)
            data[0::2], data[1::2] = np.rint(iq.real), np.rint(iq.imag)
        end = self.pos + data.size
        buf = _ROUND["buf"]
        if buf.size < end:
            buf = np.concatenate([buf, np.zeros(end - buf.size, dtype=np.int32)])
        buf[self.pos:end] += data
        _ROUND["buf"] = buf
        _ROUND["written"] = self.last = time.monotonic()
        self.pos = end
        self.open = bool(open_burst)

    def _connect(self) -> bool:
        with self._conn_lock:                    # one connection per stream (the packet path and the retrier)
            if self._sock is not None:
                return True
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.forward)
                sock.sendall(_HEADER.pack(HELLO) + _HEADER.pack(self.radio))   # who this stream is
            except OSError:                      # the hub is not listening (yet): try again later
                sock.close()
                return False
            self._sock = sock
            return True

    def tuned(self) -> None:
        """The host tuned this stream's radio (uhd_sim_daemon's ``catalina_tune``): a forwarding stream the
        hub already knows says hello again, so the hub draws the radio's LO phases anew; one not connected yet
        will, when it connects. The hub's own streams (radio 0) are drawn in place."""
        if not self.forward:
            with _LOCK:
                if _OSC["lab"] is not None and self.radio < _OSC["n"]:
                    _OSC["lab"].retune(self.radio)
            return
        sock = self._sock
        if sock is None:
            return
        try:
            with self._send_lock:
                sock.sendall(_HEADER.pack(HELLO) + _HEADER.pack(self.radio))
        except OSError:
            pass                                 # the hub went away: the next packet reconnects (a hello)

    def _keep_connecting(self) -> None:
        def run():
            while not self._closed and not self._connect():
                time.sleep(0.1)
        threading.Thread(target=run, daemon=True).start()

    def _send(self, data: np.ndarray, open_burst: bool = False) -> None:
        if self._sock is None and not self._connect():
            return                               # dropped: nobody hears it
        payload = np.clip(data, -32768, 32767).astype("<i2").tobytes()
        head = _HEADER.pack(OPEN) if open_burst else b""     # the packet after this mark ends no burst
        sock = self._sock
        if sock is None:
            return
        try:
            with self._send_lock:
                sock.sendall(head + _HEADER.pack(len(payload)) + payload)
        except OSError:                          # the hub went away: drop, reconnect when it is back
            self._drop_connection()
            self._keep_connecting()

    def _drop_connection(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def close(self):
        self._closed = True
        self._drop_connection()


class _RemoteStream(LoopbackSink):
    """A transmit stream of another simulator, forwarded over one accepted connection."""

    def __init__(self, conn):
        super().__init__()
        self.conn = conn

    def serve(self) -> None:
        open_burst = False
        try:
            while True:
                head = _recv_exactly(self.conn, _HEADER.size)
                if head is None:
                    break
                (n,) = _HEADER.unpack(head)
                if n == OPEN:                    # the next packet ends no burst
                    open_burst = True
                    continue
                if n == HELLO:                   # the radio this stream comes from: it was (re)tuned
                    who = _recv_exactly(self.conn, _HEADER.size)
                    if who is None:
                        break
                    self.radio = _HEADER.unpack(who)[0]
                    _note(f"radio {self.radio}'s stream connected")
                    with _LOCK:
                        if _OSC["lab"] is not None and self.radio < _OSC["n"]:
                            _OSC["lab"].retune(self.radio)
                    continue
                payload = _recv_exactly(self.conn, n)
                if payload is None:
                    break
                self._add(np.frombuffer(payload, dtype="<i2").astype(np.int32), open_burst)
                open_burst = False
        except OSError:
            pass
        finally:
            _note(f"radio {self.radio}'s stream closed")
            with _LOCK:
                if self in _SINKS:
                    _SINKS.remove(self)
            self.conn.close()


class LoopbackSource:
    """Simulator sample source: one capture of the current round (lead zeros, bursts, zeros).

    Each packet waits until the bursts cover it, for up to ``wait_s`` before the first burst sample
    arrives and ``idle_s`` after the last one (the end of the bursts), or ``OPEN_S`` while a stream's
    burst is open (its last packet ended no burst: the host sends the rest once it has heard the first
    part), and ``START_S`` after the round opened for another simulator's stream that has not started (on a
    loaded host 1-2 s lost a client's whole burst); the rest of the capture is zeros.
    ``listen = PATH``: the hub of several simulators (forwarded streams are accepted there)."""

    def __init__(self, log=None, lead_samples="0", wait_s="3.0", idle_s="0.3", noise_rms="0.0", listen=None,
                 oscillators=None):
        if oscillators:
            _oscillators(oscillators)
        if listen:
            _listen(listen)
        self._pn = 0.0                              # the receiver's phase noise at the end of the last packet
        self.epoch = _new_round()
        self.noise = float(noise_rms) * 32767.0     # receiver noise per real coordinate, in sc16 units
        self.rng = np.random.default_rng()          # OS entropy: nobody outside can regenerate it
        self.lead = 2 * int(lead_samples)           # int16 values (I and Q)
        self.wait_s = float(wait_s)
        self.idle_s = float(idle_s)
        self.pos = 0
        self.started = time.monotonic()
        self._said = False                          # its log line on streams that sent nothing (once)
        self._closed = False

    def _wait_for(self, end: int) -> np.ndarray:
        """The round's buffer once it holds every transmit stream's samples up to ``end``: a stream that is
        behind the others (two channels of one sink, a loaded machine) is waited for unless it has been
        silent for ``idle_s`` (its burst is shorter), or has not started ``idle_s`` after the round opened
        (``START_S`` for a forwarded stream; it sends nothing this round)."""
        while True:
            now = time.monotonic()
            with _LOCK:
                buf = _ROUND["buf"] if _ROUND["epoch"] == self.epoch else np.zeros(0, dtype=np.int32)
                last = _ROUND["written"]
                opened = _ROUND["opened"]
                held = any(s.open and s.epoch == self.epoch for s in _SINKS)   # an open burst: more comes
                open_s = max(OPEN_S, self.idle_s)       # never less than a closed stream's wait (the lab's 6 s)
                start_s = max(START_S, self.idle_s)
                # a known stream that has not started this round: another simulator's may lag the round's
                # opening by seconds on a loaded host (its own process, then the forwarding hop)
                starting = [s for s in _SINKS if s.epoch != self.epoch
                            and now - max(s.last, opened) <= (start_s if isinstance(s, _RemoteStream) else self.idle_s)]
                streams_in = not starting and all(s.pos >= end or now - s.last > (open_s if s.open else self.idle_s)
                                                  for s in _SINKS if s.epoch == self.epoch)
            if ((buf.size >= end and streams_in)
                    or (not starting and last and now - last > (open_s if held else self.idle_s))
                    or (not last and now - self.started > self.wait_s)):
                silent = [s.radio for s in _SINKS if s.epoch != self.epoch and isinstance(s, _RemoteStream)]
                if silent and not self._said:
                    self._said = True
                    _note(f"round {self.epoch}: capture handed over {now - opened:.2f} s after the round opened "
                          f"without a burst from radio {', '.join(map(str, silent))}")
                return buf
            time.sleep(0.002)

    def fill_packet(self, packet, payload_size):
        n = int(payload_size) // 2                  # int16 values in this packet
        lo, hi = self.pos - self.lead, self.pos - self.lead + n
        buf = self._wait_for(hi) if hi > 0 else np.zeros(0, dtype=np.int32)
        out = np.zeros(n, dtype=np.int32)
        a, b = max(lo, 0), min(hi, buf.size)
        if b > a:
            out[a - lo:b - lo] = buf[a:b]
        lab = _OSC["lab"]
        if lab is not None and b > a:             # the receiver's own phase noise on what it hears
            with _LOCK:
                rot, self._pn = lab.receiver_rotation(n // 2, self._pn)
            iq = (out[0::2] + 1j * out[1::2]) * rot
            out[0::2], out[1::2] = np.rint(iq.real), np.rint(iq.imag)
        self.pos += n
        if self.noise > 0:
            out = np.rint(out + self.rng.normal(0.0, self.noise, n))
        packet.set_payload_bytes(np.clip(out, -32768, 32767).astype("<i2").tobytes())
        return packet

    def close(self):
        """The simulator's stream worker is done with this capture (its last packet sent, or stopped)."""
        if not self._closed:
            self._closed = True
            _capture_done(self.epoch)
