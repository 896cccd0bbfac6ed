"""``otafl-sdr audit --repeat N``: an alarm confirmed (or not) with fresh coins.

The same experiment audited N times, each into ``out/repeat-K`` (a full audit folder: its own run, coins and
canary directions, all from OS entropy), then one verdict on the pooled samples: each statistic's inserted
and absent samples of the N audits together (N times the trials, so a tighter bound), the same RULE
(audit/runner.verdict: 2k bounds, Bonferroni, false-alarm rate at most 1 - confidence) against the largest
printed eps. Pooling needs one mechanism: every repetition must book the same mu (the ledger's composed
GDP mu); a config whose releases depend on the seed's draws is refused in one line.

On the seeded airs (sim, loopback) the noise of a repetition is the run seed's, as the run's own is: the
coins and the canary directions are new each time, so the statistic's samples are projections of that noise
onto new random directions; on zmq_inproc and uhd the noise itself is new (OS entropy at the node).

``out/audit.json``: the pooled verdict plus ``repetitions`` (each one's eps_lower, eps_lower_cp, violation
and folder); ``out/audit.png``: the pooled statistic."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from otafl_sdr.audit.runner import audit_with_samples, verdict
from otafl_sdr.errors import UserError
from otafl_sdr.results import files as results

MU_TOLERANCE = 1e-9          # relative: repetitions of one mechanism book the same composed mu


def run_repeated_audit(cfg, out, repeat: int, confidence: float = 0.95, progress: bool = False, **kw) -> dict:
    """Audit ``repeat`` (>= 2) times into ``out/repeat-K`` and write the pooled verdict to ``out/audit.json``
    and ``out/audit.png``; returns it. ``kw``: run_audit's (canaries, canary, transport_class, ...)."""
    if repeat < 2:
        raise UserError(f"--repeat must be >= 2 (one audit is the plain command), got {repeat}")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UserError(f"'{out}' exists and is not empty; an audit never overwrites results")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    audits, samples = [], []
    for k in range(1, repeat + 1):
        if progress:
            print(f"audit: repetition {k} of {repeat}", flush=True)
        a, s = audit_with_samples(cfg, out / f"repeat-{k}", confidence=confidence, progress=progress, **kw)
        audits.append(a)
        samples.append(s)
    mus = [float(a["mu_booked"]) for a in audits]
    if max(mus) - min(mus) > MU_TOLERANCE * max(max(mus), 1e-300):
        raise UserError(f"the {repeat} repetitions booked different mechanisms (composed mu {min(mus):.6g} to "
                        f"{max(mus):.6g}: their releases depend on the run's draws); their samples cannot be "
                        f"pooled: compare the repetitions' own verdicts in {out}/repeat-K/audit.json")
    names = [n for n in samples[0] if all(n in s for s in samples)]
    pooled = {n: (np.concatenate([s[n][0] for s in samples]), np.concatenate([s[n][1] for s in samples]))
              for n in names}
    if not all(math.isfinite(float(a["eps_printed"])) for a in audits):
        raise UserError("a repetition printed no finite epsilon; nothing to compare the pooled bound with")
    eps_printed = max(float(a["eps_printed"]) for a in audits)
    first = audits[0]
    pooled_audit = verdict(pooled, eps_printed, first["delta"], confidence)
    pooled_audit.update({
        "repeat": repeat, "pooled": True, "air": first["air"], "accountant": first["accountant"],
        "canary": first.get("canary", "white-box"), "config": first.get("config"),
        "trials": sum(int(a["trials"]) for a in audits),
        "canaries_inserted": sum(int(a["canaries_inserted"]) for a in audits),
        "client_releases": sum(int(a["client_releases"]) for a in audits), "mu_booked": mus[0],
        "eps_gdp_of_ledger": first["eps_gdp_of_ledger"], "wall_s": time.perf_counter() - t0,
        "repetitions": [{"folder": f"repeat-{k}", "eps_printed": a["eps_printed"], "eps_lower": a["eps_lower"],
                         "eps_lower_cp": a["eps_lower_cp"], "violation": a["violation"],
                         "violation_by": a["violation_by"]} for k, a in enumerate(audits, 1)],
    })
    from otafl_sdr.audit.plot import plot_audit
    plot_audit(out / "audit.png", pooled_audit, pooled)
    results.atomic_write_text(out / "audit.json", json.dumps(results.to_plain(pooled_audit), indent=2) + "\n")
    return pooled_audit
