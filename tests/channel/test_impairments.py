"""Front-end impairment models (otafl_sdr/channel/impairments.py) against their definitions, pure numpy."""
import numpy as np
import pytest

from otafl_sdr.channel import impairments as imp


def _cn(n, seed=0):
    r = np.random.default_rng(seed)
    return (r.standard_normal(n) + 1j * r.standard_normal(n)) / np.sqrt(2)


@pytest.mark.parametrize("receiver", [False, True])
@pytest.mark.parametrize("mag_db, phase_deg", [(0.5, 2.0), (-1.0, 5.0), (0.1, -1.0)])
def test_iq_image_level_matches_the_image_rejection_ratio(receiver, mag_db, phase_deg):
    """A tone at +f through the imbalance gets an image at -f, |image|^2 / |tone|^2 = 1 / IRR."""
    n, k = 4096, 300
    x = np.exp(2j * np.pi * k * np.arange(n) / n)
    Y = np.fft.fft(imp.iq_imbalance(x, mag_db, phase_deg, receiver))
    measured = 10 * np.log10(abs(Y[k]) ** 2 / abs(Y[n - k]) ** 2)
    assert measured == pytest.approx(imp.image_rejection_db(mag_db, phase_deg), abs=1e-6)
    assert imp.image_rejection_db(0.0, 0.0) == float("inf")
    assert np.array_equal(imp.iq_imbalance(x, 0.0, 0.0, receiver), x)


def test_rapp_compression_curve():
    a = np.array([0.0, 0.1, 1.0, 10.0, 1e3])
    y = np.abs(imp.rapp(a.astype(complex), 1.0, 2.0))
    assert y == pytest.approx(a / (1 + a ** 4) ** 0.25)
    assert y[2] == pytest.approx(2 ** -0.25)          # at saturation: -1.5 dB for p = 2
    assert y[-1] == pytest.approx(1.0, abs=1e-6) and y[1] == pytest.approx(0.1, rel=1e-4)
    x = _cn(1000) * 0.3
    assert np.allclose(np.angle(imp.rapp(x, 1.0, 3.0)), np.angle(x))   # AM/AM only


def test_wiener_phase_noise_increments_and_spectrum():
    """var(theta[n + m] - theta[n]) = m s^2; the tone's mean stays unit-power."""
    s = 0.01
    th = imp.wiener_phase(np.random.default_rng(1), 200_000, s)
    for m in (1, 10, 100):
        assert np.var(th[m:] - th[:-m]) == pytest.approx(m * s ** 2, rel=0.05)
    y = imp.phase_noise(np.ones(len(th)), th)
    assert np.mean(np.abs(y) ** 2) == pytest.approx(1.0)


def test_dc_and_cfo():
    x = _cn(4096)
    assert np.mean(imp.dc_offset(x, 0.2 - 0.1j) - x) == pytest.approx(0.2 - 0.1j)
    k = 37
    y = imp.cfo(np.ones(4096), k / 4096)
    assert np.argmax(np.abs(np.fft.fft(y))) == k
