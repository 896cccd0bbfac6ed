"""The audit's false-alarm rate on an honest, tight mechanism (issue 35, item 5): N audits of a small honest
config (sim, digits, 5 clients, 6 client releases, 4000 white-box canaries each; every audit's coins and canary
directions fresh from OS entropy), each judged by the audit's own rule (audit/runner.RULE: any of its 2k
bounds, each at 1 - (1 - confidence) / 2k, above the printed eps). Printed: every audit's eps_lower beside the
printed eps; the alarms under the rule (stated rate <= 1 - confidence); and the calibration underneath it, the
canary statistic's z = (mu_hat - mu_booked) / se (the Gaussian fit's standard error) over the N audits, which
on an exactly tight mechanism is N(0, 1), and how often its plain one-sided 95 % lower bound passed the booked
mu (expected 5 %: the uncorrected rate the rule's Bonferroni correction brings down).

    .venv/bin/python benchmarks/bench_audit_false_alarm.py [--audits 40] [--confidence 0.95] [--quick]"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otafl_sdr.audit.runner import audit_with_samples  # noqa: E402
from otafl_sdr.configure.load import default_experiment  # noqa: E402
from otafl_sdr.privacy.audit_stats import gaussian_fit  # noqa: E402

SMALL = ["air.name=sim", "run.progress=false", "data.dataset=digits", "data.clients=5", "model.hidden=64",
         "run.torch_threads=1", "run.rounds=6"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--audits", type=int, default=40)
    ap.add_argument("--canaries", type=int, default=4000)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--quick", action="store_true", help="3 audits of 400 canaries (make test's smoke)")
    a = ap.parse_args()
    n, canaries = (3, 400) if a.quick else (a.audits, a.canaries)
    cfg = default_experiment(SMALL)
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(n):
            audit, samples = audit_with_samples(cfg, Path(tmp) / f"a{k}", canaries=canaries,
                                                confidence=a.confidence)
            inserted, absent = samples["canary"]
            fit = gaussian_fit(inserted, absent, 0.95)          # the plain, uncorrected one-sided 95 % bound
            se = (fit.mu_hat - fit.mu_lower) / float(stats.t.ppf(0.95, len(inserted) + len(absent) - 2))
            rows.append({"eps_printed": audit["eps_printed"], "eps_lower": audit["eps_lower"],
                         "eps_lower_cp": audit["eps_lower_cp"], "violation": audit["violation"],
                         "z": (fit.mu_hat - audit["mu_booked"]) / se,
                         "plain_over": fit.mu_lower > audit["mu_booked"], "mu_booked": audit["mu_booked"]})
            r = rows[-1]
            print(f"audit {k + 1:3d}: eps printed {r['eps_printed']:.4f}  eps_lower {r['eps_lower']:.4f} "
                  f"(CP {r['eps_lower_cp']:.4f})  z {r['z']:+.2f}{'  ALARM' if r['violation'] else ''}", flush=True)
    z = np.array([r["z"] for r in rows])
    alarms = sum(r["violation"] for r in rows)
    plain = sum(r["plain_over"] for r in rows)
    upper = float(stats.beta.ppf(0.95, alarms + 1, n - alarms)) if alarms < n else 1.0
    print(f"\nthe audit's false alarms on an honest, tight mechanism ({n} audits, {canaries} canaries each, "
          f"{time.perf_counter() - t0:.0f} s):")
    print(f"  alarms under the rule: {alarms} of {n} (stated rate <= {100 * (1 - a.confidence):g} %; "
          f"Clopper-Pearson 95 % upper limit of the measured rate {100 * upper:.1f} %)")
    print(f"  calibration: z = (mu_hat - mu_booked) / se  mean {z.mean():+.3f}  std {z.std(ddof=1):.3f} "
          f"(N(0, 1) when tight; the mean's s.e. {1 / math.sqrt(n):.3f})")
    print(f"  plain one-sided 95 % bound above the booked mu: {plain} of {n} (expected {0.05 * n:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
