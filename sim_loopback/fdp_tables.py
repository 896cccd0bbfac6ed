"""Paper 002's experiments, reduced to what 2 cores do in minutes: Table 6 and Table 7.

    .venv/bin/python sim_loopback/fdp_tables.py table6 [--out DIR] [--seeds 2] [--ms 50,100] [--ks 5,10,20]
        [--sigmas 1,0.1,0.01,0.001] [--tk 300] [--set key=value ...] [--tiny]
    .venv/bin/python sim_loopback/fdp_tables.py table7 [--out DIR] [--rounds 30] [--alphas 0.01,0.1,1]
        [--sigma 0.01] [--set key=value ...] [--tiny]

Table 6 (test accuracy of Noisy-FedAvg over a grid of clients m, local steps K and client noise sigma, with
T K fixed): the paper runs MNIST/LeNet-5, m in {50, 100}, K in {50, 100, 200}, T K = 30000, 600 samples per
client, 5 seeds. Reduced here: mnist5k (5,000 digits), the MLP of the preset, K in {5, 10, 20}, T K = 300,
2 seeds, equal-size clients with 2 classes each (the paper's Dir-0.1 split is by label proportions at a
fixed 600 samples per client; our ``dirichlet`` partition gives very unequal sizes and hence weights). The
paper gives no learning rate, schedule or V: the preset's lr 0.05 (constant), V = 1 are used, and
train.tau = V lr K per cell (the update is never clipped). "-" marks a diverged run (final training loss
not finite or above 2 ln(10), twice the loss of a uniform guess), as the paper does. A second table in the same
layout gives eps_fdp / eps_fdp_feasible (delta of the preset) of the last model of each cell.

Table 7 (Noisy-FedAvg vs Noisy-FedProx alpha in {0.01, 0.1, 1}: accuracy and "sensitivity"): the paper
measures on CIFAR-10 (m = 20, K = 5, V = 10, T = 600) the distance between global models trained on
adjacent data sets. Here: mnist5k, m = 20, K = 5, V = 10, T = 30. Each method runs twice through the
orchestrator with identical seeds (same batches, client noise, channel): once on the data, once with
client 0's first sample replaced by a test sample of another label (Def. 1), and the table reports
||w_T - w_T'|| of the two final models, the accuracy of the first, and eps_fdp / eps_fdp_feasible.

Runs go through ``make_experiment`` with ``sim_loopback/presets/noisy_fed{avg,prox}_mnist5k.toml`` (a
near-ideal air: the digital Algorithm 1). Writes DIR/table6.md + .csv, DIR/table7.md + .csv and prints
the tables. ``--tiny`` shrinks everything for CI (seconds). Time on 2 shared cores: table6 with
``--seeds 1 --ms 20,50 --tk 200`` about 35 min (the defaults about 4x that); table7 about 20 min."""
from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from otafl_sdr.configure.load import load_config  # noqa: E402
from otafl_sdr.errors import UserError  # noqa: E402
from otafl_sdr.experiment.orchestrator import Experiment, make_experiment  # noqa: E402

PRESETS = ROOT / "sim_loopback" / "presets"
TINY = ["data.max_samples=500", "data.partition=iid", "model.hidden=16", "run.torch_threads=1", "train.batch_size=16"]
DIVERGED = 2 * math.log(10)     # twice the loss of a uniform guess over 10 classes


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"expected a comma-separated list of numbers, got {text!r}") from None


def _ints(text: str) -> list[int]:
    vals = _floats(text)
    if any(v != int(v) or v < 1 for v in vals):
        raise UserError(f"expected a comma-separated list of positive integers, got {text!r}")
    return [int(v) for v in vals]


def _options(o: dict) -> str:
    def val(v):
        return f'"{v}"' if isinstance(v, str) else ("true" if v is True else "false" if v is False else repr(v))
    return "algorithm.options={" + ", ".join(f"{k} = {val(v)}" for k, v in o.items()) + "}"


def _config(preset: str, sets: list[str], options: dict, extra: list[str]):
    base = load_config(PRESETS / preset, validate_now=False)
    opts = {**base.algorithm.options, **options}
    V, K = float(opts["clip"]), int(opts["local_steps"])
    lr = load_config(PRESETS / preset, list(extra) + list(sets), validate_now=False).train.lr
    tau = V * lr * K * (1 + 1e-9)                       # every schedule has eta <= lr: no update is longer
    return load_config(PRESETS / preset, list(extra) + [f"train.tau={tau!r}", "run.progress=false",
                                                        _options(opts)] + list(sets))


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def _fmt_eps(x) -> str:
    if x is None:
        return "n/a"
    if not math.isfinite(x):
        return "inf"
    return f"{x:.3g}"


# ------------------------------------------------------------------------------------------------ Table 6
def table6(args) -> list[dict]:
    rows = []
    extra = TINY if args.tiny else []
    for sigma in args.sigmas:
        for m in args.ms:
            for K in args.ks:
                T = max(1, args.tk // K)
                accs, eps, eps_f, losses = [], [], [], []
                for seed in range(args.seeds):
                    cfg = _config("noisy_fedavg_mnist5k.toml", args.set, {"sigma": sigma, "local_steps": K},
                                  extra + [f"data.clients={m}", f"run.rounds={T}", f"run.seed={seed}",
                                           f"run.name=t6-m{m}-K{K}-s{sigma:g}-seed{seed}"])
                    out = Path(args.out) / "runs" / f"t6_m{m}_K{K}_sigma{sigma:g}_seed{seed}"
                    s = make_experiment(cfg, out, progress=False).run().summary
                    accs.append(s["final_accuracy"])
                    losses.append(s["final_loss"])
                    eps.append(s.get("eps_fdp"))
                    eps_f.append(s.get("eps_fdp_feasible"))
                diverged = any(not _finite(v) or v > DIVERGED for v in losses)
                row = {"data": f"{cfg.data.dataset} {cfg.model.name}", "m": m, "K": K, "T": T, "sigma": sigma,
                       "seeds": args.seeds, "diverged": diverged,
                       "accuracy": statistics.fmean(accs) if not diverged else None,
                       "accuracy_std": statistics.pstdev(accs) if not diverged and len(accs) > 1 else 0.0,
                       "eps_fdp": eps[0], "eps_fdp_feasible": eps_f[0], "final_loss": statistics.fmean(
                           [v for v in losses if _finite(v)]) if any(_finite(v) for v in losses) else None}
                rows.append(row)
                print(f"  m={m} K={K} T={T} sigma={sigma:g}: acc={row['accuracy']} eps_fdp={_fmt_eps(eps[0])} "
                      f"eps_fdp_feasible={_fmt_eps(eps_f[0])}", flush=True)
    return rows


def table6_markdown(rows: list[dict], args, delta: float) -> str:
    cols = [(m, K) for m in args.ms for K in args.ks]
    head = "| Data / model | sigma | " + " | ".join(f"m={m} K={K}" for m, K in cols) + " |"
    sep = "|---|---|" + "---|" * len(cols)
    by = {(r["m"], r["K"], r["sigma"]): r for r in rows}
    acc_lines, eps_lines = [head, sep], [head, sep]
    for j, sigma in enumerate(args.sigmas):
        label = rows[0]["data"] if j == 0 else ""
        cells, ecells = [], []
        for m, K in cols:
            r = by[(m, K, sigma)]
            cells.append("-" if r["diverged"] else f"{100 * r['accuracy']:.2f}±{100 * r['accuracy_std']:.2f}")
            ecells.append(f"{_fmt_eps(r['eps_fdp'])} / {_fmt_eps(r['eps_fdp_feasible'])}")
        acc_lines.append(f"| {label} | {sigma:g} | " + " | ".join(cells) + " |")
        eps_lines.append(f"| {label} | {sigma:g} | " + " | ".join(ecells) + " |")
    T = {K: max(1, args.tk // K) for K in args.ks}
    return ("Table 6 (reduced): test accuracy % of Noisy-FedAvg, mean±std over "
            f"{args.seeds} seed(s); T K = {args.tk} (T = " + ", ".join(f"{T[K]} for K={K}" for K in args.ks)
            + "); '-' = diverged\n\n" + "\n".join(acc_lines)
            + f"\n\neps_fdp / eps_fdp_feasible of the last model (delta = {delta:g}, seed 0)\n\n"
            + "\n".join(eps_lines) + "\n")


# ------------------------------------------------------------------------------------------------ Table 7
class AdjacentExperiment(Experiment):
    """The same run on the adjacent data set of Def. 1: client 0's first sample replaced by a test sample
    with another label (all seeds unchanged, so batches, noise and channels are the same draws)."""

    def build(self):
        super().build()
        d = self.data
        y0 = int(d.client_y[0][0])
        j = int(torch.nonzero(d.test_y != y0)[0, 0])
        x0 = d.client_x[0]
        x0[0] = d.test_x[j].reshape(x0[0].shape).to(x0.dtype)
        d.client_y[0][0] = d.test_y[j]


def table7(args) -> list[dict]:
    extra = (TINY if args.tiny else []) + [f"run.rounds={args.rounds}", f"data.clients={args.clients}"]
    methods = [("Noisy-FedAvg", "noisy_fedavg_mnist5k.toml", [])]
    methods += [(f"Noisy-FedProx alpha={a:g}", "noisy_fedprox_mnist5k.toml", [f"algorithm.mu={a!r}"])
                for a in args.alphas]
    rows = []
    for label, preset, sets in methods:
        opts = {"sigma": args.sigma, "clip": args.clip, "local_steps": args.local_steps}
        finals = []
        summary = None
        slug = re.sub(r"[^A-Za-z0-9._+-]", "_", label.replace("=", ""))
        for tag, cls in (("orig", Experiment), ("adj", AdjacentExperiment)):
            cfg = _config(preset, list(args.set), opts, extra + sets + [f"run.name=t7-{slug}-{tag}"])
            out = Path(args.out) / "runs" / f"t7_{slug}_{tag}"
            outcome = cls(cfg, out, progress=False).run()
            ck = torch.load(outcome.out / "checkpoint.pt", weights_only=True)
            finals.append(ck["w"].double())
            if tag == "orig":
                summary = outcome.summary
        sens = float(torch.linalg.vector_norm(finals[0] - finals[1]))
        row = {"method": label, "accuracy": summary["final_accuracy"], "sensitivity": sens,
               "eps_fdp": summary.get("eps_fdp"), "eps_fdp_feasible": summary.get("eps_fdp_feasible"),
               "rounds": summary["rounds"]}
        rows.append(row)
        print(f"  {label}: acc={row['accuracy']:.4f} ||w_T - w_T'||={sens:.4g} eps_fdp={_fmt_eps(row['eps_fdp'])} "
              f"eps_fdp_feasible={_fmt_eps(row['eps_fdp_feasible'])}", flush=True)
    return rows


def table7_markdown(rows: list[dict], args, delta: float) -> str:
    lines = [f"Table 7 (reduced): T = {args.rounds}, m = {args.clients}, K = {args.local_steps}, V = {args.clip:g}, "
             f"sigma = {args.sigma:g}; sensitivity = ||w_T - w_T'|| for adjacent data sets (same seeds); "
             f"eps at delta = {delta:g}", "",
             "| Method | Accuracy | Sensitivity | eps_fdp | eps_fdp_feasible |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['method']} | {100 * r['accuracy']:.2f} | {r['sensitivity']:.4g} | "
                     f"{_fmt_eps(r['eps_fdp'])} | {_fmt_eps(r['eps_fdp_feasible'])} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ main
def _write(out: Path, name: str, rows: list[dict], md: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.md").write_text(md)
    with open(out / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="table", required=True)
    for name in ("table6", "table7"):
        p = sub.add_parser(name)
        p.add_argument("--out", default=None, help="results folder (default: a new temporary folder)")
        p.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
        p.add_argument("--tiny", action="store_true", help="a seconds-long version for CI")
    t6 = sub.choices["table6"]
    t6.add_argument("--seeds", type=int, default=2)
    t6.add_argument("--ms", default="50,100")
    t6.add_argument("--ks", default="5,10,20")
    t6.add_argument("--sigmas", default="1,0.1,0.01,0.001")
    t6.add_argument("--tk", type=int, default=300, help="T K, fixed across K as in the paper")
    t7 = sub.choices["table7"]
    t7.add_argument("--rounds", type=int, default=30)
    t7.add_argument("--clients", type=int, default=20)
    t7.add_argument("--local-steps", type=int, default=5)
    t7.add_argument("--clip", type=float, default=10.0)
    t7.add_argument("--sigma", type=float, default=0.01)
    t7.add_argument("--alphas", default="0.01,0.1,1")
    args = ap.parse_args(argv)
    try:
        if args.out is None:
            args.out = tempfile.mkdtemp(prefix=f"fdp_{args.table}_")
        out = Path(args.out)
        if args.table == "table6":
            args.ms, args.ks, args.sigmas = _ints(args.ms), _ints(args.ks), _floats(args.sigmas)
            if args.seeds < 1 or args.tk < 1:
                raise UserError("--seeds and --tk must be >= 1")
            rows = table6(args)
            delta = load_config(PRESETS / "noisy_fedavg_mnist5k.toml", args.set, validate_now=False).privacy.delta
            md = table6_markdown(rows, args, delta)
        else:
            args.alphas = _floats(args.alphas)
            if args.rounds < 1 or args.clients < 1 or args.local_steps < 1:
                raise UserError("--rounds, --clients and --local-steps must be >= 1")
            rows = table7(args)
            delta = load_config(PRESETS / "noisy_fedavg_mnist5k.toml", args.set, validate_now=False).privacy.delta
            md = table7_markdown(rows, args, delta)
        _write(out, args.table, rows, md)
        print(md)
        print(f"results: {out}")
    except UserError as e:
        print(f"fdp_tables: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
