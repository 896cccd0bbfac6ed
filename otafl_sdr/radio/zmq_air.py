"""The `zmq` air inside one process: each round's client bursts, the jammer and the channel output cross
real ZeroMQ sockets (UNIX sockets, no TCP port: GNU Radio ``zeromq.pull_source`` readers) through the pieces of
:mod:`otafl_sdr.radio.zmq_channel`, the same ones the testbed's node processes run. Every sender is sealed
(radio/iq_seal.py: its flowgraph writes into an unnamed socketpair, a relay of this process sends it on an
ipc socket in a private 0700 folder that admits only this process from before its bind), its staging files
are memfds and the process is non-dumpable (zmq_channel.private_process): another process of the same uid
holding no key finds no socket that talks to it and no file to read (one with CAP_SYS_PTRACE could read our
memory: out of scope).

``air.name = "zmq"`` is the testbed (one process per radio, ``otafl_sdr.net.testbed``) for the command
line and the API alike; this class is ``air.name = "zmq_inproc"``, a test bench for the IQ plane: with the
loopback defaults it returns the loopback air's aggregate sample for sample (``phy.waveform = "ofdm"`` too,
multipath included: radio/zmq_ofdm.py)."""
from __future__ import annotations

import shutil
import time

import numpy as np

from otafl_sdr.airs import Air
from otafl_sdr.errors import AirError
from otafl_sdr.phy.reference_design import allowance, reference_design   # the design the testbed server uses
from otafl_sdr.phy.packing import unpack_reals
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.iq_seal import Sealed
from otafl_sdr.radio.zmq_channel import (Capture, ChannelRound, ZmqLayout, capture_one, ipc_endpoint, ipc_folder,
                                         private_process, push_client, push_jammer, release)

ROUND_TIMEOUT_S = 60.0


class ZmqAir(Air):
    """In-process zmq air (see module doc). ``timeout_s``: how long a round may wait for its streams."""

    name = "zmq_inproc"
    # the jammer's and the emulated channel's noise come from OS entropy, as on the testbed's nodes; False
    # reproduces a seeded draw (what a server holding the run seed can compute: tests use it as the
    # adversary's reconstruction)
    secret_noise = True

    def __init__(self, cfg, timeout_s: float | None = None):
        super().__init__(cfg)
        self.timeout_s = float(timeout_s if timeout_s is not None else min(cfg.net.timeout_s, ROUND_TIMEOUT_S))
        self._layout = None
        self._folder = None                 # the private folder of this air's IQ sockets
        private_process()

    def _endpoint(self) -> Sealed:
        """A fresh sealed push endpoint: its reader connects to an ipc socket that admits only this process."""
        if self._folder is None:
            self._folder = ipc_folder()
        return Sealed.own_process(ipc_endpoint(self._folder))

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
        super().close()

    def layout(self, K: int, d: int) -> ZmqLayout:
        if self._layout is None or (self._layout.K, self._layout.dim) != (K, d):
            self._layout = ZmqLayout(self.cfg, K, d)
        return self._layout

    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        if "ofdm" in plan.extra:               # phy.waveform = "ofdm": radio/zmq_ofdm.py
            from otafl_sdr.radio.zmq_ofdm import ofdm_transmit
            return ofdm_transmit(self, plan, rng, self._endpoint)
        t0 = time.perf_counter()
        K, d = plan.clients, plan.dim
        L = self.layout(K, d)
        m = L.modem
        draws = L.draws_from(rng, secret=self.secret_noise)
        finite = np.all(np.isfinite(plan.payload), axis=1)
        active = np.array([md != "silent" for md in plan.mode]) & (plan.alpha != 0) & finite
        h_known = np.asarray(plan.extra.get("csi", plan.h), dtype=np.complex128)
        ref_gain, ref_amp = reference_design(m, h_known, allowance(plan, active), d)
        deadline = time.time() + self.timeout_s
        pushers = {}
        try:
            for i in np.flatnonzero(active):
                sym = L.client_symbols(plan.alpha[i], plan.payload[i], ref_gain[i])
                pushers[f"client-{i}"] = push_client(L, int(i), sym, L.client_scale(int(i), plan.alpha[i], draws),
                                                     self._endpoint())
            if plan.alpha_cj > 0:
                pushers["jammer"] = push_jammer(L, plan.alpha_cj, draws["jammer_seed"], self._endpoint())
            got = Capture({n: p.reach for n, p in pushers.items()}, L.n_samples).run(deadline)   # own-process sockets
            missing = [n for n, x in got.items() if x is None]
            if missing:
                raise AirError(f"zmq air: no samples from {', '.join(missing)} within {self.timeout_s:g} s")
            streams = np.zeros((K, L.n_samples), dtype=np.complex64)
            for i in np.flatnonzero(active):
                streams[i] = got[f"client-{i}"]
            sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)      # the emulated channel's true noise
            out = pushers["channel"] = ChannelRound.push(L, streams, got.get("jammer"), plan.h, plan.h_cj, sigma_c2,
                                                         draws, self._endpoint())
            y = capture_one(out.reach, L.n_samples, deadline)
        finally:
            for p in pushers.values():
                release(p)                            # closes its relay and socket
        if y is None:
            raise AirError(f"zmq air: the receiver got no burst within {self.timeout_s:g} s")
        res = m.demodulate(y[L.offset:], L.n_sym, ref_amp)
        uses = m.channel_uses(L.n_sym)
        extra = {"ref_amplitude": ref_amp, "timing": res.timing, "cfo": res.cfo, "phase": res.phase,
                 "nmse_pilots": res.nmse_pilots, "overhead": m.overhead(L.n_sym)}
        if self.cfg.air.record_iq:           # the exact samples demodulated, for `otafl-sdr replay`
            from otafl_sdr.radio.recording import round_meta
            extra["iq"] = np.asarray(y[L.offset:], dtype=np.complex64)
            extra["iq_meta"] = round_meta(self.cfg, plan, sample_rate=float(self.cfg.uhd.rate), ref_amplitude=ref_amp,
                                          n_symbols=L.n_sym, modem=m, air=self.name, hw="GNU Radio ZMQ blocks (in process)")
        if not res.ok:
            return Reception(None, ok=False, reason=res.reason, channel_uses=uses,
                             wall_s=time.perf_counter() - t0, extra=extra)
        return Reception(unpack_reals(res.symbols, d) / plan.alpha_u, ok=True, channel_uses=uses,
                         wall_s=time.perf_counter() - t0, extra=extra)
