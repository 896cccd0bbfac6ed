"""The loopback channel: the air between K client transmitters, the jammer and one receiver, as a
GNU Radio hier block of native blocks (no per-sample Python).

Inputs 0..K-1: the clients' baseband samples; input K: the jammer's. Output: what the receiver's ADC
sees. Per client i: complex gain h_i (block fading, ``blocks.multiply_const_cc``, set per round), optionally
a multipath FIR g_i (``filter.fir_filter_ccc``, the seeded taps of channel/multipath.py, set per round),
carrier offset f_i (``blocks.rotator_cc``), integer delay d_i (``blocks.delay``); the jammer gets h_cj.
The superposition (``blocks.add_cc``, eq. 10/16 of paper 000) then passes the receiver's own
impairments: its carrier offset (rotator), phase noise (a Gaussian random walk: ``analog.noise_source_f``
-> accumulator ``filter.iir_filter_ffd`` -> ``analog.phase_modulator_fc`` -> ``blocks.multiply_cc``),
its timing offset (delay), and thermal noise z ~ CN(0, 2 sigma_c2) per complex sample
(``analog.noise_source_c``; with unit-energy pulses that is CN(0, 2 sigma_c2) per symbol after the
matched filter, as in the ``sim`` air).

Offsets whose maximum is 0 are left out of the graph (``with_*`` flags) so the common case stays fast.
With ``probe_inputs`` each input's energy is accumulated natively (``complex_to_mag_squared`` ->
accumulator -> ``probe_signal_f``) so a test can check that silent clients put nothing on the air."""
from __future__ import annotations

import numpy as np
from gnuradio import analog, blocks, filter, gr

C64 = gr.sizeof_gr_complex


def _accumulator() -> filter.iir_filter_ffd:
    """y[n] = x[n] + y[n-1] (old-style GNU Radio feedback taps)."""
    return filter.iir_filter_ffd([1.0], [1.0, 1.0], True)


def _replace(hier, chain: list, j: int, new) -> None:
    """Swap chain[j] (a one-in one-out block) for ``new`` in a hier block's linear chain."""
    prev, old, nxt = chain[j - 1], chain[j], chain[j + 1]
    hier.disconnect(prev, old)
    hier.disconnect(old, nxt)
    hier.connect(prev, new)
    hier.connect(new, nxt)
    chain[j] = new


class LoopbackChannel(gr.hier_block2):
    """K clients + jammer -> one receiver.

    Parameters: ``clients`` K; ``h`` (K,) initial gains; ``client_cfo`` (K,) cycles/sample;
    ``client_delay`` (K,) samples; ``h_cj``; ``rx_cfo`` cycles/sample; ``rx_delay`` samples;
    ``rx_phase_noise`` rad per sqrt(sample); ``sigma_c2`` noise per real coordinate; seeds for the
    thermal noise and the phase noise; ``probe_inputs`` (see module doc); ``fir_len`` > 0 puts a
    multipath FIR (``filter.fir_filter_ccc``, taps set per round by ``set_taps``) after each client's gain;
    ``front_ends`` (radio/loopback_impairments.FrontEnds: channel.* impairments) puts each client's front end
    before its gain, the jammer's before h_cj and the receiver's after the thermal noise."""

    def __init__(self, clients: int, h=None, client_cfo=None, client_delay=None, h_cj: complex = 0.0,
                 rx_cfo: float = 0.0, rx_delay: int = 0, rx_phase_noise: float = 0.0, sigma_c2: float = 0.0,
                 noise_seed: int = 0, phase_seed: int = 0, probe_inputs: bool = False, fir_len: int = 0,
                 front_ends=None):
        K = int(clients)
        gr.hier_block2.__init__(self, "otafl_loopback_channel", gr.io_signature(K + 1, K + 1, C64),
                                gr.io_signature(1, 1, C64))
        self.clients = K
        h = np.ones(K, complex) if h is None else np.asarray(h, complex)
        cfo = np.zeros(K) if client_cfo is None else np.asarray(client_cfo, float)
        dly = np.zeros(K, int) if client_delay is None else np.asarray(client_delay, int)
        with_cfo = bool(np.any(cfo != 0))
        with_delay = bool(np.any(dly != 0))
        self.adder = blocks.add_cc()
        self._cfo, self._rx_cfo = cfo, float(rx_cfo)
        self.gains, self.rotators, self.delays, self.firs = [], [], [], []
        self._chains = []                     # per client: [gain, [rotator], [delay], (adder, i)] after its input
        # (self, i) is not kept: a block holding itself is a reference cycle, and GNU Radio's buffers (SysV
        # shared-memory segments, kernel.shmmni machine-wide) would then live until a full garbage collection
        for i in range(K):
            g = blocks.multiply_const_cc(complex(h[i]))
            chain = [(self, i)] + ([front_ends.tx[i]] if front_ends else []) + [g]   # radio/loopback_impairments
            self.gains.append(g)
            if fir_len > 0:
                f = filter.fir_filter_ccc(1, [1.0 + 0j] + [0j] * (int(fir_len) - 1))
                self.firs.append(f)
                chain.append(f)
            if with_cfo:
                r = blocks.rotator_cc(2 * np.pi * float(cfo[i]))
                self.rotators.append(r)
                chain.append(r)
            if with_delay:
                d = blocks.delay(C64, int(dly[i]))
                self.delays.append(d)
                chain.append(d)
            chain.append((self.adder, i))
            self.connect(*chain)
            self._chains.append(chain[1:])
        self.jammer_gain = blocks.multiply_const_cc(complex(h_cj))
        self.connect((self, K), *([front_ends.jammer] if front_ends else []), self.jammer_gain, (self.adder, K))

        chain = [self.adder]
        self.rx_rotator = None
        if rx_cfo:
            self.rx_rotator = blocks.rotator_cc(2 * np.pi * float(rx_cfo))
            chain.append(self.rx_rotator)
        self.phase_noise = None
        if rx_phase_noise:
            self.phase_mult = blocks.multiply_cc()
            self._phase_std = float(rx_phase_noise)
            self.phase_noise = analog.noise_source_f(analog.GR_GAUSSIAN, self._phase_std, int(phase_seed))
            self.phase_acc = _accumulator()
            self.phase_mod = analog.phase_modulator_fc(1.0)
            self.connect(self.phase_noise, self.phase_acc, self.phase_mod, (self.phase_mult, 1))
            chain.append(self.phase_mult)
        self.rx_delay = None
        if rx_delay:
            self.rx_delay = blocks.delay(C64, int(rx_delay))
            chain.append(self.rx_delay)
        self.noise_add = blocks.add_cc()
        chain.append((self.noise_add, 0))
        self.connect(*chain)
        self._rx_chain = chain
        self._noise_amp, self._noise_seed = self._noise_amplitude(sigma_c2), int(noise_seed)
        self.noise = analog.noise_source_c(analog.GR_GAUSSIAN, self._noise_amp, self._noise_seed)
        self.connect(self.noise, (self.noise_add, 1))
        self.connect(self.noise_add, *([front_ends.rx] if front_ends else []), self)   # after the LNA's noise

        self.probes = []
        if probe_inputs:
            for i in range(K + 1):
                mag = blocks.complex_to_mag_squared()
                acc = _accumulator()
                probe = blocks.probe_signal_f()
                self.connect((self, i), mag, acc, probe)
                self.probes.append(probe)
        self._probe_base = np.zeros(len(self.probes))

    @staticmethod
    def _noise_amplitude(sigma_c2: float) -> float:
        """noise_source_c amplitude a gives E|z|^2 = a^2 = 2 sigma_c2."""
        if not sigma_c2 >= 0:
            raise ValueError(f"sigma_c2 must be >= 0, got {sigma_c2}")
        return float(np.sqrt(2.0 * sigma_c2))

    # ------------------------------------------------------------------ per-round settings
    def set_gains(self, h) -> None:
        h = np.asarray(h, complex)
        if h.shape != (self.clients,):
            raise ValueError(f"expected {self.clients} channel gains, got shape {h.shape}")
        for g, v in zip(self.gains, h):
            g.set_k(complex(v))

    def set_taps(self, taps) -> None:
        """(K, fir_len) multipath FIR taps per client (channel/multipath.py ``Multipath.fir``)."""
        taps = np.asarray(taps, complex)
        if taps.shape != (self.clients, len(self.firs[0].taps()) if self.firs else 0):
            raise ValueError(f"expected ({self.clients}, fir_len) taps, got shape {taps.shape}")
        for f, row in zip(self.firs, taps):
            f.set_taps([complex(v) for v in row])

    def set_jammer_gain(self, h_cj: complex) -> None:
        self.jammer_gain.set_k(complex(h_cj))

    def set_sigma_c2(self, sigma_c2: float, noise_seed: int | None = None) -> None:
        """Thermal noise per real coordinate (a new noise source; while the flowgraph is stopped).

        GNU Radio 3.10's ``noise_source_c.set_amplitude(a)`` gives E|z|^2 = a^2 / 2 whereas the
        constructor's amplitude a gives a^2, so the source is always rebuilt with the constructor."""
        self._noise_amp = self._noise_amplitude(sigma_c2)
        self._replace_noise(self._noise_seed if noise_seed is None else noise_seed)

    def _replace_noise(self, seed: int) -> None:
        new = analog.noise_source_c(analog.GR_GAUSSIAN, self._noise_amp, int(seed))
        self.disconnect(self.noise, (self.noise_add, 1))
        self.connect(new, (self.noise_add, 1))
        self.noise = new
        self._noise_seed = int(seed)

    def reseed(self, noise_seed: int, phase_seed: int | None = None) -> None:
        """New thermal (and phase) noise sources with these seeds (while the flowgraph is stopped)."""
        self._replace_noise(noise_seed)
        if self.phase_noise is not None and phase_seed is not None:
            new = analog.noise_source_f(analog.GR_GAUSSIAN, self._phase_std, int(phase_seed))
            self.disconnect(self.phase_noise, self.phase_acc)
            self.connect(new, self.phase_acc)
            self.phase_noise = new

    def reset_state(self, noise_seed: int, phase_seed: int | None = None) -> None:
        """Start a new run of the same graph from the initial state (while stopped): fresh rotators
        (their phase would carry over from the last run), a fresh phase-noise random walk and new
        noise seeds. Delays and filters need nothing: GNU Radio makes new, zeroed buffers at each
        start. A round then depends only on its settings and seeds."""
        for i, tail in enumerate(self._chains):
            chain = [(self, i)] + tail
            for j, blk in enumerate(chain):
                if any(blk is r for r in self.rotators):
                    new = blocks.rotator_cc(2 * np.pi * float(self._cfo[i]))
                    _replace(self, chain, j, new)
                    self.rotators[self.rotators.index(blk)] = new
            tail[:] = chain[1:]
        if self.rx_rotator is not None:
            new = blocks.rotator_cc(2 * np.pi * self._rx_cfo)
            _replace(self, self._rx_chain, self._rx_chain.index(self.rx_rotator), new)
            self.rx_rotator = new
        if self.phase_noise is not None:
            src = analog.noise_source_f(analog.GR_GAUSSIAN, self._phase_std, int(phase_seed or 0))
            acc, mod = _accumulator(), analog.phase_modulator_fc(1.0)
            self.disconnect(self.phase_noise, self.phase_acc, self.phase_mod, (self.phase_mult, 1))
            self.connect(src, acc, mod, (self.phase_mult, 1))
            self.phase_noise, self.phase_acc, self.phase_mod = src, acc, mod
        self._replace_noise(noise_seed)

    def input_energy(self) -> np.ndarray:
        """(K+1,) energy that entered each input since the last call (needs ``probe_inputs``)."""
        if not self.probes:
            raise RuntimeError("LoopbackChannel was built without probe_inputs")
        level = np.array([p.level() for p in self.probes], dtype=np.float64)
        out = level - self._probe_base
        self._probe_base = level
        return out
