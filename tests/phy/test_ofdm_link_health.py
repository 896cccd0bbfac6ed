"""An OFDM round's link health (issue 34 item 2: ``link_health`` on every uhd round, OFDM included): the
reference statistics phy/ofdm.demodulate reports (reference_statistics) read through calibration/link_health
what the link did to the frame, on known channels: a calm link (the reference as calibrated) reads 0 dB, 0 rad,
no timing offset; a common gain and phase, a carrier offset and a subcarrier the calibration no longer fits
are read back; the CFO's stated standard error is what its scatter is over noise draws; none of it depends on
the payload."""
from __future__ import annotations

import math

import numpy as np
import pytest

from otafl_sdr.calibration.link_health import link_health
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.ofdm_burst import client_stream, ofdm_frame

D = 2000                   # reals in the payload
SIGMA = 0.02               # noise per real coordinate (time domain = per subcarrier: unitary FFT)


def _frame():
    lay = OfdmLayout()
    frame = ofdm_frame(lay, D, lay.data_pos, 1, 0)
    return lay, frame


def _capture(lay, frame, rng, payload, *, gain=1.0 + 0j, cfo=0.0, notch=None, shift=0):
    """One client, its reference c = 1 on every subcarrier (A_k = 1), through ``gain`` (common), ``notch``
    (subcarrier position -> extra factor: a subcarrier the calibration no longer fits), a carrier offset
    ``cfo`` (cycles/sample) and ``shift`` samples of late arrival; noise SIGMA per real coordinate."""
    alpha = np.ones(lay.used, np.complex128)
    ref = np.ones(lay.used, np.complex128)
    X = client_stream(frame, payload, alpha, ref)
    if notch is not None:
        for k, f in notch.items():
            X[:, k] *= f
    x = lay.to_time(X) * gain
    y = np.concatenate([np.zeros(shift, np.complex128), x, np.zeros(64, np.complex128)])
    y = y * np.exp(2j * np.pi * cfo * np.arange(len(y)))
    y = y + SIGMA * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    return y


def _health(lay, frame, y, backoff=4):
    """The receiver as the uhd air runs it: the FFT window ``backoff`` samples into the prefix (a linear phase
    over the subcarriers that the common gain and the reference points must not read as a loss or a spread)."""
    A = np.ones(lay.used, np.complex128)
    res = demodulate(y, lay, D // 2, frame.carriers, frame.n_ofdm, A, search=frame.search, backoff=backoff)
    assert res.ok, res.reason
    extra = {"timing": res.timing, "rho": res.rho, **res.extra}
    return res, link_health(extra, frame.lead * lay.symbol_len + frame.rx_delay)


def test_a_calm_link_reads_as_calibrated_and_the_figures_never_see_the_payload():
    lay, frame = _frame()
    rng = np.random.default_rng(1)
    u = rng.uniform(-1, 1, D)
    noise_seed = 7
    h = {}
    for name, payload in {"random": u, "zero": np.zeros(D), "other": -u[::-1]}.items():
        _, h[name] = _health(lay, frame, _capture(lay, frame, np.random.default_rng(noise_seed), payload))
    calm = h["zero"]
    assert abs(calm["gain_db"]) < 0.05 and abs(calm["phase_rad"]) < 0.01 and calm["timing_offset"] == 0
    assert abs(calm["cfo"]) < 4 * calm["cfo_std"] and 0 < calm["cfo_std"] < 1e-4
    assert calm["rho"] > 0.99 and calm["nmse_pilots"] < 0.01
    lo, hi = calm["subcarrier_gain_db"]
    assert -0.6 < lo <= hi < 0.6
    assert len(calm["reference"]) == 52 and all(abs(complex(*p) - 1) < 0.1 for p in calm["reference"])
    for name in ("random", "other"):       # training and pilots only: the same figures whatever the payload
        for k in ("gain_db", "phase_rad", "cfo", "cfo_std", "timing_offset", "rho", "subcarrier_gain_db", "reference"):
            assert h[name][k] == calm[k], (name, k)


def test_a_common_gain_phase_offset_and_a_faded_subcarrier_are_read_back():
    lay, frame = _frame()
    rng = np.random.default_rng(2)
    u = rng.uniform(-1, 1, D)
    g = 1.4 * np.exp(0.7j)                  # +2.92 dB, 0.7 rad
    cfo = 2e-4                              # cycles/sample (200 Hz at 1 MS/s)
    _, h = _health(lay, frame, _capture(lay, frame, rng, u, gain=g, cfo=cfo, notch={10: 0.5}))
    assert h["gain_db"] == pytest.approx(20 * math.log10(1.4), abs=0.1)
    n0 = frame.lead * lay.symbol_len           # the phase at the frame's first sample: the offset's turn by then
    assert h["phase_rad"] == pytest.approx(0.7 + 2 * math.pi * cfo * n0, abs=0.05)
    assert abs(h["cfo"] - cfo) < 5 * h["cfo_std"]
    lo, hi = h["subcarrier_gain_db"]
    assert lo == pytest.approx(20 * math.log10(1.4 * 0.5), abs=0.5) and hi == pytest.approx(20 * math.log10(1.4), abs=0.6)
    _, late = _health(lay, frame, _capture(lay, frame, rng, u, shift=5))
    assert late["timing_offset"] == 5


def test_the_stated_standard_errors_are_the_scatter_over_noise_draws():
    """200 captures of a link with no offset: the CFO readings' spread over their stated standard error is
    1 within its sampling error (an understated error would make calm links read as drift; an overstated one
    would hide drift: calibration/link_health.CFO_SIGNIFICANCE); so is every subcarrier's reference magnitude
    over ``subcarrier_std`` (the figure a calm link's weakest subcarrier is judged by)."""
    lay, frame = _frame()
    rng = np.random.default_rng(3)
    u = rng.uniform(-1, 1, D)
    z, zk = [], []
    for _ in range(200):
        res, h = _health(lay, frame, _capture(lay, frame, rng, u))
        z.append(h["cfo"] / h["cfo_std"])
        g = abs(res.extra["gain"])
        zk.extend((np.abs(res.extra["reference"]) / g - 1) / h["subcarrier_std"])
    s = float(np.std(z))
    assert abs(float(np.mean(z))) < 4 / math.sqrt(200)
    assert 0.8 < s < 1.2, s                                 # 200 draws: the std's s.e. is 0.05
    sk = float(np.std(zk))
    assert 0.9 < sk < 1.1, sk                               # 10,400 readings
    print(f"cfo z spread {s:.3f}, subcarrier z spread {sk:.3f}")
