"""The OFDM transmitter as GNU Radio blocks (``phy.waveform = "ofdm"``), one per sender: the loopback air
(radio/loopback_ofdm.py) feeds it into its channel, the zmq airs (radio/zmq_ofdm.py) into a ZeroMQ socket.

    subcarrier symbols (phy/ofdm_burst.py) -> stream_to_tagged_stream -> ofdm_carrier_allocator_cvc
        -> multiply_const_vcc(alpha_i. / sqrt N) -> fft_vcc (inverse, shifted) -> ofdm_cyclic_prefixer

(radio/loopback_ofdm.py's module doc says why these blocks and not gr-digital's channel estimator.)"""
from __future__ import annotations

import math

import numpy as np
from gnuradio import blocks, digital, fft, gr

from otafl_sdr.phy.ofdm import OfdmLayout

C64 = gr.sizeof_gr_complex
LEN_TAG = "packet_len"


def ofdm_transmitter(tb, src, lay: OfdmLayout, scale: np.ndarray):
    """One OFDM transmitter in ``tb`` fed by ``src`` (subcarrier symbols, phy/ofdm_burst.py): each OFDM
    symbol's U values one tagged packet (the allocator needs a whole packet in its input buffer) ->
    carrier allocator -> multiply_const_vcc(``scale``, :func:`carrier_scale`) -> inverse fft_vcc -> cyclic
    prefixer (no rolloff: the analog payload wants no windowing error); returns the last block, whose
    output is the sender's samples."""
    tag = blocks.stream_to_tagged_stream(C64, 1, lay.used, LEN_TAG)
    alloc = digital.ofdm_carrier_allocator_cvc(lay.fft, [[int(f) for f in lay.freqs]], [[]], [[]], [], LEN_TAG, True)
    mult = blocks.multiply_const_vcc([complex(v) for v in scale])
    ifft = fft.fft_vcc(lay.fft, False, [], True, 1)
    cp = digital.ofdm_cyclic_prefixer(lay.fft, lay.symbol_len, 0, LEN_TAG)
    tb.connect(src, tag, alloc, mult, ifft, cp)
    return cp


def carrier_scale(lay: OfdmLayout, per_carrier: np.ndarray) -> np.ndarray:
    """(U,) per-subcarrier factors (alpha_ik; ones for the jammer) -> (N,) the multiply_const_vcc vector
    (DC at N/2), / sqrt(N) so that GNU Radio's unnormalised inverse FFT is unitary."""
    v = np.zeros(lay.fft, dtype=np.complex128)
    v[lay.freqs + lay.fft // 2] = per_carrier
    return v / math.sqrt(lay.fft)
