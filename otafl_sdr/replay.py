"""`otafl-sdr replay RECORDING`: demodulate a SigMF recording of a round offline (issue 3, item 4).

The recording (written by :mod:`otafl_sdr.radio.recording`) holds the received IQ and what the
receiver needs: the [phy] parameters and modem options, n_symbols, d, the reference amplitude and
alpha_u. Replay rebuilds the same ``phy.Modem``, demodulates, and returns the aggregate estimate
unpack(y) / alpha_u (eq. 16 of paper 000) with the receiver's statistics. Pure numpy + sigmf: no
GNU Radio needed, so a recording from the lab can be inspected on any machine.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from .errors import UserError


def _phy_config(phy: dict):
    from .config import PhyConfig
    if not isinstance(phy, dict):
        raise UserError("recording metadata 'otafl:phy' is not a table of [phy] parameters")
    names = {f.name for f in dataclasses.fields(PhyConfig)}
    unknown = sorted(set(phy) - names)
    if unknown:
        raise UserError(f"recording metadata 'otafl:phy' has unknown parameters {', '.join(unknown)}; "
                        f"recorded by a different otafl-sdr version?")
    return PhyConfig(**phy)


def replay(recording_path: str | Path) -> dict:
    """Demodulate one recorded round; returns a dict with

    ``aggregate`` ((d,) float64 or None if the burst was lost), ``ok``, ``reason``, ``round``,
    ``attempt``, ``d``, ``n_symbols``, ``alpha_u``, the receiver statistics ``timing`` (samples),
    ``cfo`` (cycles/sample), ``phase`` (rad), ``gain`` (complex), ``nmse_pilots``, ``rho``,
    ``noise_var`` (per real coordinate, symbol level), ``sigma_eff_measured`` (= sqrt(noise_var) /
    alpha_u, the noise std per coordinate of the aggregate), and the capture's ``sample_rate``,
    ``center_freq``, ``n_samples``, ``air``, ``hw``, ``path``."""
    from .phy import Modem, unpack_reals
    from .radio.recording import MODEM_OPTIONS, decode_complex, read_recording

    samples, meta = read_recording(recording_path)
    phy = _phy_config(meta["phy"])
    opts = {k: v for k, v in (meta.get("modem") or {}).items() if k in MODEM_OPTIONS}
    modem = Modem(phy, **opts)
    d, n_sym = int(meta["d"]), int(meta["n_symbols"])
    alpha_u = float(meta["alpha_u"])
    if d < 1 or n_sym < (d + 1) // 2:
        raise UserError(f"recording metadata is inconsistent: d={d} needs {(d + 1) // 2} symbols, "
                        f"n_symbols={n_sym}")
    res = modem.demodulate(samples, n_sym, decode_complex(meta["ref_amplitude"]))
    agg = unpack_reals(res.symbols, d) / alpha_u if res.ok else None
    out = {
        "path": str(recording_path), "round": int(meta["round"]), "attempt": int(meta.get("attempt", 0)),
        "ok": bool(res.ok), "reason": res.reason, "aggregate": agg, "d": d, "n_symbols": n_sym,
        "alpha_u": alpha_u, "timing": int(res.timing), "cfo": float(res.cfo), "phase": float(res.phase),
        "gain": complex(res.gain), "nmse_pilots": float(res.nmse_pilots), "rho": float(res.rho),
        "noise_var": float(res.noise_var),
        "sigma_eff_measured": float(np.sqrt(res.noise_var) / alpha_u) if res.ok else float("nan"),
        "sample_rate": float(meta["sample_rate"]), "center_freq": meta.get("center_freq"),
        "n_samples": int(samples.size), "air": meta.get("air", ""), "hw": meta.get("hw", ""),
    }
    if agg is not None:
        out["aggregate_norm"] = float(np.linalg.norm(agg))
    return out


# ------------------------------------------------------------------------------------------ CLI
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("recording", help="round_NNNN.sigmf-meta (or .sigmf-data, or the base name)")
    p.add_argument("--out", metavar="FILE.npy", help="save the aggregate estimate (float64, d values)")
    p.add_argument("--json", action="store_true", help="print the statistics as one JSON object")


def _jsonable(stats: dict) -> dict:
    out = {}
    for k, v in stats.items():
        if k == "aggregate":
            continue
        if isinstance(v, complex):
            v = [v.real, v.imag]
        elif isinstance(v, float) and not np.isfinite(v):
            v = None
        out[k] = v
    return out


def main(args) -> int:
    """CLI body: prints the receiver statistics; exit 0 if the burst was demodulated, 1 if it was lost."""
    stats = replay(args.recording)
    if args.out:
        if stats["aggregate"] is None:
            raise UserError(f"round {stats['round']}: burst lost ({stats['reason']}); nothing to save")
        out = Path(args.out)
        if not out.parent.is_dir():
            raise UserError(f"--out: folder '{out.parent}' does not exist")
        np.save(out, stats["aggregate"])
    if args.json:
        print(json.dumps(_jsonable(stats)))
    else:
        head = f"round {stats['round']}" + (f" (attempt {stats['attempt']})" if stats["attempt"] else "")
        if not stats["ok"]:
            print(f"{head}: lost: {stats['reason']}")
        else:
            g = stats["gain"]
            print(f"{head}: {stats['air']} air, {stats['n_samples']} samples at {stats['sample_rate']:g} S/s, "
                  f"d={stats['d']}")
            print(f"  timing {stats['timing']} samples, cfo {stats['cfo']:.3e} cycles/sample, "
                  f"phase {stats['phase']:.4f} rad, |gain| {abs(g):.4f}, rho {stats['rho']:.3f}")
            print(f"  pilot NMSE {stats['nmse_pilots']:.3e}, noise var {stats['noise_var']:.4g}, "
                  f"sigma_eff {stats['sigma_eff_measured']:.4g}, ||aggregate|| {stats['aggregate_norm']:.6g}")
            if args.out:
                print(f"  aggregate saved to {args.out}")
    return 0 if stats["ok"] else 1


def cli_replay(args_list: list[str]) -> int:
    """Stand-alone entry (``python -m otafl_sdr.replay RECORDING``); errors print one line, exit 2."""
    p = argparse.ArgumentParser(prog="otafl-sdr replay", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(args_list)
    try:
        return main(args)
    except UserError as e:
        print(f"otafl-sdr: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli_replay(sys.argv[1:]))
