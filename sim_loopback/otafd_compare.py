"""Paper 003 comparison: over-the-air federated distillation (otafd) vs over-the-air FedAvg at equal
(eps, delta), on the same data, model and local training. One table: accuracy and air time.

    .venv/bin/python sim_loopback/otafd_compare.py [--config sim_loopback/presets/otafd_compare.toml]
        [--out DIR] [--snr-db 1,20] [--seeds 1] [--arms otafd,fedavg,local] [--set key=value ...]
        [--workers N] [--engine local|ray] [--address ADDR] [--quiet]

The runs are one sweep (otafl_sdr.sweeps.sweep: arms x power.max_snr_db x seeds, every cell an ordinary results
folder DIR/ARM-snrS-seedN): ``--workers`` runs cells in parallel (``--engine ray``: on Ray), a killed
comparison started again with the same flags skips the finished cells and resumes the interrupted ones, and
DIR/sweep.csv lists every cell. The table below is computed from the run folders (summary.json,
config.toml, rounds.jsonl).

Arms (per SNR, ``power.max_snr_db``: the SNR per channel use, the same for both):
  otafd   the config as given (algorithm otafd, transceiver otafd_prop1, z* calibrated for the
          enforcing accountant through ``power.options.calibrate``);
  fedavg  algorithm fedavg with paper 000's power control and cooperative jammer (``cj_adaptive``,
          ``jammer_multiple = 1.0001``: the jammer meets privacy.eps under the ``paper`` accountant, a hair
          above Theorem 2 of paper 000 so that rounding never refuses the last round; jammer power limit
          120 dB so that the jammer, not a fade of its channel, is never what stops the run),
          algorithm.options cleared;
  local   otafd with gamma = 0 (the devices' own models, nothing learnt from the air): the reference that
          says what the distillation adds (it needs no air: its channel-use and privacy columns are empty).
Both private arms enforce privacy.eps with ``privacy.accountant`` (``paper`` in the preset, paper 000's
closed form, for which both are calibrated); the table also gives eps under Theorem 2 of paper 003
(``otafd``), RDP and PLD (dp-accounting) for the noise each arm really received.

Air time: channel uses per round as the ``sim`` air counts them (ceil(d/2) complex symbols for d reals)
and as one PHY burst occupies the air on ``loopback`` / ``uhd`` (preamble, pilots, guards, filter tails:
``phy.modem.Modem.channel_uses``), and their total over the run. Accuracy: FedAvg's global model; otafd's
mean over the devices' models (mean over seeds, ± their std; "acc. min": the worst device (otafd) / the
worst seed). Writes DIR/otafd_compare.csv and .md and prints the table."""
from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from otafl_sdr.configure.load import load_config  # noqa: E402
from otafl_sdr.errors import UserError  # noqa: E402
from otafl_sdr.phy.modem import Modem  # noqa: E402
from otafl_sdr.phy.packing import symbols_for  # noqa: E402
from otafl_sdr.configure.plugins import load_plugins  # noqa: E402
from otafl_sdr.sweeps.sweep import SweepSpec, failed_cells, run_sweep  # noqa: E402

DEFAULT_CONFIG = ROOT / "sim_loopback" / "presets" / "otafd_compare.toml"
ARMS = ("otafd", "fedavg", "local")
ARM_SETS = {
    "otafd": [],
    "fedavg": ["algorithm.name=fedavg", "algorithm.options={}", "power.policy=cj_adaptive", "power.options={}",
               "power.jammer=true", "power.jammer_multiple=1.0001", "power.jammer_max_snr_db=120"],
    "local": ["algorithm.options.gamma=0.0", "privacy.enforce=false"],
}
COLUMNS = ("snr_db", "arm", "rounds", "accuracy", "accuracy_std", "accuracy_min", "eps_enforced", "eps_paper",
           "eps_otafd", "eps_rdp", "eps_pld", "delta", "payload_reals", "uses_sim", "uses_phy", "uses_total_phy",
           "aggregate_nmse", "noise_rounds", "seeds")
SNR_KEY = "power.max_snr_db"


def sweep_spec(config: Path, out: Path, snrs=(1.0, 20.0), seeds: int = 1, arms=ARMS, sets=()) -> SweepSpec:
    """The comparison as a sweep: arms (ARM_SETS) x power.max_snr_db x seeds 0..seeds-1 on the config."""
    return SweepSpec(name="otafd_compare", base=Path(config).resolve(), seeds=list(range(seeds)), out=Path(out),
                     fixed=list(sets), grid={SNR_KEY: [float(s) for s in snrs]},
                     arms={a: list(ARM_SETS[a]) for a in arms}, dirs="{arm}-snr{power_max_snr_db:g}-seed{seed}")


def read_arm(out: Path) -> dict:
    """One run's figures, from its results folder."""
    import json
    s = json.loads((out / "summary.json").read_text())
    cfg = load_config(out / "config.toml")
    rows = exp_rows(out)
    d = s.get("payload_dim", s["model_dim"])
    uses_phy = Modem(cfg.phy).channel_uses(symbols_for(d))
    acc_min = s.get("final_accuracy_min", s["final_accuracy"])
    nmse = [r["aggregate_nmse"] for r in rows if r.get("aggregate_nmse") is not None]
    noise = sum(1 for r in rows if r.get("case2_classes") or r.get("cj_active"))
    return {"rounds": s["rounds"], "accuracy": s["final_accuracy"], "accuracy_min": acc_min,
            "eps_enforced": s.get(f"eps_{cfg.privacy.accountant}"), "eps_paper": s.get("eps_paper"),
            "eps_otafd": s.get("eps_otafd"), "eps_rdp": s.get("eps_rdp"), "eps_pld": s.get("eps_pld"),
            "delta": cfg.privacy.delta, "payload_reals": d, "uses_sim": symbols_for(d), "uses_phy": uses_phy,
            "uses_total_phy": uses_phy * s["rounds"],
            "aggregate_nmse": float(np.median(nmse)) if nmse else math.nan, "noise_rounds": noise,
            "stopped": s.get("stopped_reason") or ""}


def exp_rows(out: Path) -> list[dict]:
    import json
    path = out / "rounds.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []



def run_cells(spec: SweepSpec, engine: str = "local", workers: int | None = None, address: str | None = None,
              quiet: bool = False):
    """Run the sweep's missing cells; a cell that failed is a one-line error naming it and its folder."""
    table = run_sweep(spec, engine=engine, workers=workers, address=address, progress=not quiet)
    bad = failed_cells(table)
    if len(bad):
        raise UserError("; ".join(f"run {spec.out / r['dir']}: {r['status']}" for _, r in bad.iterrows()))
    return table


def compare(config: Path, out: Path, snrs=(1.0, 20.0), seeds: int = 1, arms=ARMS, sets=(),
            quiet: bool = False, workers: int | None = None, engine: str = "local",
            address: str | None = None) -> list[dict]:
    load_plugins()
    for a in arms:
        if a not in ARMS:
            raise UserError(f"unknown arm '{a}'; allowed: {', '.join(ARMS)}")
    base = load_config(config, list(sets), validate_now=False)
    if base.algorithm.name != "otafd":
        raise UserError(f"the config's algorithm must be 'otafd' (the fedavg arm is derived from it), "
                        f"got '{base.algorithm.name}'")
    spec = sweep_spec(config, out, snrs, seeds, arms, sets)
    t0 = time.perf_counter()
    cells = run_cells(spec, engine, workers, address, quiet)
    table = []
    for snr in snrs:
        for arm in arms:
            here = cells[(cells["mechanism"] == arm) & (cells[SNR_KEY] == float(snr))].sort_values("seed")
            runs = [read_arm(out / d) for d in here["dir"]]
            acc = [r["accuracy"] for r in runs]
            row = {"snr_db": snr, "arm": arm, "seeds": seeds, "accuracy": statistics.fmean(acc),
                   "accuracy_std": statistics.stdev(acc) if len(acc) > 1 else 0.0,
                   "accuracy_min": min(r["accuracy_min"] for r in runs)}
            for k in ("rounds", "eps_enforced", "eps_paper", "eps_otafd", "eps_rdp", "eps_pld", "delta",
                      "payload_reals", "uses_sim", "uses_phy", "uses_total_phy", "aggregate_nmse", "noise_rounds"):
                vals = [r[k] for r in runs if r[k] is not None]
                row[k] = statistics.fmean(vals) if vals else None
            row["stopped"] = "; ".join(sorted({r["stopped"] for r in runs if r["stopped"]}))
            if arm == "local":                   # needs no air: neither channel uses nor a privacy spend
                row.update({k: None for k in ("eps_enforced", "eps_paper", "eps_otafd", "eps_rdp", "eps_pld",
                                              "uses_sim", "uses_phy", "uses_total_phy", "aggregate_nmse",
                                              "noise_rounds")})
                row["payload_reals"] = 0
            table.append(row)
            if not quiet:
                status = ", ".join(sorted(set(here["status"].astype(str))))
                print(f"  {arm} @ {snr:g} dB: acc {row['accuracy']:.3f}, eps {_fmt(row['eps_enforced'])}, "
                      f"{_fmt(row['uses_phy'])} channel uses/round ({status})", flush=True)
    if not quiet:
        print(f"  {len(cells)} runs in {time.perf_counter() - t0:.0f}s; per run: {out / 'sweep.csv'}", flush=True)
    write_table(table, out)
    return table


def _fmt(v) -> str:
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    return f"{v:.4g}"


def markdown(table: list[dict]) -> str:
    head = ["SNR dB", "arm", "rounds", "accuracy", "acc. min", "eps (enforced)", "eps paper", "eps Thm 2",
            "eps RDP", "eps PLD", "delta", "reals/round", "uses/round sim", "uses/round PHY", "uses total PHY",
            "agg. NMSE", "noise rounds"]
    keys = ["snr_db", "arm", "rounds", "accuracy", "accuracy_min", "eps_enforced", "eps_paper", "eps_otafd",
            "eps_rdp", "eps_pld", "delta", "payload_reals", "uses_sim", "uses_phy", "uses_total_phy",
            "aggregate_nmse", "noise_rounds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        cells = [_fmt(r.get(k)) for k in keys]
        if r.get("seeds", 1) > 1:
            cells[3] += f" ± {r['accuracy_std']:.3f}"
        lines.append("| " + " | ".join(cells) + " |")
    ratio = []
    for snr in sorted({r["snr_db"] for r in table}):
        by = {r["arm"]: r for r in table if r["snr_db"] == snr}
        if "otafd" in by and "fedavg" in by:
            ratio.append(f"at {snr:g} dB: FedAvg uses {by['fedavg']['uses_phy'] / by['otafd']['uses_phy']:.0f}x "
                         f"the PHY channel uses of otafd per round ({by['fedavg']['uses_sim'] / by['otafd']['uses_sim']:.0f}x "
                         f"on sim); accuracy {by['otafd']['accuracy']:.3f} (otafd) vs {by['fedavg']['accuracy']:.3f} (FedAvg)")
        if "otafd" in by and "local" in by:
            ratio.append(f"at {snr:g} dB: distillation adds {by['otafd']['accuracy'] - by['local']['accuracy']:+.3f} "
                         f"over the devices' local models")
    stops = [f"{r['arm']} @ {r['snr_db']:g} dB: {r['stopped']}" for r in table if r.get("stopped")]
    return "\n".join(lines + [""] + ratio + ([""] + ["stopped: " + s for s in stops] if stops else [])) + "\n"


def write_table(table: list[dict], out: Path) -> None:
    with open(out / "otafd_compare.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(COLUMNS) + ["stopped"], extrasaction="ignore")
        w.writeheader()
        for r in table:
            w.writerow(r)
    (out / "otafd_compare.md").write_text(markdown(table))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    ap.add_argument("--out", type=Path, default=Path("results/otafd_compare"))
    ap.add_argument("--snr-db", default="1,20", help="comma-separated SNRs per channel use (dB)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--set", dest="sets", action="append", default=[], help="config override key=value")
    ap.add_argument("--workers", type=int, default=None, help="runs in parallel (local engine; default: cores)")
    ap.add_argument("--engine", choices=("local", "ray"), default="local", help="where the runs go (otafl_sdr.sweeps.sweep)")
    ap.add_argument("--address", default=None, help="ray engine: address of an existing Ray cluster")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    try:
        snrs = [float(s) for s in a.snr_db.split(",") if s.strip()]
        if a.seeds < 1:
            raise UserError("--seeds must be >= 1")
        if a.workers is not None and a.workers < 1:
            raise UserError("--workers must be >= 1")
        table = compare(a.config, a.out, snrs, a.seeds, [s.strip() for s in a.arms.split(",") if s.strip()],
                        a.sets, a.quiet, a.workers, a.engine, a.address)
    except (UserError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(markdown(table))
    print(f"written: {a.out / 'otafd_compare.csv'}, {a.out / 'otafd_compare.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
