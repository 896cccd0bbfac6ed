"""``run_audit(cfg, out)``: the configured experiment, run once through its real round pipeline and its real
air with canaries (audit/transport.py), turned into an empirical lower bound on epsilon
(privacy/audit_stats.py) and written to ``out/audit.json`` and ``out/audit.png``; the audited run's own
results folder (ledger, rounds, summary) is ``out/run``.

Statistics, each turned into eps at the run's delta by two bounds (Bonferroni over the 2k bounds of the k
statistics computed, so that any of them passes the truth with probability at most 1 - ``confidence``: the
audit's stated false-alarm rate, RULE):
- canary: T_c = sum_t w_t <r_t, v_c>, w_t = s_t / sigma_t^2 from the round's ledger entry (white-box: v_c the
  canary's payload direction; black-box, ``canary = "mislabeled" | "nonfinite"``: crafted training samples,
  v_c the canary's clipped-gradient direction at the round's model, audit/blackbox.py);
- presence: sum_t <r_t, -e_t> / (||e_t|| sigma_t) per client round (black-box: a data-dependent silence);
- regenerated noise (only where the fresh-noise probe found the noise regenerable): T_c on r_t minus the
  probe's noise.
``eps_lower`` is the largest Gaussian-fit figure (Andrew et al. 2024); ``eps_lower_cp`` the largest
Clopper-Pearson figure (rigorous, Steinke, Nasr and Jagielski 2023)."""
from __future__ import annotations

import json
import math
import secrets
import time
from pathlib import Path

import numpy as np
from otafl_sdr.results import files as results
from otafl_sdr.errors import Terminated, UserError
from otafl_sdr.experiment.orchestrator import make_experiment
from otafl_sdr.privacy import audit_stats as st
from otafl_sdr.rounds.in_process import AirTransport
from otafl_sdr.audit import DEFAULT_CANARIES
from otafl_sdr.audit.blackbox import KINDS as BLACK_BOX_KINDS, BlackBoxTransport
from otafl_sdr.audit.transport import AuditTransport

RULE = ("violation when any reported bound (a Gaussian fit and a Clopper-Pearson bound per statistic, each at "
        "1 - (1 - confidence) / bounds) exceeds the printed eps: at most 1 - confidence of honest audits alarm")
PROBE_Z = 6.0        # |z| of a probe correlation past which the noise is called regenerable (p ~ 1e-9)


def canary_statistics(rounds: list[dict], coins: np.ndarray, key: str = "proj") -> np.ndarray:
    """T_c = sum_t w_t <r_t, v_c> / mu_booked (so the honest null is N(0, 1) and the inserted side
    N(mu_true, 1) when the booked noise is the real one)."""
    total = np.zeros(len(coins))
    mu2 = 0.0
    for r in rounds:
        if key not in r:
            continue
        w = r["sensitivity"] / r["sigma"] ** 2
        total += w * np.asarray(r[key])
        mu2 += (r["sensitivity"] / r["sigma"]) ** 2
    return total / math.sqrt(mu2) if mu2 > 0 else total


def _figure(name: str, inserted, absent, delta: float, conf: float) -> dict:
    fit = st.gaussian_fit(inserted, absent, conf)
    cp = st.clopper_pearson_eps(inserted, absent, delta, conf)
    # two samples that do not overlap: no Gaussian to fit; the bound of perfect distinguishing (rigorous)
    gauss = st.gdp_eps(fit.mu_lower, delta) if math.isfinite(fit.mu_lower) else cp["eps"]
    return {"statistic": name, "mu_hat": fit.mu_hat, "mu_lower": fit.mu_lower, "confidence": conf,
            "eps_lower_gauss": gauss, "eps_lower_cp": cp["eps"],
            "trials_inserted": fit.n_in, "trials_absent": fit.n_out, "clopper_pearson": cp,
            "mean_inserted": fit.mean_in, "mean_absent": fit.mean_out, "pooled_std": fit.std}


def analyse(tr: AuditTransport, ledger_records: list[dict], eps_printed: float, delta: float,
            confidence: float) -> tuple[dict, dict]:
    """(the audit's figures, the samples for the plot)."""
    used = [r for r in ledger_records if r.get("uses_data", True) and float(r.get("sensitivity", 0)) > 0]
    mu_booked = st.gdp_mu([r["sensitivity"] for r in used], [r["sigma_eff"] for r in used])
    sampled = any(float(r.get("sampling_prob", 1.0)) < 1 for r in used)
    rounds = tr.rounds
    coins = tr.coins
    stats_out: dict[str, tuple] = {}
    t = canary_statistics(rounds, coins)
    stats_out["canary"] = (t[coins], t[~coins])
    pres = [(r["round_coin"], r["presence"] / r["sigma"]) for r in rounds]
    rc = np.array([p[0] for p in pres], bool)
    if rc.sum() >= 2 and (~rc).sum() >= 2:
        pv = np.array([p[1] for p in pres])
        stats_out["presence"] = (pv[rc], pv[~rc])
    zs = [r["probe_z"] for r in rounds if "probe_z" in r]
    regenerable = bool(zs) and max(abs(z) for z in zs) > PROBE_Z
    if regenerable:
        denoised = [{**r, "proj_dn": np.asarray(r["proj"]) - np.asarray(r["proj_probe"])} for r in rounds
                    if "proj_probe" in r and abs(r["probe_z"]) > PROBE_Z]
        t2 = canary_statistics(denoised, coins, "proj_dn")
        stats_out["regenerated_noise"] = (t2[coins], t2[~coins])
    audit = verdict(stats_out, eps_printed, delta, confidence)
    audit.update({
        "trials": int(len(coins)), "canaries_inserted": int(coins.sum()),
        "client_releases": len(rounds), "mu_booked": mu_booked, "eps_gdp_of_ledger": st.gdp_eps(mu_booked, delta),
        "client_sampling": sampled,
        "shift_over_sensitivity": [r["shift"] / r["sensitivity"] for r in rounds],
        "fresh_noise_probe": ({"max_abs_z": max(abs(z) for z in zs), "threshold_z": PROBE_Z, "rounds": len(zs),
                               "regenerable": regenerable} if zs else
                              f"lost: {', '.join(sorted({r['probe_lost'] for r in rounds if 'probe_lost' in r}))}"
                              if any("probe_lost" in r for r in rounds) else
                              "not run: the air declares seeded noise (a simulation); the audit treats it as secret"),
    })
    return audit, {k: v for k, v in stats_out.items()}


def verdict(stats_out: dict, eps_printed: float, delta: float, confidence: float) -> dict:
    """The reported figures and the alarm (RULE) from each statistic's (inserted, absent) samples: a
    Gaussian-fit and a Clopper-Pearson bound per statistic, every one at 1 - (1 - confidence) / (their
    number) (Bonferroni), so that on an honest mechanism the chance that any of them passes the printed eps
    is at most 1 - confidence (``false_alarm_rate``; the Gaussian fit's coverage is approximate)."""
    n_bounds = 2 * len(stats_out)
    conf_each = 1 - (1 - confidence) / n_bounds
    figures = {k: _figure(k, a, b, delta, conf_each) for k, (a, b) in stats_out.items()}
    best = max(figures.values(), key=lambda f: f["eps_lower_gauss"])
    over = [f"{k} ({kind})" for k, f in figures.items()
            for kind, key in (("Gaussian fit", "eps_lower_gauss"), ("Clopper-Pearson", "eps_lower_cp"))
            if f[key] > eps_printed]
    return {"eps_lower": best["eps_lower_gauss"], "eps_lower_statistic": best["statistic"],
            "eps_lower_cp": max(f["eps_lower_cp"] for f in figures.values()),
            "eps_printed": eps_printed, "violation": bool(over), "violation_by": over,
            "ratio": (best["eps_lower_gauss"] / eps_printed) if eps_printed > 0 else None,
            "delta": delta, "confidence": confidence, "confidence_each": conf_each, "bounds": n_bounds,
            "false_alarm_rate": 1 - confidence, "rule": RULE, "statistics": figures}


CANARY_KINDS = ("white-box",) + BLACK_BOX_KINDS


def run_audit(cfg, out, canaries: int = DEFAULT_CANARIES, confidence: float = 0.95, progress: bool = False,
              transport_class=None, inner=None, rng: np.random.Generator | None = None,
              canary: str = "white-box") -> dict:
    """Run the audited experiment into ``out/run`` and write ``out/audit.json`` and ``out/audit.png``
    (:func:`audit_with_samples`); returns the audit's figures."""
    return audit_with_samples(cfg, out, canaries, confidence, progress, transport_class, inner, rng, canary)[0]


def audit_with_samples(cfg, out, canaries: int = DEFAULT_CANARIES, confidence: float = 0.95,
                       progress: bool = False, transport_class=None, inner=None,
                       rng: np.random.Generator | None = None, canary: str = "white-box") -> tuple[dict, dict]:
    """Run the audited experiment into ``out/run`` and write ``out/audit.json`` and ``out/audit.png``;
    returns (the figures, each statistic's (inserted, absent) samples).
    ``rng``: the private coins' generator (default OS entropy; tests pass a seeded one to be repeatable);
    ``transport_class`` / ``inner``: the audit transport and the run's transport (tests plant defects);
    ``canary``: "white-box" (crafted payloads at the booked sensitivity, audit/transport.py) or a black-box
    kind, crafted training samples ("mislabeled", "nonfinite": audit/blackbox.py)."""
    from otafl_sdr.airs import air_capabilities
    if air_capabilities(cfg.air.name).testbed:
        raise UserError(f"audit runs in process; air '{cfg.air.name}' is a testbed of node processes: audit "
                        f"the same mechanism on 'zmq_inproc' (the zmq IQ plane in one process) or 'uhd'")
    if not (0.5 < confidence < 1):
        raise UserError("--confidence must be in (0.5, 1)")
    if canaries < 4:
        raise UserError("--canaries must be >= 4")
    if canary not in CANARY_KINDS:
        raise UserError(f"--canary must be one of {', '.join(CANARY_KINDS)}, got {canary!r}")
    if transport_class is None:
        transport_class = AuditTransport if canary == "white-box" else \
            (lambda inner_, m, rng_: BlackBoxTransport(inner_, m, rng_, kind=canary))
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"'{out}' exists and is not empty; an audit never overwrites results")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if rng is None:
        rng = np.random.default_rng(secrets.randbits(128))    # the private coins: nobody else holds them
    tr = transport_class(inner if inner is not None else AirTransport(cfg), canaries, rng)
    outcome = make_experiment(cfg, out / "run", progress=progress, transport=tr).run()
    wall = time.perf_counter() - t0
    if outcome.stopped_reason.startswith("terminated"):      # SIGTERM: the run's summary is written; no audit
        raise Terminated(outcome.stopped_by_signal)
    if not tr.rounds:
        raise UserError(f"the audited run released no client round ({outcome.stopped_reason or 'no rounds'})")
    acc = cfg.privacy.accountant
    eps_printed = float(outcome.summary[f"eps_{acc}"])
    ledger = [json.loads(line) for line in (out / "run" / "privacy_ledger.jsonl").read_text().splitlines() if line]
    audit, samples = analyse(tr, ledger, eps_printed, cfg.privacy.delta, confidence)
    audit.update(tr.describe())
    audit.update({"air": cfg.air.name, "accountant": acc, "config": cfg.run.name, "rounds": cfg.run.rounds,
                  "wall_s": wall, "run_wall_s": outcome.summary.get("wall_s"),
                  "stopped_reason": outcome.stopped_reason, "run": str(out / "run")})
    from otafl_sdr.audit.plot import plot_audit
    plot_audit(out / "audit.png", audit, samples)
    results.atomic_write_text(out / "audit.json", json.dumps(results.to_plain(audit), indent=2) + "\n")
    return audit, samples


def format_audit(a: dict) -> str:
    ratio = "n/a" if a["ratio"] is None else f"{a['ratio']:.3f}"
    pct = f"{100 * a['confidence']:g} %"
    lines = [f"air {a['air']}: {a['trials']} {a.get('canary', 'white-box')} canaries ({a['canaries_inserted']} inserted), "
             f"{a['client_releases']} client releases, delta {a['delta']:g}",
             f"  eps printed ({a['accountant']})     {a['eps_printed']:.4g}",
             f"  eps_lower ({pct}, Gaussian fit) {a['eps_lower']:.4g}   ratio {ratio}   [{a['eps_lower_statistic']}]",
             f"  eps_lower ({pct}, Clopper-Pearson) {a['eps_lower_cp']:.4g}",
             f"  wall time {a['wall_s']:.1f} s"]
    lines.append(f"  false-alarm rate {100 * a['false_alarm_rate']:g} %: {a['bounds']} bounds, each at "
                 f"{100 * a['confidence_each']:.4g} %; an honest audit passes the printed eps at most that often")
    if a["violation"]:
        lines.append(f"  VIOLATION: {', '.join(a['violation_by'])} above the printed epsilon"
                     + ("" if a.get("repeat") else "; confirm with fresh coins: --repeat 3"))
    return "\n".join(lines)


__all__ = ["run_audit", "audit_with_samples", "format_audit", "analyse", "verdict", "canary_statistics",
           "DEFAULT_CANARIES", "RULE"]
