"""Channel phases referred to device time (issue 25, item 2): a calibration's repeats of one link, taken a
second or so apart, combined as one gain at one device instant ``t_ref`` with a carrier offset measured over
their whole span.

With a carrier offset f (cycles/sample) a link's gain turns as h(t) = h(t_ref) exp(j 2 pi f rate (t - t_ref)).
Each repeat r measures h_r at device time t_r (its pilot's centre) and f_r from its own pilot (a ~4k-sample
baseline: standard error ~2e-8 cycles/sample on the simulator lab, i.e. 0.14 rad/s of phase). Averaging the
h_r as they are mixes phases f rate (t_r - t_s) apart; referring each to t_ref first with the pilots' offset,
then fitting the residual phase slope over the repeats' span (seconds, 1e5-1e6 samples: unambiguous once the
pilots' offset is taken out) gives an offset a thousand times finer, and the gain at t_ref. A client that
pre-compensates with that offset, its rotation referenced to the same device time
(:func:`~otafl_sdr.calibration.csi.precompensate` with ``t_ref``), arrives with the calibrated phase in every
round, not a phase that restarts with each burst.

Only an offset the pilots measured beyond 3 standard errors is referred (the same gate as the pre-compensation,
offset_gate.significant_cfo); otherwise the repeats are combined as before (a shared 10 MHz: the offset is noise).
Nor is one whose span cannot resolve it: the fit unwraps the residual phase between neighbouring repeats,
which holds while 3 standard errors of the pilots' offset turn less than half a cycle over the largest gap,
3 sigma_f rate gap < 1/2 (sigma_f the repeats' offset error, calibration/repeats_offset.py). In the oscillator
lab (device time 18 s a capture) the pilots' 0.02 Hz (and, with the radios' phase noise, 0.5 Hz) turn by
cycles between repeats: a fit there picked a wrong cycle, the pre-compensation extrapolated it from t_ref, and
a client arrived radians off in the next rounds (seen by the testbed's per-client sounding,
net/uhd_sounding.py). Such an offset is not resolved by any span: the client pre-compensates the pilots'
offset alone and each round's per-client sounding (air.coherence) reads what is left."""
from __future__ import annotations

import math

import numpy as np

SIGNIFICANCE = 3.0
MIN_SPAN_S = 0.05         # repeats closer than this in device time (UHD's simulator in process: no device time)
                          # are referred with the pilots' offset only, never fitted over a span of noise


def refer_repeats(h, h_std, cfo: float, cfo_std: float, times, rate: float):
    """(h at t_ref, cfo, cfo_std, t_ref) from the repeats' gains ``h`` (R,), their standard errors, the pilots'
    combined offset and its standard error, the repeats' device times (R,) and the sample rate. Returns None
    when nothing is to be referred (no times, no significant offset)."""
    h = np.asarray(h, dtype=np.complex128)
    if times is None or any(t is None for t in times) or not rate or not abs(cfo) > SIGNIFICANCE * cfo_std:
        return None
    t = np.asarray(times, dtype=np.float64)
    gap = float(np.max(np.diff(np.sort(t)))) if len(t) > 1 else 0.0
    if gap >= MIN_SPAN_S and SIGNIFICANCE * cfo_std * rate * gap >= 0.5:
        return None                           # the span cannot resolve the pilots' offset (module doc)
    t_ref = float(np.mean(t))
    dt = t - t_ref
    f = float(cfo)
    if len(h) > 1 and float(np.ptp(dt)) >= MIN_SPAN_S:
        z = h * np.exp(-2j * np.pi * f * rate * dt)
        phase = np.unwrap(np.angle(z * np.conj(z[0])))          # residual phase, from the pilots' offset
        slope = float(np.polyfit(dt, phase, 1)[0])             # rad/s
        f += slope / (2 * np.pi * rate)
        sig_phase = float(np.mean(np.asarray(h_std, dtype=np.float64))) / max(float(np.mean(np.abs(h))), 1e-300)
        cfo_std = sig_phase / math.sqrt(2.0 * float(np.sum(dt ** 2))) / (2 * np.pi * rate)
    h_ref = complex(np.mean(h * np.exp(-2j * np.pi * f * rate * dt)))
    return h_ref, f, float(cfo_std), t_ref
