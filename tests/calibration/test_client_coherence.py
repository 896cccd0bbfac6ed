"""Per-client gain, phase and carrier offset from time-orthogonal reference slots (calibration/client_coherence.py,
issue 34 item 2): unbiased, and each standard error is the estimate's scatter over noisy frames."""
from __future__ import annotations

import numpy as np
import pytest

from otafl_sdr.calibration.client_coherence import client_estimates
from otafl_sdr.phy.zadoff_chu import zadoff_chu

SYM_RATE = 5e5            # 1 MS/s at 2 samples per symbol
L = 139


def _frame(rng, truth: dict, c: float, noise_var: float):
    """Three clients' slots back to back after 100 symbols of anything; truth: client -> (g, cfo_hz)."""
    r = zadoff_chu(L, 1)
    z = np.zeros(100 + 3 * L, dtype=np.complex128)
    slots, refs = {}, {}
    for i, (g, f) in truth.items():
        start = 100 + i * L
        k = np.arange(L)
        z[start:start + L] = c * g * np.exp(2j * np.pi * f / SYM_RATE * (k - (L - 1) / 2)) * r
        slots[i], refs[i] = (start, L), r
    z += np.sqrt(noise_var) * (rng.standard_normal(z.size) + 1j * rng.standard_normal(z.size))
    return z, slots, refs


def test_each_clients_phase_offset_and_gain_come_back_with_their_standard_errors():
    rng = np.random.default_rng(34)
    truth = {0: (1.0, 0.0), 1: (0.9 * np.exp(0.1j), 5.0), 2: (1.1 * np.exp(-2.0j), -40.0)}
    c, nv = 0.1, 1e-4                                   # reference SNR 17 dB per symbol
    runs = [client_estimates(*_frame(rng, truth, c, nv), c, nv, SYM_RATE) for _ in range(300)]
    for i, (g, f) in truth.items():
        est = [r[i] for r in runs]
        ph = np.array([e["phase_rad"] for e in est])
        cfo = np.array([e["cfo_hz"] for e in est])
        gdb = np.array([e["gain_db"] for e in est])
        assert all(e["client"] == i for e in est)
        assert np.mean(np.angle(np.exp(1j * (ph - np.angle(g))))) == pytest.approx(0.0, abs=3 * np.std(ph) / 17)
        assert np.mean(cfo) == pytest.approx(f, abs=3 * np.std(cfo) / 17)
        assert np.mean(gdb) == pytest.approx(20 * np.log10(abs(g)), abs=3 * np.std(gdb) / 17 + 1e-3)
        # the reported standard errors are the scatter (within 15 %)
        assert np.std(ph) == pytest.approx(np.median([e["phase_std"] for e in est]), rel=0.15)
        assert np.std(cfo) == pytest.approx(np.median([e["cfo_std_hz"] for e in est]), rel=0.15)
        assert np.std(gdb) == pytest.approx(np.median([e["gain_db_std"] for e in est]), rel=0.15)
    # one 139-symbol slot (0.28 ms) cannot tell a 5 Hz step by its offset (standard error ~19 Hz here): such a
    # step is seen through the phase, 2 pi 5 Hz x the time between rounds (0.1 rad after 3 ms), whose standard
    # error is 0.02 rad per slot at this SNR
    cfo_std = float(np.median([r[1]["cfo_std_hz"] for r in runs]))
    assert 10.0 < cfo_std < 30.0
    assert float(np.median([r[1]["phase_std"] for r in runs])) < 0.03


def test_a_slot_that_does_not_fit_is_refused():
    with pytest.raises(ValueError):
        client_estimates(np.zeros(10), {0: (5, 10)}, {0: np.ones(10)}, 1.0, 1e-4, SYM_RATE)
