"""One carrier offset from a calibration's repeats of one link, with a standard error that holds when the
radios' phase noise, not only thermal noise, moves each repeat's pilot offset (issue 34).

Each repeat r states its pilot offset f_r (cycles/sample) with a thermal standard error sigma_r
(calibration/estimation.py). Their mean f = mean_r f_r has the error sqrt(mean_r sigma_r^2 / R) when the
repeats scatter as stated. A real radio's phase noise adds an error the pilots cannot state: the simulated
lab's 1.2e-4 rad / sqrt(sample) puts a 4k-sample pilot's offset ~0.5 Hz off at 1 MS/s, 25 x its stated
0.02 Hz. At the stated error the mean of such repeats passed the 3-sigma gate (offset_gate.significant_cfo) as an
offset on a shared reference that has none: it was pre-compensated, referred to device time by a span fit over
repeats 18 s apart that picked a wrong cycle (calibration/phase_ref.py), and one client of the node lab arrived
0.4-3 rad off.

So the repeats' own scatter s (R - 1 degrees of freedom) is tested against the stated error: when
(R - 1) s^2 / mean(sigma_r^2) exceeds chi^2_{R-1}'s 1 - DISPERSION_ALPHA quantile the repeats scatter beyond
their thermal error, and the offset's standard error becomes s / sqrt(R) x t_{R-1}(1 - 0.00135) / 3, Student's
quantile keeping the 3-sigma gate's false-offset rate at the normal 0.27 % despite the few degrees of freedom
(R = 3: 3.7 s; 5: 1.0 s; 10: 0.45 s). Repeats that scatter as stated keep the stated error: inflating it by
Student's quantile for a scatter that is only thermal made the phase reference's span test refuse repeats a
second apart (calibration/phase_ref.py; the node phase-reference test failed 8 of 14 runs that way)."""
from __future__ import annotations

import functools
import math

import numpy as np

from otafl_sdr.calibration.offset_gate import CFO_SIGNIFICANCE

GATE_TAIL = 0.00135         # one-sided normal tail beyond offset_gate.CFO_SIGNIFICANCE (3) standard errors
DISPERSION_ALPHA = 1e-3     # repeats scattering as stated are called excess this often


def combined_offset(cfos, cfo_stds) -> tuple[float, float]:
    """(mean offset, its standard error) of R repeats' pilot offsets ``cfos`` (R,) with their stated thermal
    standard errors ``cfo_stds`` (R,), all in cycles/sample (module doc)."""
    f = np.asarray(cfos, dtype=np.float64)
    var = float(np.mean(np.asarray(cfo_stds, dtype=np.float64) ** 2))
    R = f.size
    stated = math.sqrt(var / R)
    if R < 2 or var <= 0.0:
        return float(np.mean(f)), stated
    s2 = float(np.var(f, ddof=1))
    excess, q = _quantiles(R)
    if (R - 1) * s2 / var <= excess:
        return float(np.mean(f)), stated
    return float(np.mean(f)), max(stated, math.sqrt(s2 / R) * q)


@functools.lru_cache(maxsize=32)
def _quantiles(R: int) -> tuple[float, float]:
    """(chi^2_{R-1} at 1 - DISPERSION_ALPHA, t_{R-1} at 1 - GATE_TAIL over the gate's sigmas) for R repeats."""
    from scipy.stats import chi2, t as student_t
    return (float(chi2.ppf(1.0 - DISPERSION_ALPHA, R - 1)),
            float(student_t.ppf(1.0 - GATE_TAIL, R - 1)) / CFO_SIGNIFICANCE)
