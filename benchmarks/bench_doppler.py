"""What does Doppler within a burst cost? Aggregate NMSE / theory against channel.doppler_hz on the `sim`
and `loopback` airs (issue 26 item 1), with the factor that starts at the inverted channel (rho(0) = 1)
and decorrelates as J0 (channel/doppler.py), and the sensitivity factor the ledger books for it.
Prints, does not assert.

    .venv/bin/python benchmarks/bench_doppler.py [--clients 10] [--dims 20000,155862] [--snr-db -13.5,10]

Plans: K clients with unit-norm Gaussian payloads under channel inversion (alpha_i = alpha_u / h_i,
Rayleigh h_i, perfect CSI), alpha_u^2 = SNR d sigma_c2 (the SNR of one client's payload per coordinate at
the receiver, paper 000's P_i / (d sigma_c2)), no jammer; theory = sigma_c2 / alpha_u^2 per coordinate.
d = 20,000 is a 0.02 s burst at 1 MS/s and sps 2, d = 155,862 (the CNN) 0.16 s. What the Doppler adds
is about SNR K E|rho - 1|^2 (averaged over the burst, E|rho(t) - 1|^2 ~ (2 pi f_D t)^2 / 2): harmless
while 2 pi f_D T << 1 / sqrt(SNR K), the burst's own decorrelation otherwise (the receiver tracks the
common phase, not each client's fading). Table on stdout and benchmarks/out/doppler.txt."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otafl_sdr.channel.front_end import sensitivity_gain  # noqa: E402
from otafl_sdr.channel.sim_air import SimAir  # noqa: E402
from otafl_sdr.config.schema import Config  # noqa: E402
from otafl_sdr.radio.loopback_air import LoopbackAir  # noqa: E402
from otafl_sdr.transmission import Mechanism, RoundPlan  # noqa: E402

OUT = Path(os.environ.get("OTAFL_BENCH_OUT", ROOT / "benchmarks" / "out"))   # the smoke test writes elsewhere


def plan_for(K: int, d: int, snr_db: float, rnd: int) -> RoundPlan:
    rng = np.random.default_rng(1000 + rnd)
    payload = rng.standard_normal((K, d))
    payload /= np.linalg.norm(payload, axis=1, keepdims=True)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    a_u = float(np.sqrt(10 ** (snr_db / 10) * d))
    return RoundPlan(round=rnd, payload=payload, alpha=a_u / h, h=h, target_gain=np.ones(K), alpha_u=a_u,
                     alpha_cj=0.0, h_cj=0j, sigma_c2=1.0, mode=["update"] * K,
                     mechanism=Mechanism(round=rnd, sensitivity=1.0, sigma_eff=1.0 / a_u))


def ratio(air, plan) -> float:
    r = air.transmit(plan, np.random.default_rng(plan.round))
    if not r.ok:
        return float("nan")
    return float(np.mean((r.aggregate - plan.payload.sum(axis=0)) ** 2) * plan.alpha_u ** 2 / plan.sigma_c2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--dims", default="20000,155862")
    ap.add_argument("--snr-db", default="-13.5,10")
    ap.add_argument("--dopplers", default="0,0.1,1,5,20")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke size")
    a = ap.parse_args()
    dims = [int(x) for x in a.dims.split(",")]
    snrs = [float(x) for x in a.snr_db.split(",")]
    fds = [float(x) for x in a.dopplers.split(",")]
    K, rounds = a.clients, a.rounds
    if a.quick:
        dims, snrs, fds, K, rounds = [2000], [10.0], [0.0, 5.0], 4, 1
    lines = [f"NMSE/theory vs Doppler (K = {K}, mean of {rounds} rounds; channel inversion, perfect CSI, "
             f"no jammer; 1 MS/s, sps 2)",
             f"{'d':>7} {'burst s':>8} {'SNR dB':>7} {'f_D Hz':>7} {'sim':>9} {'loopback':>9} {'booked':>7}"]
    print(lines[0])
    print(lines[1])
    for d in dims:
        for snr in snrs:
            for fd in fds:
                cfg = Config()
                cfg.channel.doppler_hz = fd
                sim, lb = SimAir(cfg), LoopbackAir(cfg)
                plans = [plan_for(K, d, snr, r) for r in range(1, rounds + 1)]
                s = np.mean([ratio(sim, p) for p in plans])
                b = np.mean([ratio(lb, p) for p in plans])
                g = max(sensitivity_gain(cfg, p.round, K, (d + 1) // 2) for p in plans)
                burst = (d + 1) // 2 * cfg.phy.sps / cfg.uhd.rate
                line = f"{d:>7} {burst:>8.3f} {snr:>7.1f} {fd:>7.1f} {s:>9.4f} {b:>9.4f} {g:>7.4f}"
                print(line, flush=True)
                lines.append(line)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "doppler.txt").write_text("\n".join(lines) + "\n")
    print(f"NMSE/theory vs Doppler: wrote {OUT / 'doppler.txt'}")


if __name__ == "__main__":
    main()
