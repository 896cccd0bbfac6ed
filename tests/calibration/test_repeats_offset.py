"""calibration/repeats_offset.py: the repeats' carrier offset and its standard error, the stated (thermal) one
unless the repeats scatter beyond it (the radios' phase noise, issue 34), and the 3-sigma gate's false-offset
rate either way; the node lab's tests are tests/net/test_net_uhd_phase_ref.py (a real 1 Hz offset, repeats a
second apart) and docs/lab.md's three-client lab (a shared reference with phase noise)."""
import numpy as np
import pytest
from scipy.stats import t as student_t

from otafl_sdr.calibration.csi import significant_cfo
from otafl_sdr.calibration.estimation import LinkEstimate
from otafl_sdr.calibration.procedures import _combine
from otafl_sdr.calibration.repeats_offset import combined_offset

THERMAL = 2e-8               # cycles/sample: the pilots' stated 0.02 Hz at 1 MS/s


def _ests(cfos, cfo_std=THERMAL):
    return [LinkEstimate(True, h=0.8 + 0j, h_std=1e-3, cfo=c, cfo_std=cfo_std, snr_db=25.0) for c in cfos]


def test_phase_noise_in_the_repeats_offsets_is_not_read_as_a_significant_offset():
    """A shared reference (true offset 0) with the radios' phase noise: each repeat's pilot offset ~0.5 Hz off,
    its stated error 0.02 Hz. Their mean, 0.3 Hz, would pass the gate at the stated error (and be
    pre-compensated and referred); with the repeats' scatter as the error it does not, and nothing is referred."""
    cfos = [8e-7, -1e-7, 5e-7, 0.0]
    link = _combine("client 0", _ests(cfos), [None] * 4, times=[0.0, 18.0, 36.0, 54.0], rate=1e6)
    assert link.cfo == pytest.approx(3e-7)
    assert link.cfo_std == pytest.approx(np.std(cfos, ddof=1) / 2 * student_t.ppf(1 - 0.00135, 3) / 3)
    assert significant_cfo(np.array([link.cfo]), np.array([link.cfo_std]))[0] == 0 and link.t_ref is None
    # at the stated error alone the same mean is 26 standard errors: the bug
    assert abs(link.cfo) > 3 * THERMAL / 2


def test_repeats_that_scatter_as_stated_keep_the_stated_error():
    """The node phase-reference test's calibration (a client radio 1 Hz off, repeats ~0.8 s apart): the three
    pilot offsets scatter as their stated 0.038 Hz; the error stays the stated one, so the span fit refers them
    (Student's quantile on this scatter, 3.7 x, made phase_ref refuse the span: 8 of 14 runs failed)."""
    cfos = [9.657e-07, 1.0494e-06, 9.882e-07]
    stds = [3.836e-08, 3.805e-08, 3.889e-08]
    f, s = combined_offset(cfos, stds)
    assert f == pytest.approx(np.mean(cfos)) and s == pytest.approx(np.sqrt(np.mean(np.square(stds)) / 3))
    h = 0.8 * np.exp(2j * np.pi * 1e-6 * 1e6 * np.array([0.0, 0.872, 1.652]))
    link = _combine("client 0", [LinkEstimate(True, h=x, h_std=1e-3, cfo=c, cfo_std=d, snr_db=25.0)
                                 for x, c, d in zip(h, cfos, stds)], [None] * 3,
                    times=[1796005967.649, 1796005968.521, 1796005969.301], rate=1e6)
    assert link.t_ref is not None and link.cfo == pytest.approx(1e-6, rel=1e-3)


@pytest.mark.parametrize("R", [3, 5])
def test_the_gates_false_offset_rate_holds_with_and_without_phase_noise(R):
    """True offset 0, 20,000 calibrations: repeats scattering as stated, and 25 x beyond it (the lab's phase
    noise). The gate |cfo| > 3 cfo_std fires near its normal 0.27 % in both (at the stated error alone the
    phase-noise case fires nearly always), except that at 3 repeats a scatter of 2 degrees of freedom reads as
    thermal by chance ~1 % of the time (0.95 % measured); a real 1 Hz offset with thermal repeats is always
    found."""
    rng = np.random.default_rng(11 + R)
    stds = np.full(R, THERMAL)
    for spread in (1.0, 25.0):
        draws = spread * THERMAL * rng.standard_normal((20000, R))
        fired = np.mean([abs(f) > 3 * s for f, s in (combined_offset(x, stds) for x in draws)])
        naive = np.mean(np.abs(draws.mean(axis=1)) > 3 * THERMAL / np.sqrt(R))
        print(f"R = {R}, scatter {spread:g} x stated: the gate fires {fired:.4%} (stated error alone {naive:.2%})")
        assert fired < (0.006 if spread == 1.0 or R > 3 else 0.013)
    found = [abs(f) > 3 * s for f, s in (combined_offset(1e-6 + x, stds)
                                         for x in THERMAL * rng.standard_normal((2000, R)))]
    assert all(found)
