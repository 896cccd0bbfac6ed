"""Aggregate NMSE against SNR through the loopback PHY, next to the theory and the `sim` air (issue 3).

    .venv/bin/python benchmarks/bench_nmse_vs_snr.py [--clients 20] [--dim 155862] [--rounds 3]

SNR_i = P_i / (d sigma_c2) (paper 000, sec. V) from -5 to 20 dB; paper-000 plans (cj_adaptive) without
the jammer, so the NMSE is the channel's; theory = sigma_eff^2 d / ||sum_i p_i u_i||^2
(transmission.aggregate_nmse_theory). Loopback runs with receiver impairments (CFO 1e-4, timing 4
samples, phase noise 1e-5 rad/sqrt(sample)) and pre-compensated client offsets. Table on stdout and in
benchmarks/out/nmse_vs_snr.txt, plot in benchmarks/out/nmse_vs_snr.png. Prints, does not assert."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from otafl_sdr.channel.sim_air import SimAir  # noqa: E402
from otafl_sdr.config.schema import Config  # noqa: E402
from otafl_sdr.power.base import SystemInfo  # noqa: E402
from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy  # noqa: E402
from otafl_sdr.radio.loopback_air import LoopbackAir  # noqa: E402
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory  # noqa: E402

IMPAIRED = dict(client_cfo_max=1e-3, client_delay_max=5, rx_cfo=1e-4, rx_delay=4, rx_phase_noise=1e-5)
OUT = Path(os.environ.get("OTAFL_BENCH_OUT", ROOT / "benchmarks" / "out"))   # the smoke test writes elsewhere


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--dim", type=int, default=155_862)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.clients = 4; a.dim = 2000; a.rounds = 1
    K, d = a.clients, a.dim
    cfg = Config()
    cfg.power.jammer = False
    for k, v in IMPAIRED.items():
        setattr(cfg.loopback, k, v)
    rng = np.random.default_rng(0)
    snrs = np.arange(-5, 21, 5)
    rows = []
    with LoopbackAir(cfg) as air:
        sim = SimAir(cfg)
        for snr in snrs:
            info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr / 10) * d),
                              dim=d, sigma_c2=1.0, rounds=15, eps=1.0, delta=1e-5)
            pol = CJAdaptivePolicy(cfg, info)
            th, lb, sm, lost = [], [], [], 0
            for m in range(a.rounds):
                u = rng.standard_normal((K, d)) * 0.5 + rng.standard_normal(d)
                u /= np.linalg.norm(u, axis=1, keepdims=True)
                h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
                plan = pol.plan(m, u, h, 0.5 + 0.5j, rng)
                exp = plan.expected_aggregate()
                rec = air.transmit(plan, rng)
                if not rec.ok:
                    lost += 1
                    continue
                th.append(aggregate_nmse_theory(plan))
                lb.append(aggregate_nmse(rec.aggregate, exp))
                sm.append(aggregate_nmse(sim.transmit(plan, rng).aggregate, exp))
            rows.append((snr, np.mean(th), np.mean(lb), np.mean(sm), lost))
    lines = [f"K={K} d={d} rounds/point={a.rounds} (jammer off; loopback with receiver impairments)",
             f"{'SNR dB':>7} {'theory':>11} {'loopback':>11} {'sim':>11} {'loop/theory':>12} {'sim/theory':>11} lost"]
    for snr, t, lbm, smm, lost in rows:
        lines.append(f"{snr:7.0f} {t:11.4e} {lbm:11.4e} {smm:11.4e} {lbm / t:12.4f} {smm / t:11.4f} {lost:4d}")
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "nmse_vs_snr.txt").write_text(text + "\n")
    r = np.array([row[:4] for row in rows])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(r[:, 0], r[:, 1], "k-", label="theory  sigma_eff^2 d / ||sum p_i u_i||^2")
    ax.semilogy(r[:, 0], r[:, 2], "o", label="loopback (GNU Radio PHY)")
    ax.semilogy(r[:, 0], r[:, 3], "x", label="sim (numpy)")
    ax.set_xlabel("SNR_i = P_i / (d sigma_c2)  [dB]")
    ax.set_ylabel("aggregate NMSE")
    ax.set_title(f"K={K}, d={d}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "nmse_vs_snr.png", dpi=120)
    print(f"wrote {OUT / 'nmse_vs_snr.txt'} and {OUT / 'nmse_vs_snr.png'}")


if __name__ == "__main__":
    main()
