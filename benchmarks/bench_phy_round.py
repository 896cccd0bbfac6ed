"""Loopback PHY time per round against the `sim` air (issue 3): K=50 clients, d=155,862 (paper 000's
MLP), paper-000 plans (cj_adaptive, jammer on). Prints, does not assert.

    .venv/bin/python benchmarks/bench_phy_round.py [--rounds 4] [--clients 50] [--dim 155862] [--no-share]

Reports: the first round (includes building the flowgraph), then the mean over the next rounds of
the whole `loopback` transmit (framing, staging, flowgraph run, demodulation) and of its flowgraph
run alone, the `sim` air on the same plans, their ratio; once with the default [loopback] section
(no offsets) and once with offsets (client CFO/delay pre-compensated, receiver CFO, timing and phase
noise). With the share part (default), it also runs 3 rounds of the default experiment
(sim_loopback/default.toml, loopback air) and prints the air's share of the wall time per round."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otafl_sdr.channel.sim_air import SimAir  # noqa: E402
from otafl_sdr.config.schema import Config  # noqa: E402
from otafl_sdr.power.base import SystemInfo  # noqa: E402
from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy  # noqa: E402
from otafl_sdr.radio.loopback_air import LoopbackAir  # noqa: E402
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory  # noqa: E402

IMPAIRED = dict(client_cfo_max=1e-3, client_delay_max=5, rx_cfo=1e-4, rx_delay=4, rx_phase_noise=1e-5)


def plans(cfg, K, d, rounds, seed=0):
    rng = np.random.default_rng(seed)
    size = 5000 // 20                                   # mnist5k over 20 clients, as the default run
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, size), power=np.full(K, 10 ** 0.1 * d),
                      dim=d, sigma_c2=1.0, rounds=15, eps=1.0, delta=1e-5)
    pol = CJAdaptivePolicy(cfg, info)
    out = []
    for m in range(rounds):
        u = rng.standard_normal((K, d)) * 0.3 + rng.standard_normal(d)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
        out.append(pol.plan(m, u, h, complex(rng.standard_normal(), rng.standard_normal()) / np.sqrt(2), rng))
    return out


def bench(label, cfg, ps):
    rng = np.random.default_rng(1)
    air, sim = LoopbackAir(cfg), SimAir(cfg)
    t_lb, t_fg, t_sim, ratios = [], [], [], []
    first = None
    for i, p in enumerate(ps):
        t = time.perf_counter()
        rec = air.transmit(p, rng)
        dt = time.perf_counter() - t
        t = time.perf_counter()
        sim.transmit(p, rng)
        ds = time.perf_counter() - t
        if not rec.ok:
            print(f"  round {i}: lost ({rec.reason})")
            continue
        ratios.append(aggregate_nmse(rec.aggregate, p.expected_aggregate()) / aggregate_nmse_theory(p))
        if i == 0:
            first = dt
            continue
        t_lb.append(dt); t_fg.append(rec.extra["flowgraph_s"]); t_sim.append(ds)
    air.close()
    print(f"{label}: first round (builds the flowgraph) {first:.3f} s; next {len(t_lb)} rounds: "
          f"loopback {np.mean(t_lb):.3f} s/round (flowgraph run {np.mean(t_fg):.3f} s), "
          f"sim {np.mean(t_sim):.4f} s/round, loopback/sim = {np.mean(t_lb) / np.mean(t_sim):.0f}x; "
          f"measured/theory NMSE {np.mean(ratios):.4f}")
    return np.mean(t_lb)


def default_share(rounds=3):
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"
        cmd = [sys.executable, "-m", "otafl_sdr.cli.main", "run", "--config", str(ROOT / "sim_loopback/default.toml"),
               "--out", str(out), "--air", "loopback", "--quiet", "--set", f"run.rounds={rounds}"]
        t = time.perf_counter()
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"})
        total = time.perf_counter() - t
        if r.returncode != 0:
            print("default experiment failed:", r.stderr.strip().splitlines()[-1:] or r.returncode)
            return
        rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines() if line.strip()]
        air = [row.get("air_s", 0.0) for row in rows]
        wall = [row.get("wall_s", 0.0) for row in rows]
        share = np.sum(air) / np.sum(wall) if np.sum(wall) else float("nan")
        print(f"default experiment (sim_loopback/default.toml, K=20, loopback, {len(rows)} rounds, "
              f"{total:.1f} s incl. start-up): air {np.mean(air):.3f} s of {np.mean(wall):.3f} s per round "
              f"= {100 * share:.1f}% of the round")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--dim", type=int, default=155_862)
    ap.add_argument("--no-share", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 2; a.clients = 4; a.dim = 2000
    print(f"K={a.clients}, d={a.dim}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    cfg = Config()
    ps = plans(cfg, a.clients, a.dim, a.rounds)
    bench("default [loopback]", cfg, ps)
    cfg2 = Config()
    for k, v in IMPAIRED.items():
        setattr(cfg2.loopback, k, v)
    bench("with offsets      ", cfg2, ps)
    if not a.no_share:
        default_share(rounds=1 if a.quick else 3)      # --quick: the same subprocess run, one round


if __name__ == "__main__":
    main()
