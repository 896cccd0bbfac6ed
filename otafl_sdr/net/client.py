"""The client node: trains on its own shard, decides its own power factor, transmits its burst.

On ``round_start`` (global model w): local training of client i only (the orchestrator's LocalTrainer
restricted to ``clients=[i]``, same seeded batch order as in process), update clipped to tau, payload
u_i = update / tau; h from ``seeding.rng(seed, "channel", it)`` (nobody sends it); the power policy on
its own row gives alpha_i = alpha_u p_i / (h_i s_i) and s_i (eq. 14/17 of paper 000); answers ``ack``
with s_i, alpha_i and its decided mode (and, in diagnostic mode only, ||u_i||, its local loss and u_i
itself): nothing derived from its data leaves the node outside the mechanism. The client is never
silenced by its data: the trainer makes u_i finite; a payload still holding NaN/inf (defence in depth)
is replaced by zeros and sent at the planned power. On ``transmit``: frames alpha_i s(u_i) with
the reference gain the server designed, and pushes it through a GNU Radio ClientTx into its ZeroMQ
PUSH socket (air zmq; an ipc socket in the run's private folder, or the CURVE relay, net/iq_relay.py),
and reports its end of the IQ link (samples pushed, the burst's tag). Air uhd: the node drives its own USRP (net/uhd_port.py); on ``transmit_at`` the
same frame, pre-compensated with its calibrated carrier offset and delay when the server sends them, goes
out as one timed burst at t_tx, every sample clipped to the DAC's full scale, a fixed planned level
(:func:`~otafl_sdr.radio.uhd_round_signal.clip_to_dac`: a projection onto a convex set, so the
sensitivity is kept), instead of refusing on the data."""
from __future__ import annotations

import logging

import numpy as np
import torch

from otafl_sdr.noise_source import entropy_rng
from otafl_sdr.errors import UserError
from otafl_sdr.net.messages import Message
from otafl_sdr.net.node import TransmitterNode
from otafl_sdr.workload.round_plan import policy_plan

log = logging.getLogger("otafl.net")


class ClientNode(TransmitterNode):
    role = "client"

    def __init__(self, name: str, server: str, air: str, keys_dir=None, iq_endpoint=None, client_id: int = 0,
                 **kw):
        super().__init__(name, server, air, keys_dir, iq_endpoint, **kw)
        self.i = int(client_id)
        self.decisions: dict[int, dict] = {}
        self.ctx = None
        self._cal_text, self._cal_dir, self._cal_count = None, None, 0
        self._latest = (0, 0)                 # newest request: an older wait gives way

    def setup(self) -> None:
        K = int(self.cfg.data.clients)
        if not 0 <= self.i < K:
            raise UserError(f"client id {self.i} is outside 0..{K - 1}")
        if self.air == "uhd":
            from otafl_sdr.phy import Modem
            from otafl_sdr.net.uhd_port import UhdPort
            self.modem = Modem(self.cfg.phy)
            self.port = UhdPort(self, f"client {self.i}", self.device_args)
            self.port.open(self.cfg, "client", self.i)
            if self.cfg.calibration.session:
                return            # the run is built once the server's calibration arrives (_calibration)
        self._build_context(None)

    def _build_context(self, session_cal) -> None:
        from otafl_sdr.net.context import node_run
        self.ctx = node_run(self.cfg, session_cal=session_cal)
        if self.air == "zmq":
            from otafl_sdr.radio.zmq_channel import ZmqLayout
            self.layout = ZmqLayout(self.cfg, self.ctx.K, self.ctx.dim)
        log.info("%s ready: %d samples in its shard, d = %d", self.name, int(self.ctx.data.sizes[self.i]),
                 self.ctx.dim)

    def _calibration(self, text: str) -> None:
        """The server's in-session calibration: build the run on it (first), or take fresh estimates."""
        import tempfile
        from pathlib import Path
        if text == self._cal_text:
            return
        if self._cal_dir is None:
            self._cal_dir = tempfile.TemporaryDirectory(prefix=f"otafl-{self.name}-")
        path = Path(self._cal_dir.name) / f"calibration-{self._cal_count}.json"
        self._cal_count += 1
        path.write_text(text)
        if self.ctx is None:
            self._build_context(path)
        else:
            self.ctx.use_calibration(path)
        self._cal_text = text

    def handle(self, msg: Message):
        if msg.type == "calibration":
            return lambda: self._calibration(msg["text"])
        if msg.type == "round_start":
            self.faults.point("round_start", msg["round"])
            w = np.array(msg.arrays["w"])                      # own copy of the received buffer
            return lambda: self._train(msg, w)
        if msg.type == "transmit":
            self.faults.point("transmit", msg["round"])
            self._latest = (msg["round"], msg["attempt"])
            return lambda: self._transmit(msg)
        if msg.type == "check_decision" and self.air == "uhd":     # the coherence check (net/uhd_check_rounds.py)
            self.faults.point("check", msg["round"])
            from otafl_sdr.net.uhd_check_rounds import client_decision
            dec = client_decision(msg, self.ctx.dim if self.ctx is not None else None)
            return lambda: self._take_check_decision(int(msg["round"]), dec)
        if msg.type == "transmit_at" and self.air == "uhd":
            self.faults.point("transmit", msg["round"])
            return lambda: self._transmit_uhd(msg)
        if msg.type == "round_end":
            return lambda: self._end(msg["round"])
        return self.port.handle(msg) if self.port is not None else None

    # ------------------------------------------------------------------------------------------
    def _train(self, msg: Message, w_np: np.ndarray) -> None:
        if self.ctx is None:           # jobs run in order: the server's calibration comes before round_start
            raise UserError("round_start before the server's calibration: cannot decide a power factor")
        ctx, cfg, i = self.ctx, self.cfg, self.i
        round_index = msg["round"]
        w = torch.from_numpy(w_np)
        tr = ctx.trainer.train_round(w, round_index, mu=float(msg["mu"]), clients=[i])
        upd = tr.updates[i].detach()
        u = upd.to(torch.float64).numpy() / cfg.train.tau            # as in process: float64, then / tau
        if not np.isfinite(u).all():           # defence in depth (never after the trainer): zeros, still sent
            u, upd = np.zeros_like(u), torch.zeros_like(upd)
        payload = np.zeros((ctx.K, ctx.dim))
        payload[i] = u
        # the server's plan of the round, this client's share (workload/round_plan.policy_plan): its
        # protective noise (artificial noise of CDPB / LAPA / OTA-FD) from OS entropy here
        channels, plan = policy_plan(ctx, round_index, payload, entropy_rng())
        alpha, mode = complex(plan.alpha[i]), plan.mode[i]
        s = plan.extra.get("s") if isinstance(plan.extra, dict) else None
        self.decisions = {k: v for k, v in self.decisions.items() if k >= round_index - 1}
        self.decisions[round_index] = {"alpha": alpha, "payload": np.array(plan.payload[i]), "mode": mode}
        if cfg.phy.waveform == "ofdm" and self.air == "zmq":     # its own alpha_ik (net/zmq_ofdm.py)
            from otafl_sdr.net.zmq_ofdm import own_subcarrier_alpha
            self.decisions[round_index]["alpha_sc"] = own_subcarrier_alpha(cfg, plan, i)
        elif cfg.phy.waveform == "ofdm":                         # air uhd: on the calibration (net/uhd_ofdm_round.py)
            from otafl_sdr.net.uhd_ofdm_round import own_alpha_sc
            self.decisions[round_index]["alpha_sc"] = own_alpha_sc(cfg, plan, i, ctx.csi, channels.known)
        loss = float(tr.client_loss[i])
        diag = bool(msg["diagnostic"])         # data-dependent figures leave only in diagnostics mode
        fields = {"round": round_index, "s": float(s[i]) if s is not None else 1.0, "alpha_re": alpha.real,
                  "alpha_im": alpha.imag, "mode": mode,
                  "norm": float(np.linalg.norm(u)) if diag else 0.0,
                  "train_loss": loss if np.isfinite(loss) and diag else None,
                  "clipped": bool(tr.clipped[i]) and diag}
        arrays = {"update": upd.numpy()} if diag else {}
        self.reply("ack", fields, arrays)

    def _take_check_decision(self, round_index: int, dec: dict) -> None:
        """A check round's share, planned by the server (public payload; kept until the next round_start)."""
        self.decisions[round_index] = dec

    def _transmit_uhd(self, msg: Message) -> None:
        from otafl_sdr.phy import pack_reals
        from otafl_sdr.radio.uhd_round_signal import clip_to_dac
        round_index, attempt = msg["round"], msg["attempt"]
        dec = self.decisions.get(round_index)
        if dec is None or dec["mode"] == "silent" or dec["alpha"] == 0:
            self.reply("burst_done", {"round": round_index, "attempt": attempt, "ok": False, "faults": {},
                                      "reason": "no transmission decided for this round"})
            return
        if "alpha_sc" in dec:                     # OFDM: no pre-compensation, as in process (net/uhd_ofdm_round.py)
            from otafl_sdr.net.uhd_ofdm_round import client_burst
            self.port.burst(client_burst(self, msg, dec), float(msg["t_tx"]), float(msg["t_rx"]), round_index, attempt, msg["n"])
            return
        g = msg["ref_gains"].get(self.name, [0.0, 0.0])
        amp = float(msg["tx_amp"])               # the round's planned scale x PA correction (radio/uhd_power.py)
        burst = self.modem.modulate(dec["alpha"] * amp * pack_reals(dec["payload"]), complex(g[0], g[1]))
        if msg["sounding"]:                       # air.coherence = "measure": its reference part after the frame
            from otafl_sdr.net.uhd_sounding import client_part
            burst = np.concatenate([burst, client_part(self.cfg, self.i, msg["ref_gains"], msg["slot"])])
        t_tx = float(msg["t_tx"])
        off = msg["offsets"].get(self.name)
        if off is not None:                       # calibrated: the measured carrier offset and delay
            from otafl_sdr.calibration.csi import precompensate
            t_ref = msg["t_ref"]                  # the rotation's phase referenced to device time (continuous)
            burst, t_tx = precompensate(burst, off[0], off[1], float(self.cfg.uhd.rate), t_tx,
                                        t_ref=None if t_ref is None or not off[0] else float(t_ref))
        self.port.burst(clip_to_dac(burst), t_tx, float(msg["t_rx"]), round_index, attempt, msg["n"])

    def _transmit(self, msg: Message) -> None:
        round_index, attempt = msg["round"], msg["attempt"]
        dec = self.decisions.get(round_index)
        fields = {"round": round_index, "attempt": attempt, "ok": False, "reason": "", "samples": 0}
        if dec is None or dec["mode"] == "silent" or dec["alpha"] == 0:
            fields["reason"] = "no transmission decided for this round"
            self.reply("tx_done", fields)
            return
        self.release_pusher()
        from otafl_sdr.radio.zmq_channel import push_client
        L = self.layout
        if "alpha_sc" in dec:                                 # phy.waveform = "ofdm" (net/zmq_ofdm.py)
            from otafl_sdr.net.zmq_ofdm import client_burst
            start, n = client_burst(self, msg, dec)
        else:
            g = msg["ref_gains"].get(self.name, [0.0, 0.0])
            draws = L.round_draws(round_index, attempt)
            sym = L.client_symbols(dec["alpha"], dec["payload"], complex(g[0], g[1]))
            scale = L.client_scale(self.i, dec["alpha"], draws)
            start, n = (lambda ep, tap: push_client(L, self.i, sym, scale, ep, tap=tap)), L.n_samples
        ok = self.push_burst(start, round_index, attempt, cancelled=lambda: self._stop.is_set() or self._latest != (round_index, attempt))
        fields.update(ok=ok, samples=n if ok else 0,
                      reason="" if ok else "the channel emulator did not take the burst in time")
        self.reply("tx_done", fields)

    def _end(self, round_index: int) -> None:
        self.decisions.pop(round_index, None)
        self.release_pusher()

    def close(self) -> None:
        super().close()
        if self._cal_dir is not None:
            self._cal_dir.cleanup()
