"""The GNU Radio impairment blocks (radio/loopback_impairments.py) against the numpy models
(channel/impairments.py): the deterministic ones sample by sample, the phase noise by its statistics."""
import numpy as np
import pytest
from gnuradio import blocks, gr

from otafl_sdr.channel import impairments as imp
from otafl_sdr.radio import loopback_impairments as glb

pytestmark = [pytest.mark.gnuradio]


def _through(block, x):
    tb = gr.top_block()
    src = blocks.vector_source_c(list(np.asarray(x, np.complex64)), False)
    head = blocks.head(gr.sizeof_gr_complex, len(x))
    sink = blocks.vector_sink_c()
    tb.connect(src, block, head, sink)
    tb.run()
    return np.array(sink.data(), dtype=np.complex128)


def _cn(n, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(n) + 1j * r.standard_normal(n)) / np.sqrt(2)


@pytest.mark.parametrize("receiver", [False, True])
def test_iqbal_gen_is_the_numpy_iq_imbalance(receiver):
    x = _cn(5000)
    y = _through(glb.iq_imbalance(0.7, 3.0, receiver), x)
    assert np.allclose(y, imp.iq_imbalance(x.astype(np.complex64), 0.7, 3.0, receiver), atol=1e-5)


def test_dc_cfo_and_rapp_blocks_are_the_numpy_models():
    x = _cn(5000) * 2.0
    x64 = x.astype(np.complex64).astype(np.complex128)
    assert np.allclose(_through(glb.dc_offset(0.1 + 0.05j), x), imp.dc_offset(x64, 0.1 + 0.05j), atol=1e-5)
    assert np.allclose(_through(glb.cfo(1e-3), x), imp.cfo(x64, 1e-3), atol=1e-4)
    x[:3] = 0                                             # |x| = 0: gain 1, no NaN
    y = _through(glb.Rapp(1.0, 2.0), x)
    assert np.all(np.isfinite(y)) and np.allclose(y[:3], 0)
    assert np.allclose(y, imp.rapp(x.astype(np.complex64), 1.0, 2.0), rtol=1e-4, atol=1e-5)


def test_phase_noise_block_has_the_wiener_statistics():
    s, n = 0.01, 200_000
    y = _through(glb.PhaseNoise(s, 5), np.ones(n))
    th = np.unwrap(np.angle(y))
    for m in (1, 10, 100):
        assert np.var(th[m:] - th[:-m]) == pytest.approx(m * s ** 2, rel=0.05)
    assert np.mean(np.abs(y) ** 2) == pytest.approx(1.0, rel=1e-5)
