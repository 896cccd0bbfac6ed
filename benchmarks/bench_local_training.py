"""Local-training benchmark on the paper-000 workload: vectorised LocalTrainer vs the plain per-client loop.

Workload (paper 000, sec. V): K = 50 clients, MLP with one hidden layer of 196 units, mnist5k (FEMNIST
stands in: it cannot be downloaded), 5 classes per client, batch 32, lr 0.05, momentum 0.5, mu = 0.1.
Local epochs are reduced (default 2, paper: 20) so the run stays short. Same data, same seed, same batches
for every implementation; the script checks that they give the same updates.

Implementations timed (one train_round each, median of --repeats after one warm-up):
  reference  plain loop over clients: nn.Module autograd + torch.optim.SGD (train_round_reference)
  primal     all clients at once, stacked parameters, batched matmuls (LocalTrainer(mode="primal"))
  auto       what LocalTrainer uses by default; here the dual first layer: W1 = W1_0 + D^T X_k, exact
             because every first-layer gradient lies in the span of the client's own samples, and cheaper
             when a client holds fewer samples than there are inputs (80 < 784 here).

GFLOP/s is *effective*: 6 * d * (sample-epochs) / time, i.e. the usual 2 (forward) + 4 (backward) flops
per parameter per sample, whatever an implementation really computes (the reference and primal skip the
input gradient; the dual form does far fewer first-layer flops). Timings are printed, never asserted.

    .venv/bin/python benchmarks/bench_local_training.py [--epochs 2] [--threads 1] [--repeats 3]"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from otafl_sdr.configure.load import load_config
from otafl_sdr.learning import LocalTrainer, build_model, load_federated


def timed(fn, repeats: int):
    fn()                                   # warm-up
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2, help="local epochs (paper 000 uses 20)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (run.torch_threads)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.epochs = 1; a.repeats = 1; a.clients = 4

    cfg = load_config(None, [
        "data.dataset=mnist5k", f"data.clients={a.clients}", "data.partition=classes_per_client",
        "data.classes_per_client=5", "model.name=mlp", "model.hidden=196", "train.batch_size=32",
        "train.lr=0.05", "train.momentum=0.5", f"train.local_epochs={a.epochs}", "train.tau=1.0",
        f"run.torch_threads={a.threads}", "run.seed=0"], validate_now=False)
    mu = 0.1
    data = load_federated(cfg)
    model = build_model(cfg, data.input_shape, data.num_classes)
    auto = LocalTrainer(cfg, data, model)
    primal = LocalTrainer(cfg, data, model, mode="primal")
    w = auto.get_flat()
    d, n = auto.dim, int(data.sizes.sum())
    sample_epochs = a.epochs * n
    flops = 6.0 * d * sample_epochs

    print(f"workload: K={data.clients} clients, mnist5k, {n} training samples (|D_i| {data.sizes.min()}-"
          f"{data.sizes.max()}), MLP 784-196-10 d={d:,}, batch 32, lr 0.05, momentum 0.5, mu {mu}")
    note = "paper 000's value" if a.epochs == 20 else "reduced; paper 000 uses 20"
    print(f"local epochs: {a.epochs} ({note}), torch threads: {torch.get_num_threads()}, "
          f"dual first layer used by default: {auto.use_dual(int(data.sizes.max()))}")
    print(f"flop count: 6 * d * sample-epochs = 6 * {d:,} * {sample_epochs:,} = {flops / 1e9:.2f} GFLOP per round")

    t_ref, r_ref = timed(lambda: auto.train_round_reference(w, 1, mu=mu), a.repeats)
    t_pri, r_pri = timed(lambda: primal.train_round(w, 1, mu=mu), a.repeats)
    t_auto, r_auto = timed(lambda: auto.train_round(w, 1, mu=mu), a.repeats)

    print(f"{'implementation':<12} {'time/round':>11} {'speed-up':>9} {'eff. GFLOP/s':>13} {'max |diff| vs ref':>18}")
    for name, t, r in (("reference", t_ref, r_ref), ("primal", t_pri, r_pri), ("auto(dual)", t_auto, r_auto)):
        diff = float((r.updates - r_ref.updates).abs().max())
        print(f"{name:<12} {t:>10.3f}s {t_ref / t:>8.2f}x {flops / t / 1e9:>13.2f} {diff:>18.2e}")
    print(f"train loss (last epoch, p-weighted): reference {r_ref.train_loss:.6f}, vectorised {r_auto.train_loss:.6f}")


if __name__ == "__main__":
    main()
