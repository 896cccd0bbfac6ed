"""A cable for UHD's device simulator: what the simulated E320 transmits comes back on its receive stream.

Loaded by the simulator itself (its ``.ini`` names these classes with ``import_path``), in the simulator's
own interpreter; standalone (numpy only). The simulator keeps no device time and ignores ``tx_time``, so
the cable models one timed round the way the ``uhd`` air runs it:

- a receive stream (one timed capture, started by a stream command) opens a new *round*: the shared
  buffer is cleared (a second receive stream started within ``JOIN_S``, the E320's other RX channel in
  2 x 2 mode, joins that round: both channels receive the same superposition, each its own noise);
- every transmit stream (one per ``usrp_sink`` channel) adds its samples into the buffer from index 0 of
  the round, so bursts of several channels (clients, jammer) superpose sample-aligned, as bursts sent
  with the same ``tx_time`` do over the air;
- the capture delivers ``lead_samples`` zeros, then the superposed bursts, then zeros; it waits up to
  ``wait_s`` for the first burst to arrive, and for every transmit stream to have written what it reads
  (one stream may lag another: reading ahead of it would lose its samples);
- ``noise_rms`` (fraction of full scale per real coordinate) adds white Gaussian receiver noise, drawn from
  the operating system's entropy in the simulator's process, so calibration measures a noise floor and
  the privacy ledger counts noise that is really in the capture.

Samples travel as sc16 (the over-the-wire format), so the cable is unity gain up to 16-bit quantisation
(TX channel 1 may be given another gain: ``UhdSimulator(tx1_gain=...)``, an attenuator on that channel).
"""
from __future__ import annotations

import threading
import time

import numpy as np

_LOCK = threading.Lock()
_ROUND = {"epoch": 0, "buf": np.zeros(0, dtype=np.int32), "written": 0.0, "opened": -1.0}
_SINKS: list = []   # every transmit stream's sink: a capture waits until each has written past what it reads
JOIN_S = 0.05       # a capture started this soon after another is the same capture on the other RX channel


def _new_round() -> int:
    with _LOCK:
        now = time.monotonic()
        if now - _ROUND["opened"] < JOIN_S:     # 2 x 2: both RX channels see the same superposed bursts
            return _ROUND["epoch"]
        _ROUND["epoch"] += 1
        _ROUND["buf"] = np.zeros(0, dtype=np.int32)
        _ROUND["written"] = 0.0
        _ROUND["opened"] = now
        return _ROUND["epoch"]


class LoopbackSink:
    """Simulator sample sink: adds each transmit stream's sc16 samples into the current round."""

    def __init__(self, log=None):
        self.epoch = -1
        self.pos = 0
        self.last = 0.0             # when this stream last wrote
        self.gain = 1.0             # the cable's amplitude gain for this stream (set per TX channel)
        with _LOCK:
            _SINKS.append(self)

    def accept_packet(self, packet):
        data = np.frombuffer(bytes(packet.get_payload_bytes()), dtype="<i2").astype(np.int32)
        if self.gain != 1.0:
            data = np.rint(data * self.gain).astype(np.int32)
        with _LOCK:
            if self.epoch != _ROUND["epoch"]:
                self.epoch, self.pos = _ROUND["epoch"], 0
            end = self.pos + data.size
            buf = _ROUND["buf"]
            if buf.size < end:
                buf = np.concatenate([buf, np.zeros(end - buf.size, dtype=np.int32)])
            buf[self.pos:end] += data
            _ROUND["buf"] = buf
            _ROUND["written"] = self.last = time.monotonic()
            self.pos = end

    def close(self):
        pass


class LoopbackSource:
    """Simulator sample source: one capture of the current round (lead zeros, bursts, zeros).

    Each packet waits until the bursts cover it, for up to ``wait_s`` before the first burst sample
    arrives and ``idle_s`` after the last one (the end of the bursts); the rest of the capture is zeros."""

    def __init__(self, log=None, lead_samples="0", wait_s="3.0", idle_s="0.3", noise_rms="0.0"):
        self.epoch = _new_round()
        self.noise = float(noise_rms) * 32767.0     # receiver noise per real coordinate, in sc16 units
        self.rng = np.random.default_rng()          # OS entropy: nobody outside can regenerate it
        self.lead = 2 * int(lead_samples)           # int16 values (I and Q)
        self.wait_s = float(wait_s)
        self.idle_s = float(idle_s)
        self.pos = 0
        self.started = time.monotonic()

    def _wait_for(self, end: int) -> np.ndarray:
        """The round's buffer once it holds every transmit stream's samples up to ``end``: a stream that is
        behind the others (two channels of one sink, a loaded machine) is waited for unless it has been
        silent for ``idle_s`` (its burst is shorter), or has not started ``idle_s`` after the round opened
        (it sends nothing this round)."""
        while True:
            now = time.monotonic()
            with _LOCK:
                buf = _ROUND["buf"] if _ROUND["epoch"] == self.epoch else np.zeros(0, dtype=np.int32)
                last = _ROUND["written"]
                opened = _ROUND["opened"]
                streams_in = all((s.pos >= end or now - s.last > self.idle_s) if s.epoch == self.epoch
                                 else now - max(s.last, opened) > self.idle_s      # not started this round
                                 for s in _SINKS)
            if ((buf.size >= end and streams_in) or (last and now - last > self.idle_s)
                    or (not last and now - self.started > self.wait_s)):
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
        self.pos += n
        if self.noise > 0:
            out = np.rint(out + self.rng.normal(0.0, self.noise, n))
        packet.set_payload_bytes(np.clip(out, -32768, 32767).astype("<i2").tobytes())
        return packet

    def close(self):
        pass
