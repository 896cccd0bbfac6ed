"""The aggregate's NMSE split into a common scale and what is left (transmission.aggregate_scale_and_residual,
issue 34's 3 % question): a reading below theory is either less noise delivered (the residual) or a receiver
scale error (the scale), and the two are told apart exactly."""
import numpy as np
import pytest

from otafl_sdr.transmission import aggregate_nmse, aggregate_scale_and_residual


def test_nmse_is_the_scale_error_squared_plus_the_residual():
    rng = np.random.default_rng(0)
    g = rng.standard_normal(20_000)
    noise = 0.3 * rng.standard_normal(20_000)
    est = 0.97 * g + noise
    c, r = aggregate_scale_and_residual(est, g)
    assert aggregate_nmse(est, g) == pytest.approx((c - 1) ** 2 + r, rel=1e-12)
    assert c == pytest.approx(0.97, abs=3 * 0.3 / np.sqrt(20_000) * 1.0 / np.sqrt(np.mean(g ** 2)))
    # the residual reads the delivered noise (0.09 per coordinate over ||g||^2 / d ~ 1), within its chi-square
    assert r / (0.09 * 20_000 / np.sum(g ** 2)) == pytest.approx(1.0, abs=4 * np.sqrt(2 / 20_000))


def test_no_intended_sum_gives_nan():
    c, r = aggregate_scale_and_residual(np.ones(4), np.zeros(4))
    assert np.isnan(c) and np.isnan(r)
