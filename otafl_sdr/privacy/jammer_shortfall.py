"""A round whose jammer delivered less noise than its booking counts is charged at the measured lower bound
(issue 34, item 5).

Every uhd round measures the jammer's delivered noise D (a share of sigma_eff^2, per real coordinate of the
aggregate unpack(y) / alpha_u, eq. 16 of paper 000) with its standard error s in a slot where only the
jammer transmits (radio/jammer_slots.py). The booking counted the share J_b (``booked_jammer_share``: the
plan's (|h_cj| alpha_cj / alpha_u)^2, or the calibrated path's lower bound, or the calibration's measured
delivered noise, as workload/booking.ledger_mechanism restated it). When the measurement's lower bound

    L = max(D - Z s, 0),   Z = 3 (one-sided, 99.87 %),

is below J_b, the round's release is charged as the mechanism with the jammer's share replaced by L:

    sigma_c^2 = sigma_b^2 - J_b + L      (same sensitivity; the channel's and the clients' shares unchanged).

The ledger is append-only and its booked line was written before the burst, so the charge is a second
line of the same release (round, attempt; ``extra.fault``, as rounds/accounting.fault_charge's), written
before the aggregate is used. Composed with the booked line it must cost exactly the charged mechanism:
for a Gaussian release with no subsampling (sampling_prob 1) two lines of noise multipliers z_b, z_t compose
to 1 / z^2 = 1 / z_b^2 + 1 / z_t^2 (mu-GDP, exactly as PLD and RDP account it: RDP alpha / (2 z^2) adds), so
the second line is the **top-up**

    1 / sigma_t^2 = 1 / sigma_c^2 - 1 / sigma_b^2,

and the booked line plus the top-up are the round at L. (An accountant composing per-line epsilons
linearly in 1/z charges at least that: z_b^-1 + z_t^-1 >= (z_b^-2 + z_t^-2)^(1/2).) A subsampled line
(sampling_prob < 1) has no exact top-up: the charge line is then sigma_c itself, composed with the booked
line (over-counting the one release: conservative). ``extra.jammer_shortfall`` records D, s, Z, L, J_b,
sigma_c and the mode, so `verify` recomputes the charge from the booked line it re-derives
(workload/rederive_match.py) and refuses a line that charges less.

With the booking at the calibration's lower bound G - 3 s.e.(G) (2^15 test samples) and the round's slot as
long, a calm round's L falls below J_b about half the time, by about a standard error: a small, honest
top-up. A jammer whose delivered noise really fell (a PA, a cable, an attenuator) is charged every round
at what it was measured to deliver at worst."""
from __future__ import annotations

import dataclasses
import math

from otafl_sdr.transmission import Mechanism

Z = 3.0                          # the lower bound's standard errors (one-sided 99.87 %)
FAULT = "jammer delivered less noise than booked"


def booked_jammer_share(plan, mech: Mechanism) -> float:
    """The jammer's share of ``mech.sigma_eff^2`` as the booking counted it (workload/booking.py): the
    measured delivered noise the booking took (``extra.jammer_noise.booked``), else the calibrated path's
    lower bound (``extra.jammer_gain_lower``), else the plan's; 0 without a jammer, or when the round is
    booked at the capture (the jammer not counted)."""
    extra = mech.extra or {}
    if plan.alpha_cj <= 0 or plan.alpha_u <= 0 or extra.get("multipath_capture") or not mech.uses_data:
        return 0.0
    a = float(plan.alpha_cj) / float(plan.alpha_u)
    planned = (abs(plan.h_cj) * a) ** 2
    share = planned
    if isinstance(extra.get("jammer_noise"), dict):
        share = float(extra["jammer_noise"]["booked"])
    elif "jammer_gain_lower" in extra:
        share = (float(extra["jammer_gain_lower"]) * a) ** 2
    # the booking keeps the plan's sigma_eff where its restatement would be larger: the plan's share then
    return min(share, planned, float(mech.sigma_eff) ** 2)


def lower_bound(delivered: float, std: float, z: float = Z) -> float:
    """L = max(D - z s, 0)."""
    return max(float(delivered) - float(z) * float(std), 0.0)


def charged_sigma(sigma_b: float, share: float, bound: float) -> float:
    """sigma_c = sqrt(sigma_b^2 - J_b + L) (module doc)."""
    return math.sqrt(max(float(sigma_b) ** 2 - float(share) + float(bound), 0.0))


def top_up_sigma(sigma_b: float, sigma_c: float, sampling_prob: float) -> tuple[float, str]:
    """(the charge line's sigma_eff, its mode): 'top-up' (exact with the booked line) at sampling_prob 1,
    else 'full' (sigma_c, composed with the booked line: conservative)."""
    if sampling_prob >= 1.0 and sigma_c > 0:
        inv = 1.0 / sigma_c ** 2 - 1.0 / float(sigma_b) ** 2
        return (1.0 / math.sqrt(inv) if inv > 0 else math.inf), "top-up"
    return float(sigma_c), "full"


def figures(plan, mech: Mechanism, measured: dict | None) -> dict | None:
    """The row's figures of a round's measurement against its booking: delivered, its s.e., booked, their
    ratio, the lower bound and whether it is charged (L < J_b); None without a measurement or a jammer share.
    (An OFDM round's per-subcarrier measurement: privacy/ofdm_jammer_shortfall.py, ``for_measurement``.)"""
    share = booked_jammer_share(plan, mech)
    if not measured or share <= 0:
        return None
    d, s = float(measured["delivered"]), float(measured["delivered_std"])
    bound = lower_bound(d, s)
    return {"delivered": d, "delivered_std": s, "booked": share, "ratio": d / share, "ratio_std": s / share,
            "bound": bound, "z": Z, "charged": bool(bound < share)}


def shortfall_charge(plan, mech: Mechanism, attempt: int, measured: dict | None) -> Mechanism | None:
    """The charge line of a release whose jammer's measured lower bound fell below its booked share (module
    doc), or None. ``mech``: the booked mechanism; ``measured``: radio/jammer_slots.measure's dict."""
    fig = figures(plan, mech, measured)
    if fig is None or not fig["charged"] or mech.sensitivity == 0:
        return None
    sigma_b = float(mech.sigma_eff)
    sigma_c = charged_sigma(sigma_b, fig["booked"], fig["bound"])
    sigma_t, mode = top_up_sigma(sigma_b, sigma_c, float(mech.sampling_prob))
    if not math.isfinite(sigma_t):
        return None
    record = {"delivered": fig["delivered"], "delivered_std": fig["delivered_std"], "z": Z, "bound": fig["bound"],
              "booked": fig["booked"], "charged_sigma_eff": sigma_c, "mode": mode}
    what = ("top-up: with the booked line, the round at the jammer's measured lower bound" if mode == "top-up"
            else "the round at the jammer's measured lower bound, composed with the booked line (subsampled)")
    return dataclasses.replace(mech, sigma_eff=sigma_t, extra={
        **(mech.extra or {}), "attempt": int(attempt), "fault": FAULT, "charged": what,
        "planned_sigma_eff": sigma_b, "jammer_shortfall": record})


def check_charge(rec: dict, booked: Mechanism, share: float) -> str:
    """'' when ledger line ``rec`` (a shortfall charge) charges what its recorded measurement and the
    re-derived booking ``booked`` (with its jammer share ``share``) give, else what is wrong (verify)."""
    js = (rec.get("extra") or {}).get("jammer_shortfall")
    try:
        d, s, z = float(js["delivered"]), float(js["delivered_std"]), float(js["z"])
        bound, got_share = float(js["bound"]), float(js["booked"])
        sigma = float(rec["sigma_eff"])
    except (TypeError, KeyError, ValueError):
        return "extra.jammer_shortfall is not a complete measurement"
    if not all(math.isfinite(v) for v in (d, s, z, bound, got_share)) or s < 0:
        return "extra.jammer_shortfall holds a figure that is not a finite number"
    if z != Z:
        return f"extra.jammer_shortfall.z is {z!r}, the charge rule's is {Z!r}"
    if not close_enough(bound, lower_bound(d, s)):
        return f"extra.jammer_shortfall.bound is {bound!r} but its measurement gives {lower_bound(d, s)!r}"
    if not close_enough(got_share, share):
        return f"extra.jammer_shortfall.booked is {got_share!r} but the round's booking counts {share!r}"
    if not bound < share:
        return "a shortfall charge whose measured bound is not below the booked share"
    sigma_c = charged_sigma(float(booked.sigma_eff), share, bound)
    if not close_enough(float(js.get("charged_sigma_eff", math.nan)), sigma_c):
        return f"extra.jammer_shortfall.charged_sigma_eff is {js.get('charged_sigma_eff')!r}, not {sigma_c!r}"
    want, mode = top_up_sigma(float(booked.sigma_eff), sigma_c, float(booked.sampling_prob))
    if js.get("mode") != mode:
        return f"extra.jammer_shortfall.mode is {js.get('mode')!r}, not {mode!r}"
    if mode == "top-up":                  # compared as what it charges: 1/sigma_t^2 = 1/sigma_c^2 - 1/sigma_b^2
        ok = sigma > 0 and close_enough(1.0 / sigma ** 2 + 1.0 / float(booked.sigma_eff) ** 2, 1.0 / sigma_c ** 2)
    else:
        ok = close_enough(sigma, want)
    return "" if ok else f"sigma_eff is {sigma!r} but the measured bound charges {want!r}"


def close_enough(a: float, b: float, rel: float = 1e-9) -> bool:
    """a and b equal to ``rel`` (a re-derived figure against the recorded one)."""
    return abs(a - b) <= rel * max(1e-300, abs(a), abs(b))
