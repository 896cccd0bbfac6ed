"""The OFDM round on the zmq airs (``phy.waveform = "ofdm"``, issue 26 item 2): the loopback air's OFDM
round (radio/loopback_ofdm.py) cut at its sockets. Every sender's burst is built by the same gr-digital
transmitter (radio/ofdm_tx.py) from the same subcarrier stream (phy/ofdm_burst.py) and pushed through the
zmq IQ plane (radio/zmq_channel.py: sealed senders, radio/iq_seal.py; memfd staging); the channel emulator applies
the loopback channel block (per-link gain h_i and the round's seeded multipath FIR, the receiver's CFO,
phase noise and delay, thermal noise, the jammer through h_cj) and pushes the sum on; the receiver
demodulates it with phy/ofdm.py ``demodulate``, unpack(y) / alpha_u.

    client i:  subcarrier stream -> OFDM transmitter (alpha_ik) -> push_sink        (OfdmPlane.push_client)
    jammer:    alpha_cj CN(0, 2) on the payload slots -> OFDM transmitter -> push_sink (push_jammer)
    channel:   captured streams -> file_source x (K+1) -> LoopbackChannel -> push_sink (push_channel)
    receiver:  capture -> phy/ofdm.demodulate -> unpack / alpha_u                    (OfdmPlane.receive)

Every stream of a round has ``OfdmFrame.n_samples`` samples, so sample k of every sender lands on sample
k of the sum, as in the loopback's single flowgraph: with the round generator's draws (``secret=False``:
the jammer's CN(0, 2) first, then the seeds of the thermal and phase noise, the loopback's order) the
in-process air returns the loopback air's aggregate. On the zmq airs (``secret_noise``) the jammer's draws
and the channel's noise seeds come from OS entropy where they are used (noise_source.py).

The frame depends on the round's data carriers (power/ofdm_plan.py: a carrier every sender truncates is
skipped), so each node is told them (net/messages.py ``ofdm_carriers``); client i computes its own
alpha_ik from its own decision (power/ofdm_plan.plan_subcarriers), the server sends only the shared
pre-equalised reference design (``ofdm_reference`` for the attempt's senders)."""
from __future__ import annotations

import time

import numpy as np
from gnuradio import blocks, gr

from otafl_sdr.channel.ofdm_sim import delay_extent, round_firs
from otafl_sdr.errors import AirError
from otafl_sdr.noise_source import entropy_rng, entropy_seed
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.ofdm_burst import OfdmFrame, client_stream, jammer_draws, jammer_stream, ofdm_frame
from otafl_sdr.phy.packing import symbols_for, unpack_reals
from otafl_sdr.transmission import Reception
from otafl_sdr.radio.burst_blocks import burst_source
from otafl_sdr.radio.loopback_channel import LoopbackChannel
from otafl_sdr.radio.ofdm_tx import carrier_scale, ofdm_transmitter
from otafl_sdr.radio.zmq_channel import Capture, Pusher, capture_one, push_stream, release, stage_rows

C64 = gr.sizeof_gr_complex
MIN_TRACK_PHASE_NOISE = 1e-6     # rad/sqrt(sample): the loopback OFDM receiver's floor


class OfdmPlane:
    """One round's OFDM geometry on the zmq IQ plane (module doc): ``frame`` (phy/ofdm_burst.OfdmFrame) for
    K clients, ``dim`` reals and the round's data ``carriers``; builders of every pusher and the receiver."""

    def __init__(self, cfg, clients: int, dim: int, carriers):
        self.cfg = cfg
        self.K, self.dim = int(clients), int(dim)
        self.lay = lay = OfdmLayout.from_phy(cfg.phy)
        self.extent = delay_extent(cfg)
        self.backoff = max(0, (lay.cp - self.extent) // 2)
        self.frame: OfdmFrame = ofdm_frame(lay, self.dim, carriers, self.extent + 1, int(cfg.loopback.rx_delay))
        self.n_samples = self.frame.n_samples

    def _sender(self, name: str, stream: np.ndarray, scale: np.ndarray, endpoint: str, tap: bool) -> Pusher:
        tb = gr.top_block(name)
        src = burst_source(np.asarray(stream).reshape(-1))
        return push_stream(tb, ofdm_transmitter(tb, src, self.lay, carrier_scale(self.lay, scale)), endpoint,
                           self.n_samples, tap)

    def push_client(self, i: int, stream: np.ndarray, alpha_row: np.ndarray, endpoint: str, tap: bool = False) -> Pusher:
        """Client i's transmitter: its subcarrier stream (``client_stream``) x alpha_ik -> push_sink."""
        return self._sender(f"otafl_zmq_ofdm_client_{int(i)}", stream, np.asarray(alpha_row, np.complex128),
                            endpoint, tap)

    def push_jammer(self, stream: np.ndarray, endpoint: str, tap: bool = False) -> Pusher:
        """The jammer's transmitter: its stream (``jammer_stream``) -> push_sink."""
        return self._sender("otafl_zmq_ofdm_jammer", stream, np.ones(self.lay.used), endpoint, tap)

    def push_channel(self, round_index: int, streams: np.ndarray, jammer: np.ndarray | None, h: np.ndarray, h_cj: complex,
                     sigma_c2: float, noise_seed: int, phase_seed: int, endpoint: str, tap: bool = False) -> Pusher:
        """The channel emulator: (K, n) captured client streams (zero rows: silent or missing), the jammer's
        (n,) or None -> LoopbackChannel (h_i, round ``round_index``'s multipath FIR, receiver impairments, AWGN) ->
        push_sink."""
        K, n = self.K, self.n_samples
        staging = stage_rows(streams, jammer, K, n)
        try:
            lb = self.cfg.loopback
            fir = round_firs(self.cfg, round_index, K)
            tb = gr.top_block("otafl_zmq_ofdm_channel")
            ch = LoopbackChannel(K, h=np.asarray(h, np.complex128), rx_cfo=lb.rx_cfo, rx_delay=lb.rx_delay,
                                 rx_phase_noise=lb.rx_phase_noise, h_cj=h_cj if jammer is not None else 0.0,
                                 sigma_c2=float(sigma_c2), noise_seed=int(noise_seed), phase_seed=int(phase_seed),
                                 fir_len=fir.shape[1] if fir.shape[1] > 1 else 0)
            if fir.shape[1] > 1:
                ch.set_taps(fir)
            for k in range(K + 1):
                tb.connect(blocks.file_source(C64, staging.path, False, k * n, n), (ch, k))
            pusher = push_stream(tb, ch, endpoint, n, tap)
        except BaseException:
            staging.close()
            raise
        pusher.staging = staging
        return pusher

    @property
    def phase_noise(self) -> float:
        """rad/sqrt(sample) the receiver's phase tracker assumes (the loopback OFDM receiver's)."""
        return max(float(self.cfg.loopback.rx_phase_noise), MIN_TRACK_PHASE_NOISE)

    @property
    def channel_uses(self) -> int:
        return self.frame.burst_samples

    def receive(self, y: np.ndarray, ref_amp: np.ndarray, alpha_u: float):
        """The receiver: (aggregate (dim,) or None, reason, info) from the captured samples ``y``."""
        lay, fr = self.lay, self.frame
        need = fr.search + lay.frame_symbols(fr.n_ofdm) * lay.symbol_len
        if y is None or len(y) < need:
            return None, f"OFDM capture of {0 if y is None else len(y)} samples, fewer than one burst window ({need})", {}
        res = demodulate(y, lay, symbols_for(self.dim), fr.carriers, fr.n_ofdm, np.asarray(ref_amp, np.complex128),
                         search=fr.search, backoff=self.backoff, smoothing=self.cfg.phy.ofdm_smoothing,
                         phase_noise=self.phase_noise)
        info = {"waveform": "ofdm", "ofdm_symbols": fr.n_ofdm, "data_carriers": int(len(fr.carriers)),
                "timing": res.timing, "rho": res.rho}
        if not res.ok:
            return None, res.reason, info
        return unpack_reals(res.symbols, self.dim) / float(alpha_u), "", info


def sender_draws(frame: OfdmFrame, rng: np.random.Generator, jammer: bool, secret: bool) -> dict:
    """The round's noise, in the loopback OFDM round's order from ``rng`` (jammer draws if it sends, then
    the thermal and phase noise seeds); ``secret``: every one from OS entropy instead."""
    jam = jammer_draws(frame, entropy_rng() if secret else rng) if jammer else None
    seeds = rng.integers(1, 2**31 - 1, 2)
    if secret:
        seeds = [entropy_seed(), entropy_seed()]
    return {"jammer": jam, "noise_seed": int(seeds[0]), "phase_seed": int(seeds[1])}


def ofdm_transmit(air, plan, rng: np.random.Generator, endpoint) -> Reception:
    """The in-process zmq air's OFDM round (``ZmqAir.transmit`` hands it the plan; ``air``: its timeout_s,
    secret_noise, cfg, name); ``endpoint()``: a fresh sealed push endpoint."""
    t0 = time.perf_counter()
    od = plan.extra["ofdm"]
    K, d = plan.clients, plan.dim
    plane = OfdmPlane(air.cfg, K, d, od["carriers"])
    fr = plane.frame
    alpha = np.asarray(od["alpha"], np.complex128)
    ref = np.asarray(od["ref"], np.complex128)
    active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    draws = sender_draws(fr, rng, plan.alpha_cj > 0, air.secret_noise)
    deadline = time.time() + air.timeout_s
    pushers = {}
    try:
        for i in np.flatnonzero(active):
            pushers[f"client-{i}"] = plane.push_client(int(i), client_stream(fr, plan.payload[i], alpha[i], ref[i]),
                                                       alpha[i], endpoint())
        if plan.alpha_cj > 0:
            pushers["jammer"] = plane.push_jammer(jammer_stream(fr, plan.alpha_cj, draws["jammer"]), endpoint())
        got = Capture({n: p.reach for n, p in pushers.items()}, plane.n_samples).run(deadline)
        missing = [n for n, x in got.items() if x is None]
        if missing:
            raise AirError(f"zmq air: no samples from {', '.join(missing)} within {air.timeout_s:g} s")
        streams = np.zeros((K, plane.n_samples), dtype=np.complex64)
        for i in np.flatnonzero(active):
            streams[i] = got[f"client-{i}"]
        out = pushers["channel"] = plane.push_channel(plan.round, streams, got.get("jammer"),
                                                      np.where(active, plan.h, 0.0), plan.h_cj,
                                                      plan.extra.get("air_sigma_c2", plan.sigma_c2),
                                                      draws["noise_seed"], draws["phase_seed"], endpoint())
        y = capture_one(out.reach, plane.n_samples, deadline)
    finally:
        for p in pushers.values():
            release(p)
    if y is None:
        raise AirError(f"zmq air: the receiver got no burst within {air.timeout_s:g} s")
    ref_amp = np.asarray(od["ref_amp"], np.complex128)
    agg, reason, extra = plane.receive(y, ref_amp, plan.alpha_u)
    extra["overhead"] = 1.0 - symbols_for(d) / fr.burst_samples
    if air.cfg.air.record_iq and extra.get("rho", 0.0) > 0:      # the burst the receiver found, for SigMF
        extra.update(ofdm_recording(air.cfg, plan, plane, y, ref_amp, extra["timing"], air.name,
                                    "GNU Radio ZMQ blocks (in process, OFDM)"))
    uses = plane.channel_uses
    if agg is None:
        return Reception(None, ok=False, reason=reason, channel_uses=uses, wall_s=time.perf_counter() - t0, extra=extra)
    return Reception(agg, ok=True, channel_uses=uses, wall_s=time.perf_counter() - t0, extra=extra)


def ofdm_recording(cfg, plan, plane: OfdmPlane, y: np.ndarray, ref_amp: np.ndarray, timing: int, air: str,
                   hw: str) -> dict:
    """{"iq", "iq_meta"} for SigMF (radio/recording.py): every sample the receiver's timing search and
    FFT windows read (from the capture's start), with the receiver's settings so that replay repeats it;
    ``timing`` where the annotations put the first training prefix (the receiver's, or the nominal one)."""
    from otafl_sdr.radio.recording import ofdm_round_meta
    lay, fr = plane.lay, plane.frame
    need = fr.search + lay.frame_symbols(fr.n_ofdm) * lay.symbol_len
    receiver = {"search": fr.search, "backoff": plane.backoff, "phase_noise": plane.phase_noise}
    return {"iq": np.asarray(np.asarray(y)[:need], dtype=np.complex64),
            "iq_meta": ofdm_round_meta(cfg, plan, lay, fr.n_ofdm, fr.carriers, int(timing), sample_rate=float(cfg.uhd.rate),
                                       ref_amplitude=ref_amp, air=air, hw=hw, receiver=receiver)}
