"""The `zmq` air inside one process: each round's client bursts, the jammer and the channel output cross
real ZeroMQ sockets (GNU Radio ``zeromq.push_sink`` / ``pull_source`` on UNIX sockets in a private 0700
folder with unguessable names, no TCP port) through the
pieces of :mod:`otafl_sdr.radio.zmq_channel`, the same ones the testbed's node processes run.

``air.name = "zmq"`` is the testbed (one process per radio, ``otafl_sdr.net.testbed``) for the command
line and the API alike; this class is ``air.name = "zmq_inproc"``, a test bench for the IQ plane: with the
loopback defaults it returns the loopback air's aggregate sample for sample."""
from __future__ import annotations

import os
import shutil
import time

import numpy as np

from ..airs import Air
from ..errors import AirError
from ..phy.reference_design import allowance, reference_design   # the design the testbed server uses
from ..phy.packing import unpack_reals
from ..transmission import Reception, RoundPlan
from .zmq_channel import (Capture, ChannelRound, ZmqLayout, capture_one, ipc_endpoint, ipc_folder, push_client,
                          push_jammer, release)

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

    def _endpoint(self) -> str:
        if self._folder is None:
            self._folder = ipc_folder()
        return ipc_endpoint(self._folder)

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
        eps = {f"client-{i}": self._endpoint() for i in np.flatnonzero(active)}
        if plan.alpha_cj > 0:
            eps["jammer"] = self._endpoint()
        pushers = []
        out = None
        try:
            cap = Capture(eps, L.n_samples)
            for i in np.flatnonzero(active):
                sym = L.client_symbols(plan.alpha[i], plan.payload[i], ref_gain[i])
                pushers.append(push_client(L, int(i), sym, L.client_scale(int(i), plan.alpha[i], draws),
                                           eps[f"client-{i}"]))
            if plan.alpha_cj > 0:
                pushers.append(push_jammer(L, plan.alpha_cj, draws["jammer_seed"], eps["jammer"]))
            got = cap.run(deadline)
            missing = [n for n, x in got.items() if x is None]
            if missing:
                raise AirError(f"zmq air: no samples from {', '.join(missing)} within {self.timeout_s:g} s")
            streams = np.zeros((K, L.n_samples), dtype=np.complex64)
            for i in np.flatnonzero(active):
                streams[i] = got[f"client-{i}"]
            out = self._endpoint()
            sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)      # the emulated channel's true noise
            pushers.append(ChannelRound.push(L, streams, got.get("jammer"), plan.h, plan.h_cj, sigma_c2, draws, out))
            y = capture_one(out, L.n_samples, deadline)
        finally:
            for p in pushers:
                release(p)
            for ep in list(eps.values()) + ([out] if out else []):
                if os.path.exists(ep[6:]):
                    os.unlink(ep[6:])                 # the socket's file (ipc://PATH)
        if y is None:
            raise AirError(f"zmq air: the receiver got no burst within {self.timeout_s:g} s")
        res = m.demodulate(y[L.offset:], L.n_sym, ref_amp)
        uses = m.channel_uses(L.n_sym)
        extra = {"ref_amplitude": ref_amp, "timing": res.timing, "cfo": res.cfo, "phase": res.phase,
                 "nmse_pilots": res.nmse_pilots, "overhead": m.overhead(L.n_sym)}
        if self.cfg.air.record_iq:           # the exact samples demodulated, for `otafl-sdr replay`
            from .recording import round_meta
            extra["iq"] = np.asarray(y[L.offset:], dtype=np.complex64)
            extra["iq_meta"] = round_meta(self.cfg, plan, sample_rate=float(self.cfg.uhd.rate), ref_amplitude=ref_amp,
                                          n_symbols=L.n_sym, modem=m, air=self.name, hw="GNU Radio ZMQ blocks (in process)")
        if not res.ok:
            return Reception(None, ok=False, reason=res.reason, channel_uses=uses,
                             wall_s=time.perf_counter() - t0, extra=extra)
        return Reception(unpack_reals(res.symbols, d) / plan.alpha_u, ok=True, channel_uses=uses,
                         wall_s=time.perf_counter() - t0, extra=extra)
