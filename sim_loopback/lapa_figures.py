"""Paper 004 comparisons on bundled data: Fig. 4-style aggregation strategies, Fig. 7-style noise control.

    .venv/bin/python sim_loopback/lapa_figures.py --out DIR [--size full|ci] [--which fig4,fig7]
        [--seeds N] [--rounds N] [--set key=value ...] [--workers N] [--engine local|ray] [--address ADDR]

fig4 (preset lapa_fig4.toml, no DP noise, Rayleigh fading, 3 IID + 12 non-IID devices): Benchmark 1 FedAvg
weights, Benchmark 2 angle weights (FedAdp-form stand-in for BEDA), Configuration 1 reliable weights
(eqs. 20-21) and Configuration 2 reliable weights with SER-based selection (eq. 22) at 1e-1, 1e-2, 1e-3.
fig7 (preset lapa_fig7.toml, DP): Configuration 5 (policy `ddpg`: LAPA + dynamic noise control with
DDPG powers), LAPA + noise control at average power, Benchmark 4 (ARB-like: eq. 12 round budgets split
evenly, no switch) and Benchmark 3 (uniform DP) at average power, and Configuration 4 (no DP).
Every run goes through the orchestrator (sim air). Writes DIR/fig4.png, DIR/fig7.png (accuracy against
rounds + the final aggregation weights / the aggregate's noise std per round), DIR/fig4.md, DIR/fig7.md
(final accuracy = mean of the last 3 rounds, mean +- std over seeds; epsilons of the same records by
rdp / pld and by the paper's own sum, lapa_sum; the switch round T_th) and DIR/summary.json, and checks
the paper's orderings (sec. V-B, V-D): which hold here, with the numbers. --size ci: 5 rounds, 1 seed,
a short DDPG training (the CI test).

Each figure is one sweep (otafl_sdr.sweeps.sweep: its configurations as arms x seeds, every cell an ordinary results
folder DIR/runs/FIG/KEY_sN, DIR/runs/FIG/sweep.csv listing them): ``--workers`` runs cells in parallel
(``--engine ray``: on Ray), and the same command started again on the same DIR skips the finished cells and
resumes the interrupted ones. Tables and plots are computed from the run folders: rounds.jsonl (accuracy,
sigma_eff), summary.json (epsilons) and privacy_ledger.jsonl (each round's mechanism as the policy described
it: devices selected, the switch round T_th; the last round's aggregation weights G_k and the DDPG training's
rewards where the policy records them there, ``G`` and ``ddpg_train``)."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from otafl_sdr.errors import UserError  # noqa: E402
from otafl_sdr.sweeps.sweep import SweepSpec, failed_cells, run_sweep  # noqa: E402

PRESETS = Path(__file__).resolve().parent / "presets"

# (key, label, policy, power.options)
FIG4 = [
    ("B1", "B1 FedAvg weights", "lapa", {"budget": "none", "weights": "fedavg"}),
    ("B2", "B2 angle weights (BEDA stand-in)", "lapa", {"budget": "none", "weights": "angle"}),
    ("C1", "C1 reliable weights", "lapa", {"budget": "none", "weights": "reliable"}),
    ("C2a", "C2 reliable + SER 1e-1", "lapa", {"budget": "none", "weights": "reliable", "ser_threshold": 0.1}),
    ("C2b", "C2 reliable + SER 1e-2", "lapa", {"budget": "none", "weights": "reliable", "ser_threshold": 0.01}),
    ("C2c", "C2 reliable + SER 1e-3", "lapa", {"budget": "none", "weights": "reliable", "ser_threshold": 0.001}),
]
# sec. V-B: C1 > B2 > B1; C2 at 1e-1 > B2 and the best; stricter thresholds lower accuracy
FIG4_PAPER = [("C1", "B2"), ("B2", "B1"), ("C1", "B1"), ("C2a", "C1"), ("C2a", "B2"), ("C2a", "C2b"), ("C2a", "C2c")]
AVG = 0.5
FIG7 = [
    ("C5", "C5 LAPA + DDPG powers", "ddpg", {}),
    ("LAPA", "LAPA + noise control, average power", "lapa", {"power_fraction": AVG}),
    ("B4", "B4 ARB-like, average power", "lapa", {"budget": "arb", "noise_control": False, "power_fraction": AVG}),
    ("B3", "B3 uniform DP, average power", "lapa", {"budget": "uniform", "noise_control": False, "power_fraction": AVG}),
    ("C4", "C4 no DP", "lapa", {"budget": "none", "power_fraction": AVG}),
]
# sec. V-D: C5 > its own average-power setting > B4 at average power (sec. V-C: LAPA > B4 > B3; no DP best)
FIG7_PAPER = [("C5", "LAPA"), ("LAPA", "B4"), ("C5", "B4"), ("B4", "B3"), ("C4", "LAPA")]
SIZES = {"full": {"rounds": 30, "seeds": 3, "episodes": 30, "steps": 16},
         "ci": {"rounds": 5, "seeds": 1, "episodes": 3, "steps": 6}}
FIGS = {"fig4": (FIG4, FIG4_PAPER, "lapa_fig4.toml",
                 "Fig. 4-style: aggregation strategies (no DP noise, Rayleigh fading)"),
        "fig7": (FIG7, FIG7_PAPER, "lapa_fig7.toml",
                 "Fig. 7-style: LAPA dynamic noise control (DP, realistic channel noise)")}


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def options_literal(opts: dict) -> str:
    return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in opts.items()) + "}"


def arm_sets(policy: str, opts: dict, size: dict, extra_sets: list[str]) -> list[str]:
    """One configuration's overrides (its sweep arm); the --set overrides come last (they win)."""
    opts = dict(opts)
    if policy == "ddpg":
        opts.setdefault("episodes", size["episodes"])
        opts.setdefault("steps", size["steps"])
    return [f"power.policy={json.dumps(policy)}", f"power.options={options_literal(opts)}"] + list(extra_sets)


def sweep_spec(name: str, out: Path, size: dict, seeds: int, rounds: int, extra_sets: list[str]) -> SweepSpec:
    """A figure as a sweep: its configurations (arms) x seeds 0..seeds-1 on its preset, in DIR/runs/NAME."""
    configs, _, preset_name, _ = FIGS[name]
    return SweepSpec(name=f"lapa_{name}", base=PRESETS / preset_name, seeds=list(range(seeds)),
                     out=out / "runs" / name, fixed=[f"run.rounds={rounds}"] + list(extra_sets), grid={},
                     arms={key: arm_sets(policy, opts, size, extra_sets) for key, _, policy, opts in configs},
                     labels={key: label for key, label, _, _ in configs}, dirs="{arm}_s{seed}")


def read_run(out: Path) -> dict:
    """One run's figures, from its results folder."""
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((out / "summary.json").read_text())
    ledger = [json.loads(line) for line in (out / "privacy_ledger.jsonl").read_text().splitlines() if line.strip()]
    plans = [r.get("extra") or {} for r in ledger if r.get("attempt", 0) == 0]    # one per planned round
    switch = [x["switch_round"] for x in plans if "switch_round" in x]
    weights = [x["G"] for x in plans if "G" in x]
    res = {
        "accuracy": [r.get("test_accuracy") for r in rows],
        "sigma_eff": [r.get("sigma_eff") for r in rows],
        "final": float(np.mean([r["test_accuracy"] for r in rows[-3:]])),
        "eps_rdp": summary.get("eps_rdp"), "eps_pld": summary.get("eps_pld"),
        "eps_lapa_sum": summary.get("eps_lapa_sum"),
        "switch_round": switch[-1] if switch else None,
        "selected": float(np.mean([x["selected"] for x in plans if "selected" in x]))
        if any("selected" in x for x in plans) else None,
        "weights": weights[-1] if weights else None,
        "wall_s": summary.get("wall_s"),
    }
    trained = [x["ddpg_train"] for x in plans if "ddpg_train" in x]
    if trained:
        tr = trained[-1]
        res["ddpg"] = {"objective": tr["objective"], "T_th": tr["T_th"], "initial_reward": tr["initial_reward"],
                       "final_reward": float(-np.log(tr["objective"])), "power_fraction": tr.get("power_fraction")}
    return res


def _mean_std(xs) -> tuple[float, float]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return float("nan"), float("nan")
    return float(np.mean(xs)), float(statistics.pstdev(xs)) if len(xs) > 1 else 0.0


def _fmt(x, spec=".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def run_figure(name: str, out: Path, size: dict, seeds: int, rounds: int, extra_sets: list[str],
               quiet: bool = False, workers: int | None = None, engine: str = "local",
               address: str | None = None) -> dict:
    configs, paper_pairs, preset_name, title = FIGS[name]
    spec = sweep_spec(name, out, size, seeds, rounds, extra_sets)
    cells = run_sweep(spec, engine=engine, workers=workers, address=address, progress=not quiet)
    bad = failed_cells(cells)
    if len(bad):
        raise UserError("; ".join(f"run {spec.out / r['dir']}: {r['status']}" for _, r in bad.iterrows()))
    results: dict[str, list[dict]] = {}
    for key, label, policy, opts in configs:
        here = cells[cells["mechanism"] == key].sort_values("seed")
        results[key] = [read_run(spec.out / d) for d in here["dir"]]
        if not quiet:
            for seed, status, res in zip(here["seed"], here["status"], results[key]):
                print(f"[{name}] {label:40s} seed {seed}: acc {res['final']:.3f}  ({res['wall_s']:.1f} s, {status})",
                      flush=True)
    table = []
    for key, label, policy, opts in configs:
        rs = results[key]
        acc = _mean_std([r["final"] for r in rs])
        row = {"key": key, "label": label, "policy": policy, "options": opts, "acc_mean": acc[0], "acc_std": acc[1],
               "eps_rdp": _mean_std([r["eps_rdp"] for r in rs])[0],
               "eps_pld": _mean_std([r["eps_pld"] for r in rs])[0],
               "eps_lapa_sum": _mean_std([r["eps_lapa_sum"] for r in rs])[0],
               "switch_round": [r["switch_round"] for r in rs],
               "selected": _mean_std([r["selected"] for r in rs])[0]}
        if policy == "ddpg":                 # None: a run whose folder holds no training record
            row["ddpg_reward"] = [(r["ddpg"]["initial_reward"], r["ddpg"]["final_reward"]) if "ddpg" in r else None
                                  for r in rs]
        table.append(row)
    acc = {row["key"]: row["acc_mean"] for row in table}
    checks = [{"pair": f"{a} > {b}", "paper": True, "obtained": bool(acc[a] > acc[b]),
               "values": (acc[a], acc[b])} for a, b in paper_pairs]
    ordering = sorted(acc, key=lambda k: -acc[k])
    write_table(out / f"{name}.md", title, table, checks, ordering, seeds, rounds)
    plot_figure(out / f"{name}.png", name, title, configs, results)
    return {"title": title, "table": table, "checks": checks, "ordering": ordering, "seeds": seeds, "rounds": rounds}


def write_table(path: Path, title: str, table, checks, ordering, seeds, rounds) -> None:
    lines = [f"# {title}", "", f"{seeds} seed(s), {rounds} rounds; accuracy = mean of the last 3 rounds "
             "(mean +- std over seeds); epsilons of the same ledger records (delta from the preset).", "",
             "| config | accuracy | eps rdp | eps pld | eps lapa_sum (paper) | T_th | devices/round |",
             "|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['label']} | {r['acc_mean']:.3f} +- {r['acc_std']:.3f} | {_fmt(r['eps_rdp'])} | "
                     f"{_fmt(r['eps_pld'])} | {_fmt(r['eps_lapa_sum'])} | {r['switch_round']} | "
                     f"{_fmt(r['selected'], '.1f')} |")
    lines += ["", "Obtained ordering (best first): " + " > ".join(ordering), "",
              "| paper's ordering | holds here | accuracies |", "|---|---|---|"]
    for c in checks:
        lines.append(f"| {c['pair']} | {'yes' if c['obtained'] else 'NO'} | {c['values'][0]:.3f} vs {c['values'][1]:.3f} |")
    path.write_text("\n".join(lines) + "\n")


def plot_figure(path: Path, name: str, title: str, configs, results) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label, _, _ in configs:
        curves = np.array([r["accuracy"] for r in results[key]], dtype=float)
        m = np.nanmean(curves, axis=0)
        x = np.arange(1, len(m) + 1)
        ax1.plot(x, m, label=label)
        if len(curves) > 1:
            s = np.nanstd(curves, axis=0)
            ax1.fill_between(x, m - s, m + s, alpha=0.15)
    ax1.set_xlabel("round")
    ax1.set_ylabel("test accuracy")
    ax1.set_title(title, fontsize=9)
    ax1.legend(fontsize=7)
    ax1.grid(alpha=0.3)
    if name == "fig4" and not any(results[k][0]["weights"] is not None for k, *_ in configs):
        ax2.text(0.5, 0.5, "the runs' ledgers hold no aggregation weights G_k", ha="center", va="center",
                 transform=ax2.transAxes, fontsize=9)
        ax2.set_axis_off()
    elif name == "fig4":
        keys = [k for k, *_ in configs if results[k][0]["weights"] is not None]
        K = len(results[keys[0]][0]["weights"])
        width = 0.8 / len(keys)
        for i, k in enumerate(keys):
            ax2.bar(np.arange(K) + i * width, results[k][0]["weights"], width, label=k)
        ax2.set_xlabel("device (0-2 IID)")
        ax2.set_ylabel("aggregation weight G_k (last round, seed 0)")
        ax2.legend(fontsize=7)
    else:
        for key, label, _, _ in configs:
            s = np.array([r["sigma_eff"] for r in results[key]], dtype=float)
            ax2.semilogy(np.arange(1, s.shape[1] + 1), np.nanmean(s, axis=0), label=key)
        ax2.set_xlabel("round")
        ax2.set_ylabel("noise std in the aggregate (sigma_eff)")
        ax2.legend(fontsize=7)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="results folder (created; started again on the same folder, "
                    "the finished runs are skipped)")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--which", default="fig4,fig7", help="comma-separated: fig4, fig7")
    ap.add_argument("--seeds", type=int, default=0, help="0 = the size's default")
    ap.add_argument("--rounds", type=int, default=0, help="0 = the size's default")
    ap.add_argument("--set", action="append", default=[], help="config override key=value (all runs)")
    ap.add_argument("--workers", type=int, default=None, help="runs in parallel (local engine; default: cores)")
    ap.add_argument("--engine", choices=("local", "ray"), default="local", help="where the runs go (otafl_sdr.sweeps.sweep)")
    ap.add_argument("--address", default=None, help="ray engine: address of an existing Ray cluster")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.workers is not None and a.workers < 1:
        ap.error("--workers must be >= 1")
    size = SIZES[a.size]
    seeds = a.seeds or size["seeds"]
    rounds = a.rounds or size["rounds"]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    which = [w.strip() for w in a.which.split(",") if w.strip()]
    for w in which:
        if w not in FIGS:
            ap.error(f"--which: unknown figure '{w}'; allowed: {', '.join(FIGS)}")
    try:
        summary = {w: run_figure(w, out, size, seeds, rounds, a.set, a.quiet, a.workers, a.engine, a.address)
                   for w in which}
    except UserError as e:
        ap.exit(2, f"lapa_figures: error: {e}\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    if not a.quiet:
        for w in which:
            print((out / f"{w}.md").read_text())
    return summary


if __name__ == "__main__":
    main()
