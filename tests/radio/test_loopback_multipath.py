"""Multipath on the loopback air (a ``filter.fir_filter_ccc`` per link, channel/multipath.py) against the
sim air's numpy model of the same channel and receiver (channel/multipath_rx.py): same seed, same taps,
same statistics.

The single-carrier modem has no equaliser: per-link CSI (perfect here) handles each link's main arrival
only, every other tap is inter-symbol interference, so the aggregate degrades with the delay spread.
Measured (K = 8, d = 20,000, perfect CSI, 12 rounds per cell, uhd.rate = 1 MS/s so 1 sample = 1000 ns,
sps = 2; noiseless aggregate NMSE, and NMSE / theory at 10 dB SNR):

    profile      RMS spread   noiseless NMSE         NMSE/theory @ 10 dB
                 (samples)    sim       loopback     sim      loopback
    flat         0            1e-32     2e-15        0.99     1.00
    exponential  0.5          0.025     0.026        7.4      7.6
    exponential  1            0.054     0.054        14.9     15.0
    exponential  2            0.093     0.094        25.5     25.8
    exponential  4            0.147     0.151        38.5     39.1
    exponential  8            0.316     0.321        86.0     87.3
    tdl-a        0.5          0.0099    0.0098       3.5      3.5
    tdl-a        2            0.045     0.046        13.0     13.3
    tdl-a        8            0.111     0.113        30.4     30.9
    tdl-c        2            0.059     0.061        17.3     17.7
    tdl-c        8            0.148     0.151        41.1     41.7

(sim and loopback agree within 4 % in every cell; the flat channel is unchanged.)"""
import numpy as np
import pytest

from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.radio.loopback_air import LoopbackAir
from otafl_sdr.transmission import aggregate_nmse

from loopback_helpers import make_cfg, make_plan

pytestmark = [pytest.mark.gnuradio]

ROUNDS, K, D = 6, 8, 20_000


def _both(cfg, rounds=ROUNDS, seed=7):
    """Per round: (NMSE loopback, NMSE sim, NMSE between the two aggregates), noiseless."""
    rng = np.random.default_rng(seed)
    out = []
    with LoopbackAir(cfg) as lb:
        sim = SimAir(cfg)
        for r in range(rounds):
            plan = make_plan(cfg, K, D, rng, rnd=r)
            plan.sigma_c2 = 0.0
            e = plan.expected_aggregate()
            a = lb.transmit(plan, np.random.default_rng(r))
            b = sim.transmit(plan, np.random.default_rng(r))
            assert a.ok and b.ok, a.reason
            out.append((aggregate_nmse(a.aggregate, e), aggregate_nmse(b.aggregate, e),
                        aggregate_nmse(a.aggregate, b.aggregate)))
        firs = lb._channel.firs
    return np.array(out), firs


@pytest.mark.parametrize("profile, spread_ns", [("exponential", 2000.0), ("tdl-a", 2000.0)])
def test_sim_and_loopback_agree_under_multipath(profile, spread_ns):
    """Same seeded taps on both airs: the mean NMSE agrees within 10 % (measured <= 5 %), each round's
    two aggregates are far closer to each other than to the ideal one, and both are far from flat."""
    cfg = make_cfg()
    cfg.channel.multipath, cfg.channel.delay_spread_ns = profile, spread_ns
    res, firs = _both(cfg)
    mp = Multipath.from_config(cfg)
    assert len(firs) == K and len(firs[0].taps()) == 2 * mp.length - 1
    lb, sim, between = res.mean(axis=0)
    assert lb == pytest.approx(sim, rel=0.10)
    assert between < 0.25 * lb
    assert lb > 0.01 and sim > 0.01              # flat: < 1e-9 (test below)


def test_delay_spread_degrades_the_single_carrier_aggregate_on_both_airs():
    nmse = []
    for spread_ns in (0.0, 500.0, 8000.0):
        cfg = make_cfg()
        cfg.channel.multipath, cfg.channel.delay_spread_ns = "exponential", spread_ns
        res, _ = _both(cfg, rounds=4)
        nmse.append(res[:, :2].mean(axis=0))
    assert np.all(nmse[0] < 1e-9)
    assert np.all(nmse[0] < nmse[1]) and np.all(nmse[1] < nmse[2]) and np.all(nmse[2] > 0.05)


def test_flat_default_builds_no_fir_and_is_exact():
    cfg = make_cfg()
    assert cfg.channel.multipath == "flat"
    res, firs = _both(cfg, rounds=2)
    assert firs == []
    assert np.all(res[:, 0] < 1e-9) and np.all(res[:, 1] < 1e-20)


def test_rician_first_tap_sim_and_loopback_agree():
    """A Rician first tap (K = 20: non-fading, its PDP power unchanged) on TDL-C: both airs still agree, and
    the draw differs from the Rayleigh one (K is applied)."""
    out = []
    for k in (0.0, 20.0):
        cfg = make_cfg()
        cfg.channel.multipath, cfg.channel.delay_spread_ns, cfg.channel.rician_k = "tdl-c", 2000.0, k
        res, _ = _both(cfg, rounds=4)
        out.append(res[:, 0].mean())
        assert res[:, 0].mean() == pytest.approx(res[:, 1].mean(), rel=0.10)
        assert res[:, 2].mean() < 0.25 * res[:, 0].mean()
    assert out[0] != pytest.approx(out[1], rel=0.01)
