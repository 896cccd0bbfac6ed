"""How good must synchronisation be? Excess aggregate NMSE against an uncompensated per-client
residual: carrier frequency offset, timing offset, phase error (issue 3). Prints, does not assert.
Whole-sample timing, CFO and phase residuals run through the loopback air; fractional timing
residuals (the loopback's delay blocks are whole samples) through the same modem with a numpy channel.

    .venv/bin/python benchmarks/bench_sync_residual.py [--clients 20] [--dim 155862] [--rounds 2]

The loopback air with per-client residuals (config loopback.residual_cfo: each client's uniform in
+-value, drawn once per run; residual_delay: integer uniform in -value..value samples; residual_phase:
N(0, value^2) per client per round) on paper-000 plans at SNR 10 dB without the jammer. Excess =
measured NMSE - theory (the error the residual adds, relative to ||sum p_i u_i||^2) and its ratio to the
theory (the channel noise the DP analysis counts). The receiver's own CFO/timing/phase are tracked, so
a residual common to all clients costs nothing; what hurts is the spread between clients. Table on
stdout and benchmarks/out/sync_residual.txt, plot benchmarks/out/sync_residual.png."""
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

from otafl_sdr.config.schema import Config  # noqa: E402
from otafl_sdr.power.base import SystemInfo  # noqa: E402
from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy  # noqa: E402
from otafl_sdr.phy import Modem, pack_reals, unpack_reals  # noqa: E402
from otafl_sdr.phy.reference import reference_budget, reference_gains  # noqa: E402
from otafl_sdr.radio.loopback_air import LoopbackAir  # noqa: E402
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory  # noqa: E402

OUT = Path(os.environ.get("OTAFL_BENCH_OUT", ROOT / "benchmarks" / "out"))   # the smoke test writes elsewhere
SWEEPS = {
    "residual_cfo": ("cycles/sample", [0.0, 1e-8, 3e-8, 1e-7, 3e-7, 1e-6, 3e-6, 1e-5]),
    "residual_delay": ("samples", [0, 1, 2, 4]),
    "residual_phase": ("rad (std)", [0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]),
    "fractional timing (numpy PHY)": ("samples", [0.0, 0.003, 0.01, 0.03, 0.1, 0.3]),
}


def make_plan(pol, K, d, m, rng):
    u = rng.standard_normal((K, d)) * 0.5 + rng.standard_normal(d)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    return pol.plan(m, u, h, 0.5 + 0.5j, rng)


def policy(cfg, K, d, snr_db=10.0):
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * d),
                      dim=d, sigma_c2=1.0, rounds=15, eps=1.0, delta=1e-5)
    return CJAdaptivePolicy(cfg, info)


def run_fractional(tau, K, d, rounds):
    """Fractional timing residuals (the loopback's delays are whole samples): the same modem, clients'
    bursts delayed in numpy by tau_i ~ U(-tau, tau) samples (band-limited), summed with CN(0, 2) noise."""
    cfg = Config()
    cfg.power.jammer = False
    pol = policy(cfg, K, d)
    modem = Modem(cfg.phy)
    rng, nrng, trng = np.random.default_rng(0), np.random.default_rng(1), np.random.default_rng(2)
    n = (d + 1) // 2
    lay = modem.layout(n)
    taus = trng.uniform(-1, 1, K) * tau
    th, me = [], []
    for m in range(rounds):
        plan = make_plan(pol, K, d, m, rng)
        g, A = reference_gains(plan.h, reference_budget(plan.power_limit, lay.n_reference, n), lay.n_reference)
        N = modem.burst_samples(n) + 64
        f = np.fft.fftfreq(N)
        Y = np.zeros(N, complex)
        for i in range(K):
            x = np.concatenate([modem.modulate(plan.alpha[i] * pack_reals(plan.payload[i]), g[i]), np.zeros(64)])
            Y += plan.h[i] * np.fft.fft(x) * np.exp(-2j * np.pi * f * taus[i])
        y = np.fft.ifft(Y) + np.sqrt(plan.sigma_c2) * (nrng.standard_normal(N) + 1j * nrng.standard_normal(N))
        res = modem.demodulate(y, n, A)
        if res.ok:
            th.append(aggregate_nmse_theory(plan))
            me.append(aggregate_nmse(unpack_reals(res.symbols, d) / plan.alpha_u, plan.expected_aggregate()))
    return float(np.mean(th)), float(np.mean(me)), rounds - len(me)


def run(key, value, K, d, rounds, snr_db=10.0):
    cfg = Config()
    cfg.power.jammer = False
    setattr(cfg.loopback, key, value)
    pol = policy(cfg, K, d, snr_db)
    rng = np.random.default_rng(0)                 # the same plans for every residual value
    air_rng = np.random.default_rng(1)
    th, me, lost = [], [], 0
    with LoopbackAir(cfg) as air:
        for m in range(rounds):
            plan = make_plan(pol, K, d, m, rng)
            rec = air.transmit(plan, air_rng)
            if not rec.ok:
                lost += 1
                continue
            th.append(aggregate_nmse_theory(plan))
            me.append(aggregate_nmse(rec.aggregate, plan.expected_aggregate()))
    if not me:
        return float("nan"), float("nan"), lost
    return float(np.mean(th)), float(np.mean(me)), lost


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--dim", type=int, default=155_862)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.clients = 4; a.dim = 2000; a.rounds = 1
    cfg = Config()
    rate = cfg.uhd.rate
    n_samples = LoopbackAir(cfg).modem.burst_samples((a.dim + 1) // 2)
    lines = [f"K={a.clients} d={a.dim} (burst {n_samples} samples), SNR 10 dB, jammer off, {a.rounds} rounds/point; "
             f"Hz at uhd.rate={rate:g} S/s"]
    results = {}
    for key, (unit, values) in SWEEPS.items():
        lines.append(f"\n{key} [{unit}]")
        lines.append(f"{'value':>10} {'theory':>11} {'measured':>11} {'excess':>11} {'excess/theory':>14} lost")
        res = []
        for v in values:
            t, m, lost = (run_fractional(v, a.clients, a.dim, a.rounds) if key.startswith("fractional")
                          else run(key, v, a.clients, a.dim, a.rounds))
            res.append((v, t, m))
            extra = f"  (= {v * rate:.3g} Hz)" if key == "residual_cfo" and v else ""
            lines.append(f"{v:10.3g} {t:11.4e} {m:11.4e} {m - t:11.3e} {(m - t) / t:14.3f} {lost:4d}{extra}")
            print(lines[-1], flush=True)
        results[key] = (unit, np.array(res, dtype=float))
        ok = [v for v, t, m in res if (m - t) <= 0.1 * t]
        lines.append(f"  -> excess <= 10% of the channel noise up to {key} = {max(ok):g} {unit}" if ok else
                     f"  -> excess > 10% of the channel noise for every tested {key}")
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "sync_residual.txt").write_text(text + "\n")
    fig, axes = plt.subplots(1, len(results), figsize=(4.3 * len(results), 4))
    for ax, (key, (unit, r)) in zip(axes, results.items()):
        x = r[:, 0]
        xs = np.where(x > 0, x, np.nan)
        ax.loglog(xs, r[:, 2], "o-", label="measured NMSE")
        ax.axhline(np.nanmean(r[:, 1]), color="k", ls="--", label="theory (channel noise only)")
        ax.axhline(1.1 * np.nanmean(r[:, 1]), color="gray", ls=":", label="theory + 10%")
        ax.set_xlabel(f"{key} [{unit}]")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("NMSE")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"uncompensated per-client residuals, K={a.clients}, d={a.dim}, SNR 10 dB")
    fig.tight_layout()
    fig.savefig(OUT / "sync_residual.png", dpi=120)
    print(f"wrote {OUT / 'sync_residual.txt'} and {OUT / 'sync_residual.png'}")


if __name__ == "__main__":
    main()
