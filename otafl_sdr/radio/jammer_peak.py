"""The jammer's planned DAC peak and the refusal, with advice that works as written (issue 34, item 5).

A uhd round's jammer sends alpha_cj n, n ~ CN(0, 2) per symbol (paper 000 eq. 15), checked before anything
is accounted at a JAMMER_PAPR_SIGMA peak of its amplitude: peak = 4.5 sqrt(2) alpha_cj / full scale (a
planned quantity). When peak > 1 the round is refused in one line that names the knob that actually sets
alpha_cj:

* the jammer's power cap binds (``plan.extra['cj_capped']``: alpha_cj = sqrt(P_cj / d), P_cj =
  d sigma_c2 10^(power.jammer_max_snr_db / 10)): alpha_cj follows the cap, so lowering
  ``power.jammer_max_snr_db`` by 20 log10(peak) dB brings the peak to the full scale (the ledger books the
  noise then sent);
* otherwise alpha_cj is the privacy rule's (Theorem 2 x ``power.jammer_multiple``, eq. 23 of paper 000, or the
  solved target, power/cj_target.py): alpha_cj^2 |h_cj|^2 = alpha_u^2 sigma^2 - sigma_c2, with sigma the
  noise the privacy target needs in aggregate units. The cap is not binding, so lowering it changes nothing
  until it falls below alpha_cj, and then only by breaking the target (the node lab's MLP run: the cap 90 dB
  stood ~60 dB above alpha_cj, so 15 dB lower gave the same refusal). alpha_cj scales with alpha_u (=
  sqrt(P) |h|_q K, P = d sigma_c2 10^(power.max_snr_db / 10), or ``power.alpha_u``): scaling alpha_u by r <= 1
  scales alpha_cj by at most r (r^2 alpha_u^2 sigma^2 - sigma_c2 <= r^2 (alpha_u^2 sigma^2 - sigma_c2)), so
  lowering ``power.max_snr_db`` (or ``power.alpha_u``) by 20 log10(peak) dB is sufficient and the privacy
  target is kept: the clients' signal and the jammer's noise shrink together, the noise the target needs
  stays the same in aggregate units (exactly at jammer_multiple = 1; above 1 the margin over Theorem 2's
  bound shrinks a little, never below the bound). With the jammer dominant the aggregate's NMSE barely moves. On hardware a
  higher jammer TX gain (then a recalibration: |h_cj| grows) does the same without touching the plan."""
from __future__ import annotations

import math

from otafl_sdr.errors import AirError
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE, JAMMER_PAPR_SIGMA

CALIBRATION_SPREAD_DB = 0.5     # the advice's margin for the next calibration (the floor and |h_cj| move ~1 %)


def jammer_peak(alpha_cj: float) -> float:
    """The jammer burst's planned JAMMER_PAPR_SIGMA peak over the DAC's full scale (> 1: refused)."""
    return JAMMER_PAPR_SIGMA * float(alpha_cj) * math.sqrt(2.0) / DAC_FULL_SCALE


def jammer_peak_advice(cfg, plan, peak: float) -> str:
    """What to change so that the jammer's burst fits (module doc): the knob that sets alpha_cj this round,
    by at least 20 log10(peak) dB, with the value to set."""
    pw = cfg.power
    db = 20.0 * math.log10(peak)
    # rounded up, plus CALIBRATION_SPREAD_DB: the next run re-measures the noise floor and the jammer's path
    step = math.ceil((db + CALIBRATION_SPREAD_DB) * 10.0) / 10.0
    capped = bool((plan.extra or {}).get("cj_capped")) if isinstance(plan.extra, dict) else False
    if capped:
        return (f"the jammer's power cap sets it: lower power.jammer_max_snr_db by at least {step:.1f} dB "
                f"(to {pw.jammer_max_snr_db - step:g} or less; the jammer is then capped further and the ledger "
                f"books the noise it sends)")
    if pw.alpha_u > 0:
        knob = (f"lower power.alpha_u by at least {step:.1f} dB (to {pw.alpha_u * 10 ** (-step / 20):.4g} or less)")
    else:
        knob = (f"lower power.max_snr_db by at least {step:.1f} dB (to {pw.max_snr_db - step:g} or less)")
    return (f"the privacy rule sets it (power.jammer_max_snr_db {pw.jammer_max_snr_db:g} dB is not binding, "
            f"lowering it does not help): {knob}: alpha_cj follows alpha_u and the privacy target is kept; "
            f"or raise the jammer's TX gain by {step:.1f} dB and recalibrate")


def refuse_jammer_peak(cfg, plan, who: str = "uhd air") -> float:
    """The jammer's planned peak / full scale (0 without a jammer); AirError (one line, with the advice)
    when it passes the full scale."""
    peak = jammer_peak(plan.alpha_cj)
    if peak > 1.0:
        raise AirError(f"{who}: round {plan.round}: the jammer's burst would peak near {peak:.3g} x the DAC full "
                       f"scale (alpha_cj = {plan.alpha_cj:.3g}); {jammer_peak_advice(cfg, plan, peak)}")
    return peak if plan.alpha_cj > 0 else 0.0
