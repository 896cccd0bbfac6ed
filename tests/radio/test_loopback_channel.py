"""The loopback channel hier block and the burst blocks, run as real GNU Radio flowgraphs."""
import numpy as np
import pytest
from gnuradio import blocks, gr

from otafl_sdr.config.schema import PhyConfig
from otafl_sdr.phy import Modem
from otafl_sdr.phy.pulse_shaping import shape
from otafl_sdr.radio.burst_blocks import Capture, ClientTx, JammerTx, StagedBursts, burst_source
from otafl_sdr.radio.loopback_channel import LoopbackChannel

pytestmark = [pytest.mark.gnuradio]


def run_channel(ch, inputs):
    tb = gr.top_block()
    srcs = [burst_source(x) for x in inputs]
    for i, s in enumerate(srcs):
        tb.connect(s, (ch, i))
    sink = blocks.vector_sink_c()
    tb.connect(ch, sink)
    tb.run()
    return np.asarray(sink.data(), dtype=np.complex128)


def test_awgn_has_variance_sigma_c2_per_real_coordinate():
    N = 200_000
    ch = LoopbackChannel(2, sigma_c2=0.0, noise_seed=1)
    ch.set_sigma_c2(0.7, noise_seed=5)             # (GNU Radio's own set_amplitude halves the power)
    y = run_channel(ch, [np.zeros(N)] * 3)
    assert len(y) == N
    assert np.var(y.real) == pytest.approx(0.7, rel=0.02) and np.var(y.imag) == pytest.approx(0.7, rel=0.02)
    assert abs(np.mean(y.real * y.imag)) < 0.02 * 0.7


def test_per_client_gain_cfo_delay_and_rx_impairments_are_exact():
    rng = np.random.default_rng(0)
    N = 4096
    x = [(rng.standard_normal(N) + 1j * rng.standard_normal(N)) for _ in range(2)] + [np.zeros(N)]
    h, f, dl = np.array([0.5 - 1j, 2j]), np.array([1e-3, -2e-3]), np.array([3, 0])
    ch = LoopbackChannel(2, h=h, client_cfo=f, client_delay=dl, rx_cfo=1e-4, rx_delay=2)
    y = run_channel(ch, x)
    n = np.arange(N)
    expect = np.zeros(N, complex)
    for i in range(2):
        xi = h[i] * x[i].astype(np.complex64) * np.exp(2j * np.pi * f[i] * n)
        expect[dl[i]:] += xi[:N - dl[i]]
    expect = expect * np.exp(2j * np.pi * 1e-4 * n)
    expect = np.concatenate([np.zeros(2), expect[:-2]])
    assert np.max(np.abs(y - expect)) < 1e-3 * np.max(np.abs(expect))


def test_phase_noise_is_a_random_walk_with_the_configured_step():
    N = 100_000
    ch = LoopbackChannel(1, rx_phase_noise=0.01, phase_seed=3)
    y = run_channel(ch, [np.ones(N), np.zeros(N)])
    assert np.allclose(np.abs(y), 1, atol=1e-5)
    steps = np.diff(np.unwrap(np.angle(y)))
    assert np.std(steps) == pytest.approx(0.01, rel=0.02) and abs(np.mean(steps)) < 2e-4


def test_reseed_reproduces_and_changes_the_noise():
    N = 10_000
    ch = LoopbackChannel(1, sigma_c2=1.0, noise_seed=7)
    tb = gr.top_block()
    a, b = burst_source(np.zeros(N)), burst_source(np.zeros(N))
    sink = blocks.vector_sink_c()
    tb.connect(a, (ch, 0)); tb.connect(b, (ch, 1)); tb.connect(ch, sink)
    outs = []
    for seed in (11, 11, 12):
        ch.reseed(seed)
        a.rewind(); b.rewind(); sink.reset()
        tb.run()
        outs.append(np.asarray(sink.data()))
    assert np.array_equal(outs[0], outs[1]) and not np.allclose(outs[0], outs[2])


def test_client_tx_shapes_like_the_modem_and_jammer_is_gated():
    m = Modem(PhyConfig())
    rng = np.random.default_rng(1)
    frame = np.concatenate([m.frame(rng.standard_normal(300) + 1j * rng.standard_normal(300), 0.5), np.zeros(16)])
    staged = StagedBursts(1, len(frame))
    staged.stage(frame[None, :])
    mask = np.concatenate([m.jammer_mask(300), np.zeros(16)])
    tb = gr.top_block()
    tx = ClientTx(m.taps, m.sps, scale=2 - 1j)
    jam = JammerTx(m.taps, m.sps, mask, alpha_cj=3.0, seed=4)
    cap_tx, cap_j = Capture(), Capture()
    cap_tx.reset(); cap_j.reset()
    tb.connect(staged.sources[0], tx, cap_tx.sink)
    tb.connect(jam, cap_j.sink)
    tb.run()
    y = cap_tx.samples()
    ref = (2 - 1j) * shape(frame, m.taps, m.sps)[:len(y)]
    assert len(y) == m.sps * len(frame) and np.max(np.abs(y - ref)) < 1e-5 * np.max(np.abs(ref))
    # the jammer: alpha_cj x CN(0, 2) symbols in payload slots only; zero in the reference slots
    j = cap_j.samples().astype(np.complex128)
    L = (len(m._c) - 1) // 2
    from otafl_sdr.phy.pulse_shaping import matched_filter, zf_equalise
    sym = zf_equalise(matched_filter(j, m.taps, m.sps, -L * m.sps, len(mask) + 2 * L), m._c)
    lay = m.layout(300)
    assert np.max(np.abs(sym[:lay.preamble_len])) < 1e-4 and np.max(np.abs(sym[lay.pilot_idx])) < 1e-4
    assert np.mean(np.abs(sym[lay.payload_idx]) ** 2) == pytest.approx(2 * 9.0, rel=0.2)
    staged.close(); cap_tx.close(); cap_j.close()


def test_probes_measure_input_energy():
    ch = LoopbackChannel(2, probe_inputs=True)
    x = [np.full(1000, 2.0 + 0j), np.zeros(1000), np.full(1000, 1j)]
    run_channel(ch, x)
    assert np.allclose(ch.input_energy(), [4000.0, 0.0, 1000.0], rtol=1e-6)


@pytest.mark.parametrize("kw", [dict(rx_cfo=1e-3), dict(client_cfo=[1e-3]), dict(client_delay=[3], rx_delay=2),
                                dict(rx_phase_noise=1e-3)])
def test_reset_state_restarts_rotators_phase_noise_and_noise(kw):
    N = 4096
    ch = LoopbackChannel(1, sigma_c2=0.1, **kw)
    staged = StagedBursts(2, N)
    staged.stage(np.random.default_rng(0).standard_normal((2, N)))
    cap = Capture()
    tb = gr.top_block()
    src = staged.make_sources()
    tb.connect(src[0], (ch, 0)); tb.connect(src[1], (ch, 1)); tb.connect(ch, cap.sink)
    outs = []
    for seeds in ((5, 6), (5, 6), (7, 8)):
        ch.reset_state(*seeds)
        staged.rewind(); cap.reset()
        tb.run()
        outs.append(cap.samples()[:N])
    assert np.array_equal(outs[0], outs[1]) and not np.allclose(outs[0], outs[2])
    staged.close(); cap.close()
