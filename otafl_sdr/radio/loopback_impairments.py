"""Front-end impairments as native GNU Radio blocks, the loopback counterparts of channel/impairments.py
(same parameters, same definitions; tests/radio/test_loopback_impairments.py checks them sample by sample
or, for the random phase noise, by its statistics); ``FrontEnds`` puts them per radio into the loopback
channel (radio/loopback_channel.py).

- IQ imbalance: gr-channels ``iqbal_gen`` (mode 0 transmitter, 1 receiver).
- DC offset: ``blocks.add_const_cc``.
- Rapp PA: gain (1 + (|x| / A)^{2p})^{-1/(2p)} computed natively as exp(-log(1 + exp(2p log(|x| / A))) / 2p)
  (``complex_to_mag`` -> ``transcendental`` log/exp chain -> ``multiply_cc``); |x| = 0 gives gain 1.
- Phase noise: ``analog.noise_source_f`` -> accumulator -> ``phase_modulator_fc`` -> ``multiply_cc``
  (the loopback channel's receiver phase noise, here for any radio).
- CFO: ``blocks.rotator_cc``.
- Doppler: ``vector_source_c`` of the round's precomputed path (channel/doppler.py) -> ``multiply_cc``."""
from __future__ import annotations

import numpy as np
from gnuradio import analog, blocks, channels, filter, gr

C64 = gr.sizeof_gr_complex


def iq_imbalance(mag_db: float, phase_deg: float, receiver: bool = False) -> gr.hier_block2:
    return channels.iqbal_gen(float(mag_db), float(phase_deg), 1 if receiver else 0)


def dc_offset(dc: complex) -> blocks.add_const_cc:
    return blocks.add_const_cc(complex(dc))


def cfo(f: float) -> blocks.rotator_cc:
    return blocks.rotator_cc(2 * np.pi * float(f))


class Rapp(gr.hier_block2):
    """Rapp's PA model (channel/impairments.py ``rapp``) from native blocks."""

    def __init__(self, a_sat: float, p: float):
        gr.hier_block2.__init__(self, "otafl_rapp", gr.io_signature(1, 1, C64), gr.io_signature(1, 1, C64))
        if not (a_sat > 0 and p > 0):
            raise ValueError(f"Rapp needs a_sat > 0 and p > 0, got {a_sat}, {p}")
        two_p = 2.0 * float(p)
        chain = [blocks.complex_to_mag(), blocks.multiply_const_ff(1.0 / float(a_sat)),
                 blocks.transcendental("log", "float"), blocks.multiply_const_ff(two_p),
                 blocks.transcendental("exp", "float"), blocks.add_const_ff(1.0),
                 blocks.transcendental("log", "float"), blocks.multiply_const_ff(-1.0 / two_p),
                 blocks.transcendental("exp", "float"), blocks.float_to_complex()]
        self.blocks = chain
        mult = blocks.multiply_cc()
        self.connect(self, *chain, (mult, 1))
        self.connect(self, (mult, 0))
        self.connect(mult, self)


class PhaseNoise(gr.hier_block2):
    """Wiener phase noise, ``std`` rad per sqrt(sample), seeded (GNU Radio's generator, not numpy's)."""

    def __init__(self, std: float, seed: int):
        gr.hier_block2.__init__(self, "otafl_phase_noise", gr.io_signature(1, 1, C64), gr.io_signature(1, 1, C64))
        self.source = analog.noise_source_f(analog.GR_GAUSSIAN, float(std), int(seed))
        self.acc = filter.iir_filter_ffd([1.0], [1.0, 1.0], True)
        self.mod = analog.phase_modulator_fc(1.0)
        mult = blocks.multiply_cc()
        self.connect(self.source, self.acc, self.mod, (mult, 1))
        self.connect(self, (mult, 0))
        self.connect(mult, self)


# ---------------------------------------------------------------------------------------------------------
# Per-radio front ends of the loopback channel (channel/front_end.py: the chain, the draws, the bound).
# Every stateful block (phase walk, rotator, resampler) is made anew each round (``configure``); the
# Doppler factor is one ``vector_source_c`` per client holding this round's precomputed path
# (channel/doppler.py, the sim air's values) over the booked window, rewound each round, times one
# ``multiply_cc``: two blocks per client (sums of sig_sources ran GNU Radio out of buffers at K = 60).
# A round depends only on its settings and seeds, as the rest of the loopback air.

def _kept(hier, chain) -> tuple:
    """A hier block's edge as it keeps it: itself as None. A block holding itself is a reference cycle, and
    its flowgraph's buffers (SysV shared-memory segments, kernel.shmmni machine-wide) would then live until a
    full garbage collection."""
    return tuple(None if c is hier else c for c in chain)


def _live(hier, chain) -> tuple:
    """The kept edge (:func:`_kept`) with the hier block back in place, for ``disconnect``."""
    return tuple(hier if c is None else c for c in chain)


class TxFrontEnd(gr.hier_block2):
    """One transmitter's impairments (channel/front_end.py's chain): IQ (tx) -> Rapp -> + DC -> phase noise
    -> residual CFO -> SRO resampler (``filter.mmse_resampler_cc``, ratio 1 + delta) -> Doppler (a vector
    source of rho_i over the window, times the stream). ``jammer``: DC, phase noise and CFO only (module
    doc of channel/front_end.py)."""

    def __init__(self, fe, cfo: float, sro: float, jammer: bool = False):
        gr.hier_block2.__init__(self, "otafl_tx_front_end", gr.io_signature(1, 1, C64), gr.io_signature(1, 1, C64))
        self.fe, self.cfo, self.sro, self.jammer = fe, float(cfo), 0.0 if jammer else float(sro), bool(jammer)
        self.iq = iq_imbalance(fe.iq_mag_db, fe.iq_phase_deg) if fe.iq and not jammer else None
        self.rapp = Rapp(1.0, fe.p) if fe.a_sat and not jammer else None
        self.doppler = None
        if fe.doppler and not jammer:
            self.doppler = blocks.vector_source_c([1.0 + 0j], False)
            self.doppler_mult = blocks.multiply_cc()
        self._edges = []
        self.configure(1.0, 0j, 1, None)

    def _link(self, *chain) -> None:
        self.connect(*chain)
        self._edges.append(_kept(self, chain))

    def configure(self, a_sat: float, dc: complex, phase_seed: int, path=None) -> None:
        """This round's Rapp A_sat and DC (per sample), phase-noise seed and Doppler path rho_i over the
        window (complex, one value per stream sample; the stream ends with it), or None: no Doppler
        (while the flowgraph is stopped)."""
        for chain in self._edges:
            self.disconnect(*_live(self, chain))
        self._edges = []
        chain = [self]
        if self.iq is not None:
            chain.append(self.iq)
        if self.rapp is not None:
            self.rapp.blocks[1].set_k(1.0 / float(a_sat))
            chain.append(self.rapp)
        if self.fe.dc:
            self.dc = dc_offset(dc)
            chain.append(self.dc)
        if self.fe.phase_noise:
            self.phase = PhaseNoise(self.fe.phase_noise, phase_seed)
            chain.append(self.phase)
        if self.cfo:
            self.rotator = cfo(self.cfo)
            chain.append(self.rotator)
        if self.sro:
            self.resampler = filter.mmse_resampler_cc(0.0, 1.0 + self.sro)
            chain.append(self.resampler)
        if path is not None and self.doppler is not None:
            self.doppler.set_data(np.asarray(path, dtype=np.complex64))
            self.doppler.rewind()
            self._link(self.doppler, (self.doppler_mult, 1))
            chain.append((self.doppler_mult, 0))
            self._link(*chain)
            self._link(self.doppler_mult, self)
            return
        if len(chain) == 1:
            chain.append(blocks.copy(C64))
        chain.append(self)
        self._link(*chain)


class RxFrontEnd(gr.hier_block2):
    """The receiver's impairments after its thermal noise: phase noise, then IQ imbalance (rx)."""

    def __init__(self, fe):
        gr.hier_block2.__init__(self, "otafl_rx_front_end", gr.io_signature(1, 1, C64), gr.io_signature(1, 1, C64))
        self.fe = fe
        self.iq = iq_imbalance(fe.iq_mag_db, fe.iq_phase_deg, receiver=True) if fe.iq else None
        self._edges = []
        self.configure(1)

    def configure(self, phase_seed: int) -> None:
        for chain in self._edges:
            self.disconnect(*_live(self, chain))
        chain = [self]
        if self.fe.phase_noise:
            self.phase = PhaseNoise(self.fe.phase_noise, phase_seed)
            chain.append(self.phase)
        if self.iq is not None:
            chain.append(self.iq)
        if len(chain) == 1:
            chain.append(blocks.copy(C64))
        chain.append(self)
        self.connect(*chain)
        self._edges = [_kept(self, chain)]


class FrontEnds:
    """Every radio's front end in one loopback channel: ``tx`` (K), ``jammer``, ``rx``; ``round`` sets a
    round's parameters from its plan (channel/front_end.py: planned RMS amplitude, seeds, Doppler).
    ``cfg``: the run's config, whose front_end.doppler_window sets the Doppler paths' length (the booked
    window; None: the defaults' window at the round's sps); ``round(..., n_samples=)`` overrides it (a
    stream of another shape, e.g. OFDM: book doppler_peak over the same n_samples)."""

    def __init__(self, fe, seed: int, clients: int, cfg=None):
        self.fe, self.seed, self.K, self.cfg = fe, int(seed), int(clients), cfg
        self.draws = fe.draws(seed, clients)
        self.tx = [TxFrontEnd(fe, self.draws["cfo"][i], self.draws["sro"][i]) for i in range(clients)]
        self.jammer = TxFrontEnd(fe, self.draws["jammer_cfo"], 0.0, jammer=True)
        self.rx = RxFrontEnd(fe)

    def window(self, n_sym: int, sps: int) -> int:
        """Samples of each Doppler path: front_end.doppler_window of the run's config (or the defaults')."""
        from otafl_sdr.channel.front_end import doppler_window
        cfg = self.cfg
        if cfg is None:
            from otafl_sdr.config.schema import Config
            cfg = Config()
            cfg.phy.sps = int(sps)
        return doppler_window(cfg, int(n_sym))

    def round(self, round_index: int, alpha, alpha_cj: float, n_sym: int, sps: int,
              n_samples: int | None = None) -> None:
        fe, K = self.fe, self.K
        amp = np.abs(np.asarray(alpha)) / np.sqrt(n_sym * sps)        # planned RMS amplitude per sample
        ph = np.exp(1j * self.draws["dc_phase"])
        dop, times = None, None
        if fe.doppler:
            from otafl_sdr.channel.doppler import DopplerRound
            dop = DopplerRound(fe.doppler, self.seed, round_index, K)   # the sim air's paths (same draws)
            times = np.arange(float(n_samples or self.window(n_sym, sps)))
        for i, tx in enumerate(self.tx):
            a_sat = fe.a_sat * amp[i] if amp[i] > 0 else 1.0
            tx.configure(a_sat, fe.dc * amp[i] * ph[i], fe.phase_seed(self.seed, round_index, i),
                         None if dop is None else dop.paths(times, [i])[0])
        self.jammer.configure(1.0, fe.dc * float(alpha_cj) * np.sqrt(2.0 / sps) * ph[K],
                              fe.phase_seed(self.seed, round_index, "jammer"), None)
        self.rx.configure(fe.phase_seed(self.seed, round_index, "rx"))
