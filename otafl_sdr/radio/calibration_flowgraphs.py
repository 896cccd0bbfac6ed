"""Calibration links: the flowgraphs that carry the calibration procedures' transmit streams
(:mod:`otafl_sdr.calibration.procedures`) through the loopback channel or the USRPs.

* :class:`LoopbackLink`: per transmitter a staged stream (``StagedBursts``, ``blocks.file_source``) ->
  a TX-gain stage (``blocks.multiply_const_cc``, 10^((G - uhd.tx_gain)/20): the loopback's stand-in for
  a radio's TX gain) -> the :class:`~otafl_sdr.radio.loopback_channel.LoopbackChannel` the run's loopback
  air uses, with the *same* per-client offsets (carrier, delay, oscillator phase: the run seed's
  ``loopback-offsets`` draws) and the receiver's impairments and AWGN of ``channel.sigma_c2`` ->
  ``Capture``. The calibration channel h_i (and h_cj) is drawn from the configured fading with
  ``seeding.rng(seed, "calibration", "channel")`` unless given. The block's true values are known, so
  :meth:`LoopbackLink.truth` gives the ground truth the estimates are checked against.
* :class:`UhdLink`: the ``uhd`` air's radios (same discovery, settings, reference lock and time
  alignment: with no USRP it fails at ``start`` with the air's message naming ``uhd_find_devices``);
  each transmitter sends the non-zero span of its stream as one timed burst (``tx_time`` = t0 + its
  first sample / rate), the receiver captures the whole stream length from t0; any UHD fault makes
  the exchange an AirError (never used).
"""
from __future__ import annotations

import numpy as np
from gnuradio import blocks, gr

from otafl_sdr import seeding
from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.errors import AirError
from otafl_sdr.radio.burst_blocks import Capture, StagedBursts
from otafl_sdr.radio.loopback_air import LoopbackAir
from otafl_sdr.radio.loopback_channel import LoopbackChannel
from otafl_sdr.radio.uhd_air import UhdAir
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE, find_usrps
from otafl_sdr.calibration.procedures import exchange_with_retries

DELAY_SLACK = 8          # samples searched beyond the largest configured delay


class LoopbackLink:
    """K clients (+ the jammer when ``power.jammer``) -> LoopbackChannel -> capture (see module doc).

    Parameters: ``cfg`` (run config: seed, loopback offsets, channel.sigma_c2, uhd.tx_gain as the gain
    reference); ``clients`` K; optional ``h`` (K,) / ``h_cj`` calibration channel (default: drawn),
    ``sigma_c2`` (default ``channel.sigma_c2``), ``jammer`` (default ``power.jammer``), ``fir`` (K, L) a
    multipath FIR per client after its gain (default none: flat; the OFDM step's test channel)."""

    def __init__(self, cfg, clients: int, h=None, h_cj=None, sigma_c2: float | None = None,
                 jammer: bool | None = None, fir=None):
        self.cfg = cfg
        K = self.clients = int(clients)
        self.has_jammer = bool(cfg.power.jammer if jammer is None else jammer)
        self.transmitters = K + (1 if self.has_jammer else 0)
        seed = cfg.run.seed
        g = seeding.rng(seed, "calibration", "channel")
        self.h = np.asarray(BlockFading(cfg.channel.fading)(g, K) if h is None else h, dtype=np.complex128)
        if self.h.shape != (K,):
            raise ValueError(f"expected {K} channel gains, got shape {self.h.shape}")
        self.h_cj = complex(BlockFading(cfg.channel.jammer_fading)(g, 1)[0] if h_cj is None else h_cj)
        self.sigma_c2 = float(cfg.channel.sigma_c2 if sigma_c2 is None else sigma_c2)
        self.fir = None if fir is None else np.asarray(fir, dtype=np.complex128).reshape(K, -1)
        self.off = LoopbackAir(cfg).offsets(K)            # the run's loopback air draws exactly these
        lb = cfg.loopback
        self.rx_cfo, self.rx_delay = float(lb.rx_cfo), int(lb.rx_delay)
        self.gain_ref = float(cfg.uhd.tx_gain)
        self.delay_search = (-4, int(np.max(self.off["delay"], initial=0)) + self.rx_delay + DELAY_SLACK)
        self._tb = None
        self._len = 0
        self._exchanges = 0
        self._gain_db = self.gain_ref

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Nothing to acquire (the flowgraph is built at the first exchange, it needs the length)."""

    def close(self) -> None:
        if self._tb is not None:
            self._staged.close()
            self._capture.close()
            self._tb, self._channel, self._gain = None, None, []    # the flowgraph's buffers go now

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def _build(self, L: int) -> None:
        self.close()
        K, lb = self.clients, self.cfg.loopback
        seeds = seeding.rng(self.cfg.run.seed, "calibration", "build").integers(1, 2**31 - 1, 2)
        self._staged = StagedBursts(K + 1, L)          # the jammer's row stays zero without a jammer
        self._gain = [blocks.multiply_const_cc(1.0) for _ in range(K + 1)]
        self._channel = LoopbackChannel(
            K, h=self.h * np.exp(1j * self.off["phase"]), client_cfo=self.off["cfo"], client_delay=self.off["delay"],
            h_cj=self.h_cj if self.has_jammer else 0.0, rx_cfo=self.rx_cfo, rx_delay=self.rx_delay,
            rx_phase_noise=lb.rx_phase_noise, sigma_c2=self.sigma_c2, noise_seed=int(seeds[0]),
            phase_seed=int(seeds[1]), fir_len=0 if self.fir is None else self.fir.shape[1])
        if self.fir is not None:
            self._channel.set_taps(self.fir)
        self._capture = Capture()
        tb = gr.top_block("otafl_calibration_loopback")
        for t in range(K + 1):
            tb.connect(self._staged.sources[t], self._gain[t], (self._channel, t))
        tb.connect(self._channel, self._capture.sink)
        self._tb, self._len = tb, L
        self.set_tx_gain(self._gain_db)

    # ------------------------------------------------------------------ link interface
    def set_tx_gain(self, gain_db: float) -> None:
        self._gain_db = float(gain_db)
        if self._tb is not None:
            k = 10 ** ((self._gain_db - self.gain_ref) / 20)
            for b in self._gain:
                b.set_k(complex(k))

    def exchange(self, streams: np.ndarray) -> np.ndarray:
        streams = np.asarray(streams, dtype=np.complex64)
        if streams.shape[0] != self.transmitters:
            raise ValueError(f"expected {self.transmitters} transmit streams, got {streams.shape[0]}")
        L = streams.shape[1]
        if self._tb is None or L != self._len:
            self._build(L)
        full = np.zeros((self.clients + 1, L), dtype=np.complex64)
        full[:self.transmitters] = streams
        self._staged.stage(full)
        seeds = seeding.rng(self.cfg.run.seed, "calibration", "noise", self._exchanges).integers(1, 2**31 - 1, 2)
        self._channel.reset_state(int(seeds[0]), int(seeds[1]))   # rotators from phase 0, new noise
        self._capture.reset()
        self._tb.run()
        y = self._capture.samples()
        if len(y) < L:
            raise AirError(f"calibration loopback capture holds {len(y)} samples, expected {L}")
        self._exchanges += 1
        return y[:L]

    def truth(self, t: int, ref_sample: float) -> dict:
        """Ground truth of transmitter t in the last exchange: its complex gain per unit digital amplitude
        (TX-gain stage included) referred to capture sample ``ref_sample``, its total carrier offset
        (own + receiver's, cycles/sample) and its arrival delay (own + receiver's, samples).

        Every exchange starts the channel block's rotators at phase 0 (``reset_state``); the client's
        rotator sees stream sample n at its input (before its delay), the receiver's at the adder output,
        so capture sample m (after the receiver's delay D) was rotated by f_i (m - D - d_i) and
        f_rx (m - D)."""
        k = 10 ** ((self._gain_db - self.gain_ref) / 20)
        D, m = self.rx_delay, float(ref_sample)
        if self.has_jammer and t == self.clients:
            g, f, d = self.h_cj, 0.0, 0
        else:
            g = self.h[t] * np.exp(1j * self.off["phase"][t])
            f, d = float(self.off["cfo"][t]), int(self.off["delay"][t])
        n_tx = m - D - d
        n_rx = m - D
        h = k * g * np.exp(2j * np.pi * (f * n_tx + self.rx_cfo * n_rx))
        return {"h": complex(h), "cfo": f + self.rx_cfo, "delay": float(d + D)}


def set_uhd_link_geometry(link, cfg) -> None:
    """What the calibration procedures read of a uhd link (this module's UhdLink, or the testbed's nodes):
    the transmitters (clients, then the jammer), the delay search window, the reference TX gain, full scale."""
    link.clients = int(cfg.data.clients)
    link.has_jammer = bool(cfg.power.jammer)
    link.transmitters = link.clients + (1 if link.has_jammer else 0)
    link.delay_search = UhdLink.DELAY_SEARCH
    link.gain_ref = float(cfg.uhd.tx_gain)
    link.full_scale = DAC_FULL_SCALE


class UhdLink(UhdAir):
    """The uhd air's radios as a calibration link (see the module doc). ``start`` / ``close`` are the
    air's; ``exchange`` sends each transmitter's stream as one timed burst and captures the whole
    stream on the receiver."""

    DELAY_SEARCH = (-64, 128)

    def __init__(self, cfg):
        super().__init__(cfg)
        set_uhd_link_geometry(self, cfg)

    def serials(self) -> dict:
        """{'clients': [...], 'jammer': ..., 'receiver': ...}: each radio's serial as UHD reports it."""
        def serial(r) -> str:
            found = find_usrps(r.args) or [{}]
            return str(found[0].get("serial", ""))
        return {"clients": [serial(r) for r in self._clients],
                "jammer": serial(self._jammer) if self._jammer is not None else "",
                "receiver": serial(self._rx) if self._rx is not None else ""}

    def set_tx_gain(self, gain_db: float) -> None:
        """Every TX radio at its own gain (uhd.tx_gains, else uhd.tx_gain) + (gain_db - uhd.tx_gain)."""
        from otafl_sdr.calibration.tx_gains import tx_gain_for
        u = self.cfg.uhd
        for r in self._tx_radios():
            g = tx_gain_for(u, r.role, r.serial) + float(gain_db) - float(u.tx_gain)
            try:
                r.block.set_gain(g, r.port)
            except RuntimeError as e:
                raise AirError(f"calibration: {r.role} ({r.key}) rejected TX gain {gain_db:g} dB: {e}") from None

    def truth(self, t: int, ref_sample: float) -> None:
        return None

    def exchange(self, streams: np.ndarray) -> np.ndarray:
        """Each transmitter's non-zero span of its row of ``streams`` as one timed burst, the receiver
        capturing the whole length; an exchange lost to a fault (a late command, an overflow on a loaded
        host) is sent again (calibration/procedures.exchange_with_retries)."""
        from otafl_sdr.radio.uhd_events import summarise

        if self._tb is None:
            raise AirError("calibration: exchange() before start()")
        streams = np.asarray(streams, dtype=np.complex64)
        T, L = streams.shape
        radios = self._tx_radios()
        if T != len(radios):
            raise AirError(f"calibration: {T} transmit streams for {len(radios)} transmitting radios")
        rate = float(self.cfg.uhd.rate)

        def once():
            t0 = self._device_time() + float(self.cfg.uhd.start_delay)
            sends = []
            for r, x in zip(radios, streams):
                nz = np.flatnonzero(x)
                if nz.size:
                    first, last = int(nz[0]), int(nz[-1])
                    sends.append((r, x[first:last + 1], t0 + first / rate))
            samples, faults = self._capture(L, t0, sends)
            self.exchange_time = t0              # the capture's first sample, device time (calibration/phase_ref.py)
            ok, reason = summarise(faults)
            return (samples, "") if ok and len(samples) >= L else (None, reason or "short capture")
        return exchange_with_retries(once)


def make_link(cfg, air: str, clients: int | None = None):
    """The calibration link for ``air`` ('loopback' or 'uhd') and the run config."""
    K = int(cfg.data.clients if clients is None else clients)
    if air == "loopback":
        return LoopbackLink(cfg, K)
    if air == "uhd":
        return UhdLink(cfg)
    raise ValueError(f"unknown calibration air '{air}'")


def calibrate(cfg, what=None, out=None, air: str | None = None, **options):
    """``otafl-sdr calibrate``: calibration/session.run_calibration over the config's own calibration link
    for ``air`` (default: the config's, calibration/data.calibration_air), opened here and always closed."""
    from otafl_sdr.calibration.data import calibration_air
    from otafl_sdr.calibration.session import STEPS, run_calibration
    air = air or calibration_air(cfg)
    link = make_link(cfg, air, int(cfg.data.clients))
    try:
        return run_calibration(cfg, STEPS if what is None else what, out, air=air, link=link, **options)
    finally:
        link.close()
