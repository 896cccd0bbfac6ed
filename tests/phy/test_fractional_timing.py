"""phy/fractional_timing.TimingScore is the score it replaces: |<shape(frame, delayed_taps(taps, tau), sps)[a:b],
seg>| at every delay (to rounding), and its golden-section search finds the delay a received preamble carries."""
from __future__ import annotations

import numpy as np
import pytest

from otafl_sdr.phy.fractional_timing import TimingScore
from otafl_sdr.phy.pulse_shaping import delayed_taps, rrc_taps, shape
from otafl_sdr.phy.sync import refine_fraction


@pytest.mark.parametrize("sps,span,n,pad", [(2, 8, 126, 64), (4, 8, 60, 64), (2, 6, 40, 10)])
def test_the_score_is_the_shaped_templates_correlation_at_every_delay(sps, span, n, pad):
    rng = np.random.default_rng(sps * 100 + n)
    taps = rrc_taps(sps, 0.35, span)
    frame = np.exp(1j * rng.uniform(0, 2 * np.pi, n))
    a, b = pad + len(taps) - 1, pad + n * sps - (len(taps) - 1)
    seg = (0.7 + 0.2j) * shape(frame, delayed_taps(taps, 0.23, pad), sps)[a:b]
    seg = seg + 0.05 * (rng.standard_normal(b - a) + 1j * rng.standard_normal(b - a))
    score = TimingScore(frame, taps, sps, pad, a, b, seg)
    for tau in np.linspace(-0.6, 0.6, 13):
        direct = abs(np.vdot(shape(frame, delayed_taps(taps, tau, pad), sps)[a:b], seg))
        assert score(tau) == pytest.approx(direct, rel=1e-12)
    assert refine_fraction(score, -0.6, 0.6, iters=40) == pytest.approx(0.23, abs=0.02)


def test_a_segment_of_another_length_is_refused():
    taps = rrc_taps(2, 0.35, 8)
    with pytest.raises(ValueError, match="segment"):
        TimingScore(np.ones(40), taps, 2, 10, 26, 60, np.ones(10))
