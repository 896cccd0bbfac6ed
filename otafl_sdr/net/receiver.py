"""The receiver node: on ``receive`` it captures the round's burst (air zmq: from the channel
emulator's PUSH socket, ``zeromq.pull_source`` stopped once the burst's samples have arrived or at the
deadline), demodulates it with the phy modem (preamble timing, CFO and phase on the shared reference)
and returns the aggregate estimate unpack(y) / alpha_u (eq. 16 of paper 000) to the server. A burst
with no detectable preamble, or none at all, is reported lost with the reason, never a silent zero.

Air uhd: the node drives the receiving USRP (net/uhd_port.py): on ``capture`` it commands a timed capture,
answers ``armed``, and returns the samples with its radio's faults (``captured``); the server, whose radio
this is, demodulates them as the in-process air does (``finish_round``)."""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.net.messages import Message
from otafl_sdr.net.node import Node


class ReceiverNode(Node):
    role = "receiver"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._latest = (0, 0)                 # newest request: an older capture still running gives way
        self.port = None                      # air uhd: this node's USRP

    def setup(self) -> None:
        if self.air == "uhd":
            from otafl_sdr.net.uhd_port import UhdPort
            self.port = UhdPort(self, "receiver", self.device_args)
            self.port.open(self.cfg, "receiver")

    def handle(self, msg: Message):
        if msg.type == "receive":
            self.faults.point("receive", msg["round"])
            self._latest = (msg["round"], msg["attempt"])
            return lambda: self._receive(msg)
        return self.port.handle(msg) if self.port is not None else None

    def close(self) -> None:
        if self.port is not None:
            self.port.close()

    def _receive(self, msg: Message) -> None:
        from otafl_sdr.phy.packing import unpack_reals
        from otafl_sdr.radio.zmq_channel import capture_one
        round_index, attempt, d = msg["round"], msg["attempt"], msg["dim"]
        from otafl_sdr.net.zmq_ofdm import plane_of, row_of
        ofdm = plane_of(self.cfg, msg, d)                  # phy.waveform = "ofdm": radio/zmq_ofdm.OfdmPlane
        L = ofdm or self.layout(d)
        fields = {"round": round_index, "attempt": attempt, "release": msg["release"], "ok": False, "reason": "",
                  "faults": {}, "channel_uses": ofdm.channel_uses if ofdm else L.modem.channel_uses(L.n_sym)}
        # (release: echoed, the server logs it)
        if not msg["endpoint"]:
            fields["reason"] = "no capture endpoint"
            self.reply("aggregate", fields)
            return
        try:
            local = self.iq.source("channel", msg["endpoint"], round_index, attempt)     # ipc, or the CURVE relay's ipc side
        except UserError as e:                    # e.g. a TCP endpoint without keys: refused, and said so
            fields["reason"] = f"no burst: {e}"
            self.reply("aggregate", fields)
            return
        counts: dict = {}
        try:
            y = capture_one(local.endpoint, L.n_samples, min(msg["deadline"], time.time() + self.timeout_s),
                            cancelled=lambda: self._stop.is_set() or self._latest != (round_index, attempt), counts=counts)
        finally:
            local.close()
        if self._latest != (round_index, attempt):
            return
        self.iq_report("channel", self.name, round_index, attempt, "got", counts.get("rx", 0), L.n_samples, y)
        if y is None:
            fields["reason"] = "no burst arrived from the channel by the deadline"
            self.reply("aggregate", fields)
            return
        if ofdm is not None:           # the window the timing search and the FFTs read (net/zmq_ofdm.py)
            agg, reason, _ = ofdm.receive(y, row_of(msg, "ofdm_ref_amp", (ofdm.lay.used,)), float(msg["alpha_u"]))
            need = ofdm.frame.search + ofdm.lay.frame_symbols(ofdm.frame.n_ofdm) * ofdm.lay.symbol_len
            iq = {"iq": np.ascontiguousarray(y[:need], dtype=np.complex64)} if self.cfg.air.record_iq else {}
        else:
            res = L.modem.demodulate(y[L.offset:], L.n_sym, complex(msg["ref_re"], msg["ref_im"]))
            # air.record_iq: the exact samples demodulated travel back for the server's SigMF recording
            iq = {"iq": np.ascontiguousarray(y[L.offset:], dtype=np.complex64)} if self.cfg.air.record_iq else {}
            reason = res.reason
            agg = unpack_reals(res.symbols, d) / float(msg["alpha_u"]) if res.ok else None
        if agg is None:
            fields["reason"] = reason
            self.reply("aggregate", fields, iq)
            return
        fields.update(ok=True)
        self.reply("aggregate", fields, {"aggregate": np.ascontiguousarray(agg, dtype=np.float64), **iq})
