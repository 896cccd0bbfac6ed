"""A paper-000 round against the machine's limit, all measured in the same run (issue: paper-scale sweeps).

Workload (paper 000, sec. V): K = 50 clients, MLP 784-196-10 (d = 155,830), mnist5k, 20 local epochs,
batch 32, sim air, the paper-000 jammer preset, accountants paper + rdp + pld.

Prints
  * sgemm peak: torch.mm of 1024 x 1024 float32 at 1 thread (best of 5): the compute limit of one core;
  * local training at paper size: effective GFLOP/s (6 d per sample-epoch, the usual 2 forward + 4 backward
    flops per parameter) for the default trainer and for the plain primal form, as a fraction of that peak;
  * where torch sees a GPU: the same training on run.device = "cuda" against the GPU's sgemm peak;
  * the orchestrator's round: wall time per client round (everything the run loop does between two rows,
    the first round left out as a warm-up) and the shares of local training, accounting (ledger check +
    record, timed around the ledger's own methods), evaluation (test accuracy + global train loss, see
    run.eval_every) and the sim air (issue 26: at most 5 % with the flat channel); then the same with
    the 3GPP TDL-C channel at 3 samples RMS delay spread (the sim air's single-carrier multipath model);
  * the projected wall time of paper 000's full grid (80 client rounds x 10 trials x 3 eps x 6 mechanisms
    = 14,400 rounds) on this machine with the local engine (one worker per core, 1 thread each) against
    the compute limit of that workload on all cores (its flops / (cores x sgemm peak)).
Nothing is asserted; ratios are against references measured here, so a busy machine slows both sides.

    .venv/bin/python benchmarks/bench_paper_round.py [--rounds 4] [--epochs 20]"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.orchestrator import Experiment

PRESET = Path(__file__).resolve().parent.parent / "sim_loopback/presets/paper000_fedavg_cj_eps1.toml"
PAPER_ROUNDS = 80 * 10 * 3 * 6
TDL = ("tdl-c", 3000.0)          # 3GPP TDL-C at 3 us RMS delay spread: 3 samples at the default 1 MS/s


def sgemm_peak(threads: int, n: int = 1024, repeats: int = 5) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2.0 * n ** 3 / best / 1e9


def gpu_section(cfg, exp, tr_cpu, w, flops: float) -> None:
    """run.device = "cuda": the same paper-size round on the GPU against the GPU's sgemm peak measured here
    (torch.mm of 8192 x 8192 float32, synchronised), and the agreement of its updates with the CPU's."""
    if not torch.cuda.is_available():
        print("GPU: torch sees no GPU here: skipped (run.device = 'cuda' is refused on this machine)")
        return
    import dataclasses
    n = 8192
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    torch.mm(a, b)
    torch.cuda.synchronize()

    def mm():
        torch.mm(a, b)
        torch.cuda.synchronize()
    peak = 2.0 * n ** 3 / min(_timed(mm) for _ in range(5)) / 1e9
    gcfg = dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, device="cuda"))
    tr = type(tr_cpu)(gcfg, exp.data, tr_cpu.model)

    def one():
        r = tr.train_round(w, 1, mu=0.0)
        torch.cuda.synchronize()
        return r
    one()
    t = min(_timed(one) for _ in range(3))
    diff = float((one().updates - tr_cpu.train_round(w, 1, mu=0.0).updates).abs().max())
    print(f"GPU ({torch.cuda.get_device_name(0)}): sgemm peak {peak:.0f} GFLOP/s; training one round {t:.3f} s, "
          f"{flops / t / 1e9:.0f} effective GFLOP/s = {flops / t / 1e9 / peak:.0%} of the GPU's peak; "
          f"max |update_gpu - update_cpu| = {diff:.1e}")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


class Timer:
    def __init__(self):
        self.total = 0.0

    def wrap(self, fn):
        def inner(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.total += time.perf_counter() - t0
        return inner


def orchestrator_round(cfg, folder: Path, label: str) -> float:
    """The orchestrator's own rounds, with training, the ledger, evaluation and the air timed where they run.

    "The round" is everything the run loop does per client round: the interval between one round's row
    and the next's (``Experiment.on_round``), so the row write and the checkpoint count too; the first
    round (first touches, caches) is left out. The air's share is the air's own figure (rounds.jsonl's
    air_s, taken inside ``Air.transmit``); the transport's call around it (the protective rng, the
    attempt) is printed beside it, so a cost the air leaves outside its own timer would show."""
    exp2 = Experiment(cfg, folder)
    build = exp2.build
    ledger_t, eval_t, train_t, attempt_t = Timer(), Timer(), Timer(), Timer()
    ends: list[float] = []
    last: dict = {}

    def build_and_wrap():
        build()
        exp2.ledger.check = ledger_t.wrap(exp2.ledger.check)
        exp2.ledger.record = ledger_t.wrap(exp2.ledger.record)
        exp2.trainer.evaluate = eval_t.wrap(exp2.trainer.evaluate)
        exp2.trainer.global_train_loss = eval_t.wrap(exp2.trainer.global_train_loss)
        exp2.trainer.train_round = train_t.wrap(exp2.trainer.train_round)
        attempt = attempt_t.wrap(exp2.transport.attempt)

        def keep_plan(plan, *a, **k):
            last["plan"] = plan
            return attempt(plan, *a, **k)
        exp2.transport.attempt = keep_plan
        exp2.build = lambda: None

    def on_round(row):
        ends.append(time.perf_counter())
        if len(ends) == 1:                                  # the first round is a warm-up: counted from here
            for t in (ledger_t, eval_t, train_t, attempt_t):
                t.total = 0.0
    exp2.build = build_and_wrap
    exp2.build()
    exp2.on_round = on_round
    exp2.run()
    from otafl_sdr.results.files import read_rounds
    rows = [r for r in read_rounds(folder / "rounds.jsonl") if r.get("uses_clients")][1:]
    rounds = len(rows)
    if rounds == 0:                                         # --quick: one round, nothing after the warm-up
        print(f"orchestrator, sim air ({label}): run.rounds >= 2 needed to time a round after the warm-up")
        return 0.0
    total = ends[-1] - ends[0]                              # rounds 2..N, everything the loop does
    per = total / rounds
    rowed = sum(r["wall_s"] for r in rows)
    air = sum(r.get("air_s") or 0.0 for r in rows)
    outside = 1.0 - (train_t.total + ledger_t.total + air) / total
    print(f"orchestrator, sim air, channel {label}, {rounds} client rounds after the first: {per:.3f} s per round "
          f"(rows' own wall_s {rowed / rounds:.3f} s); shares: training {train_t.total / total:.1%}, accounting "
          f"(paper+rdp+pld) {ledger_t.total / total:.2%} ({ledger_t.total / rounds * 1e3:.1f} ms/round; aim <= 5 %), "
          f"evaluation {eval_t.total / total:.1%} (run.eval_every), air {air / total:.1%} "
          f"({air / rounds * 1e3:.1f} ms/round; the transport's call around it {attempt_t.total / rounds * 1e3:.1f} ms; "
          f"aim <= 5 % flat); the round outside training, the air and accounting {outside:.1%} (aim <= 10 %)")
    if "plan" in last and label == "flat":
        air_vs_plain(cfg, last["plan"])
    return per


def air_vs_plain(cfg, plan, repeats: int = 5) -> None:
    """The sim air's transmit on the run's last plan against the plain formula it replaced (pack_reals copy of
    the active rows, gemv, two noise draws, unpack_reals: the same aggregate bit for bit), in turn."""
    import numpy as np
    from otafl_sdr.channel.sim_air import SimAir
    from otafl_sdr.phy.packing import pack_reals, unpack_reals

    def plain():
        rng = np.random.default_rng(0)
        n = (plan.dim + 1) // 2
        active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
        y = (plan.h[active] * plan.alpha[active]) @ pack_reals(plan.payload[active])
        var = plan.extra.get("air_sigma_c2", plan.sigma_c2) + (abs(plan.h_cj) * plan.alpha_cj) ** 2
        y = y + np.sqrt(var) * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
        return unpack_reals(y, plan.dim) / plan.alpha_u
    air = SimAir(cfg)
    fast = lambda: air.transmit(plan, np.random.default_rng(0)).aggregate   # noqa: E731
    same = bool(np.array_equal(fast(), plain()))
    t_fast, t_plain = [], []
    for _ in range(repeats):
        t_plain.append(_timed(plain))
        t_fast.append(_timed(fast))
    tf, tp = float(np.median(t_fast)), float(np.median(t_plain))
    print(f"  sim air transmit on the last plan (K={plan.clients}, d={plan.dim:,}): {tf * 1e3:.1f} ms against the "
          f"plain formula's {tp * 1e3:.1f} ms (ratio {tf / tp:.2f}, median of {repeats} in turn); same aggregate "
          f"bit for bit: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="client rounds to run, the first a warm-up (paper: 80)")
    ap.add_argument("--epochs", type=int, default=20, help="local epochs (paper 000: 20)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 2; a.epochs = 1
    cores = os.cpu_count() or 1
    peak1 = sgemm_peak(1)
    print(f"sgemm peak, 1 thread: {peak1:.1f} GFLOP/s  ({cores} cores here)")

    cfg = load_config(PRESET, [f"run.rounds={a.rounds}", f"train.local_epochs={a.epochs}", "air.name=sim",
                               "run.torch_threads=1", "run.progress=false", "privacy.enforce=false"])
    with tempfile.TemporaryDirectory() as tmp:
        exp = Experiment(cfg, Path(tmp) / "run")
        exp.build()
        torch.set_num_threads(1)
        tr = exp.trainer
        w = tr.get_flat()
        n = int(exp.data.sizes.sum())
        flops = 6.0 * tr.dim * n * a.epochs
        tr.train_round(w, 1, mu=0.0)                                   # warm-up
        t_auto = min(_timed(lambda: tr.train_round(w, 1, mu=0.0)) for _ in range(2))
        tr_primal = type(tr)(cfg, exp.data, tr.model, mode="primal")
        t_primal = _timed(lambda: tr_primal.train_round(w, 1, mu=0.0))
        print(f"training one round: K={exp.K}, d={tr.dim:,}, {n} samples x {a.epochs} epochs = "
              f"{flops / 1e9:.1f} GFLOP (6 d per sample-epoch)")
        print(f"  default trainer ({'dual' if tr.use_dual(int(exp.data.sizes.max())) else 'primal'} first layer): "
              f"{t_auto:.3f} s, {flops / t_auto / 1e9:.1f} effective GFLOP/s = {flops / t_auto / 1e9 / peak1:.0%} of peak")
        print(f"  primal form:     {t_primal:.3f} s, {flops / t_primal / 1e9:.1f} GFLOP/s = "
              f"{flops / t_primal / 1e9 / peak1:.0%} of peak")
        gpu_section(cfg, exp, tr, w, flops)

        per = orchestrator_round(cfg, Path(tmp) / "run2", "flat")
        tdl = load_config(PRESET, [f"run.rounds={a.rounds}", f"train.local_epochs={a.epochs}", "air.name=sim",
                                   "run.torch_threads=1", "run.progress=false", "privacy.enforce=false",
                                   f"channel.multipath={TDL[0]}", f"channel.delay_spread_ns={TDL[1]}"])
        orchestrator_round(tdl, Path(tmp) / "run3", f"{TDL[0]} {TDL[1]:.0f} ns")
    # `otafl-sdr account` for 1,000 rounds: in process (the calculator) and as a command (interpreter start-up
    # and imports included), against composing the same rounds one by one in the ledger (the reference)
    import subprocess
    import sys
    from otafl_sdr.config.schema import PrivacyConfig
    from otafl_sdr.privacy.calculator import epsilon_of_rounds
    from otafl_sdr.privacy.ledger import PrivacyLedger
    from otafl_sdr.transmission import Mechanism
    t0 = time.perf_counter()
    fast = {n: epsilon_of_rounds(n, 2.0, 1000, 1e-5) for n in ("paper", "rdp", "pld")}
    t_calc = time.perf_counter() - t0
    t0 = time.perf_counter()
    led = PrivacyLedger(PrivacyConfig(eps=1e9, delta=1e-5, accountant="rdp", report=["paper", "rdp", "pld"],
                                      enforce=False), None)
    for t in range(1, 1001):
        led.record(Mechanism(t, 1.0, 2.0))
    t_ledger = time.perf_counter() - t0
    slow = led.epsilons()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "account", "--sigma", "2", "--rounds", "1000"],
                   check=True, capture_output=True)
    t_cli = time.perf_counter() - t0
    diff = max(abs(fast[n] / slow[n] - 1) for n in fast)
    print(f"account, 1,000 rounds (z = 2): calculator {t_calc * 1e3:.1f} ms, whole command {t_cli:.2f} s "
          f"(aim < 1 s); round-by-round ledger {t_ledger:.2f} s; max relative difference {diff:.1e}")
    projected = PAPER_ROUNDS * per / cores
    limit = PAPER_ROUNDS * flops / (cores * peak1 * 1e9)
    print(f"paper-000 grid ({PAPER_ROUNDS:,} rounds at {a.epochs} local epochs), local engine with {cores} "
          f"workers x 1 thread: projected {projected / 3600:.2f} h; compute limit on {cores} cores "
          f"{limit / 3600:.2f} h; ratio {projected / limit:.2f} (aim <= 1.5)")


if __name__ == "__main__":
    main()
