"""Paper 001 comparison: the eight power policies of Sec. V on a bundled data set, one table.

    .venv/bin/python sim_loopback/cdpb_compare.py [--config sim_loopback/presets/cdpb_compare.toml]
        [--out DIR] [--seeds 1] [--max-rounds N] [--policies a,b,...] [--set key=value ...]
        [--workers N] [--engine local|ray] [--address ADDR] [--quiet]

For every policy (cdpb_noisy, cdpb_idle, cdpb_mixed, h_min, gamma_bar, independent_sampling, noise_free, and
cdpb_idle_oracle = CDPB-i whose server divides by the true count, the sim-only comparison option) it
builds the run as every entry point does (``build_run``), reads the server's design (rho, tau_opt of
Algorithm 3; h_min and independent_sampling have none and run cdpb_idle's tau), runs min(tau, --max-rounds)
rounds with that (rho, tau) fixed, and reports: final test accuracy, the RDP epsilon at the design's order
(Theorem 1, accountant ``cdpb``), (eps, delta) from that RDP curve, (eps, delta) of dp-accounting's exact
Poisson-subsampled Gaussian RDP (accountant ``rdp``) for the same records, the paper's printed RDP (r = W^2 /
sigma_q^2, no rho) for comparison, and the rounds. The power.options of the config are the design options;
each policy receives those its Options accept. Writes DIR/cdpb_compare.csv and .md (and prints the table),
then checks the paper's orderings (Sec. V) and prints which hold, with the numbers.

The runs are one sweep (otafl_sdr.sweeps.sweep: one arm per row, its policy, design options and rounds as the
arm's overrides, x seeds; every cell an ordinary results folder DIR/ROW-seedN): ``--workers`` runs cells in
parallel (``--engine ray``: on Ray), the same command started again on the same DIR skips the finished
cells and resumes the interrupted ones, and DIR/sweep.csv lists every cell. The table is computed from the
run folders (summary.json, rounds.jsonl, and privacy_ledger.jsonl replayed for Theorem 1's RDP)."""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from otafl_sdr.configure.load import load_config  # noqa: E402
from otafl_sdr.errors import UserError  # noqa: E402
from otafl_sdr.workload.build import build_run  # noqa: E402
from otafl_sdr.privacy.cdpb_rdp import theorem1_round  # noqa: E402
from otafl_sdr.registry import POWER_POLICIES  # noqa: E402
from otafl_sdr.configure.plugins import load_plugins  # noqa: E402
from otafl_sdr.sweeps.sweep import SweepSpec, failed_cells, run_sweep  # noqa: E402

POLICIES = ("cdpb_noisy", "cdpb_idle", "cdpb_mixed", "h_min", "gamma_bar", "independent_sampling", "noise_free")
# rows of the table: label -> (policy, options on top of the design options); the eighth row is CDPB-i with
# the sim-only oracle count (the server divides by the true number of senders; issue 6, item 2)
VARIANTS = {p: (p, {}) for p in POLICIES}
VARIANTS["cdpb_idle_oracle"] = ("cdpb_idle", {"server_count": "oracle"})
DEFAULT_ROWS = tuple(VARIANTS)
# optional rows (--policies): h_min with every client filling its spare power with noise (eq. 11), the reading
# of paper 001's Fig. 5 text; CDPB-mixed at other portions
VARIANTS["h_min_noise"] = ("h_min", {"artificial_noise": True})
VARIANTS["cdpb_mixed_0.2"] = ("cdpb_mixed", {"portion": 0.2})
VARIANTS["cdpb_mixed_0.8"] = ("cdpb_mixed", {"portion": 0.8})
TAIL = 5                                            # accuracy is also reported as the mean of the last 5 rounds
DEFAULT_CONFIG = ROOT / "sim_loopback" / "presets" / "cdpb_compare.toml"
NO_DESIGN = ("h_min", "independent_sampling")      # baselines without an Algorithm-3 design: cdpb_idle's tau
COLUMNS = ("policy", "rounds", "tau_design", "accuracy", "accuracy_std", "acc_tail", "acc_tail_std", "rdp_eps", "order", "eps_cdpb", "eps_rdp",
           "delta", "rdp_eps_paper_literal", "rho", "p", "k_expected", "participants", "nmse_median", "seeds")


def _options_for(policy: str, options: dict) -> dict:
    """The subset of the design options that the policy's Options dataclass accepts."""
    names = {f.name for f in dataclasses.fields(POWER_POLICIES.get(policy).Options)}
    return {k: v for k, v in options.items() if k in names}


def _toml_inline(d: dict) -> str:
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return f'"{v}"'
        return repr(v)
    return "{" + ", ".join(f"{k} = {val(v)}" for k, v in d.items()) + "}"


def _cfg(config: Path, sets: list[str], policy: str, options: dict, extra: list[str] = ()):
    base = load_config(config, sets, validate_now=False)
    opts = _options_for(policy, {**base.power.options, **options})
    return load_config(config, list(sets) + [f"power.policy={policy}", f"power.options={_toml_inline(opts)}",
                                              "run.progress=false"] + list(extra))


def design_of(config: Path, sets: list[str], policy: str):
    """The policy object as every entry point builds it (workload/parts.py build_run) (the server's design happens in its constructor)."""
    cfg = _cfg(config, sets, policy, {})
    return build_run(cfg).policy


def arm_sets(config: Path, sets: list[str], policy: str, rounds: int, fixed: dict) -> list[str]:
    """A row's overrides (its sweep arm): the policy, its design options (those its Options accept) with
    ``fixed`` (the design's rho and tau) on top, and its rounds."""
    base = load_config(config, sets, validate_now=False)
    opts = _options_for(policy, {**base.power.options, **fixed})
    return [f"power.policy={policy}", f"power.options={_toml_inline(opts)}", f"run.rounds={rounds}"]


def read_run(out: Path) -> dict:
    """One run's figures, from its results folder (the ledger replayed as ``otafl-sdr verify`` does)."""
    from otafl_sdr.privacy.base import mech_from_dict
    from otafl_sdr.privacy.ledger import PrivacyLedger
    from otafl_sdr.workload.ledger_checks import audit
    cfg = load_config(out / "config.toml")
    s = json.loads((out / "summary.json").read_text())
    records = audit(out, cfg).records                     # the keyed chain checked as verify checks it
    ledger = PrivacyLedger(cfg.privacy, None)
    ledger.load_state_dict({"records": records})
    cdpb = ledger.accountants["cdpb"]
    order = cdpb.report_order
    mechs = [mech_from_dict(r) for r in records]
    literal = sum(theorem1_round(order, m.sampling_prob, m.extra["paper_literal_r"])
                  for m in mechs if m.uses_data and m.sensitivity > 0 and "paper_literal_r" in m.extra)
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines() if line.strip()]
    plans = [r for r in rows if r.get("uses_clients")]
    accs = [r["test_accuracy"] for r in rows if r.get("test_accuracy") is not None]
    return {"accuracy": s["final_accuracy"], "acc_tail": float(np.mean(accs[-TAIL:])),
            "rdp_eps": cdpb.rdp_at(order), "order": order, "eps_cdpb": s.get("eps_cdpb"), "eps_rdp": s.get("eps_rdp"), "delta": s["delta"],
            "rdp_eps_paper_literal": literal, "rounds": s["rounds"],
            "participants": float(np.mean([r["transmitting"] for r in plans])) if plans else 0.0,
            "nmse_median": float(np.median([r["aggregate_nmse"] for r in plans if r["aggregate_nmse"] is not None]))
            if plans else math.nan}


def sweep_spec(config: Path, out: Path, seeds: int, arms: dict, sets: list[str]) -> SweepSpec:
    """The comparison as a sweep: one arm per row (``arm_sets``) x seeds 0..seeds-1 on the config."""
    return SweepSpec(name="cdpb_compare", base=Path(config).resolve(), seeds=list(range(seeds)), out=Path(out),
                     fixed=list(sets), grid={}, arms=arms, dirs="{arm}-seed{seed}")


def compare(config: Path, out: Path, seeds: int = 1, max_rounds: int = 0, rows=DEFAULT_ROWS,
            sets: list[str] = (), quiet: bool = False, workers: int | None = None, engine: str = "local",
            address: str | None = None) -> list[dict]:
    load_plugins()
    sets = list(sets)
    designs = {}
    for pol in dict.fromkeys(["cdpb_idle"] + [VARIANTS[r][0] for r in rows if VARIANTS[r][0] not in NO_DESIGN]):
        designs[pol] = design_of(config, sets, pol)
    tau_ref = designs["cdpb_idle"].suggested_rounds
    plan, arms = {}, {}
    for label in rows:
        pol, extra_opts = VARIANTS[label]
        d = designs.get(pol)
        tau = d.suggested_rounds if d is not None else tau_ref
        rounds = min(tau, max_rounds) if max_rounds > 0 else tau
        fixed = {"rho": d.rho, "rounds": tau} if d is not None else {}
        fixed.update(extra_opts)
        plan[label] = (d, tau, rounds)
        arms[label] = arm_sets(config, sets, pol, rounds, fixed)
    spec = sweep_spec(config, out, seeds, arms, sets)
    t0 = time.perf_counter()
    cells = run_sweep(spec, engine=engine, workers=workers, address=address, progress=not quiet)
    bad = failed_cells(cells)
    if len(bad):
        raise UserError("; ".join(f"run {out / r['dir']}: {r['status']}" for _, r in bad.iterrows()))
    table = []
    for label in rows:
        d, tau, rounds = plan[label]
        here = cells[cells["mechanism"] == label].sort_values("seed")
        runs = [read_run(out / name) for name in here["dir"]]
        acc = [r["accuracy"] for r in runs]
        tail = [r["acc_tail"] for r in runs]
        row = {"policy": label, "rounds": rounds, "tau_design": tau, "accuracy": statistics.fmean(acc),
               "accuracy_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
               "acc_tail_std": statistics.stdev(tail) if len(tail) > 1 else 0.0, "seeds": seeds}
        for k in ("acc_tail", "rdp_eps", "order", "eps_cdpb", "eps_rdp", "delta", "rdp_eps_paper_literal", "participants",
                  "nmse_median"):
            row[k] = statistics.fmean(r[k] for r in runs)
        row.update(rho=d.rho if d is not None else math.nan, p=d.design.p if d is not None else 1.0,
                   k_expected=d.design.count if d is not None else math.nan)
        table.append(row)
        if not quiet:
            status = ", ".join(sorted(set(here["status"].astype(str))))
            print(f"  {label}: {rounds} rounds x {seeds} seed(s), acc {row['accuracy']:.3f}, "
                  f"RDP({row['order']:g}) {row['rdp_eps']:.4g}, eps {row['eps_cdpb']:.4g} ({status})", flush=True)
    if not quiet:
        print(f"  {len(cells)} runs in {time.perf_counter() - t0:.0f}s; per run: {out / 'sweep.csv'}", flush=True)
    write_table(table, out)
    return table


def _fmt(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, int):
        return str(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.4g}"


def markdown(table: list[dict]) -> str:
    head = ["policy", "rounds", "accuracy", f"acc (last {TAIL})", "RDP eps @ alpha (Thm 1)", "(eps, delta) Thm 1", "(eps, delta) dp-acc.",
            "paper-literal RDP", "rho", "p", "E[K_t]", "mean senders", "median NMSE"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        acc = _fmt(r["accuracy"]) + (f" ± {r['accuracy_std']:.3f}" if r["seeds"] > 1 else "")
        tail = _fmt(r["acc_tail"]) + (f" ± {r['acc_tail_std']:.3f}" if r["seeds"] > 1 else "")
        cells = [r["policy"], f"{r['rounds']}" + (f" (tau {r['tau_design']})" if r["rounds"] != r["tau_design"] else ""),
                 acc, tail, f"{_fmt(r['rdp_eps'])} (alpha={r['order']:g})", f"({_fmt(r['eps_cdpb'])}, {r['delta']:g})",
                 f"({_fmt(r['eps_rdp'])}, {r['delta']:g})", _fmt(r["rdp_eps_paper_literal"]), _fmt(r["rho"]),
                 _fmt(r["p"]), _fmt(r["k_expected"]), _fmt(r["participants"]), _fmt(r["nmse_median"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


ACC = "acc_tail"


def _verdict(a: float, b: float, se: float) -> str:
    """'holds' (a >= b beyond the seeds' standard error), 'tie' (within it) or 'DOES NOT hold'."""
    if abs(a - b) <= se:
        return "tie"
    return "holds" if a >= b else "DOES NOT hold"


def orderings(table: list[dict]) -> list[tuple[str, str, str]]:
    """The paper's Sec. V claims, checked on the table: (claim, verdict, numbers). Accuracy is the mean test
    accuracy of the last rounds (``acc_tail``, less noisy than the last round alone), compared with the
    standard error of the difference over the seeds (a 'tie' is within it; one seed has no error bar);
    privacy is the (eps, delta) of Theorem 1's curve (accountant ``cdpb``), compared exactly."""
    by = {r["policy"]: r for r in table}
    out = []

    def acc(a, b, claim):
        se = math.sqrt((a["acc_tail_std"] ** 2 + b["acc_tail_std"] ** 2) / max(a["seeds"], 1))
        out.append((claim, _verdict(a[ACC], b[ACC], se),
                    f"{a[ACC]:.4f} vs {b[ACC]:.4f}, standard error of the difference {se:.4f}"))

    def eps(a, b, claim):
        out.append((claim, "holds" if a["eps_cdpb"] <= b["eps_cdpb"] else "DOES NOT hold",
                    f"eps {a['eps_cdpb']:.5g} vs {b['eps_cdpb']:.5g}; RDP {a['rdp_eps']:.5g} vs {b['rdp_eps']:.5g}"))

    if "cdpb_idle" in by and "cdpb_noisy" in by:
        acc(by["cdpb_idle"], by["cdpb_noisy"], "CDPB-i accuracy >= CDPB-n")
        eps(by["cdpb_idle"], by["cdpb_noisy"], "CDPB-i privacy >= CDPB-n (smaller eps)")
    for c in ("cdpb_idle", "cdpb_noisy"):
        if c in by and "h_min" in by:
            acc(by[c], by["h_min"], f"{c} accuracy >= h_min")
            eps(by[c], by["h_min"], f"{c} privacy >= h_min (smaller eps)")
    if "noise_free" in by:
        nf = by["noise_free"]
        others = [r for r in table if r["policy"] not in ("noise_free", "cdpb_idle_oracle", "h_min_noise")]
        top = max(others, key=lambda r: r[ACC])
        acc(nf, top, f"noise_free most accurate (best other: {top['policy']})")
        worst = max(others, key=lambda r: r["eps_cdpb"])
        out.append((f"noise_free least private (largest other: {worst['policy']})",
                    "holds" if nf["eps_cdpb"] >= worst["eps_cdpb"] else "DOES NOT hold",
                    f"eps {nf['eps_cdpb']:.5g} vs {worst['eps_cdpb']:.5g}"))
    return out


def write_table(table: list[dict], out: Path) -> None:
    with open(out / "cdpb_compare.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in table:
            w.writerow({k: r.get(k) for k in COLUMNS})
    checks = orderings(table)
    text = markdown(table) + "\n\nOrderings of paper 001, Sec. V:\n" + "\n".join(
        f"- {verdict}: {claim} ({nums})" for claim, verdict, nums in checks) + "\n"
    (out / "cdpb_compare.md").write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(DEFAULT_CONFIG))
    ap.add_argument("--out", default=None)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--max-rounds", type=int, default=0, help="cap on rounds per run (0 = the design's tau)")
    ap.add_argument("--policies", default=",".join(DEFAULT_ROWS),
                    help=f"rows, comma separated (also: {', '.join(v for v in VARIANTS if v not in DEFAULT_ROWS)})")
    ap.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    ap.add_argument("--workers", type=int, default=None, help="runs in parallel (local engine; default: cores)")
    ap.add_argument("--engine", choices=("local", "ray"), default="local", help="where the runs go (otafl_sdr.sweeps.sweep)")
    ap.add_argument("--address", default=None, help="ray engine: address of an existing Ray cluster")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    try:
        policies = [p.strip() for p in a.policies.split(",") if p.strip()]
        for p in policies:
            if p not in VARIANTS:
                raise UserError(f"--policies: unknown row '{p}'; allowed: {', '.join(VARIANTS)}")
        if a.seeds < 1:
            raise UserError("--seeds must be >= 1")
        if a.workers is not None and a.workers < 1:
            raise UserError("--workers must be >= 1")
        out = Path(a.out or f"results/cdpb_compare-{time.strftime('%Y%m%d-%H%M%S')}")
        if out.exists() and any(out.iterdir()) and not (out / "sweep.toml").is_file():
            raise UserError(f"--out '{out}' exists, is not empty and holds no earlier comparison (sweep.toml)")
        table = compare(Path(a.config), out, a.seeds, a.max_rounds, policies, a.set, a.quiet, a.workers, a.engine,
                        a.address)
    except UserError as e:
        print(f"cdpb_compare: error: {e}", file=sys.stderr)
        return 2
    print((out / "cdpb_compare.md").read_text())
    print(f"written: {out / 'cdpb_compare.csv'}, {out / 'cdpb_compare.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
