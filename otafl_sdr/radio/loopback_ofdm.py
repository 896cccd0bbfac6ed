"""The loopback air's OFDM round (``phy.waveform = "ofdm"``, issue 26 item 2): every client's OFDM burst is
built by gr-digital's OFDM blocks and carried through the loopback channel (radio/loopback_channel.py: the
per-link multipath FIR, the receiver's CFO / phase noise / delay, thermal noise, the jammer), then
demodulated by phy/ofdm.py.

One top block per round (a ~0.1 s build; every block then starts from its initial state):

    file_source[i] -> stream_to_tagged_stream -> ofdm_carrier_allocator_cvc -> multiply_const_vcc(alpha_i. / sqrt N)
        -> fft_vcc (inverse, shifted) -> ofdm_cyclic_prefixer --> LoopbackChannel input i   (i = 0..K-1, jammer K)

- ``ofdm_carrier_allocator_cvc`` maps each client's stream of subcarrier symbols (training, payload and comb
  pilots of every OFDM symbol, in the layout's carrier order; phy/ofdm.py ``OfdmLayout.grid``) onto the
  occupied subcarriers, DC and guard band zero. Its own pilot and sync-word inputs are left empty: both are
  constructor constants, while here the reference is pre-equalised per client, per subcarrier and per
  round (c / H_ik), so it travels in the stream like the payload.
- ``multiply_const_vcc`` is the per-subcarrier power control: client i's alpha_ik (power/ofdm_plan.py) on
  every subcarrier, times 1 / sqrt(N) so that GNU Radio's unnormalised inverse ``fft_vcc`` is unitary (the
  reference in the stream is divided by alpha_ik, so it leaves the client as c / H_ik).
- ``ofdm_cyclic_prefixer`` adds the prefix (no rolloff: the analog payload wants no windowing error).

Not used: ``ofdm_chanest_vcvc`` and ``ofdm_frame_equalizer_vcvc`` take their sync words / pilot values as
constructor constants and (``ofdm_equalizer_simpledfe``) feed decisions back from a constellation; the
superposed analog reference changes amplitude every round (A_k = c x senders on k) and an analog payload
has no constellation to decide on, so the receiver (timing, FFT, LS estimate, phase tracking; phy/ofdm.py
``demodulate``) is numpy, shared with the sim air's model. ``ofdm_serializer_vcc`` is replaced by the
layout's own inverse map (``OfdmLayout.payload``), which skips the round's truncated carriers.

The jammer sends alpha_cj CN(0, 2) on every payload slot (data subcarriers of the payload symbols), zero on
the reference, through h_cj. The per-client offsets: loopback.client_cfo_max / client_delay_max are
pre-compensated and cancel, the residuals (residual_cfo, residual_delay, residual_phase) go into the
channel's per-client rotators, delays and gains (radio/ofdm_front_ends.residual_offsets); client_phase is
part of h and pre-compensated, so it cancels. The radios' front-end impairments (channel.*,
not Doppler) go per client, jammer and receiver into the loopback channel (radio/ofdm_front_ends.py; the
sim's model and the booking: channel/ofdm_impairments.py)."""
from __future__ import annotations

import time

import numpy as np
from gnuradio import gr

from otafl_sdr.channel.ofdm_impairments import tracker_phase_noise
from otafl_sdr.channel.ofdm_sim import delay_extent, round_firs
from otafl_sdr.errors import AirError
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.ofdm_burst import client_stream, jammer_draws, jammer_stream, ofdm_frame
from otafl_sdr.phy.packing import symbols_for, unpack_reals
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.burst_blocks import Capture, StagedBursts
from otafl_sdr.radio.loopback_channel import LoopbackChannel
from otafl_sdr.radio.ofdm_front_ends import ofdm_front_ends, residual_offsets
from otafl_sdr.radio.ofdm_tx import carrier_scale, ofdm_transmitter

MIN_TRACK_PHASE_NOISE = 1e-6


class LoopbackOfdm:
    """The OFDM round of the loopback air (``LoopbackAir.transmit`` hands it the plan)."""

    def __init__(self, cfg, probe: bool = False):
        self.cfg = cfg
        self.lay = OfdmLayout.from_phy(cfg.phy)
        self.lb = cfg.loopback
        self.probe = bool(probe)
        self.extent = delay_extent(cfg)
        self.backoff = max(0, (self.lay.cp - self.extent) // 2)

    def _chain(self, tb, src, scale: np.ndarray, channel, port: int) -> None:
        tb.connect(ofdm_transmitter(tb, src, self.lay, scale), (channel, port))

    def _shifted(self, per_carrier: np.ndarray) -> np.ndarray:
        return carrier_scale(self.lay, per_carrier)

    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        t0 = time.perf_counter()
        cfg, lay, lb = self.cfg, self.lay, self.lb
        od = plan.extra.get("ofdm")
        if od is None:
            raise AirError("an OFDM round needs its per-subcarrier plan (power/ofdm_plan.plan_ofdm)")
        K, d = plan.clients, plan.dim
        n = symbols_for(d)
        carriers = np.asarray(od["carriers"], np.int64)
        n_ofdm = int(od["n_ofdm"])
        alpha = np.asarray(od["alpha"], np.complex128)                   # (K, U)
        ref = np.asarray(od["ref"], np.complex128)
        A = np.asarray(od["ref_amp"], np.complex128)
        active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)

        L = lay.symbol_len
        fir = round_firs(cfg, plan.round, K)
        fes, pad, advance = ofdm_front_ends(cfg, plan)            # channel.* impairments (channel/ofdm_impairments.py)
        off = residual_offsets(cfg, K, rng)              # loopback.client_* / residual_*: the residuals
        frame = ofdm_frame(lay, d, carriers, fir.shape[1] + pad + off["span"], int(lb.rx_delay))      # phy/ofdm_burst.py
        lead, S = frame.lead, frame.symbols
        grids = np.zeros((K + 1, S, lay.used), dtype=np.complex128)
        for i in np.flatnonzero(active):
            grids[i] = client_stream(frame, plan.payload[i], alpha[i], ref[i])
        if plan.alpha_cj > 0:                                             # the jammer: payload slots only
            grids[K] = jammer_stream(frame, plan.alpha_cj, jammer_draws(frame, rng))
        seeds = rng.integers(1, 2**31 - 1, 2)
        n_items = S * lay.used
        staged = StagedBursts(K + 1, n_items)
        capture = Capture()
        try:
            staged.stage(grids.reshape(K + 1, n_items))
            tb = gr.top_block("otafl_loopback_ofdm")
            channel = LoopbackChannel(K, h=np.where(active, plan.h * off["phase"], 0.0), client_cfo=off["cfo"],
                                      client_delay=off["delay"], rx_cfo=lb.rx_cfo, rx_delay=lb.rx_delay,
                                      rx_phase_noise=lb.rx_phase_noise, h_cj=plan.h_cj,
                                      sigma_c2=plan.extra.get("air_sigma_c2", plan.sigma_c2),
                                      noise_seed=int(seeds[0]), phase_seed=int(seeds[1]),
                                      probe_inputs=self.probe, fir_len=fir.shape[1] if fir.shape[1] > 1 else 0,
                                      front_ends=fes)
            if fir.shape[1] > 1:
                channel.set_taps(fir)
            for j, src in enumerate(staged.sources):
                scale = alpha[j] if j < K else np.ones(lay.used)
                self._chain(tb, src, self._shifted(scale), channel, j)
            tb.connect(channel, capture.sink)
            t_fg = time.perf_counter()
            tb.run()
            t_fg = time.perf_counter() - t_fg
            y = capture.samples()
            energy = channel.input_energy() if self.probe else None
        finally:
            staged.close()
            capture.close()
        search = lead * L + int(lb.rx_delay) + off["first"] + L - 1 - advance   # <= L - 1 past the earliest start
        need = search + lay.frame_symbols(n_ofdm) * L
        if len(y) < need:
            raise AirError(f"loopback OFDM capture holds {len(y)} samples, fewer than one burst window ({need})")
        phase_noise = tracker_phase_noise(cfg)           # the receiver's and the clients' walks
        res = demodulate(y, lay, n, carriers, n_ofdm, A, search=search, backoff=self.backoff,
                         smoothing=cfg.phy.ofdm_smoothing, phase_noise=phase_noise)
        extra = {"waveform": "ofdm", "ofdm_symbols": n_ofdm, "data_carriers": int(len(carriers)),
                 "flowgraph_s": t_fg, "timing": res.timing, "rho": res.rho, "ref_senders": int(np.count_nonzero(
                     np.any(ref != 0, axis=1))), "overhead": 1.0 - n / lay.burst_samples(n_ofdm)}
        if energy is not None:
            extra["channel_input_energy"] = energy
            extra["capture"] = y                          # tests: the capture-level sensitivity
        if cfg.air.record_iq:
            from otafl_sdr.radio.recording import ofdm_round_meta
            start = max(res.timing - lay.guard, 0)        # the burst, and all the timing search correlated
            end = start + max(lay.burst_samples(n_ofdm), search - start + lay.frame_symbols(n_ofdm) * L)
            extra["iq"] = np.asarray(y[start:end], dtype=np.complex64)
            extra["iq_meta"] = ofdm_round_meta(cfg, plan, lay, n_ofdm, carriers, res.timing - start,
                                               sample_rate=float(cfg.uhd.rate), ref_amplitude=A,
                                               air="loopback", hw="GNU Radio loopback channel (OFDM)",
                                               receiver={"search": search - start, "backoff": self.backoff,
                                                         "phase_noise": phase_noise})
        uses = lay.burst_samples(n_ofdm)
        if not res.ok:
            return Reception(aggregate=None, ok=False, reason=res.reason, channel_uses=uses,
                             wall_s=time.perf_counter() - t0, extra=extra)
        return Reception(aggregate=unpack_reals(res.symbols, d) / plan.alpha_u, ok=True, channel_uses=uses,
                         wall_s=time.perf_counter() - t0, extra=extra)
