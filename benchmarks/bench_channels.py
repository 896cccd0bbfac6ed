"""Channels and waveforms (issue 26 item 4): what multipath costs the aggregate, the air and the airtime.

    .venv/bin/python benchmarks/bench_channels.py [--clients 20] [--dim 155830] [--rounds 2] [--spread-ns 2000]
                                                  [--no-loopback] [--quick]

Prints, does not assert (ratios against a reference measured in the same run):
  1. aggregate NMSE / theory against SNR_i = P_i / (d sigma_c2) (0, 5, 10, 15, 20 dB) for the single-carrier
     waveform under the flat channel, an exponential PDP and 3GPP TDL-A/B/C (channel/multipath.py) at
     ``--spread-ns`` RMS delay spread and the default rate (uhd.rate = 1 MS/s: 2,000 ns = 2 samples), on the
     loopback air (GNU Radio, the default [loopback] section: no offsets, so the channel is the only
     impairment) and on the sim air beside it (its symbol-level model of the same receiver); paper-000
     plans (cj_adaptive) without the jammer, theory = the flat channel's sigma_eff^2 d / ||sum p_i u_i||^2
     (transmission.aggregate_nmse_theory), each round's taps seeded by its index (the same on both airs);
     1b. the same ratio at 10 dB against the delay spread (100 ns to 4 us), sim air only;
  2. airtime of one round at d = 155,830 for the single-carrier burst (phy/modem.py: preamble, pilots,
     filter tails and guards at phy.sps samples per symbol) at 1, 5 and 20 MS/s, against the bare payload
     (ceil(d/2) complex uses at one sample each);
  3. the sim air's time per transmit at K = 50, d = 155,830 under each channel, as a ratio to the flat one
     (same plans, same process).
The OFDM waveform (phy.waveform = "ofdm", issue 26 item 2) is not in this tree yet: its columns are not
printed (no estimate stands in for them).

The accuracy cost of multipath for the default experiment (sim air, test accuracy with and without a TDL-C
channel), a sweep of 8 runs, about 5 minutes on 2 busy cores:
    .venv/bin/otafl-sdr sweep sim_loopback/sweeps/multipath_cost.toml --workers 2"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otafl_sdr.channel.multipath import Multipath  # noqa: E402
from otafl_sdr.channel.sim_air import SimAir  # noqa: E402
from otafl_sdr.config import Config  # noqa: E402
from otafl_sdr.phy.modem import Modem  # noqa: E402
from otafl_sdr.phy.packing import symbols_for  # noqa: E402
from otafl_sdr.power.base import SystemInfo  # noqa: E402
from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy  # noqa: E402
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory  # noqa: E402

CHANNELS = ("flat", "exponential", "tdl-a", "tdl-b", "tdl-c")
SNRS = (0, 5, 10, 15, 20)
RATES = (1e6, 5e6, 20e6)
PAPER_D = 155_830


def channel_cfg(name: str, spread_ns: float) -> Config:
    cfg = Config()
    cfg.power.jammer = False
    cfg.channel.multipath = name
    cfg.channel.delay_spread_ns = 0.0 if name == "flat" else float(spread_ns)
    return cfg


def make_plans(K: int, d: int, snr_db: float, rounds: int, seed: int) -> list:
    """Paper-000 plans (cj_adaptive, no jammer) at SNR_i = snr_db; round m's index is m + 1 (its taps)."""
    rng = np.random.default_rng(seed)
    cfg = channel_cfg("flat", 0.0)
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * d),
                      dim=d, sigma_c2=1.0, rounds=15, eps=1.0, delta=1e-5)
    pol = CJAdaptivePolicy(cfg, info)
    out = []
    for m in range(rounds):
        u = rng.standard_normal((K, d)) * 0.5 + rng.standard_normal(d)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
        plan = pol.plan(m + 1, u, h, 0.5 + 0.5j, rng)
        plan.extra["air_sigma_c2"] = 1.0
        out.append(plan)
    return out


def nmse_table(a) -> None:
    K, d = a.clients, a.dim
    print(f"1. aggregate NMSE / theory, single carrier, K={K}, d={d:,}, {a.rounds} rounds per point, RMS delay "
          f"spread {a.spread_ns:g} ns = {a.spread_ns * 1e-3:g} samples at 1 MS/s (jammer off)")
    plans = {snr: make_plans(K, d, snr, a.rounds, seed=snr + 100) for snr in SNRS}
    airs = ["sim"] if a.no_loopback else ["loopback", "sim"]
    results = {}                                              # (air, channel, snr) -> (mean ratio, lost)
    for ch in CHANNELS:
        cfg = channel_cfg(ch, a.spread_ns)
        for air_name in airs:
            if air_name == "loopback":
                from otafl_sdr.radio.loopback_air import LoopbackAir
                air = LoopbackAir(cfg)
            else:
                air = SimAir(cfg)
            air.start()
            try:
                rng = np.random.default_rng(7)
                for snr in SNRS:
                    ratios, lost = [], 0
                    for plan in plans[snr]:
                        rec = air.transmit(plan, rng)
                        if not rec.ok:
                            lost += 1
                            continue
                        exp = plan.expected_aggregate()
                        ratios.append(aggregate_nmse(rec.aggregate, exp) / aggregate_nmse_theory(plan, exp))
                    results[air_name, ch, snr] = (float(np.mean(ratios)) if ratios else float("nan"), lost)
            finally:
                air.close()
    print(f"{'':>7}" + "".join(f" {ch:>{9 * len(airs) - 1}}" for ch in CHANNELS))
    print(f"{'SNR dB':>7}" + "".join(" " + " ".join(f"{air:>8}" for air in airs) for _ in CHANNELS))
    for snr in SNRS:
        cells = []
        for ch in CHANNELS:
            cells.append(" ".join(f"{results[air, ch, snr][0]:8.3f}" for air in airs))
        lost = sum(results[air, ch, snr][1] for air in airs for ch in CHANNELS)
        print(f"{snr:7d}" + "".join(f" {c}" for c in cells) + (f"   ({lost} lost)" if lost else ""))
    print("   (NMSE / the flat channel's theory, mean over the rounds received; lost: bursts whose preamble was"
          " not found)")


def spread_table(a) -> None:
    """NMSE / theory at 10 dB against the RMS delay spread, sim air only (section 1 shows it tracks the
    loopback air within a few per cent)."""
    K, d = a.clients, a.dim
    spreads = (100.0, 300.0, 1000.0, 2000.0, 4000.0)
    plans = make_plans(K, d, 10.0, a.rounds, seed=110)
    print(f"\n1b. NMSE / theory at SNR 10 dB against the RMS delay spread (ns; samples at 1 MS/s = ns / 1000), "
          f"sim air, K={K}, d={d:,}")
    print(f"{'spread ns':>10}" + "".join(f" {ch:>11}" for ch in CHANNELS[1:]))
    for sp in spreads:
        row = []
        for ch in CHANNELS[1:]:
            air, rng = SimAir(channel_cfg(ch, sp)), np.random.default_rng(7)
            r = [aggregate_nmse(air.transmit(p, rng).aggregate, p.expected_aggregate()) / aggregate_nmse_theory(p)
                 for p in plans]
            row.append(float(np.mean(r)))
        print(f"{sp:10g}" + "".join(f" {x:11.3f}" for x in row))


def airtime_table(d: int) -> None:
    phy = Config().phy
    n = symbols_for(d)
    m = Modem(phy)
    sc = m.burst_samples(n)
    print(f"\n2. airtime of one round, d = {d:,} ({n:,} complex payload symbols), default phy (sps {phy.sps}, "
          f"RRC {phy.rolloff}, preamble {phy.preamble_len}, a pilot every {phy.pilot_spacing})")
    print(f"{'rate MS/s':>10} {'single carrier s':>17} {'bare payload s':>15} {'SC / bare':>10} {'SC overhead':>12}")
    for rate in RATES:
        print(f"{rate / 1e6:10g} {sc / rate:17.4f} {n / rate:15.4f} {sc / n:10.3f} {m.overhead(n):12.2%}")
    print("   (single carrier: Modem.burst_samples / rate; bare: one sample per complex use, the sim air's count;"
          " SC overhead: the share of symbol periods not carrying payload)")


def cost_table(a) -> None:
    K, d = (8, 4000) if a.quick else (50, PAPER_D)
    plans = make_plans(K, d, 10.0, 3, seed=1)
    print(f"\n3. the sim air's time per transmit, K={K}, d={d:,} (median of {len(plans)} plans x {a.repeats}), "
          f"RMS delay spread {a.spread_ns:g} ns")
    t = {}
    for ch in CHANNELS:
        air = SimAir(channel_cfg(ch, a.spread_ns))
        air.transmit(plans[0], np.random.default_rng(0))                     # warm-up (caches, buffers)
        times = []
        for _ in range(a.repeats):
            for p in plans:
                t0 = time.perf_counter()
                air.transmit(p, np.random.default_rng(0))
                times.append(time.perf_counter() - t0)
        t[ch] = float(np.median(times))
    mp = {ch: Multipath.from_config(channel_cfg(ch, a.spread_ns)) for ch in CHANNELS}
    print(f"{'channel':>12} {'taps':>5} {'FIR len':>8} {'ms/transmit':>12} {'x flat':>8}")
    for ch in CHANNELS:
        print(f"{ch:>12} {len(mp[ch].delays):5d} {mp[ch].length:8d} {t[ch] * 1e3:12.1f} {t[ch] / t['flat']:8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--dim", type=int, default=PAPER_D)
    ap.add_argument("--rounds", type=int, default=2, help="plans per SNR point (each its own taps)")
    ap.add_argument("--spread-ns", type=float, default=2000.0, help="RMS delay spread of the multipath channels")
    ap.add_argument("--repeats", type=int, default=3, help="timing repeats of section 3")
    ap.add_argument("--no-loopback", action="store_true", help="sim air only (no GNU Radio)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.clients, a.dim, a.rounds, a.repeats = 4, 2000, 1, 1
    nmse_table(a)
    spread_table(a)
    airtime_table(PAPER_D)
    cost_table(a)


if __name__ == "__main__":
    main()
