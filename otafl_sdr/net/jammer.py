"""The jammer node: on ``jam`` (alpha_cj from the server's plan, Theorem 2 of paper 000) it pushes the
round's jamming burst, alpha_cj x gated, shaped CN(0, 2) noise (eq. 15), seeded from the round's
generator exactly as the loopback air seeds its jammer, into its ZeroMQ PUSH socket (air zmq). Air uhd:
the node drives its own USRP (net/uhd_port.py); on ``jam_at`` it sends alpha_cj n, n ~ CN(0, 2) drawn from
this host's operating-system entropy (nobody else can regenerate it), as one timed burst at t_tx: it answers
``armed`` (burst drawn, with its device time), gets the times the server chose after that handshake (``go``,
net/uhd_clock.py) and answers ``going`` (its time still ahead); the server tells the clients to transmit only
then."""
from __future__ import annotations

import time

from otafl_sdr.net.messages import Message
from otafl_sdr.net.node import TransmitterNode


ARM_MARGIN_S = 0.01     # air uhd: the jammer arms only with at least this much time left before its burst


class JammerNode(TransmitterNode):
    role = "jammer"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._latest = (0, 0)                 # newest request: an older wait gives way

    def setup(self) -> None:
        if self.air == "uhd":
            from otafl_sdr.phy import Modem
            from otafl_sdr.net.uhd_port import UhdPort
            self.modem = Modem(self.cfg.phy)
            self.port = UhdPort(self, "jammer", self.device_args)
            self.port.open(self.cfg, "jammer")

    def handle(self, msg: Message):
        if msg.type == "jam":
            self.faults.point("jam", msg["round"])
            self._latest = (msg["round"], msg["attempt"])
            return lambda: self._jam(msg)
        if msg.type == "jam_at" and self.air == "uhd":
            self.faults.point("jam", msg["round"])
            self._latest = (msg["round"], msg["attempt"])
            return lambda: self._jam_uhd(msg)
        if msg.type == "round_end":
            return self.release_pusher
        return self.port.handle(msg) if self.port is not None else None

    def _jam_uhd(self, msg: Message) -> None:
        """Draw the burst, answer ``armed`` (ok only when it fits the DAC; with this radio's device time: the
        handshake), wait for the server's ``go`` (the times it chose after the handshake), answer ``going``
        (ok only when the burst's time is still ahead: the server tells the clients to transmit only then),
        send it; a burst whose time passed before it reached the radio is not sent and reported as a late
        command (``burst_done``; the round is charged at channel noise by the server's release rule)."""
        import numpy as np

        from otafl_sdr.noise_source import entropy_rng
        from otafl_sdr.phy.packing import symbols_for
        from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE
        from otafl_sdr.radio.uhd_round_signal import jammer_burst
        round_index, attempt = msg["round"], msg["attempt"]
        if self.cfg.phy.waveform == "ofdm":                   # net/uhd_ofdm_round.py
            from otafl_sdr.net.uhd_ofdm_round import jammer_burst as ofdm_jammer_burst
            burst = ofdm_jammer_burst(self.cfg, msg)
        else:
            rng = entropy_rng()
            burst = jammer_burst(self.modem, symbols_for(int(msg["dim"])), float(msg["alpha_cj"]), rng)
            if int(msg["slot"]) > 0:            # then alone: the round's jammer-only slot (radio/jammer_slots.py)
                from otafl_sdr.radio.jammer_slots import slot_noise
                burst = np.concatenate([burst, slot_noise(self.modem, float(msg["alpha_cj"]), rng, int(msg["slot"]))])
        timed = not self.cfg.uhd.simulator          # the simulator keeps no device time: bursts are never late
        why = ""
        if burst.size and float(np.max(np.abs(burst))) > DAC_FULL_SCALE:
            why = "its burst passes the DAC full scale (refused)"
        self.reply("armed", {"round": round_index, "attempt": attempt, "ok": not why, "reason": why,
                             "device_time": self.port.clock()})
        if why:
            return
        go = self.port.wait_go(round_index, attempt, time.time() + self.timeout_s, lambda: self._latest == (round_index, attempt))
        if go is None or not go["ok"]:
            return                                  # abandoned before anything was scheduled
        t_tx = float(go["t_tx"])
        if timed and time.time() > t_tx - ARM_MARGIN_S:
            why = f"late: {t_tx - time.time():.3f} s before its burst time when ready (raise uhd.start_delay)"
        self.reply("going", {"round": round_index, "attempt": attempt, "ok": not why, "reason": why})
        if why:
            return
        late = self.faults.point("jam_armed", round_index, until=t_tx)      # fault injection: late past t_tx
        if late or (timed and time.time() > t_tx):
            self.reply("burst_done", {"round": round_index, "attempt": attempt, "ok": False, "faults": {"time_error": 1},
                                      "reason": "late command: the burst's time passed before it reached the radio"})
            return
        self.port.burst(burst, t_tx, float(go["t_rx"]), round_index, attempt, msg["n"])

    def _jam(self, msg: Message) -> None:
        from otafl_sdr.radio.zmq_channel import push_jammer
        round_index, attempt = msg["round"], msg["attempt"]
        L = self.layout(msg["dim"])
        self.release_pusher()
        draws = L.round_draws(round_index, attempt)
        start, n = (lambda ep, tap: push_jammer(L, float(msg["alpha_cj"]), draws["jammer_seed"], ep, tap=tap)), L.n_samples
        if self.cfg.phy.waveform == "ofdm":                   # net/zmq_ofdm.py
            from otafl_sdr.net.zmq_ofdm import jammer_burst
            start, n = jammer_burst(self, msg)
        ok = self.push_burst(start, round_index, attempt, cancelled=lambda: self._stop.is_set() or self._latest != (round_index, attempt))
        self.reply("tx_done", {"round": round_index, "attempt": attempt, "ok": ok, "samples": n if ok else 0,
                               "reason": "" if ok else "the channel emulator did not take the burst in time"})

