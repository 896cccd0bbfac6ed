"""Paper 004 comparisons on bundled data: Fig. 4-style aggregation strategies, Fig. 7-style noise control.

    .venv/bin/python sim_loopback/lapa_figures.py --out DIR [--size full|ci] [--which fig4,fig7]
        [--seeds N] [--rounds N] [--set key=value ...]

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
a short DDPG training (the CI test)."""
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

from otafl_sdr.config import load_config  # noqa: E402
from otafl_sdr.orchestrator import make_experiment  # noqa: E402

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


def run_one(preset: Path, policy: str, opts: dict, seed: int, rounds: int, out: Path, extra_sets: list[str],
            size: dict) -> dict:
    opts = dict(opts)
    if policy == "ddpg":
        opts.setdefault("episodes", size["episodes"])
        opts.setdefault("steps", size["steps"])
    sets = [f"run.seed={seed}", f"run.rounds={rounds}", f"power.policy={json.dumps(policy)}",
            f"power.options={options_literal(opts)}", "run.progress=false"] + list(extra_sets)
    cfg = load_config(preset, overrides=sets)
    t0 = time.perf_counter()
    ex = make_experiment(cfg, out, progress=False)
    outcome = ex.run()
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines() if line.strip()]
    pol = ex.policy
    log = getattr(pol, "log", [])
    res = {
        "accuracy": [r.get("test_accuracy") for r in rows],
        "sigma_eff": [r.get("sigma_eff") for r in rows],
        "final": float(np.mean([r["test_accuracy"] for r in rows[-3:]])),
        "eps_rdp": outcome.summary.get("eps_rdp"), "eps_pld": outcome.summary.get("eps_pld"),
        "eps_lapa_sum": outcome.summary.get("eps_lapa_sum"),
        "switch_round": getattr(pol, "switch_round", None),
        "selected": float(np.mean([np.sum(entry["selected"]) for entry in log if "selected" in entry])) if log else None,
        "weights": log[-1]["G"].tolist() if log and "G" in log[-1] else None,
        "wall_s": time.perf_counter() - t0,
    }
    tr = getattr(pol, "train_result", None)
    if tr is not None:
        res["ddpg"] = {"objective": tr.objective, "T_th": tr.T_th, "initial_reward": tr.initial_reward,
                       "final_reward": float(-np.log(tr.objective)), "power_fraction": pol.frac.tolist()}
    return res


def _mean_std(xs) -> tuple[float, float]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return float("nan"), float("nan")
    return float(np.mean(xs)), float(statistics.pstdev(xs)) if len(xs) > 1 else 0.0


def _fmt(x, spec=".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, spec)


def run_figure(name: str, out: Path, size: dict, seeds: int, rounds: int, extra_sets: list[str],
               quiet: bool = False) -> dict:
    configs, paper_pairs, preset_name, title = FIGS[name]
    results: dict[str, list[dict]] = {}
    for key, label, policy, opts in configs:
        results[key] = []
        for seed in range(seeds):
            run_dir = out / "runs" / name / f"{key}_s{seed}"
            res = run_one(PRESETS / preset_name, policy, opts, seed, rounds, run_dir, extra_sets, size)
            results[key].append(res)
            if not quiet:
                print(f"[{name}] {label:40s} seed {seed}: acc {res['final']:.3f}  ({res['wall_s']:.1f} s)", flush=True)
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
        if "ddpg" in rs[0]:
            row["ddpg_reward"] = [(r["ddpg"]["initial_reward"], r["ddpg"]["final_reward"]) for r in rs]
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
    if name == "fig4":
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
    ap.add_argument("--out", required=True, help="results folder (created; must not hold earlier runs)")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--which", default="fig4,fig7", help="comma-separated: fig4, fig7")
    ap.add_argument("--seeds", type=int, default=0, help="0 = the size's default")
    ap.add_argument("--rounds", type=int, default=0, help="0 = the size's default")
    ap.add_argument("--set", action="append", default=[], help="config override key=value (all runs)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    size = SIZES[a.size]
    seeds = a.seeds or size["seeds"]
    rounds = a.rounds or size["rounds"]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    which = [w.strip() for w in a.which.split(",") if w.strip()]
    for w in which:
        if w not in FIGS:
            ap.error(f"--which: unknown figure '{w}'; allowed: {', '.join(FIGS)}")
    summary = {w: run_figure(w, out, size, seeds, rounds, a.set, a.quiet) for w in which}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    if not a.quiet:
        for w in which:
            print((out / f"{w}.md").read_text())
    return summary


if __name__ == "__main__":
    main()
