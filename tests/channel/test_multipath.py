"""Tapped-delay-line multipath (otafl_sdr/channel/multipath.py) against its definition, pure numpy, and the
sim air's single-carrier receiver model (channel/multipath_rx.py)."""
import numpy as np
import pytest

from otafl_sdr.channel import multipath_rx
from otafl_sdr.channel.multipath import PROFILES, Multipath, profile, rms_delay_spread
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.config.schema import Config
from otafl_sdr.errors import ConfigError
from otafl_sdr.configure.load import load_config
from otafl_sdr.transmission import aggregate_nmse

SPREADS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0)


@pytest.mark.parametrize("name", PROFILES)
@pytest.mark.parametrize("spread", SPREADS)
def test_profile_powers_sum_to_one_and_rms_delay_spread_as_configured(name, spread):
    delays, powers = profile(name, spread)
    assert powers.sum() == pytest.approx(1.0, abs=1e-12) and np.all(powers > 0)
    assert delays.dtype.kind == "i" and delays[0] == 0 and np.all(np.diff(delays) > 0)
    if name == "flat":
        assert len(delays) == 1
        return
    # exponential: exact (bisection); TDL: as close as the sample grid allows (<= 3 % from 0.5 samples up)
    tol = 1e-6 if name == "exponential" else 0.03
    assert rms_delay_spread(delays, powers) == pytest.approx(spread, rel=tol)


def test_tdl_shapes_follow_3gpp():
    """At a spread wide enough that no taps share a sample: 23/23/24 taps, TDL-A's strongest its second
    (0 dB at 0.38 DS) and its first -13.4 dB, TDL-B's strongest its first, TDL-C's first -4.4 dB."""
    d, p = profile("tdl-a", 1000.0)
    assert len(d) == 23 and np.argmax(p) == 1
    assert 10 * np.log10(p[0] / p.max()) == pytest.approx(-13.4, abs=0.01)
    d, p = profile("tdl-b", 1000.0)
    assert len(d) == 23 and np.argmax(p) == 0
    d, p = profile("tdl-c", 1000.0)
    assert len(d) == 24 and 10 * np.log10(p[0] / p.max()) == pytest.approx(-4.4, abs=0.01)


def test_draw_matches_pdp_and_is_normalised_per_link():
    mp = Multipath("exponential", 2.0)
    g = mp.draw(np.random.default_rng(0), 40_000, normalize=False)
    assert np.mean(np.abs(g) ** 2, axis=0) == pytest.approx(mp.powers, rel=0.04, abs=2e-4)
    gn = mp.draw(np.random.default_rng(0), 1000)
    assert np.sum(np.abs(gn) ** 2, axis=1) == pytest.approx(np.ones(1000), abs=1e-12)
    # the empirical RMS delay spread of the (unnormalised) draws' average PDP is the configured one
    assert rms_delay_spread(mp.delays, np.mean(np.abs(g) ** 2, axis=0)) == pytest.approx(2.0, rel=0.02)


@pytest.mark.parametrize("K", [0.0, 1.0, 5.0, 20.0])
def test_rician_k_of_the_first_tap(K):
    """Moment estimator: E|g|^4 / (E|g|^2)^2 = 1 + (1 + 2K) / (1 + K)^2 for a Rician tap (2 for Rayleigh)."""
    g0 = Multipath("tdl-b", 2.0, k_factor=K).draw(np.random.default_rng(1), 200_000, normalize=False)[:, 0]
    m2, m4 = np.mean(np.abs(g0) ** 2), np.mean(np.abs(g0) ** 4)
    ratio = m4 / m2 ** 2
    r = ratio - 1                                      # = (1 + 2K) / (1 + K)^2, solve for K >= 0
    K_hat = ((1 - r) + np.sqrt(max(1 - r, 0.0))) / r if r < 1 else 0.0
    assert K_hat == pytest.approx(K, abs=0.05 + 0.05 * K)
    assert m2 == pytest.approx(profile("tdl-b", 2.0)[1][0], rel=0.02)


def test_round_taps_are_seeded_and_distinct_per_round():
    mp = Multipath("tdl-c", 3.0, k_factor=2.0)
    a, b = mp.round_taps(7, 3, 5), mp.round_taps(7, 3, 5)
    assert np.array_equal(a, b) and a.shape == (5, len(mp.delays))
    assert not np.allclose(a, mp.round_taps(7, 4, 5)) and not np.allclose(a, mp.round_taps(8, 3, 5))
    fir = mp.fir(a)
    assert fir.shape == (5, mp.length) and np.array_equal(fir[:, mp.delays], a)


def test_doppler_taps_have_the_pdp_and_a_coherence_time_of_order_one_over_fd():
    mp = Multipath("exponential", 1.0, doppler=1e-3)
    g = mp.time_varying(np.random.default_rng(3), 300, 800)
    assert np.mean(np.abs(g) ** 2, axis=(0, 2)) == pytest.approx(mp.powers, rel=0.1, abs=1e-3)
    x = g[:, 0]                                          # Clarke: corr(tau) = J0(2 pi fd tau)
    corr = [np.real(np.mean(x[:, lag:] * np.conj(x[:, :-lag]))) / np.mean(np.abs(x) ** 2) for lag in (40, 383)]
    assert corr[0] == pytest.approx(0.94, abs=0.05)      # J0(0.25) = 0.984 .. 0.94 for N = 16 sinusoids
    assert abs(corr[1]) < 0.15                            # J0(2.405) = 0 (first zero)


def test_flat_default_is_disabled_and_sim_air_unchanged():
    cfg = Config()
    assert not Multipath.from_config(cfg).enabled
    cfg.channel.multipath, cfg.channel.delay_spread_ns = "exponential", 0.0
    assert not Multipath.from_config(cfg).enabled        # zero spread is the flat channel


def test_receiver_model_is_exact_for_a_single_tap_and_degrades_with_spread():
    """With one unit tap the symbol-level model is the identity; with spread it is ISI plus a per-link
    gain error that the single-carrier receiver cannot undo (NMSE grows with the spread)."""
    cfg = Config()
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 3000)) + 1j * rng.standard_normal((4, 3000)))
    one = np.ones((4, 1), complex)
    y = multipath_rx.receive(x, np.zeros(1, int), one, np.ones(4, bool), cfg.phy)
    assert np.allclose(y, x.sum(0), atol=1e-6)
    nmse = []
    for spread in (0.1, 1.0, 8.0):
        mp = Multipath("exponential", spread)
        err = []
        for rnd in range(8):
            fir = mp.link_channels(0, rnd, 4, cfg.phy)
            assert fir.shape == (4, 2 * mp.length - 1)
            y = multipath_rx.receive(x, np.arange(fir.shape[1]), fir, np.ones(4, bool), cfg.phy)
            err.append(np.sum(np.abs(y - x.sum(0)) ** 2) / np.sum(np.abs(x.sum(0)) ** 2))
        nmse.append(np.mean(err))
    assert 0 < nmse[0] < 0.05 < nmse[1] < nmse[2]


def test_sim_air_with_multipath_is_seeded():
    import sys
    sys.path.insert(0, "tests")
    from loopback_helpers import make_cfg, make_plan
    cfg = make_cfg()
    cfg.channel.multipath, cfg.channel.delay_spread_ns = "tdl-a", 2000.0
    plan = make_plan(cfg, 6, 4000, np.random.default_rng(2), rnd=1)
    plan.sigma_c2 = 0.0
    a = SimAir(cfg).transmit(plan, np.random.default_rng(0)).aggregate
    b = SimAir(cfg).transmit(plan, np.random.default_rng(5)).aggregate
    assert np.array_equal(a, b)
    assert aggregate_nmse(a, plan.expected_aggregate()) > 0.05


@pytest.mark.parametrize("key, value, needle", [
    ("channel.multipath", "tdl-z", "must be one of"),
    ("channel.delay_spread_ns", "-1", "must be in"),
    ("channel.rician_k", "-1", "must be in"),
    ("channel.rician_k", "nan", "finite number"),
])
def test_bad_channel_keys_are_one_clear_line(key, value, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, [f"{key}={value}"])
    with pytest.raises(ConfigError, match="at most 2048"):
        load_config(None, ["channel.multipath=exponential", "channel.delay_spread_ns=900000"])


def test_multipath_is_refused_on_hardware_airs():
    with pytest.raises(ConfigError, match="sim and loopback airs only"):
        load_config(None, ["air.name=zmq", "channel.multipath=tdl-a", "channel.delay_spread_ns=1000"])
