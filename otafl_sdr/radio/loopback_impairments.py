"""Front-end impairments as native GNU Radio blocks, the loopback counterparts of channel/impairments.py
(same parameters, same definitions; tests/radio/test_loopback_impairments.py checks them sample by sample
or, for the random phase noise, by its statistics). Not yet inserted in the loopback channel.

- IQ imbalance: gr-channels ``iqbal_gen`` (mode 0 transmitter, 1 receiver).
- DC offset: ``blocks.add_const_cc``.
- Rapp PA: gain (1 + (|x| / A)^{2p})^{-1/(2p)} computed natively as exp(-log(1 + exp(2p log(|x| / A))) / 2p)
  (``complex_to_mag`` -> ``transcendental`` log/exp chain -> ``multiply_cc``); |x| = 0 gives gain 1.
- Phase noise: ``analog.noise_source_f`` -> accumulator -> ``phase_modulator_fc`` -> ``multiply_cc``
  (the loopback channel's receiver phase noise, here for any radio).
- CFO: ``blocks.rotator_cc``."""
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
