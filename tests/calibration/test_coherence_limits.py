"""Drift limits from the NMSE excess they cause (calibration/coherence_limits.py, issue 34 item 3): the
first-order prediction against the burst modem (phy/modem.py) with per-client residuals, at a theory NMSE of
0.02 where a 0.1 rad error shows; the limits are where the predicted excess is the allowed one."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.calibration.coherence_limits import (EXCESS, cfo_limit_hz, mean_square_phase, phase_limit,
                                                     predicted_excess)
from otafl_sdr.config.radio import PhyConfig
from otafl_sdr.phy import Modem
from otafl_sdr.phy.packing import symbols_for

_spec = importlib.util.spec_from_file_location(
    "bench_coherence_tolerance", Path(__file__).resolve().parents[2] / "benchmarks" / "bench_coherence_tolerance.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_the_limits_are_where_the_predicted_excess_is_the_allowed_one():
    th, T = 0.02, 0.0154
    assert phase_limit(th) == pytest.approx(0.0316, abs=1e-4)
    assert predicted_excess([phase_limit(th)], [0.0], [1.0], T, th) == pytest.approx(EXCESS)
    assert predicted_excess([0.0], [cfo_limit_hz(th, T)], [1.0], T, th) == pytest.approx(EXCESS)
    assert cfo_limit_hz(th, T) == pytest.approx(0.57, abs=0.01)
    assert mean_square_phase(0.1, 0.0, T) == pytest.approx(0.01)
    assert phase_limit(50.0) > 1.5                   # a DP aggregate's theory of 50: radians go unseen


@pytest.mark.parametrize("kind,value", [("phase", 0.1), ("cfo", 1.0)])
def test_the_first_order_excess_is_what_the_modem_measures(kind, value):
    modem, rng, K, d, th = Modem(PhyConfig()), np.random.default_rng(34), 3, 14_710, 0.02
    T = modem.burst_samples(symbols_for(d)) / bench.RATE
    spread = bench.spread(K, value)
    ph = spread if kind == "phase" else np.zeros(K)
    f = spread if kind == "cfo" else np.zeros(K)
    ratios, pred = [], []
    for _ in range(6):
        u = bench.updates(K, d, rng, 0.0)                       # independent updates
        ratios.append(bench.one_round(modem, u, ph, f, th, rng))
        pu = u / K
        w = np.sum(pu ** 2, axis=1) / float(np.sum(pu.sum(axis=0) ** 2))
        pred.append(1 + predicted_excess(ph, f, w, T, th))
    se = np.std(ratios, ddof=1) / np.sqrt(len(ratios))
    assert np.mean(ratios) - 1 == pytest.approx(np.mean(pred) - 1, rel=0.15, abs=4 * se), (ratios, pred)
    assert np.mean(ratios) > 1.08                                # visible at this SNR
