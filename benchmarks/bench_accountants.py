"""Accountant speed and accuracy over a long run of heterogeneous rounds (one ledger check + record per
round, as the orchestrator does), against a reference measured in the same run: dp-accounting's
PLDAccountant composing every round one by one and asked for epsilon each round.

    .venv/bin/python benchmarks/bench_accountants.py [--rounds 200] [--poisson-rounds 20]
"""
from __future__ import annotations

import argparse
import math
import time

import dp_accounting
import numpy as np
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.privacy.pld import DEFAULT_INTERVAL
from otafl_sdr.transmission import Mechanism

DELTA = 1e-5


def mechanisms(n: int, q: float, seed: int) -> list[Mechanism]:
    rng = np.random.default_rng(seed)
    sens = rng.uniform(0.5, 1.5, n) / 1000.0            # 1/(s_i |D|) with |D| ~ 1000, s_i in [1, 2]
    sigma = rng.uniform(0.01, 0.03, n)                  # z ~ 7 .. 60 (eps ~ 1..5 after 200 rounds)
    return [Mechanism(t + 1, float(a), float(b), sampling_prob=q) for t, (a, b) in enumerate(zip(sens, sigma))]


def time_ledger(mechs, names):
    pc = PrivacyConfig(eps=1e9, delta=DELTA, accountant=names[0], report=list(names), enforce=True)
    led = PrivacyLedger(pc, None)
    t0 = time.perf_counter()
    for m in mechs:
        led.check(m)
        led.record(m)
    t_run = time.perf_counter() - t0
    again = PrivacyLedger(pc, None)
    t0 = time.perf_counter()
    again.load_state_dict(led.state_dict())            # what resume does after reading the file
    eps = again.epsilons()
    t_replay = time.perf_counter() - t0
    assert eps == led.epsilons()
    return t_run, t_replay, eps


def time_reference(mechs, interval):
    acc = PLDAccountant(value_discretization_interval=interval)
    t0 = time.perf_counter()
    for m in mechs:
        g = dp_accounting.GaussianDpEvent(m.sigma_eff / m.sensitivity)
        acc.compose(g if m.sampling_prob == 1 else dp_accounting.PoissonSampledDpEvent(m.sampling_prob, g))
        eps = acc.get_epsilon(DELTA)
    return time.perf_counter() - t0, eps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--poisson-rounds", type=int, default=20)
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 10; a.poisson_rounds = 2

    mechs = mechanisms(a.rounds, 1.0, 0)
    z = np.array([m.sigma_eff / m.sensitivity for m in mechs])
    exact = get_epsilon_gaussian(1 / math.sqrt(float(np.sum(1 / z ** 2))), DELTA)
    print(f"{a.rounds} full-participation rounds, z in [{z.min():.3g}, {z.max():.3g}], delta={DELTA:g}")
    ref_t, ref_eps = time_reference(mechs, DEFAULT_INTERVAL)
    print(f"  reference dp-accounting PLD one by one @{DEFAULT_INTERVAL:g}: {ref_t:7.2f} s  eps={ref_eps:.6f}"
          f"  (exact {exact:.6f})")
    for names in (("paper",), ("rdp",), ("pld",), ("rdp", "paper", "pld")):
        t, t_rep, eps = time_ledger(mechs, names)
        vals = "  ".join(f"{k}={v:.6f}" for k, v in eps.items())
        print(f"  ledger {'+'.join(names):<15} {t:7.2f} s  {1e3 * t / len(mechs):7.2f} ms/round  "
              f"ratio to reference {t / ref_t:6.3f}  replay {t_rep:5.2f} s   {vals}")

    if a.poisson_rounds:
        pm = mechanisms(a.poisson_rounds, 0.5, 1)
        print(f"{a.poisson_rounds} Poisson-subsampled rounds (q=0.5)")
        ref_t, ref_eps = time_reference(pm, DEFAULT_INTERVAL)
        print(f"  reference dp-accounting PLD one by one @{DEFAULT_INTERVAL:g}: {ref_t:7.2f} s  eps={ref_eps:.6f}")
        for names in (("rdp",), ("pld",)):
            t, t_rep, eps = time_ledger(pm, names)
            print(f"  ledger {'+'.join(names):<15} {t:7.2f} s  {1e3 * t / len(pm):7.1f} ms/round  "
                  f"ratio to reference {t / ref_t:6.3f}  replay {t_rep:5.2f} s   eps={eps[names[0]]:.6f}")


if __name__ == "__main__":
    main()
