"""The coherence tolerance table (issue 34): what a per-client residual phase or carrier offset costs the
over-the-air sum, at a high SNR where the theory NMSE is 0.02 (so a 0.1 rad error is visible), through the
project's burst modem (phy/modem.py: the receiver tracks the *common* phase and offset from the shared
reference; a spread between clients it cannot see).

K clients (default 3, as the lab presets) send p_i u_i (p_i = 1/K, u_i correlated unit-norm updates: a common
direction plus 0.5 of a client's own), each rotated by its residual exp(j (phi_i + 2 pi f_i n / rate)), spread
across clients as (+1, -1, 0, +1, -1, ...) x the table's value (no common part: the receiver would remove
it). White noise of the variance that puts the theory NMSE (d sigma^2 / (s^2 ||sum p_i u_i||^2), eq. 16 of
paper 000 with unit channel) at ``--theory``. Printed: measured NMSE / theory (mean over trials, with its
standard error) for correlated updates (a common direction of weight 1, as FL updates of one model are) and
independent ones (the worst case: no cross terms cancel), and for the phase rows the first-order prediction for independent updates,
1 + sum_i 2 (1 - cos phi_i) ||p_i u_i||^2 / (theory ||sum p_i u_i||^2) (an upper guide: correlated updates
cancel part of it). No assertion: tests/test_benchmarks_smoke.py runs it at ``--quick``.

    .venv/bin/python benchmarks/bench_coherence_tolerance.py [--clients 3] [--dims 650 14710] [--trials 20]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otafl_sdr.config.radio import PhyConfig  # noqa: E402
from otafl_sdr.phy import Modem, pack_reals, unpack_reals  # noqa: E402
from otafl_sdr.phy.packing import symbols_for  # noqa: E402

RATE = 1e6
PHASES = [0.0, 0.01, 0.03, 0.05, 0.1, 0.2, 0.3]             # rad, per-client spread
CFOS = [0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]          # Hz at 1 MS/s, per-client spread


UPDATES = {"correlated": 1.0, "independent": 0.0}       # weight of the common direction (own part 0.5)


def updates(K: int, d: int, rng, common: float) -> np.ndarray:
    u = rng.standard_normal((K, d)) * 0.5 + common * rng.standard_normal(d)
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def one_round(modem: Modem, u: np.ndarray, phase: np.ndarray, cfo_hz: np.ndarray, theory: float, rng) -> float:
    """Measured NMSE / theory of one round with these per-client residuals."""
    K, d = u.shape
    p = np.full(K, 1.0 / K)
    target = p @ u
    s = 0.05                                                   # payload scale: well inside the DAC
    n_sym = symbols_for(d)
    ref = 1.0
    rx = 0
    for i in range(K):
        b = modem.modulate(s * p[i] * pack_reals(u[i]), ref)
        n = np.arange(len(b))
        rx = rx + b * np.exp(1j * (phase[i] + 2 * np.pi * cfo_hz[i] / RATE * n))
    sigma2 = theory * s ** 2 * float(target @ target) / d        # per real coordinate
    rx = np.concatenate([np.zeros(300), rx, np.zeros(300)])
    rx = rx + np.sqrt(sigma2) * (rng.standard_normal(len(rx)) + 1j * rng.standard_normal(len(rx)))
    res = modem.demodulate(rx, n_sym, K * ref)
    if not res.ok:
        return float("nan")
    est = unpack_reals(res.symbols, d) / s
    return float(np.sum((est - target) ** 2) / np.sum(target ** 2)) / theory


def spread(K: int, value: float) -> np.ndarray:
    return value * np.array([(1, -1, 0)[i % 3] for i in range(K)], dtype=np.float64)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--dims", type=int, nargs="+", default=[650, 14_710])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--theory", type=float, default=0.02, help="the theory NMSE the noise is set to")
    ap.add_argument("--quick", action="store_true", help="smoke size (figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.dims, a.trials = [650], 2
    modem = Modem(PhyConfig())
    print(f"NMSE/theory vs per-client residual: K = {a.clients}, theory NMSE {a.theory:g}, "
          f"{a.trials} trials, spread (+1, -1, 0) x value across clients")
    for d in a.dims:
        rng = np.random.default_rng(34)
        print(f"\nd = {d} ({modem.burst_samples(symbols_for(d))} samples per burst at {RATE / 1e6:g} MS/s)")
        print(f"{'residual':>22}  " + "  ".join(f"{m + ' updates':>26}" for m in UPDATES)
              + f"  {'1st-order (indep.)':>18}")
        rows = [("phase", v, "rad") for v in PHASES] + [("cfo", v, "Hz") for v in CFOS]
        for kind, v, unit in rows:
            cells, guide = [], []
            for common in UPDATES.values():
                ratios = []
                for _ in range(a.trials):
                    u = updates(a.clients, d, rng, common)
                    ph = spread(a.clients, v) if kind == "phase" else np.zeros(a.clients)
                    f = spread(a.clients, v) if kind == "cfo" else np.zeros(a.clients)
                    ratios.append(one_round(modem, u, ph, f, a.theory, rng))
                    if common == 0.0:
                        pu = u / a.clients
                        tgt = pu.sum(axis=0)
                        guide.append(1 + float(np.sum(2 * (1 - np.cos(ph)) * np.sum(pu ** 2, axis=1)))
                                     / (a.theory * float(tgt @ tgt)))
                r = np.asarray(ratios)
                se = float(np.std(r, ddof=1) / np.sqrt(len(r))) if len(r) > 1 else float("nan")
                cells.append(f"{np.nanmean(r):15.3f} +- {se:7.3f}")
            g = f"{np.mean(guide):18.3f}" if kind == "phase" else f"{'':>18}"
            print(f"{kind:>6} {v:>10g} {unit:<4}  " + "  ".join(cells) + f"  {g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
