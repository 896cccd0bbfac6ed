"""The `loopback` air: every round really goes through GNU Radio flowgraphs, with the loopback channel
block standing in for the air (issue 3).

One top block per run (rebuilt if K or d changes; every stateful block is reset each round):

    StagedBursts[i] -> ClientTx[i] --\
    ...                               >-- LoopbackChannel --> Capture --> Modem.demodulate
    JammerTx ------------------------/

Per round (``transmit``): client i (mode 'update' or 'noise', alpha_i != 0; never silenced by its data) frames
s(payload_i) and its ClientTx scales the burst by alpha_i (x_i = alpha_i s(payload_i), eq. 10 of paper
000), the reference inside the frame divided by alpha_i so that it goes out as c / h_i
(:mod:`otafl_sdr.phy.reference`; h_i known from ``plan.extra['csi']`` if given, else the true h:
"perfect CSI"). Each client pre-compensates what it knows of its own link: gain and phase through
alpha_i (which inverts h_i), its oscillator phase and carrier offset (scale, rotator) and its
propagation delay (it starts that much earlier). The channel applies the true values. The receiver
corrects only what is common to the sum: its timing, CFO and phase noise (tracked on the reference).
The aggregate is unpack(y) / alpha_u.

Every round's streams are a whole number of STREAM_QUANTUM samples (see ``_prepare``).

Per-client offsets are drawn once per run from ``seeding.rng(seed, "loopback-offsets")``: carrier
offsets uniform in +-client_cfo_max, delays uniform in 0..client_delay_max, oscillator phases uniform
(client_phase), residual (uncompensated) carrier offsets uniform in +-residual_cfo and residual delays
uniform in -residual_delay..residual_delay. Per round, from the round's generator: residual phase
errors ~ N(0, residual_phase^2) and the seeds of the thermal, phase and jammer noise sources."""
from __future__ import annotations

import math
import time

import numpy as np
from gnuradio import gr

from otafl_sdr import seeding
from otafl_sdr.airs import Air
from otafl_sdr.errors import AirError, ConfigError
from otafl_sdr.phy.modem import Modem
from otafl_sdr.phy.packing import symbols_for, unpack_reals
from otafl_sdr.phy.reference import reference_budget, reference_gains
from otafl_sdr.phy.reference_design import allowance
from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.burst_blocks import Capture, ClientTx, JammerTx, StagedBursts
from otafl_sdr.radio.loopback_channel import LoopbackChannel

STREAM_QUANTUM = 256          # samples: the length of every round's streams is a multiple of this
MIN_TRACK_PHASE_NOISE = 1e-6   # rad/sqrt(sample): floor of the phase noise the receiver's tracker assumes


def check_loopback(cfg) -> None:
    """Range checks of the [loopback] section (ConfigError names the key)."""
    lb = cfg.loopback
    for key in ("client_delay_max", "rx_delay", "residual_delay"):
        if getattr(lb, key) < 0:
            raise ConfigError(f"loopback.{key}", f"must be >= 0 samples, got {getattr(lb, key)}")
    for key in ("client_cfo_max", "residual_cfo", "rx_cfo"):
        if not abs(getattr(lb, key)) < 0.5:
            raise ConfigError(f"loopback.{key}", f"must be in (-0.5, 0.5) cycles/sample, got {getattr(lb, key)}")
    for key in ("rx_phase_noise", "residual_phase"):
        if not getattr(lb, key) >= 0:
            raise ConfigError(f"loopback.{key}", f"must be >= 0 rad, got {getattr(lb, key)}")
    if lb.residual_delay >= cfg.phy.guard:
        raise ConfigError("loopback.residual_delay", f"must be < phy.guard ({cfg.phy.guard}), got {lb.residual_delay}")
    if cfg.phy.guard < 0:
        raise ConfigError("phy.guard", f"must be >= 0, got {cfg.phy.guard}")


class LoopbackAir(Air):
    """GNU Radio loopback air. ``probe=True`` also measures each channel input's energy per round
    (``Reception.extra['channel_input_energy']``, (K+1,) with the jammer last)."""

    name = "loopback"

    def __init__(self, cfg, probe: bool = False):
        super().__init__(cfg)
        check_loopback(cfg)
        self.lb = cfg.loopback
        self.probe = bool(probe)
        walk = np.hypot(float(self.lb.rx_phase_noise), np.sqrt(2) * float(cfg.channel.phase_noise))  # + channel.*
        self.modem = Modem(cfg.phy, phase_noise=max(float(walk), MIN_TRACK_PHASE_NOISE))
        self.multipath = Multipath.from_config(cfg)    # channel.multipath: per-link FIR, the sim air's seeded taps
        self._key = None
        self._tb = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Nothing to acquire: the staging files are made at the first round (they need K and d)."""

    def close(self) -> None:
        """Release the staging files and the flowgraph now: its blocks' buffers are SysV shared-memory segments
        (kernel.shmmni bounds them machine-wide), which an air left in a reference cycle would otherwise hold
        until Python's next full garbage collection."""
        if self._key is not None:
            self._staged.close()
            self._mask.close()
            self._capture.close()
            self._key = None
        self._tb, self._tx, self._channel, self._jammer, self._fe = None, [], None, None, None

    def delivered_jammer_gain(self) -> float | None:
        """The calibration file's jammer step (lower 3-sigma bound), where it holds for every round: a
        calibrated run (air.csi = calibrated) whose jammer path is static (channel.jammer_fading = 'awgn');
        with a fading jammer path a one-off measurement says nothing of a round's draw (None)."""
        c = self.cfg
        if not (c.power.jammer and c.air.csi == "calibrated" and c.channel.jammer_fading == "awgn"):
            return None
        if not hasattr(self, "_jammer_gain"):
            from otafl_sdr.calibration.csi import delivered_jammer_gain
            self._jammer_gain = delivered_jammer_gain(c.calibration.file)
        return self._jammer_gain

    # ------------------------------------------------------------------ offsets (once per run)
    def offsets(self, K: int) -> dict:
        """The run's true per-client offsets (seeded from run.seed): cfo, delay, phase, residuals."""
        return self._offsets(K)

    def geometry(self, K: int, n_sym: int) -> dict:
        """The per-run stream geometry the zmq air shares (its processes must build the same streams):
        off (offsets, calibrated residuals when air.csi = calibrated), nominal, lead_sym, len_sym,
        start (samples each client waits), tx_cfo (offset each client pre-compensates)."""
        self._prepare(K, n_sym)
        try:
            return {"off": self._off, "nominal": int(self._nominal), "lead_sym": int(self._lead_sym),
                    "len_sym": int(self._len_sym), "start": np.asarray(self._start),
                    "tx_cfo": np.asarray(self._tx_cfo)}
        finally:
            self.close()

    def _offsets(self, K: int) -> dict:
        lb = self.lb
        r = seeding.rng(self.cfg.run.seed, "loopback-offsets")
        cfo = r.uniform(-1, 1, K) * lb.client_cfo_max
        delay = r.integers(0, lb.client_delay_max + 1, K)
        phase = r.uniform(0, 2 * np.pi, K) if lb.client_phase else np.zeros(K)
        res_cfo = r.uniform(-1, 1, K) * lb.residual_cfo
        res_delay = r.integers(-lb.residual_delay, lb.residual_delay + 1, K)
        return dict(cfo=cfo, delay=delay, phase=phase, res_cfo=res_cfo, res_delay=res_delay)

    # ------------------------------------------------------------------ per run: sizes and staging
    def _prepare(self, K: int, n_sym: int) -> None:
        self.close()
        lb, m = self.lb, self.modem
        sps = m.sps
        off = self._offsets(K)
        if self.cfg.air.csi == "calibrated":    # clients know the calibrated offsets (issue 5), not the true ones
            from otafl_sdr.calibration.csi import known_offsets
            cfo_k, delay_k = known_offsets(self.cfg, K)
            off = dict(off, res_cfo=off["cfo"] - cfo_k, res_delay=off["delay"] - delay_k)
        Dmax, R = int(lb.client_delay_max), int(lb.residual_delay)
        known = off["delay"] - off["res_delay"]                # the delay each client compensates
        self._nominal = int(max(Dmax + R, np.max(known)))      # arrival offset of a compensated burst
        late = int(max(R, np.max(off["res_delay"])))           # latest uncompensated arrival
        lay = m.layout(n_sym)
        self._lead_sym = -(-m.guard // sps)                    # silent symbols before the frame
        tail = m.ntaps + self._nominal + late + int(lb.rx_delay) + m.guard + 2 * (self.multipath.length - 1)
        # GNU Radio's aligned adders drop a ragged tail (< 8 samples) when one input never ends (the
        # noise sources): keep every round's stream a whole number of STREAM_QUANTUM samples
        need = (self._lead_sym + lay.n_frame) * sps + tail
        q = math.lcm(STREAM_QUANTUM, sps)
        self._len_sym = (-(-need // q) * q) // sps
        self._off = off
        self._start = self._nominal - known                  # wait = max delay - known delay (>= 0)
        self._tx_cfo = off["cfo"] - off["res_cfo"]                         # what each client knows
        self._staged = StagedBursts(K, self._len_sym)
        self._streams = np.zeros((K, self._len_sym), dtype=np.complex64)
        mask = np.zeros((1, self._len_sym), dtype=np.complex64)
        mask[0, self._lead_sym:self._lead_sym + lay.n_frame] = m.jammer_mask(n_sym)
        self._mask = StagedBursts(1, self._len_sym)
        self._mask.stage(mask)
        self._capture = Capture()
        self._key = (K, n_sym)
        self._flowgraph(K)

    def _flowgraph(self, K: int) -> None:
        """The run's top block (built once; ~0.1 s for 50 clients). Each round resets every stateful
        block (rotators, phase-noise walk, noise sources; GNU Radio zeroes the buffers at each start),
        so a round depends only on its plan and generator: a resumed run repeats it exactly."""
        m, lb, off = self.modem, self.lb, self._off
        tb = gr.top_block("otafl_loopback")
        with_cfo = bool(np.any(self._tx_cfo != 0))
        with_delay = bool(np.any(self._start != 0))
        sources = self._staged.make_sources()
        self._jammer = JammerTx(m.taps, m.sps, self._mask.make_sources()[0], 0.0, 1, start=self._nominal)
        self._channel = LoopbackChannel(
            K, client_cfo=off["cfo"], client_delay=off["delay"], rx_cfo=lb.rx_cfo, rx_delay=lb.rx_delay,
            rx_phase_noise=lb.rx_phase_noise, sigma_c2=0.0, noise_seed=1, phase_seed=1,
            probe_inputs=self.probe, fir_len=2 * self.multipath.length - 1 if self.multipath.enabled else 0,
            front_ends=self._front_ends(K))
        self._tx = []
        for i in range(K):
            tx = ClientTx(m.taps, m.sps, 0.0, self._tx_cfo[i], int(self._start[i]), with_cfo, with_delay)
            tb.connect(sources[i], tx, (self._channel, i))
            self._tx.append(tx)
        tb.connect(self._jammer, (self._channel, K))
        tb.connect(self._channel, self._capture.sink)
        self._tb = tb

    def _front_ends(self, K: int):
        """The radios' front ends (channel.* impairments, channel/front_end.py) or None when all are off."""
        from otafl_sdr.channel.front_end import FrontEnd, doppler_window
        fe = FrontEnd.from_config(self.cfg)
        self._fe = None
        if fe.enabled:
            if fe.doppler and self._len_sym * self.modem.sps > doppler_window(self.cfg, self._key[1]):
                raise AirError("the loopback stream is longer than channel.doppler_hz's bounded window")
            from otafl_sdr.radio.loopback_impairments import FrontEnds
            self._fe = FrontEnds(fe, self.cfg.run.seed, K, cfg=self.cfg)   # Doppler paths over the booked window
        return self._fe

    # ------------------------------------------------------------------ one round
    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        if "ofdm" in plan.extra:               # phy.waveform = "ofdm": gr-digital's OFDM blocks (radio/loopback_ofdm.py)
            from otafl_sdr.radio.loopback_ofdm import LoopbackOfdm
            return LoopbackOfdm(self.cfg, self.probe).transmit(plan, rng)
        t0 = time.perf_counter()
        K, d = plan.clients, plan.dim
        n_sym = symbols_for(d)
        if self._key != (K, n_sym):
            self._prepare(K, n_sym)
        m, lay = self.modem, self.modem.layout(n_sym)

        # never silenced by its data: a row still holding NaN/inf (defence in depth; the round pipeline and
        # the trainer already make it finite) is sent as zeros at the client's planned power
        finite = np.all(np.isfinite(plan.payload), axis=1)
        payload = plan.payload if finite.all() else np.where(finite[:, None], plan.payload, 0.0)
        active = (np.array([md != "silent" for md in plan.mode]) & (plan.alpha != 0))
        h_known = np.asarray(plan.extra.get("csi", plan.h), dtype=np.complex128)
        ref_gain, ref_amp = reference_gains(      # planned allowance only (phy/reference_design.py)
            h_known, reference_budget(allowance(plan, active), lay.reference_energy, n_sym), lay.reference_energy)

        # frames at the symbol rate: pack(payload_i) with the reference / alpha_i; each ClientTx then
        # applies alpha_i (its power scaling, eq. 10) natively. Silent rows stay zero.
        streams = self._streams
        frames = streams[:, self._lead_sym:self._lead_sym + lay.n_frame]
        safe_alpha = np.where(active, plan.alpha, 1.0)
        for i in range(K):
            if active[i]:
                lay.write_reals(frames[i], payload[i], ref_gain[i] / safe_alpha[i])
            else:
                frames[i] = 0
        self._staged.stage(streams)

        # clients' power scaling and phase pre-compensation (+ residual error), true channel, jammer
        res_phase = rng.normal(0.0, self.lb.residual_phase, K) if self.lb.residual_phase else np.zeros(K)
        scale = np.where(active, plan.alpha * np.exp(1j * (res_phase - self._off["phase"])), 0.0)
        seeds = rng.integers(1, 2**31 - 1, 3)
        t_fg = time.perf_counter()
        for i, tx in enumerate(self._tx):
            tx.set_scale(scale[i])
            tx.reset_state()
        self._channel.set_gains(plan.h * np.exp(1j * self._off["phase"]))
        if self.multipath.enabled:
            mp = self.multipath
            self._channel.set_taps(mp.link_channels(self.cfg.run.seed, plan.round, K, self.cfg.phy))
        self._channel.set_jammer_gain(plan.h_cj)
        if self._fe is not None:                      # channel.* impairments: this round's A_sat, DC, seeds, Doppler
            self._fe.round(plan.round, np.where(active, plan.alpha, 0.0), plan.alpha_cj, n_sym, m.sps)
        self._channel.set_sigma_c2(plan.extra.get("air_sigma_c2", plan.sigma_c2), int(seeds[0]))
        self._channel.reset_state(int(seeds[0]), int(seeds[1]))
        self._jammer.set_alpha(plan.alpha_cj)
        self._jammer.reseed(int(seeds[2]))
        self._mask.rewind()
        self._capture.reset()
        self._tb.run()
        t_fg = time.perf_counter() - t_fg
        y = self._capture.samples()
        offset = self._lead_sym * m.sps + self._nominal - m.guard        # nominal burst start -> guard
        if len(y) < offset + m.burst_samples(n_sym):
            raise AirError(f"loopback capture holds {len(y)} samples, fewer than one burst window "
                           f"({offset + m.burst_samples(n_sym)})")
        res = m.demodulate(y[offset:], n_sym, ref_amp)
        extra = {"ref_amplitude": ref_amp, "ref_senders": int(np.count_nonzero(ref_gain)),
                 "flowgraph_s": t_fg, "timing": res.timing, "timing_frac": res.timing_frac, "cfo": res.cfo,
                 "phase": res.phase, "gain": [float(np.real(res.gain)), float(np.imag(res.gain))],
                 "nmse_pilots": res.nmse_pilots, "overhead": m.overhead(n_sym)}
        if self.probe:
            extra["channel_input_energy"] = self._channel.input_energy()
        if self.cfg.air.record_iq:           # the exact samples demodulated, for `otafl-sdr replay`
            from otafl_sdr.radio.recording import round_meta
            extra["iq"] = np.asarray(y[offset:], dtype=np.complex64)
            extra["iq_meta"] = round_meta(self.cfg, plan, sample_rate=float(self.cfg.uhd.rate), ref_amplitude=ref_amp,
                                          n_symbols=n_sym, modem=m, air=self.name, hw="GNU Radio loopback channel")
        uses = m.channel_uses(n_sym)
        if not res.ok:
            return Reception(aggregate=None, ok=False, reason=res.reason, channel_uses=uses,
                             wall_s=time.perf_counter() - t0, faults={}, extra=extra)
        agg = unpack_reals(res.symbols, d) / plan.alpha_u
        return Reception(aggregate=agg, ok=True, channel_uses=uses, wall_s=time.perf_counter() - t0,
                         faults={}, extra=extra)
