"""calibration/phase_ref.py: a calibration's repeats of a link with a carrier offset, referred to one device
instant, with the offset fitted over their span (issue 25, item 2; the simulator lab's test is
tests/net/test_net_uhd_phase_ref.py)."""
import numpy as np
import pytest

from otafl_sdr.calibration.csi import precompensate
from otafl_sdr.calibration.phase_ref import refer_repeats

RATE = 1e6


def _repeats(f, h0, times, t_ref, phase_noise, rng):
    t = np.asarray(times)
    return h0 * np.exp(2j * np.pi * f * RATE * (t - t_ref) + 1j * phase_noise * rng.standard_normal(len(t)))


def test_the_gain_at_the_mean_instant_and_the_offset_over_the_span():
    rng = np.random.default_rng(3)
    f, h0 = 1e-6, 0.8 * np.exp(0.4j)
    times = [1795640918.2, 1795640918.8, 1795640919.65]
    t_ref = float(np.mean(times))
    h = _repeats(f, h0, times, t_ref, 1e-3, rng)
    # naive mean of the repeats: their phases 0.6 and 0.85 cycles apart -> a wrong gain
    assert abs(np.mean(h) - h0) > 0.3
    # the pilots' offset (2e-8 off, 0.13 rad/s) refined over the 1.45 s span
    got = refer_repeats(h, [1e-3 * 0.8] * 3, f + 2e-8, 2e-8 / 9, times, RATE)
    h_ref, f_fit, f_std, t = got
    assert t == pytest.approx(t_ref) and abs(h_ref - h0) < 5e-3
    assert f_fit == pytest.approx(f, abs=5e-10) and f_std < 1e-9
    # a client pre-compensating with that offset, its rotation continued from t_ref, arrives at h0's phase in a
    # burst any time later (sample n of the burst leaving at t: the channel turned 2 pi f rate (t - t_ref))
    for t_burst in (t_ref + 7.3, t_ref + 61.9):
        x = np.ones(64, np.complex64)
        y, t_send = precompensate(x, f_fit, 0.0, RATE, t_burst, t_ref=t)
        rx = h0 * np.exp(2j * np.pi * f * (RATE * (t_send - t_ref) + np.arange(64))) * y
        assert np.max(np.abs(np.angle(rx / h0))) < 0.1          # the residual offset, 1e-10 x a minute
        y0, _ = precompensate(x, f_fit, 0.0, RATE, t_burst)            # restarting at 0: the phase is lost
        rx0 = h0 * np.exp(2j * np.pi * f * (RATE * (t_send - t_ref) + np.arange(64))) * y0
        assert abs(np.angle(rx0[0] / h0)) == pytest.approx(
            abs(np.angle(np.exp(2j * np.pi * f * RATE * (t_send - t_ref)))), abs=1e-3)


def test_nothing_is_referred_without_times_or_a_significant_offset():
    h = [1 + 0j, 1 + 0.01j]
    assert refer_repeats(h, [1e-3] * 2, 1e-6, 1e-8, None, RATE) is None
    assert refer_repeats(h, [1e-3] * 2, 2e-8, 1e-8, [0.0, 1.0], RATE) is None     # 2 sigma: noise, not offset
    # repeats at one device instant (no device time): referred with the pilots' offset, no fit over noise
    h_ref, f, f_std, t = refer_repeats(h, [1e-3] * 2, 1e-6, 1e-8, [0.5, 0.5 + 1e-4], RATE)
    assert f == 1e-6 and f_std == 1e-8


def test_repeats_too_far_apart_for_the_pilots_offset_are_not_referred():
    """The oscillator lab's calibration: repeats 18 s apart in device time, the pilots' offset 0.02 Hz off
    (a standard error of 2e-8 cycles/sample): 3 of them turn by a cycle between repeats, so no fit over the
    span could tell which cycle; nothing is referred (a referral here extrapolated a wrong cycle)."""
    h = [1 + 0j, 1 + 0.01j, 1 - 0.01j]
    times = [100.0, 118.0, 136.0]
    assert refer_repeats(h, [1e-3] * 3, 2e-7, 2e-8, times, RATE) is None
    # the same repeats a second apart: resolvable, referred
    assert refer_repeats(h, [1e-3] * 3, 2e-7, 2e-8, [100.0, 101.0, 102.0], RATE) is not None
