"""phy/ofdm.py: the OFDM layout, payload map, unitary modulation and the receiver (pure numpy)."""
import numpy as np
import pytest

from otafl_sdr.config.schema import PhyConfig
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate, ofdm_airtime, ofdm_overhead, subcarrier_response
from otafl_sdr.phy.packing import pack_reals, unpack_reals

LAY = OfdmLayout()


def _burst(lay, s, carriers, ref, pre=None):
    n_ofdm = lay.payload_symbols(len(s), len(carriers))
    g = lay.grid(s, carriers, n_ofdm, ref)
    if pre is not None:                                   # per-subcarrier pre-equalisation (client side)
        g = g * pre
    return lay.modulate(g), n_ofdm


def test_layout_carriers_pilots_and_data():
    assert len(LAY.freqs) == 52 and 0 not in LAY.freqs and LAY.freqs.min() == -26 and LAY.freqs.max() == 26
    assert len(LAY.pilot_pos) == 4 and len(LAY.data_pos) == 48
    assert set(LAY.pilot_pos) | set(LAY.data_pos) == set(range(52))
    assert np.allclose(np.abs(LAY.train_seq), 1)


def test_reals_onto_subcarriers_round_trip_exactly():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1001)                       # odd d: the last Q is padding
    s = pack_reals(x)
    carriers = LAY.data_pos[::2]                        # a round that skips half the data carriers
    n_ofdm = LAY.payload_symbols(len(s), len(carriers))
    g = LAY.grid(s, carriers, n_ofdm, np.ones(LAY.used))
    assert g.shape == (LAY.train + n_ofdm, LAY.used)
    assert np.all(g[LAY.train:, LAY.data_pos[1::2]] == 0)          # skipped carriers carry nothing
    assert np.array_equal(unpack_reals(LAY.payload(g, carriers, len(s)), len(x)), x)
    # I and Q both carry values
    first = g[LAY.train, carriers[0]]
    assert first == x[0] + 1j * x[1]


def test_modulation_is_unitary_and_the_fft_windows_invert_it():
    rng = np.random.default_rng(1)
    g = rng.standard_normal((6, LAY.used)) + 1j * rng.standard_normal((6, LAY.used))
    x = LAY.to_time(g)
    assert len(x) == 6 * LAY.symbol_len
    body = x.reshape(6, LAY.symbol_len)[:, LAY.cp:]
    assert np.sum(np.abs(body) ** 2) == pytest.approx(np.sum(np.abs(g) ** 2), rel=1e-12)
    for backoff in (0, 3):
        Y = LAY.read(x, 0, 6, backoff)
        ramp = np.exp(-2j * np.pi * LAY.bins * backoff / LAY.fft)
        assert np.allclose(Y, g * ramp, atol=1e-12)


def test_subcarrier_response_is_the_circular_convolution():
    rng = np.random.default_rng(2)
    fir = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    H = subcarrier_response(fir, LAY)
    g = np.zeros((1, LAY.used), complex)
    g[0] = rng.standard_normal(LAY.used) + 1j * rng.standard_normal(LAY.used)
    y = np.convolve(LAY.to_time(g), fir)[:LAY.symbol_len]
    assert np.allclose(LAY.read(y, 0, 1), g * H, atol=1e-12)


def test_receiver_is_exact_through_a_pre_equalised_multipath_channel_with_delay_and_phase():
    """Noise-free: the client pre-equalises each subcarrier (payload and reference) by 1 / H_k; the channel
    is a 9-tap FIR (inside the prefix), an unknown delay of 37 samples and an unknown phase."""
    rng = np.random.default_rng(3)
    s = rng.standard_normal(3000) + 1j * rng.standard_normal(3000)
    fir = np.array([1, 0.6j, 0, -0.3, 0.2, 0, 0, 0.1j, 0.05])
    H = subcarrier_response(fir, LAY)
    x, n_ofdm = _burst(LAY, s, LAY.data_pos, np.ones(LAY.used), pre=1 / H)
    y = np.concatenate([np.zeros(37), np.convolve(x, fir), np.zeros(300)]) * np.exp(1.1j)
    res = demodulate(y, LAY, len(s), LAY.data_pos, n_ofdm, np.ones(LAY.used), search=37 + LAY.guard + LAY.symbol_len - 1,
                     backoff=3)
    assert res.ok and res.timing == 37 + LAY.guard and res.rho > 0.9
    assert np.max(np.abs(res.symbols - s)) < 1e-9


@pytest.mark.parametrize("smoothing", ["none", "delay"])
def test_receiver_noise_is_the_channel_noise(smoothing):
    """With noise sigma^2 per real coordinate in the time domain, the equalised payload's error is sigma^2
    per real coordinate (unitary FFT, unit-modulus equalisation) plus the channel estimate's share: per
    subcarrier (``none``) a phase error of variance sigma^2 / (train |A|^2) on each symbol, i.e. E|s|^2 / (2 train)
    x sigma^2 per real coordinate (1/8 here); with the delay fit (two parameters from 4 x 52 values) < 5 %."""
    rng = np.random.default_rng(4)
    n, sigma = 40_000, 0.05
    s = (rng.standard_normal(n) + 1j * rng.standard_normal(n)) / np.sqrt(2)
    x, n_ofdm = _burst(LAY, s, LAY.data_pos, np.ones(LAY.used))
    y = np.concatenate([np.zeros(20), x, np.zeros(300)]) * np.exp(-0.4j)
    y = y + sigma * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    res = demodulate(y, LAY, n, LAY.data_pos, n_ofdm, np.ones(LAY.used), search=20 + LAY.guard + LAY.symbol_len - 1, backoff=4,
                     smoothing=smoothing)
    err = np.mean(np.abs(res.symbols - s) ** 2) / 2                   # per real coordinate
    share = 1 / (2 * LAY.train) if smoothing == "none" else 0.0
    assert err / sigma ** 2 == pytest.approx(1.0 + share, abs=0.05)
    assert res.noise_var == pytest.approx(sigma ** 2, rel=0.1)


def test_no_reference_or_no_burst_is_reported_not_zero():
    y = np.zeros(5000, complex)
    r = demodulate(y, LAY, 100, LAY.data_pos, 3, np.zeros(LAY.used), search=100)
    assert not r.ok and "no client sent the reference" in r.reason
    rng = np.random.default_rng(5)
    noise = rng.standard_normal(5000) + 1j * rng.standard_normal(5000)
    r = demodulate(noise, LAY, 100, LAY.data_pos, 3, np.ones(LAY.used), search=100)
    assert not r.ok and r.symbols is None


def test_airtime_per_round():
    """d = 155,830 reals: 77,915 symbols on 48 data carriers = 1624 payload symbols + 4 training symbols of
    80 samples, 2 x 64 guard samples: 130,368 samples, 0.130 s at 1 MS/s, 26.1 ms at 5 MS/s, 6.5 ms at
    20 MS/s; 60 % of the samples carry payload symbols (48 of 64 subcarriers, 64 of 80 samples a symbol)."""
    phy = PhyConfig()
    assert ofdm_airtime(155_830, 1e6, phy) == pytest.approx((4 + 1624) * 80 / 1e6 + 128 / 1e6)
    for rate in (1e6, 5e6, 20e6):
        assert ofdm_airtime(155_830, rate, phy) * rate == pytest.approx(130_368)
    assert ofdm_overhead(155_830, phy) == pytest.approx(1 - 77_915 / 130_368)
    assert ofdm_airtime(155_830, 1e6, phy, n_data=24) > 1.9 * ofdm_airtime(155_830, 1e6, phy) - 0.01


def test_timing_never_sees_the_payload():
    """The timing search may start windows up to L - 1 samples after the true start; its template is the
    training less its last symbol but one sample, so every window ends inside the training: a payload of NaN
    (any sample of it inside a window would make that window's correlation NaN and win the argmax) or one
    crafted to look like the training gives the very timing, CFO and channel estimate a zero payload gives.
    (Before, the full training template let windows 1..L-1 samples late reach the payload: timing 102, not 101.)"""
    L, n_ofdm = LAY.symbol_len, 4
    base = LAY.grid(np.zeros(0), LAY.data_pos, n_ofdm, np.ones(LAY.used))
    offset = 37 + LAY.guard
    pay = slice(offset + LAY.train * L, offset + (LAY.train + n_ofdm) * L)
    captures = []
    for payload in ("zero", "nan", "training"):
        g = base.copy()
        if payload == "training":
            g[LAY.train:, LAY.data_pos] = 30.0 * base[0, LAY.data_pos]
        y = np.concatenate([np.zeros(37), LAY.modulate(g), np.zeros(400)])
        if payload == "nan":
            y[pay] = np.nan
        captures.append(y)
    with np.errstate(invalid="ignore"):
        results = [demodulate(y, LAY, 10, LAY.data_pos, n_ofdm, np.ones(LAY.used), search=offset + L - 1, backoff=3)
                   for y in captures]
    assert all(r.ok and r.timing == offset for r in results)
    assert all(r.extra["cfo"] == results[0].extra["cfo"] == 0.0 for r in results)
    assert all(np.array_equal(r.gain, results[0].gain) for r in results)
