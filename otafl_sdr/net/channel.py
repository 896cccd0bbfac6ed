"""The channel-emulator node (air zmq): the air between the radios, as its own process.

On ``channel_round`` it captures one burst from every listed client and the jammer (GNU Radio
``zeromq.pull_source`` branches, stopped once each holds its samples, a dead sender is dropped, or the
deadline passes), then runs the loopback channel block on them: per-client h_i (drawn from
``seeding.rng(seed, "channel", it)``, the same draw as every other node), offsets, the sum (eq. 10/16 of
paper 000), the jammer through h_cj, the receiver's impairments and AWGN of variance sigma_c2 seeded
from the round's generator; the result goes out of its own PUSH socket to the receiver. A sender whose
burst never arrived counts as silent (a zero stream) and is named in ``channel_done``. Its IQ sockets are
ipc ones in the run's private folder, or CURVE relays between hosts (net/iq_relay.py); it reports both
ends it holds of each IQ link (``iq_report``: samples received / pushed and the bursts' tags), which the
server compares with the other ends' (net/iq_guard.py)."""
from __future__ import annotations

import threading
import time

import numpy as np

from otafl_sdr.errors import AirError
from otafl_sdr.noise_source import entropy_seed
from otafl_sdr.workload.parts import draw_channels
from otafl_sdr.net.messages import Message
from otafl_sdr.net.node import Node


class ChannelNode(Node):
    role = "channel"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.out = None
        self._lock = threading.Lock()
        self._dropped: set[tuple[int, int, str]] = set()
        self._latest = (0, 0)                 # newest request: an older one still running gives way

    def setup(self) -> None:
        if self.air != "zmq":
            raise AirError("the channel emulator runs only for air zmq")

    def handle(self, msg: Message):
        if msg.type == "drop":
            with self._lock:
                self._dropped.add((msg["round"], msg["attempt"], msg["node"]))
            return None
        if msg.type == "channel_round":
            self.faults.point("channel_round", msg["round"])
            with self._lock:
                self._latest = (msg["round"], msg["attempt"])
            return lambda: self._round(msg)
        if msg.type == "round_end":
            return self._release
        return None

    def _round(self, msg: Message) -> None:
        from otafl_sdr.radio.zmq_channel import Capture, ChannelRound
        round_index, attempt = msg["round"], msg["attempt"]
        cfg = self.cfg
        from otafl_sdr.net.zmq_ofdm import plane_of
        ofdm = plane_of(cfg, msg, msg["dim"])               # phy.waveform = "ofdm": radio/zmq_ofdm.OfdmPlane
        L = ofdm or self.layout(msg["dim"])
        K = L.K
        self._release()
        sources = dict(msg["sources"])
        if msg["jammer"]:
            sources["jammer"] = msg["jammer"]

        def superseded() -> bool:
            with self._lock:
                return self._latest != (round_index, attempt) or self._stop.is_set()

        def dropped():
            if superseded():
                return set(sources)
            with self._lock:
                return {n for (r, a, n) in self._dropped if r == round_index and a == attempt}

        links = {}
        try:
            for n, ep in sources.items():          # ipc, or a CURVE relay's ipc side
                links[n] = self.iq.source(n, ep, round_index, attempt)
            cap = Capture({n: lk.endpoint for n, lk in links.items()}, L.n_samples)
            got = cap.run(min(msg["deadline"], time.time() + self.timeout_s), dropped)
        finally:
            for lk in links.values():
                lk.close()
        if superseded():
            return
        gone = dropped()
        for n in sources:                 # this end of each sender's link: what arrived, and its tag
            if n not in gone:
                self.iq_report(n, self.name, round_index, attempt, "got", cap.counts.get(n, 0), L.n_samples, got.get(n))
        received = sorted(n for n, x in got.items() if x is not None)
        missing = sorted(n for n, x in got.items() if x is None)
        streams = np.zeros((K, L.n_samples), dtype=np.complex64)
        for n, x in got.items():
            if x is not None and n.startswith("client-"):
                streams[int(n.split("-")[1])] = x
        h, h_cj = draw_channels(cfg, K, round_index)
        local = self.iq.push(round_index, attempt)
        try:
            if ofdm is not None:                              # thermal / phase noise seeds: OS entropy here
                self.out = ofdm.push_channel(round_index, streams, got.get("jammer"), h, h_cj, float(msg["sigma_c2"]),
                                             entropy_seed(), entropy_seed(), local.endpoint, tap=self.iq.keys is not None)
            else:
                self.out = ChannelRound.push(L, streams, got.get("jammer"), h, h_cj, float(msg["sigma_c2"]),
                                             L.round_draws(round_index, attempt), local.endpoint, tap=self.iq.keys is not None)
        except BaseException:
            local.close()
            raise
        self.out.local = local
        until = min(msg["deadline"], time.time() + self.timeout_s)
        ok = self.out.wait_sent(until, cancelled=superseded)
        if not superseded():
            pushed = int(self.out.sink.nitems_read(0))
            self.iq_report(self.name, "receiver", round_index, attempt, "sent", pushed, L.n_samples,
                           self.out.samples(until if ok else time.time() + 0.5))
        with self._lock:
            self._dropped = {k for k in self._dropped if k[0] >= round_index}
        self.reply("channel_done", {"round": round_index, "attempt": attempt, "received": received, "missing": missing,
                                    "ok": ok, "reason": "" if ok else "the receiver did not take the burst in time"})

    def _release(self) -> None:
        if self.out is not None:
            from otafl_sdr.radio.zmq_channel import release
            release(self.out)
            if getattr(self.out, "local", None) is not None:
                self.out.local.close()
            self.out = None

    def close(self) -> None:
        self._release()
