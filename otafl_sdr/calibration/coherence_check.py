"""The high-SNR coherence check (issue 34, item 4; `otafl-sdr calibrate coherence`): every client sends known,
independent payloads (experiment/coherence_rounds.py: the run's radios, calibration and planner, nothing
trained or booked) at a high SNR, where a per-client phase error of ``VISIBLE_RAD`` (0.1 rad) costs many times
the NMSE's scatter; the coherent sum's NMSE is judged against its theory and every client's residual phase
(the round's sounding, ``air.coherence = "measure"``) against the same 0.1 rad.

Why a high SNR (calibration/coherence_limits.py): a client i with phase error phi_i adds w_i phi_i^2 to the
NMSE, w_i = 1/K for K clients of equal weight, so 0.1 rad on one client adds 0.01 / K; against the theory
N_th that is an excess of 0.01 / (K N_th). At a run's DP operating point (N_th of 1-100) it is invisible; at
``CHECK_SETS``' 20 dB without the jammer, N_th is a few 1e-3 and 0.1 rad on one of three clients shows as
an excess of about 1. The NMSE's own scatter over R rounds of d real coordinates is sqrt(2 / (d R))
(chi-square), so the tolerance is EXCESS (0.05) + 4 sqrt(2 / (d R)); the check says it is not sensitive
(and fails) when the 0.1-rad excess is not at least twice that tolerance.

A client is named when its mean residual phase over the check's rounds (a circular mean: readings either side
of +-pi average near pi, not 0) passes 0.1 rad by more than 3 standard errors (phase_std / sqrt(R) from each
round's sounding), or when its phase wanders between the rounds: its readings scatter about their mean by more
than 0.1 rad rms and beyond their stated errors (chi-square with R - 1 degrees of freedom past its 0.1 % point),
as a client whose oscillator is not locked to the receiver's does (the node lab with independent TCXOs: each
round's phase uniform, NMSE / theory 308; its mean phase is then no residual a recalibration could take out).
Shapes: ``rows`` as experiment/coherence_rounds returns them (one dict per round)."""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import chi2

from otafl_sdr.calibration.coherence_limits import EXCESS

VISIBLE_RAD = 0.1        # the per-client phase error the check must see
CHECK_SNR_DB = 20.0      # per client, against the calibrated noise floor
CHECK_SETS = ["power.jammer=false", f"power.max_snr_db={CHECK_SNR_DB:g}", "privacy.eps=1000"]   # nothing is booked
SIGMAS = 3.0             # a client's phase is named beyond this many standard errors past VISIBLE_RAD
SCATTER_SIGMAS = 4.0     # the NMSE ratio's tolerance in standard deviations of its chi-square scatter
WANDER_P = 1e-3          # a client's phases scatter beyond their stated errors at this chi-square level: named


def check_sets(cfg) -> list[str]:
    """The overrides of the run's config for the check: the high SNR of CHECK_SETS and, on a uhd run, each
    client sounded: ``air.coherence = "measure"`` (its residual, not corrected), or the run's ``track`` (each
    round's payload corrected from its own sounding, as the run's will be: a lab of independent oscillators
    is coherent only so)."""
    sets = list(CHECK_SETS)
    if cfg.air.name == "uhd" and cfg.air.coherence != "track":
        sets.append("air.coherence=measure")
    return sets


def judge(rows: list[dict], clients: int, dim: int, visible_rad: float = VISIBLE_RAD, tracked: bool = False) -> dict:
    """The check's verdict: {"passed", "failures" (one line each, a client named where its phase explains
    it), "ratio" (mean NMSE / theory), "tolerance", "theory", "visible_excess" (0.1 rad on one client, as
    an NMSE / theory excess), "sensitive", "rounds", "tracked", "clients" (per client: phase_rad (circular
    mean), phase_se, phase_wander_rad (rms about it), cfo_hz, cfo_se_hz, rounds)}. ``tracked``
    (``air.coherence = "track"``): each phase is the one the round's payload was corrected by, so no client
    is named by it; the corrected sum is judged."""
    ok = [r for r in rows if r.get("ratio") is not None and math.isfinite(r["ratio"])]
    out: dict = {"rounds": len(rows), "received": len(ok), "failures": [], "clients": [], "tracked": bool(tracked)}
    if not ok:
        out.update(passed=False, ratio=None, tolerance=None, theory=None, visible_excess=None, sensitive=False)
        out["failures"].append(f"no check round was received ({', '.join(sorted({r.get('reason') or '?' for r in rows}))})")
        return out
    ratio = float(np.mean([r["ratio"] for r in ok]))
    theory = float(np.mean([r["theory"] for r in ok]))
    tolerance = EXCESS + SCATTER_SIGMAS * math.sqrt(2.0 / (max(int(dim), 1) * len(ok)))
    visible = visible_rad ** 2 / max(int(clients), 1) / theory
    out.update(ratio=ratio, tolerance=tolerance, theory=theory, visible_excess=visible, sensitive=visible >= 2 * tolerance)
    per: dict[int, list[dict]] = {}
    for r in ok:
        for c in ((r.get("link_health") or {}).get("clients") or []):
            if c is not None:                     # a client that did not send this round (silent, dead): no reading
                per.setdefault(int(c["client"]), []).append(c)
    for i in sorted(per):
        est = per[i]
        n = len(est)
        phases = np.array([float(e["phase_rad"]) for e in est])
        stds = np.array([max(float(e["phase_std"]), 1e-12) for e in est])
        phase = float(np.angle(np.mean(np.exp(1j * phases))))          # circular: +3.1 and -3.1 are near pi
        phase_se = float(math.sqrt(np.sum(stds ** 2)) / n)
        scatter = np.angle(np.exp(1j * (phases - phase)))              # each round about the mean, wrapped
        wander = float(np.sqrt(np.mean(scatter ** 2)))
        wanders = n >= 2 and wander > visible_rad and float(np.sum((scatter / stds) ** 2)) > chi2.ppf(1 - WANDER_P, n - 1)
        cfo = float(np.mean([e["cfo_hz"] for e in est]))
        cfo_se = math.sqrt(sum(float(e["cfo_std_hz"]) ** 2 for e in est)) / n
        out["clients"].append({"client": i, "phase_rad": phase, "phase_se": phase_se, "phase_wander_rad": wander,
                               "cfo_hz": cfo, "cfo_se_hz": cfo_se, "rounds": n})
        if tracked:
            continue
        if wanders:
            out["failures"].append(f"client-{i}: its phase wanders between the check's rounds ({wander:.2f} rad rms "
                                   f"about its mean, each read to {float(np.mean(stds)):.3f} rad): its oscillator "
                                   f"is not locked to the receiver's (share a 10 MHz / PPS reference, or run in "
                                   f"process with air.coherence = \"track\")")
        elif abs(phase) > visible_rad + SIGMAS * phase_se:
            out["failures"].append(f"client-{i}: residual phase {phase:+.3f} +- {phase_se:.3f} rad after the "
                                   f"calibration (the check sees {visible_rad:g} rad): recalibrate its channel")
    if not out["sensitive"]:
        out["failures"].append(f"not sensitive: at this SNR (theory NMSE {theory:.3g}) {visible_rad:g} rad on one of "
                               f"{clients} clients costs {visible:.3f} of the theory, under twice the tolerance "
                               f"{tolerance:.3f}: raise power.max_snr_db")
    if abs(ratio - 1) > tolerance:
        named = [f for f in out["failures"] if f.startswith("client-")]
        why = (": each client's payload corrected by its own sounding, the sum still off (a client's gain, the "
               "receiver or the timing: recalibrate)" if tracked else
               ": no client's residual phase explains it (the receiver, the jammer or the timing: recalibrate)")
        out["failures"].append(f"the coherent sum's NMSE is {ratio:.3f} x its theory (tolerance 1 +- {tolerance:.3f})"
                               + ("" if named else why))
    out["passed"] = not out["failures"]
    return out


def report_lines(v: dict) -> list[str]:
    """The verdict as the command prints it."""
    lines = []
    if v.get("ratio") is not None:
        lines.append(f"coherence check: {v['received']} of {v['rounds']} rounds received; NMSE / theory "
                     f"{v['ratio']:.3f} (tolerance 1 +- {v['tolerance']:.3f}; theory {v['theory']:.3g}; "
                     f"{VISIBLE_RAD:g} rad on one client would show as +{v['visible_excess']:.2f})")
    for c in v["clients"]:
        wander = c.get("phase_wander_rad", 0.0)
        lines.append(f"  client-{c['client']}: phase {c['phase_rad']:+.3f} +- {c['phase_se']:.3f} rad"
                     f"{f' (wandering {wander:.2f} rad rms)' if wander > VISIBLE_RAD else ''}"
                     f"{' (corrected in its round)' if v.get('tracked') else ''}, "
                     f"offset {c['cfo_hz']:+.2f} +- {c['cfo_se_hz']:.2f} Hz ({c['rounds']} soundings)")
    lines += [f"  FAILED: {f}" for f in v["failures"]]
    lines.append("coherence check: " + ("passed" if v["passed"] else "failed"))
    return lines


__all__ = ["CHECK_SETS", "CHECK_SNR_DB", "VISIBLE_RAD", "check_sets", "judge", "report_lines"]
