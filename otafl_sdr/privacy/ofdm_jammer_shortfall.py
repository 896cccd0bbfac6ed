"""An OFDM round whose jammer delivered less noise than its per-subcarrier booking counts is charged at what
was measured (issue 34): privacy/jammer_shortfall.py's rule, per subcarrier.

The booking (power/ofdm_plan.jammer_noise_var) counts on data subcarrier k the jammer share
J_k = r (L_k alpha_cj / alpha_u)^2 (L_k the calibration's lower bound on |H_cj,k|) and expects
E_k = r_mean |H~_cj,k|^2 (alpha_cj / alpha_u)^2 (the estimates). Each round's jammer-only slot
(radio/ofdm_jammer_slot.py) measures D_k with standard error s_k, about 5 % a subcarrier at M = 400 symbols:
a lower bound D_k - 3 s_k per subcarrier sits ~15 % below the truth and the weakest of 48 subcarriers lower
still, so a per-subcarrier rule would charge a calm jammer every round. The charge therefore uses the
calibrated shape while the measurement is consistent with it:

    c = sum_k D_k / sum_k E_k,   s.e.(c) = sqrt(sum_k s_k^2) / sum_k E_k     (~0.7 %: all subcarriers pooled),
    X = sum_k ((D_k - c E_k) / s_k)^2  ~ chi^2 with n - 1 degrees of freedom when D_k = c E_k.

- shape held (P(chi^2_{n-1} >= X) >= SHAPE_ALPHA = 1e-3): the jammer delivers c times its calibrated
  profile, lower bound B_k = max(c - Z s.e.(c), 0) E_k (a weaker PA, an attenuator, a compressed noise: a
  common scale);
- shape broken (the link moved: a subcarrier's reading no longer follows the profile): B_k = max(D_k - Z s_k, 0)
  on every subcarrier (conservative; the round's row says so and the lab should recalibrate).

Z = 3 (jammer_shortfall.Z). Where some B_k < J_k the release is charged as the mechanism with every
subcarrier's jammer share min(J_k, B_k) (subcarrier_mechanism on the plan's booked gains): its noise
multiplier z_c against the booked z_b gives sigma_c = sigma_b z_c / z_b at the booked sensitivity, and the
charge line is jammer_shortfall.top_up_sigma's (exact with the booked line at sampling_prob 1). The line's
``extra.jammer_shortfall`` records every D_k and s_k, the mode, c and X, so `verify` recomputes the charge
from the round's re-derived plan (``check_charge``) and refuses one that charges less.

What the shape test cannot see: a change confined to a few subcarriers small enough to keep X under its 1e-3
quantile (one subcarrier alone can fall ~30 % unseen at n = 48; a multipath change moves many subcarriers
together, since |H_cj,k|^2 is smooth over k on a link inside the prefix). That residual is the price of a
bound that does not charge a calm jammer every round; the calibration's own margin (J_k at L_k, r at G's
lower bound) sits below E_k by a few standard errors of the sounding."""
from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
from scipy.stats import chi2

from otafl_sdr.privacy import jammer_shortfall
from otafl_sdr.privacy.jammer_shortfall import FAULT, Z, close_enough, top_up_sigma
from otafl_sdr.privacy.subcarrier_mechanism import subcarrier_mechanism
from otafl_sdr.transmission import Mechanism

SHAPE_ALPHA = 1e-3


def booked_profile(plan, carriers) -> tuple[np.ndarray, np.ndarray] | None:
    """(J_k, E_k) at ``carriers`` from the plan's per-subcarrier jammer booking, None without one."""
    od = plan.extra.get("ofdm") if isinstance(plan.extra, dict) else None
    if not od or "jammer_booked" not in od:
        return None
    k = np.asarray(carriers, np.int64)
    return np.asarray(od["jammer_booked"], float)[k], np.asarray(od["jammer_expected"], float)[k]


def analyse(plan, measured: dict) -> dict | None:
    """The round's measurement against its booking (module doc): scale c and its s.e., the shape's X and
    P-value, the mode, every subcarrier's bound B_k and booked J_k, whether it is charged; None without a
    per-subcarrier booking or a usable measurement."""
    prof = booked_profile(plan, measured["carriers"])
    if prof is None:
        return None
    J, E = prof
    D = np.asarray(measured["delivered_k"], float)
    s = np.asarray(measured["delivered_k_std"], float)
    if D.shape != J.shape or s.shape != J.shape or not np.all(np.isfinite(D)) or not np.all(np.isfinite(s)) \
            or np.any(s < 0) or float(np.sum(E)) <= 0:
        return None
    s = np.maximum(s, 1e-12 * max(float(np.max(E)), 1e-300))     # a silent capture (no floor either) reads exactly 0
    c = float(np.sum(D) / np.sum(E))
    c_se = float(math.sqrt(float(np.sum(s ** 2))) / np.sum(E))
    x = float(np.sum(((D - c * E) / s) ** 2))
    p = float(chi2.sf(x, max(len(D) - 1, 1)))
    if p >= SHAPE_ALPHA:
        mode, bound = "scale", max(c - Z * c_se, 0.0) * E
    else:
        mode, bound = "per subcarrier", np.maximum(D - Z * s, 0.0)
    return {"scale": c, "scale_std": c_se, "shape_chi2": x, "shape_p": p, "mode": mode,
            "bound": [float(v) for v in bound], "booked": [float(v) for v in J], "charged": bool(np.any(bound < J))}


def _charge_of(plan, mech: Mechanism, measured: dict, a: dict) -> tuple[float, float, str] | None:
    """(sigma_c, the charge line's sigma_eff, its mode) when the measured bounds move the booked mechanism
    (some B_k < J_k on a subcarrier that decides its noise multiplier), else None (nothing to charge: the
    bounds fell short only where the mechanism's worst coordinate is not)."""
    if not a["charged"] or mech.sensitivity == 0:
        return None
    sigma_b = float(mech.sigma_eff)
    sigma_c = charged_sigma(plan, mech, measured["carriers"], a["bound"], a["booked"])
    sigma_t, mode = top_up_sigma(sigma_b, sigma_c, float(mech.sampling_prob))
    if not sigma_c < sigma_b or not math.isfinite(sigma_t):
        return None
    return sigma_c, sigma_t, mode


def figures(plan, mech: Mechanism, measured: dict | None) -> dict | None:
    """The row's figures (jammer_shortfall.figures' keys, over the subcarriers: delivered and booked their
    means, ratio = c, bound the mean charged share; ``charged`` when a charge line is written) plus the
    analysis; None without one."""
    if not measured:
        return None
    a = analyse(plan, measured)
    if a is None:
        return None
    D = np.asarray(measured["delivered_k"], float)
    s = np.asarray(measured["delivered_k_std"], float)
    J = np.asarray(a["booked"])
    return {"delivered": float(D.mean()), "delivered_std": float(math.sqrt(float(np.sum(s ** 2)))) / len(D),
            "booked": float(J.mean()), "ratio": a["scale"], "ratio_std": a["scale_std"],
            "bound": float(np.mean(np.minimum(J, a["bound"]))), "z": Z,
            "charged": _charge_of(plan, mech, measured, a) is not None,
            "mode": a["mode"], "shape_p": a["shape_p"]}


def _multiplier(plan, noise_var: np.ndarray, sampling_prob: float) -> float:
    od = plan.extra["ofdm"]
    m = subcarrier_mechanism(plan.round, np.asarray(od["booked_gain"]), plan.target_gain, od["payload_bound"],
                             noise_var, sampling_prob=sampling_prob)
    return math.inf if m.sensitivity <= 0 else m.sigma_eff / m.sensitivity


def charged_sigma(plan, booked: Mechanism, carriers, bound, share) -> float:
    """sigma_c: the booked line's sigma_eff times z_c / z_b, z the per-subcarrier mechanism's noise multiplier
    with every measured subcarrier's jammer share J_k (z_b) or min(J_k, B_k) (z_c)."""
    var = np.asarray(plan.extra["ofdm"]["noise_var"], float)
    k = np.asarray(carriers, np.int64)
    charged = var.copy()
    J = np.asarray(share, float)
    charged[k] = var[k] - J + np.minimum(J, np.asarray(bound, float))
    z_b = _multiplier(plan, var, booked.sampling_prob)
    z_c = _multiplier(plan, charged, booked.sampling_prob)
    return float(booked.sigma_eff) * z_c / z_b


def shortfall_charge(plan, mech: Mechanism, attempt: int, measured: dict | None) -> Mechanism | None:
    """The charge line of an OFDM release whose jammer fell short of its per-subcarrier booking, or None."""
    if not measured:
        return None
    a = analyse(plan, measured)
    charge = None if a is None else _charge_of(plan, mech, measured, a)
    if charge is None:
        return None
    sigma_b = float(mech.sigma_eff)
    sigma_c, sigma_t, mode = charge
    record = {"per_subcarrier": True, "carriers": list(measured["carriers"]), "delivered_k": list(measured["delivered_k"]),
              "delivered_k_std": list(measured["delivered_k_std"]), "z": Z, **a, "charged_sigma_eff": sigma_c,
              "mode": mode, "shape": a["mode"]}
    record.pop("charged")
    what = ("top-up: with the booked line, the round at the jammer's measured per-subcarrier lower bounds"
            if mode == "top-up" else "the round at the jammer's measured per-subcarrier lower bounds, composed "
                                     "with the booked line (subsampled)")
    return dataclasses.replace(mech, sigma_eff=sigma_t, extra={
        **(mech.extra or {}), "attempt": int(attempt), "fault": FAULT, "charged": what,
        "planned_sigma_eff": sigma_b, "jammer_shortfall": record})


def for_measurement(measured: dict | None):
    """The module that charges this measurement: this one for an OFDM round's per-subcarrier slot
    (radio/ofdm_jammer_slot.measure: ``carriers``), else privacy/jammer_shortfall.py (single carrier)."""
    return sys.modules[__name__] if isinstance(measured, dict) and "carriers" in measured else jammer_shortfall


def check_any_charge(rec: dict, booked: Mechanism, share: float, plan) -> str:
    """`verify`'s re-check of a shortfall charge line, single carrier or OFDM (``plan`` the round's re-derived
    plan; ``share`` the single-carrier booking's jammer share)."""
    js = (rec.get("extra") or {}).get("jammer_shortfall")
    if isinstance(js, dict) and js.get("per_subcarrier"):
        if plan is None:
            return "a per-subcarrier charge without the round's re-derived plan"
        return check_charge(rec, booked, plan)
    return jammer_shortfall.check_charge(rec, booked, share)


def check_charge(rec: dict, booked: Mechanism, plan) -> str:
    """'' when ledger line ``rec`` (an OFDM shortfall charge) charges what its recorded measurement and the
    round's re-derived ``plan`` and booking give, else what is wrong (verify)."""
    js = (rec.get("extra") or {}).get("jammer_shortfall")
    try:
        measured = {"carriers": [int(k) for k in js["carriers"]], "delivered_k": [float(v) for v in js["delivered_k"]],
                    "delivered_k_std": [float(v) for v in js["delivered_k_std"]]}
        sigma = float(rec["sigma_eff"])
    except (TypeError, KeyError, ValueError):
        return "extra.jammer_shortfall is not a complete per-subcarrier measurement"
    if float(js.get("z", math.nan)) != Z:
        return f"extra.jammer_shortfall.z is {js.get('z')!r}, the charge rule's is {Z!r}"
    a = analyse(plan, measured)
    if a is None:
        return "the round's re-derived plan books no per-subcarrier jammer share for this measurement"
    if js.get("shape") != a["mode"]:
        return f"extra.jammer_shortfall.shape is {js.get('shape')!r} but its measurement gives {a['mode']!r}"
    for key in ("bound", "booked"):
        got = js.get(key)
        if not isinstance(got, list) or len(got) != len(a[key]) or \
                not all(close_enough(float(g), float(w)) for g, w in zip(got, a[key])):
            return f"extra.jammer_shortfall.{key} is not what its measurement and the round's booking give"
    if not a["charged"]:
        return "a shortfall charge whose measured bounds are not below the booked shares"
    sigma_c = charged_sigma(plan, booked, measured["carriers"], a["bound"], a["booked"])
    if not close_enough(float(js.get("charged_sigma_eff", math.nan)), sigma_c):
        return f"extra.jammer_shortfall.charged_sigma_eff is {js.get('charged_sigma_eff')!r}, not {sigma_c!r}"
    want, mode = top_up_sigma(float(booked.sigma_eff), sigma_c, float(booked.sampling_prob))
    if js.get("mode") != mode:
        return f"extra.jammer_shortfall.mode is {js.get('mode')!r}, not {mode!r}"
    if mode == "top-up":
        ok = sigma > 0 and close_enough(1.0 / sigma ** 2 + 1.0 / float(booked.sigma_eff) ** 2, 1.0 / sigma_c ** 2)
    else:
        ok = close_enough(sigma, want)
    return "" if ok else f"sigma_eff is {sigma!r} but the measured bounds charge {want!r}"
