"""Channels and waveforms (issue 26 item 4): what multipath costs the aggregate, the air and the airtime.

    .venv/bin/python benchmarks/bench_channels.py [--clients 20] [--dim 155830] [--rounds 2] [--spread-ns 2000]
                                                  [--no-loopback] [--quick]

Prints, does not assert (ratios against a reference measured in the same run):
  1a. aggregate NMSE / theory against SNR_i = P_i / (d sigma_c2) (0, 5, 10, 15, 20 dB) for the single-carrier
     waveform under the flat channel, an exponential PDP and 3GPP TDL-A/B/C (channel/multipath.py) at
     ``--spread-ns`` RMS delay spread and the default rate (uhd.rate = 1 MS/s: 2,000 ns = 2 samples), on the
     loopback air (GNU Radio, the default [loopback] section: no offsets, so the channel is the only
     impairment) and on the sim air beside it (its symbol-level model of the same receiver); paper-000
     plans (cj_adaptive) without the jammer, theory = the flat channel's sigma_eff^2 d / ||sum p_i u_i||^2
     (transmission.aggregate_nmse_theory), each round's taps seeded by its index (the same on both airs);
  1b. the same for OFDM (phy.waveform = "ofdm", phy/ofdm.py): the same plans carried per subcarrier
     (power/ofdm_plan.plan_ofdm, truncated channel inversion) with the smallest cyclic prefix that covers
     each channel's delay extent plus one sample (at least the default 16); NMSE against the round's
     planned aggregate (power/ofdm_plan.planned_aggregate) over sigma_eff^2 d / its energy;
  1c. NMSE against the intended aggregate sum p_i u_i / the flat theory at 10 dB against the delay spread
     (100 ns to 4 us), single carrier and OFDM, sim air only (1a/1b show it tracks loopback): for OFDM this
     adds the bias of truncated and down-scaled subcarriers to 1b's noise;
  2. airtime of one round at d = 155,830 at 1, 5 and 20 MS/s: the bare payload (ceil(d/2) complex uses at one
     sample each), the single-carrier burst (phy/modem.py: preamble, pilots, filter tails and guards at
     phy.sps samples per symbol) and OFDM (phy/ofdm.ofdm_airtime) at the default layout and with the
     prefix a 300 ns TDL-C channel's delay extent needs at each rate;
  3. the sim air's time per transmit at K = 50, d = 155,830 under each channel and waveform, as a ratio to
     the flat single-carrier one (same plans, same process).

The accuracy cost of multipath for the default experiment (sim air, test accuracy under flat and TDL-C,
single carrier and OFDM), a sweep of 8 runs, about 5 minutes on 2 busy cores:
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
from otafl_sdr.config.schema import Config  # noqa: E402
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


def ofdm_cfg(name: str, spread_ns: float) -> Config:
    """channel_cfg with phy.waveform = "ofdm" and the smallest prefix (>= 16) covering the delay extent + 1."""
    cfg = channel_cfg(name, spread_ns)
    mp = Multipath.from_config(cfg)
    cfg.phy.waveform = "ofdm"
    cfg.phy.ofdm_cp = max(int(cfg.phy.ofdm_cp), (mp.length - 1 if mp.enabled else 0) + 1)
    return cfg


def ofdm_plans(plans: list, cfg: Config, info) -> list:
    """Deep copies of the single-carrier plans carried per subcarrier under cfg's channel."""
    import copy
    from otafl_sdr.power.ofdm_plan import plan_ofdm
    out = []
    for p in plans:
        q = copy.deepcopy(p)
        q.extra.setdefault("csi", q.h)
        plan_ofdm(q, cfg, info)
        out.append(q)
    return out


def ofdm_nmse_ratio(plan, aggregate) -> float:
    from otafl_sdr.power.ofdm_plan import planned_aggregate
    ref = planned_aggregate(plan)
    return aggregate_nmse(aggregate, ref) / (plan.sigma_eff() ** 2 * plan.dim / float(np.sum(ref ** 2)))


def system_info(K: int, d: int, snr_db: float) -> SystemInfo:
    return SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 ** (snr_db / 10) * d),
                      dim=d, sigma_c2=1.0, rounds=15, eps=1.0, delta=1e-5)


def make_plans(K: int, d: int, snr_db: float, rounds: int, seed: int) -> list:
    """Paper-000 plans (cj_adaptive, no jammer) at SNR_i = snr_db; round m's index is m + 1 (its taps)."""
    rng = np.random.default_rng(seed)
    cfg = channel_cfg("flat", 0.0)
    pol = CJAdaptivePolicy(cfg, system_info(K, d, snr_db))
    out = []
    for m in range(rounds):
        u = rng.standard_normal((K, d)) * 0.5 + rng.standard_normal(d)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
        plan = pol.plan(m + 1, u, h, 0.5 + 0.5j, rng)
        plan.extra["air_sigma_c2"] = 1.0
        out.append(plan)
    return out


def ofdm_present() -> bool:
    """True where this tree has the OFDM waveform (phy/ofdm.py and its per-subcarrier plan)."""
    import importlib.util
    return all(importlib.util.find_spec(m) is not None
               for m in ("otafl_sdr.phy.ofdm", "otafl_sdr.power.ofdm_plan", "otafl_sdr.channel.ofdm_sim"))


def nmse_table(a) -> None:
    K, d = a.clients, a.dim
    plans = {snr: make_plans(K, d, snr, a.rounds, seed=snr + 100) for snr in SNRS}
    airs = ["sim"] if a.no_loopback else ["loopback", "sim"]
    for wf in ("single carrier", "ofdm") if ofdm_present() else ("single carrier",):
        ofdm = wf == "ofdm"
        results = {}                                          # (air, channel, snr) -> (mean ratio, lost)
        cps = {}
        for ch in CHANNELS:
            cfg = ofdm_cfg(ch, a.spread_ns) if ofdm else channel_cfg(ch, a.spread_ns)
            cps[ch] = cfg.phy.ofdm_cp
            todo = {snr: ofdm_plans(plans[snr], cfg, system_info(K, d, snr)) if ofdm else plans[snr] for snr in SNRS}
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
                        for plan in todo[snr]:
                            rec = air.transmit(plan, rng)
                            if not rec.ok:
                                lost += 1
                                continue
                            if ofdm:
                                ratios.append(ofdm_nmse_ratio(plan, rec.aggregate))
                            else:
                                exp = plan.expected_aggregate()
                                ratios.append(aggregate_nmse(rec.aggregate, exp) / aggregate_nmse_theory(plan, exp))
                        results[air_name, ch, snr] = (float(np.mean(ratios)) if ratios else float("nan"), lost)
                finally:
                    air.close()
        print(f"1{'b' if ofdm else 'a'}. aggregate NMSE / theory, {wf}, K={K}, d={d:,}, {a.rounds} rounds per point, "
              f"RMS delay spread {a.spread_ns:g} ns = {a.spread_ns * 1e-3:g} samples at 1 MS/s (jammer off)"
              + (", cyclic prefix " + ", ".join(f"{ch} {cps[ch]}" for ch in CHANNELS) if ofdm else ""))
        print(f"{'':>7}" + "".join(f" {ch:>{9 * len(airs) - 1}}" for ch in CHANNELS))
        print(f"{'SNR dB':>7}" + "".join(" " + " ".join(f"{air:>8}" for air in airs) for _ in CHANNELS))
        for snr in SNRS:
            cells = [" ".join(f"{results[air, ch, snr][0]:8.3f}" for air in airs) for ch in CHANNELS]
            lost = sum(results[air, ch, snr][1] for air in airs for ch in CHANNELS)
            print(f"{snr:7d}" + "".join(f" {c}" for c in cells) + (f"   ({lost} lost)" if lost else ""))
        print("   (" + ("NMSE against the planned per-subcarrier aggregate / sigma_eff^2 d over its energy"
                        if ofdm else "NMSE / the flat channel's theory")
              + ", mean over the rounds received; lost: bursts whose preamble or training was not found)\n")


def spread_table(a) -> None:
    """NMSE against the intended aggregate sum_i p_i u_i over the flat channel's theory at 10 dB, against the
    RMS delay spread, sim air only (section 1a shows it tracks the loopback air within a few per cent):
    single carrier (inter-symbol interference) and, where present, OFDM (its truncated and down-scaled
    subcarriers are a bias against the intended aggregate, section 1b's noise aside)."""
    K, d = a.clients, a.dim
    spreads = (100.0, 300.0, 1000.0, 2000.0, 4000.0)
    plans = make_plans(K, d, 10.0, a.rounds, seed=110)
    wfs = ("sc", "ofdm") if ofdm_present() else ("sc",)
    print(f"1c. NMSE against the intended aggregate / the flat channel's theory at SNR 10 dB against the RMS delay "
          f"spread (ns; samples at 1 MS/s = ns / 1000), sim air, K={K}, d={d:,}"
          + ("; sc = single carrier, ofdm with the prefix that covers the channel" if len(wfs) > 1 else ""))
    print(f"{'':>10}" + "".join(f" {ch:>{9 * len(wfs) - 1}}" for ch in CHANNELS[1:]))
    print(f"{'spread ns':>10}" + "".join(" " + " ".join(f"{w:>8}" for w in wfs) for _ in CHANNELS[1:]))
    for sp in spreads:
        row = []
        for ch in CHANNELS[1:]:
            for wf in wfs:
                cfg = ofdm_cfg(ch, sp) if wf == "ofdm" else channel_cfg(ch, sp)
                if wf == "ofdm" and cfg.phy.ofdm_cp >= cfg.phy.ofdm_fft:
                    row.append(float("nan"))                   # the prefix would not fit the FFT
                    continue
                todo = ofdm_plans(plans, cfg, system_info(K, d, 10.0)) if wf == "ofdm" else plans
                air, rng = SimAir(cfg), np.random.default_rng(7)
                r = [aggregate_nmse(air.transmit(p, rng).aggregate, p.expected_aggregate()) / aggregate_nmse_theory(p)
                     for p in todo]
                row.append(float(np.mean(r)))
        print(f"{sp:10g}" + "".join(f" {x:8.3f}" for x in row))
    print()


def airtime_table(d: int) -> None:
    phy = Config().phy
    n = symbols_for(d)
    m = Modem(phy)
    sc = m.burst_samples(n)
    ofdm = ofdm_present()
    print(f"2. airtime of one round, d = {d:,} ({n:,} complex payload symbols), default phy (single carrier: sps "
          f"{phy.sps}, RRC {phy.rolloff}, preamble {phy.preamble_len}, a pilot every {phy.pilot_spacing}"
          + (f"; OFDM: FFT {phy.ofdm_fft}, prefix {phy.ofdm_cp}, {phy.ofdm_used} used, a pilot every "
             f"{phy.ofdm_pilot_spacing}, {phy.ofdm_train} training symbols)" if ofdm else ")"))
    head = f"{'rate MS/s':>10} {'bare payload s':>15} {'single carrier s':>17} {'SC / bare':>10}"
    if ofdm:
        head += f" {'OFDM s':>8} {'OFDM / bare':>12} {'TDL-C 300 ns: extent':>21} {'prefix':>7} {'OFDM s':>8}"
    print(head)
    for rate in RATES:
        line = f"{rate / 1e6:10g} {n / rate:15.4f} {sc / rate:17.4f} {sc / n:10.3f}"
        if ofdm:
            from otafl_sdr.phy.ofdm import ofdm_airtime
            t = ofdm_airtime(d, rate, phy)
            c = Config()
            c.uhd.rate = rate
            c.channel.multipath, c.channel.delay_spread_ns = "tdl-c", 300.0
            ext = Multipath.from_config(c).length - 1
            c.phy.ofdm_cp = max(int(phy.ofdm_cp), ext + 1)
            fits = c.phy.ofdm_cp < c.phy.ofdm_fft
            t2 = f"{ofdm_airtime(d, rate, c.phy):8.4f}" if fits else f"{'> FFT':>8}"
            line += f" {t:8.4f} {t * rate / n:12.3f} {ext:21d} {c.phy.ofdm_cp:7d} {t2}"
        print(line)
    print("   (bare: one sample per complex use, the sim air's count; single carrier: Modem.burst_samples / rate"
          + ("; OFDM: phy/ofdm.ofdm_airtime, at the default prefix and at the prefix a 300 ns TDL-C channel's "
             "delay extent (samples at that rate) needs" if ofdm else "") + ")\n")


def cost_table(a) -> None:
    K, d = (8, 4000) if a.quick else (50, PAPER_D)
    plans = make_plans(K, d, 10.0, 3, seed=1)
    wfs = ("single carrier", "ofdm") if ofdm_present() else ("single carrier",)
    print(f"3. the sim air's time per transmit, K={K}, d={d:,} (median of {len(plans)} plans x {a.repeats}), "
          f"RMS delay spread {a.spread_ns:g} ns, against the flat single-carrier round in the same run")
    t = {}
    for wf in wfs:
        for ch in CHANNELS:
            cfg = ofdm_cfg(ch, a.spread_ns) if wf == "ofdm" else channel_cfg(ch, a.spread_ns)
            todo = ofdm_plans(plans, cfg, system_info(K, d, 10.0)) if wf == "ofdm" else plans
            air = SimAir(cfg)
            air.transmit(todo[0], np.random.default_rng(0))                 # warm-up (caches, buffers)
            times = []
            for _ in range(a.repeats):
                for p in todo:
                    t0 = time.perf_counter()
                    air.transmit(p, np.random.default_rng(0))
                    times.append(time.perf_counter() - t0)
            t[wf, ch] = float(np.median(times))
    mp = {ch: Multipath.from_config(channel_cfg(ch, a.spread_ns)) for ch in CHANNELS}
    ref = t["single carrier", "flat"]
    short = {"single carrier": "sc", "ofdm": "ofdm"}
    print(f"{'channel':>12} {'taps':>5} {'FIR len':>8}"
          + "".join(f" {short[wf] + ' ms/transmit':>17} {'x flat':>7}" for wf in wfs))
    for ch in CHANNELS:
        print(f"{ch:>12} {len(mp[ch].delays):5d} {mp[ch].length:8d}"
              + "".join(f" {t[wf, ch] * 1e3:17.1f} {t[wf, ch] / ref:7.2f}" for wf in wfs))


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
