"""`otafl-sdr replay RECORDING`: demodulate a SigMF recording of a round offline (issue 3, item 4).

The recording (written by :mod:`otafl_sdr.radio.recording`) holds the received IQ and what the
receiver needs: the [phy] parameters and modem options, n_symbols, d, the reference amplitude and
alpha_u. Replay rebuilds the same ``phy.Modem``, demodulates, and returns the aggregate estimate
unpack(y) / alpha_u (eq. 16 of paper 000) with the receiver's statistics. An OFDM recording
(``phy.waveform = "ofdm"``, issue 26) is demodulated by ``phy.ofdm.demodulate`` with the per-subcarrier
reference, data carriers and receiver settings it carries (:func:`replay_ofdm`). Pure numpy + sigmf: no
GNU Radio needed, so a recording from the lab can be inspected on any machine.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np

from otafl_sdr.errors import UserError


# [phy] parameters a recording may carry: (type, low, high), the ranges config_validation allows
_PHY_RANGES = {"sps": (int, 1, 64), "rolloff": (float, 0.01, 1.0), "rrc_span": (int, 1, 64),
               "preamble_len": (int, 7, 100_000), "pilot_spacing": (int, 0, 10_000_000), "guard": (int, 0, 1_000_000),
               "ofdm_fft": (int, 8, 4096), "ofdm_cp": (int, 0, 4095), "ofdm_used": (int, 2, 4095),
               "ofdm_pilot_spacing": (int, 0, 4095), "ofdm_train": (int, 1, 64), "ofdm_truncation": (float, 0.0, 1.0)}
_PHY_CHOICES = {"waveform": ("single_carrier", "ofdm"), "ofdm_smoothing": ("none", "delay")}   # phy/ofdm.SMOOTHING
_MAX_META_BYTES = 64 << 20


def _number(meta: dict, key: str, kind: type, lo: float, hi: float, where: str = "recording metadata"):
    """meta[key] as ``kind`` (int: an integer, bool refused; float: a finite number) within [lo, hi]."""
    v = meta.get(key)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and (kind is float or isinstance(v, int)
                                                                      or (isinstance(v, float) and v.is_integer()))
    if ok:
        try:
            v = kind(v)
        except (OverflowError, ValueError):
            ok = False
    if not ok or not (lo <= v <= hi):
        from otafl_sdr.config.schema import show
        raise UserError(f"{where} '{key}' is {show(v)}; expected {'an integer' if kind is int else 'a number'} "
                        f"in [{lo:g}, {hi:g}]")
    return v


def _phy_config(phy: dict):
    from otafl_sdr.config.schema import PhyConfig
    if not isinstance(phy, dict):
        raise UserError("recording metadata 'otafl:phy' is not a table of [phy] parameters")
    unknown = sorted(str(k) for k in set(phy) - set(_PHY_RANGES) - set(_PHY_CHOICES))
    if unknown:
        raise UserError(f"recording metadata 'otafl:phy' has unknown parameters {', '.join(unknown)[:200]}; "
                        f"recorded by a different otafl-sdr version?")
    values = {k: _number(phy, k, *_PHY_RANGES[k], where="recording metadata 'otafl:phy'")
              for k in phy if k in _PHY_RANGES}
    for k in set(phy) & set(_PHY_CHOICES):
        if phy[k] not in _PHY_CHOICES[k]:
            from otafl_sdr.config.schema import show
            raise UserError(f"recording metadata 'otafl:phy' '{k}' is {show(phy[k])}; expected one of "
                            f"{', '.join(_PHY_CHOICES[k])}")
        values[k] = phy[k]
    if values.get("waveform") == "ofdm":                 # the layout's own constraints (config_validation)
        ph = PhyConfig(**values)
        for ok, key, want in ((ph.ofdm_cp < ph.ofdm_fft, "ofdm_cp", "below ofdm_fft"),
                              (ph.ofdm_used <= ph.ofdm_fft - 1, "ofdm_used", "at most ofdm_fft - 1"),
                              (ph.ofdm_pilot_spacing == 0 or 2 <= ph.ofdm_pilot_spacing <= ph.ofdm_used,
                               "ofdm_pilot_spacing", "0 or in [2, ofdm_used]"), (ph.ofdm_train >= 2, "ofdm_train", "at least 2")):
            if not ok:
                raise UserError(f"recording metadata 'otafl:phy' '{key}' is {getattr(ph, key)}; expected {want}")
    return PhyConfig(**values)


def _complex(meta: dict, key: str) -> complex:
    from otafl_sdr.radio.recording import decode_complex
    try:
        z = decode_complex(meta.get(key))
    except (TypeError, ValueError, OverflowError):
        z = None
    if z is None or not (np.isfinite(z.real) and np.isfinite(z.imag)) or z == 0:
        raise UserError(f"recording metadata '{key}' is not a finite non-zero number or [re, im] pair")
    return z


def _read(recording_path) -> tuple:
    """read_recording, with the metadata file first read by a reader that bounds its size and nesting
    (a hostile .sigmf-meta is a one-line UserError, never a RecursionError inside the SigMF library)."""
    from otafl_sdr.radio.recording import SUFFIX_META, read_recording
    from otafl_sdr.results.safe_files import load_json
    p = Path(recording_path)
    meta_path = p.with_suffix(SUFFIX_META) if p.suffix in (".sigmf-data", SUFFIX_META) else p.with_name(p.name + SUFFIX_META)
    if meta_path.exists() or meta_path.is_symlink():
        load_json(meta_path, "recording metadata", dict, _MAX_META_BYTES)
    try:
        with warnings.catch_warnings():       # the SigMF library's warnings about a hostile file: refused below
            warnings.simplefilter("ignore")
            return read_recording(recording_path)
    except UserError:
        raise
    except (OSError, MemoryError) as e:
        raise UserError(f"cannot read recording '{recording_path}' ({getattr(e, 'strerror', None) or type(e).__name__})") from None
    except Exception as e:  # noqa: BLE001 - the SigMF library's own checks raise many types on a hostile file
        raise UserError(f"recording '{meta_path}' is not valid SigMF ({type(e).__name__})") from None


def replay(recording_path: str | Path) -> dict:
    """Demodulate one recorded round; returns a dict with

    ``aggregate`` ((d,) float64 or None if the burst was lost), ``ok``, ``reason``, ``round``,
    ``attempt``, ``d``, ``n_symbols``, ``alpha_u``, the receiver statistics ``timing`` (samples),
    ``cfo`` (cycles/sample), ``phase`` (rad), ``gain`` (complex), ``nmse_pilots``, ``rho``,
    ``noise_var`` (per real coordinate, symbol level, measured on the reference slots), the aggregate's
    noise (std per coordinate, :func:`aggregate_noise`: ``sigma_channel_measured``, ``sigma_jammer``,
    ``sigma_eff_measured``, ``sigma_eff_basis``, ``sigma_eff_planned``, ``aggregate_rms``), and the capture's ``sample_rate``,
    ``center_freq``, ``n_samples``, ``air``, ``hw``, ``path``. Metadata of the wrong type or out of range
    is a UserError naming the key."""
    from otafl_sdr.phy import Modem, unpack_reals
    from otafl_sdr.radio.recording import MODEM_OPTIONS

    samples, meta = _read(recording_path)
    if isinstance(meta.get("phy"), dict) and meta["phy"].get("waveform", "single_carrier") not in _PHY_CHOICES["waveform"]:
        raise UserError(f"recording '{recording_path}' is an {str(meta['phy'].get('waveform'))[:20]!r} round; "
                        "replay demodulates single-carrier and OFDM recordings only")
    phy = _phy_config(meta["phy"])
    if phy.waveform == "ofdm":
        return replay_ofdm(recording_path, samples, meta, phy)
    modem_meta = meta.get("modem") or {}
    if not isinstance(modem_meta, dict):
        raise UserError("recording metadata 'otafl:modem' is not a table of modem options")
    opts = {k: v for k, v in modem_meta.items() if k in MODEM_OPTIONS}
    for k, v in opts.items():
        if k == "phase_noise":
            opts[k] = _number(opts, k, float, 0.0, 10.0, where="recording metadata 'otafl:modem'")
        elif not isinstance(v, bool):
            raise UserError(f"recording metadata 'otafl:modem' '{k}' must be true or false")
    modem = Modem(phy, **opts)
    meta, d, n_sym, alpha_u = _round_fields(meta, samples)
    ref_amplitude = _complex(meta, "ref_amplitude")
    try:
        with np.errstate(all="ignore"):       # a capture of garbage gives a lost burst, not overflow warnings
            res = modem.demodulate(samples, n_sym, ref_amplitude)
    except (ValueError, IndexError, ArithmeticError, MemoryError) as e:
        raise UserError(f"recording '{recording_path}' cannot be demodulated with its own metadata "
                        f"({type(e).__name__}); it is inconsistent") from None
    agg = unpack_reals(res.symbols, d) / alpha_u if res.ok else None
    return _stats(recording_path, meta, samples, res, agg, d, n_sym, alpha_u, waveform="single_carrier",
                  cfo=float(res.cfo), phase=float(res.phase), gain=complex(res.gain),
                  nmse_pilots=float(res.nmse_pilots))


def _round_fields(meta: dict, samples: np.ndarray) -> tuple[dict, int, int, float]:
    """(meta with round / attempt / rate / centre frequency / air / hw checked, d, n_symbols, alpha_u)."""
    d = _number(meta, "d", int, 1, 100_000_000)
    n_sym = _number(meta, "n_symbols", int, 1, 1_000_000_000)
    alpha_u = _number(meta, "alpha_u", float, 1e-300, 1e300)
    round_index = _number(meta, "round", int, 0, 10**9)
    attempt = _number({"attempt": meta.get("attempt", 0)}, "attempt", int, 0, 10**6)
    sample_rate = _number(meta, "sample_rate", float, 1e-300, 1e15)
    center_freq = meta.get("center_freq")
    if center_freq is not None:
        center_freq = _number(meta, "center_freq", float, -1e15, 1e15)
    if d < 1 or n_sym < (d + 1) // 2:
        raise UserError(f"recording metadata is inconsistent: d={d} needs {(d + 1) // 2} symbols, "
                        f"n_symbols={n_sym}")
    if n_sym > samples.size:
        raise UserError(f"recording metadata is inconsistent: n_symbols={n_sym} but the capture holds only "
                        f"{samples.size} samples")
    meta = {**meta, "round": round_index, "attempt": attempt, "sample_rate": sample_rate, "center_freq": center_freq,
            "air": str(meta.get("air", ""))[:100], "hw": str(meta.get("hw", ""))[:200]}
    return meta, d, n_sym, alpha_u


def _stats(path, meta, samples, res, agg, d, n_sym, alpha_u, **receiver) -> dict:
    out = {
        "path": str(path), "round": meta["round"], "attempt": meta["attempt"],
        "ok": bool(res.ok), "reason": res.reason, "aggregate": agg, "d": d, "n_symbols": n_sym,
        "alpha_u": alpha_u, "timing": int(res.timing), **receiver, "rho": float(res.rho),
        "noise_var": float(res.noise_var),
        **aggregate_noise(meta, float(res.noise_var) if res.ok else float("nan"), alpha_u, agg),
        "sample_rate": meta["sample_rate"], "center_freq": meta["center_freq"],
        "n_samples": int(samples.size), "air": meta.get("air", ""), "hw": meta.get("hw", ""),
    }
    if agg is not None:
        out["aggregate_norm"] = float(np.linalg.norm(agg))
    return out


def replay_ofdm(recording_path, samples: np.ndarray, meta: dict, phy) -> dict:
    """An OFDM recording (radio/recording.ofdm_round_meta): ``phy.ofdm.demodulate`` with the recorded
    superposed reference per subcarrier, data carriers, OFDM symbol count and receiver settings (timing
    search, FFT back-off, phase-noise prior), so the aggregate is the one the live receiver returned.
    Besides :func:`replay`'s keys: ``waveform`` 'ofdm', ``ofdm_symbols``, ``data_carriers``, ``cfo``
    (the receiver's, from the training), ``phase`` (the common phase tracked on the last payload symbol),
    ``gain`` (mean estimated channel over the subcarriers that carry the reference; the clients
    pre-equalise, so |gain| ~ 1) and ``gain_abs_min`` / ``gain_abs_max`` over those subcarriers."""
    from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
    from otafl_sdr.phy.packing import unpack_reals
    from otafl_sdr.radio.recording import decode_complex

    meta, d, n_sym, alpha_u = _round_fields(meta, samples)
    lay = OfdmLayout.from_phy(phy)
    od = (meta.get("extra") or {}).get("ofdm") if isinstance(meta.get("extra"), dict) else None
    where = "recording metadata 'otafl:extra.ofdm'"
    if not isinstance(od, dict):
        raise UserError(f"{where} is missing: an OFDM recording carries its reference, carriers and symbol count there")
    missing = [k for k in ("n_ofdm", "carriers", "ref_amplitude", "search", "backoff", "phase_noise") if k not in od]
    if missing:
        raise UserError(f"{where} lacks {', '.join(missing)} (written before OFDM replay was built?)")
    n_ofdm = _number(od, "n_ofdm", int, 0, 10**9, where=where)
    backoff = _number(od, "backoff", int, 0, lay.cp, where=where)
    search = _number(od, "search", int, 1, samples.size, where=where)
    phase_noise = _number(od, "phase_noise", float, 0.0, 10.0, where=where)
    car, ref = od["carriers"], od["ref_amplitude"]
    if not (isinstance(car, list) and 1 <= len(car) <= lay.used
            and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < lay.used for c in car)
            and len(set(car)) == len(car) and not set(car) & set(lay.pilot_pos.tolist())):
        raise UserError(f"{where} 'carriers' is not a list of distinct data subcarriers in [0, {lay.used})")
    try:
        A = np.array([decode_complex(a) for a in ref], dtype=np.complex128) if isinstance(ref, list) else None
    except (TypeError, ValueError, OverflowError):
        A = None
    if A is None or A.shape != (lay.used,) or not np.all(np.isfinite(A)):
        raise UserError(f"{where} 'ref_amplitude' is not {lay.used} finite numbers or [re, im] pairs")
    if n_sym > n_ofdm * len(car):
        raise UserError(f"recording metadata is inconsistent: {n_sym} symbols do not fit {n_ofdm} OFDM symbols "
                        f"of {len(car)} data carriers")
    need = lay.frame_symbols(n_ofdm) * lay.symbol_len
    try:
        with np.errstate(all="ignore"):
            res = demodulate(samples, lay, n_sym, np.asarray(car, np.int64), n_ofdm, A,
                             search=max(min(search, samples.size - need), 1), backoff=backoff,
                             smoothing=phy.ofdm_smoothing, phase_noise=phase_noise)
    except (ValueError, IndexError, ArithmeticError, MemoryError) as e:
        raise UserError(f"recording '{recording_path}' cannot be demodulated with its own metadata "
                        f"({type(e).__name__}); it is inconsistent") from None
    agg = unpack_reals(res.symbols, d) / alpha_u if res.ok else None
    tx = A != 0
    G = res.gain[tx] if res.gain is not None and np.any(tx) else np.zeros(1, complex)
    phase = res.phase[-1] if res.phase is not None and len(res.phase) else 0.0
    return _stats(recording_path, meta, samples, res, agg, d, n_sym, alpha_u, waveform="ofdm",
                  ofdm_symbols=n_ofdm, data_carriers=len(car), cfo=float(res.extra.get("cfo", 0.0)),
                  phase=float(phase), gain=complex(np.mean(G)), gain_abs_min=float(np.min(np.abs(G))),
                  gain_abs_max=float(np.max(np.abs(G))), nmse_pilots=float("nan"))


def aggregate_noise(meta: dict, noise_var: float, alpha_u: float, agg) -> dict:
    """The aggregate's noise std per real coordinate (sigma_eff, eq. 15-16 of paper 000).

    The receiver measures the noise on the reference slots (preamble and pilots), where the jammer is gated
    off (``Modem.jammer_mask``): that is the channel's share only, ``sigma_channel_measured`` =
    sqrt(noise_var) / alpha_u. The jammer adds |h_cj| alpha_cj / alpha_u (``sigma_jammer``, from the
    recording's alpha_cj and h_cj) in the payload slots alone, where the clients' unknown sum hides it, so
    ``sigma_eff_measured`` = sqrt(noise_var + |h_cj alpha_cj|^2) / alpha_u (``sigma_eff_basis`` says which
    parts were measured; NaN for a jammed recording without h_cj). ``sigma_eff_planned`` is the plan's
    sqrt(sigma_c2 + |h_cj alpha_cj|^2) / alpha_u; ``aggregate_rms`` (||aggregate|| / sqrt(d), signal and
    noise together) bounds the delivered noise from above: a sigma_eff_measured well above it says the
    jammer did not deliver what was planned."""
    alpha_cj = _number({"alpha_cj": meta.get("alpha_cj", 0.0)}, "alpha_cj", float, 0.0, 1e300)
    h_cj = None
    if meta.get("h_cj") is not None:
        from otafl_sdr.radio.recording import decode_complex
        try:
            z = decode_complex(meta["h_cj"])
        except (TypeError, ValueError, OverflowError):
            z = None
        if z is None or not (math.isfinite(z.real) and math.isfinite(z.imag)):
            raise UserError("recording metadata 'h_cj' is not a finite number or [re, im] pair")
        h_cj = abs(z)
    jam = 0.0 if alpha_cj == 0 else (None if h_cj is None else (h_cj * alpha_cj) ** 2)
    out = {"sigma_channel_measured": float(np.sqrt(noise_var) / alpha_u),
           "sigma_jammer": float(np.sqrt(jam) / alpha_u) if jam is not None else float("nan"),
           "sigma_eff_measured": float(np.sqrt(noise_var + jam) / alpha_u) if jam is not None else float("nan"),
           "sigma_eff_basis": ("measured on the reference slots (no jammer)" if alpha_cj == 0 else
                               "channel noise measured on the reference slots + the jammer's share |h_cj| alpha_cj "
                               "/ alpha_u from the recording (gated off the reference: not measurable there)"
                               if jam is not None else "channel noise only: the recording has no h_cj (older "
                               "recording), the jammer's share is unknown"),
           "aggregate_rms": float(np.linalg.norm(agg) / np.sqrt(len(agg))) if agg is not None else float("nan")}
    sigma_c2 = meta.get("sigma_c2")
    ok = isinstance(sigma_c2, (int, float)) and not isinstance(sigma_c2, bool) and math.isfinite(sigma_c2) \
        and sigma_c2 >= 0 and jam is not None
    out["sigma_eff_planned"] = float(np.sqrt(sigma_c2 + jam) / alpha_u) if ok else float("nan")
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
    with np.errstate(all="ignore"):           # figures of a garbage capture are inf / nan, printed as such
        stats = replay(args.recording)
    if args.out:
        if stats["aggregate"] is None:
            raise UserError(f"round {stats['round']}: burst lost ({stats['reason']}); nothing to save")
        out = Path(args.out)
        if not out.parent.is_dir():
            raise UserError(f"--out: folder '{out.parent}' does not exist")
        try:
            np.save(out, stats["aggregate"])
        except OSError as e:
            raise UserError(f"--out: cannot write '{out}' ({e.strerror or type(e).__name__})") from None
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
            if stats["waveform"] == "ofdm":
                print(f"  OFDM: {stats['ofdm_symbols']} payload symbols on {stats['data_carriers']} data carriers, "
                      f"timing {stats['timing']} samples, cfo {stats['cfo']:.3e} cycles/sample, last phase "
                      f"{stats['phase']:.4f} rad, |gain| {stats['gain_abs_min']:.4f}..{stats['gain_abs_max']:.4f}, "
                      f"rho {stats['rho']:.3f}")
                print(f"  noise var {stats['noise_var']:.4g} (training symbols), "
                      f"||aggregate|| {stats['aggregate_norm']:.6g}")
            else:
                print(f"  timing {stats['timing']} samples, cfo {stats['cfo']:.3e} cycles/sample, "
                      f"phase {stats['phase']:.4f} rad, |gain| {abs(g):.4f}, rho {stats['rho']:.3f}")
                print(f"  pilot NMSE {stats['nmse_pilots']:.3e}, noise var {stats['noise_var']:.4g} (reference slots), "
                      f"||aggregate|| {stats['aggregate_norm']:.6g}")
            print(f"  sigma_eff {stats['sigma_eff_measured']:.4g} (planned {stats['sigma_eff_planned']:.4g}; channel "
                  f"{stats['sigma_channel_measured']:.4g} measured, jammer {stats['sigma_jammer']:.4g}): "
                  f"{stats['sigma_eff_basis']}")
            if args.out:
                print(f"  aggregate saved to {args.out}")
    return 0 if stats["ok"] else 1


def cli_replay(args_list: list[str]) -> int:
    """Stand-alone entry (``python -m otafl_sdr.experiment.replay RECORDING``); errors print one line, exit 2."""
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
