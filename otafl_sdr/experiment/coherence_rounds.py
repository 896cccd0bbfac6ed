"""The round's signal chain with known payloads (issue 34, items 3-4): the run's radios, its in-session
calibration and its power policy's plan, but instead of the clients' updates independent random unit-norm
rows (seeded from the run's seed), so that the coherent sum's NMSE against its theory is measured where a
per-client phase error shows (independent payloads: no cross terms hide it; coherence_limits.py) and nothing
is trained or released (no client data: nothing is booked).

Per round: ``plan_round`` (workload/round_plan.py, the run's own planner; not finished: no client data) on
the known payloads, the air's ``preflight`` and ``transmit`` (the air's own: no run's transport, ledger or
audit sees them), the aggregate's NMSE against ``plan.expected_aggregate()`` and ``aggregate_nmse_theory``
(transmission.py), the air's ``link_health`` (per-client ``clients`` with ``air.coherence``) and its
``recalibration_due``; a due recalibration is taken (``calibration.session``) and counted. Used by
benchmarks/bench_coherence_lab.py and tests/radio/test_uhd_coherence_lab.py against UHD's
simulated lab (radio/uhd_sim_lab.py); ``before_round(r, air)`` injects the lab's events (a retune, a carrier step).

Shapes: payload (K, d) float64, K = data.clients, d = the model's size (650 for the presets' logistic
regression on digits)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory


def known_payload(seed: int, round_index: int, K: int, d: int) -> np.ndarray:
    """(K, d) independent rows of unit norm, seeded from the run's seed and the round."""
    u = seeding.rng(seed, "coherence-rounds", round_index).standard_normal((K, d))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def windows(ratios: list[float], size: int = 20) -> list[float]:
    """The mean NMSE / theory of each whole window of ``size`` rounds (lost rounds left out)."""
    out = []
    for k in range(0, len(ratios) - size + 1, size):
        w = [r for r in ratios[k:k + size] if r is not None and np.isfinite(r)]
        out.append(float(np.mean(w)) if w else float("nan"))
    return out


def coherence_rounds(cfg, out: Path, rounds: int, before_round: Callable[[int, object], None] | None = None,
                     echo=None, take_recalibrations: bool = True) -> list[dict]:
    """``rounds`` rounds of known payloads on the run's air, opened and calibrated here (module doc); the
    rows as ``known_rounds`` returns them."""
    from otafl_sdr.calibration.session import recalibration_steps, run_calibration
    from otafl_sdr.rounds.in_process import AirTransport
    from otafl_sdr.workload.build import build_run

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    transport = AirTransport(cfg)
    path = out / "calibration.json"

    def calibrate(parts=None, first=True) -> Path:
        steps = (("noise", "channel", "power") + (("jammer",) if cfg.power.jammer else ())) if first \
            else recalibration_steps(cfg)                  # as the orchestrator's session calibration
        run_calibration(cfg, steps, path, air="uhd", link=transport.calibration_link(parts), echo=lambda m: None)
        transport.calibrated(path)
        return path

    parts = build_run(cfg, calibrate=calibrate if cfg.calibration.session else None)
    try:
        transport.bind(parts)
        transport.start()
        return known_rounds(parts, transport.air, rounds, before_round, echo,
                            recalibrate=(lambda: calibrate(parts, first=False)) if take_recalibrations else None)
    finally:
        transport.close()


def known_rounds(parts, air, rounds: int, before_round: Callable[[int, object], None] | None = None,
                 echo=None, recalibrate: Callable[[], Path] | None = None) -> list[dict]:
    """``rounds`` rounds of known payloads on ``air`` (started, calibrated) with ``parts``' planner, a lost
    attempt retried up to ``air.retries`` times. The air itself, never a run's transport: nothing of the
    run's release path (its ledger, an audit's canaries) sees these public payloads. One dict per round:
    round, clients (those sending), dim, ok, reason, lost (the lost attempts' reasons), nmse, theory (the plan's, over the
    square of the DAC's planned scale: radio/uhd_power.py), ratio, link_health, due (why the air asked for a
    recalibration after it, or ''), recalibrated (due and taken: ``recalibrate`` given)."""
    from otafl_sdr.noise_source import protective_rng
    from otafl_sdr.workload.round_plan import plan_round
    from otafl_sdr.workload.workloads import LocalRound

    cfg = parts.cfg
    say = echo or (lambda m: print(f"[coherence] {m}", file=sys.stderr))
    rows = []
    for r in range(1, int(rounds) + 1):
        if before_round is not None:
            before_round(r, air)
        payload = known_payload(cfg.run.seed, r, parts.K, parts.dim)
        # clients the air has dropped (the testbed: a node gone under net.dead_client_policy = "drop") stay
        # silent, as in a run's round: liveness only, never data
        gone = np.asarray(air.gone_clients(parts.K) if hasattr(air, "gone_clients") else np.zeros(parts.K, bool), bool)
        local = LocalRound(payload=payload, w=None, absent=gone)

        def silence(plan, gone=gone) -> None:
            plan.alpha = np.where(gone, 0, plan.alpha)
            plan.mode = ["silent" if g else m for m, g in zip(plan.mode, gone)]
        plan = plan_round(parts, r, local, protective_rng(cfg, "coherence-rounds", "plan", r), finish=False,
                          adopt=silence if gone.any() else None).plan
        air.preflight(plan)                                  # no client data: nothing to finish or book
        rec = air.transmit(plan, protective_rng(cfg, "coherence-rounds", "noise", r, 1))
        lost = []
        while not rec.ok and len(lost) < int(cfg.air.retries):     # as the release rule: a lost attempt is retried
            lost.append(rec.reason)
            rec = air.transmit(plan, protective_rng(cfg, "coherence-rounds", "noise", r, len(lost) + 1))
        fields = air.round_fields() if hasattr(air, "round_fields") else {}
        scale = float(plan.extra.get("tx_scale", 1.0))       # the payload went out scaled down for the DAC
        row = {"round": r, "clients": int(parts.K - gone.sum()), "dim": int(parts.dim), "ok": bool(rec.ok),
               "reason": rec.reason, "lost": lost, "nmse": None, "ratio": None,
               "theory": aggregate_nmse_theory(plan) / scale ** 2, "link_health": fields.get("link_health"),
               "due": "", "recalibrated": ""}
        if rec.ok:
            row["nmse"] = aggregate_nmse(rec.aggregate, plan.expected_aggregate())
            row["ratio"] = row["nmse"] / row["theory"]
        why, stop = air.recalibration_due() if hasattr(air, "recalibration_due") else ("", "")
        row["due"] = why or stop
        if why and recalibrate is not None:
            parts.use_calibration(recalibrate())
            row["recalibrated"] = why
        rows.append(row)
        if r % 20 == 0:
            say(f"round {r}: last 20 NMSE / theory {windows([x['ratio'] for x in rows[-20:]])}")
    return rows


__all__ = ["coherence_rounds", "known_payload", "known_rounds", "windows"]
