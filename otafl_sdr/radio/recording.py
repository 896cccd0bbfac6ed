"""SigMF recording of a round's received IQ (issue 3, item 4), written and read with the ``sigmf`` package.

One round = one SigMF pair ``round_0003.sigmf-data`` (complex64 little-endian, ``cf32_le``) +
``round_0003.sigmf-meta``. The global object holds the SigMF core fields (sample rate, datatype, hw,
recorder, description) plus an ``otafl:`` namespace with everything the phy modem needs to demodulate the
round offline and to scale the result (round, seed, alpha_u, d, n_symbols, ref_amplitude, the
``[phy]`` parameters); the capture holds the centre frequency and the time. Nothing here imports
GNU Radio: ``otafl-sdr replay`` runs on any machine.

How an air hands IQ to the recorder (the contract with the loopback/uhd airs and the orchestrator):
when ``cfg.air.record_iq`` is true, an air puts the receiver's samples in ``Reception.extra["iq"]``
(complex64, the exact samples it demodulated) and the metadata from :func:`round_meta` in
``Reception.extra["iq_meta"]``; the orchestrator, which owns the results folder, calls
``Recorder(out / "iq").record(round, rec.extra.pop("iq"), rec.extra.pop("iq_meta"), attempt)``.
When ``record_iq`` is false the airs put nothing there (no copy of the samples is kept).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from otafl_sdr.errors import UserError

if TYPE_CHECKING:
    from otafl_sdr.config.schema import Config
    from otafl_sdr.transmission import RoundPlan

NS = "otafl"                       # SigMF extension namespace of this project
NS_VERSION = "1.0.0"
DATATYPE = "cf32_le"
SUFFIX_DATA = ".sigmf-data"
SUFFIX_META = ".sigmf-meta"
# metadata keys a recording must carry to be demodulated offline
MODEM_OPTIONS = ("phase_noise", "fractional_timing", "correct_gain")   # phy.Modem keyword options
REQUIRED = ("sample_rate", "round", "alpha_u", "d", "n_symbols", "ref_amplitude", "phy")
# SigMF core keys (spec names; the sigmf package's own constants moved between versions)
K_DATATYPE, K_SAMPLE_RATE, K_NUM_CHANNELS = "core:datatype", "core:sample_rate", "core:num_channels"
K_RECORDER, K_DESCRIPTION, K_EXTENSIONS, K_HW = "core:recorder", "core:description", "core:extensions", "core:hw"
K_DATETIME, K_FREQUENCY = "core:datetime", "core:frequency"
OPTIONAL = ("modem", "center_freq", "seed", "air", "hw", "attempt", "sigma_c2", "alpha_cj", "h_cj", "clients",
            "t0", "description", "datetime", "extra", "alpha", "csi", "fault")


def round_name(round_: int, attempt: int = 0) -> str:
    """``round_0003`` (attempt 0) or ``round_0003_try1`` for a retried burst."""
    return f"round_{int(round_):04d}" + (f"_try{int(attempt)}" if attempt else "")


def modem_options(modem) -> dict:
    """The keyword options a ``phy.Modem`` was built with (so that replay rebuilds the same receiver)."""
    return {k: getattr(modem, k) for k in MODEM_OPTIONS if hasattr(modem, k)}


def encode_complex(z: complex) -> float | list:
    """JSON form of a complex number: a float when real, else [re, im]."""
    z = complex(z)
    return z.real if z.imag == 0 else [z.real, z.imag]


def decode_complex(v) -> complex:
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return complex(float(v[0]), float(v[1]))
    return complex(float(v))


def round_meta(cfg: "Config", plan: "RoundPlan", *, sample_rate: float, ref_amplitude: complex,
               n_symbols: int | None = None, modem=None, center_freq: float | None = None,
               air: str | None = None, hw: str = "", attempt: int = 0, t0: float | None = None,
               extra: dict | None = None, annotation_start: int = 0) -> dict:
    """The metadata dict an air puts in ``Reception.extra["iq_meta"]`` (see the module docstring).

    ref_amplitude: the value the air passed to ``Modem.demodulate`` (reference amplitude of the
    superposed preamble); modem: the ``phy.Modem`` the air demodulated with (its options are kept);
    sample_rate / center_freq: of the receiver (loopback: nominal values); annotation_start: the sample of
    the capture where the bursts arrive (``burst_annotations``)."""
    d = int(plan.dim)
    return {
        "sample_rate": float(sample_rate), "center_freq": float(center_freq if center_freq is not None
                                                                 else cfg.uhd.freq),
        # alpha_u as the payload went out: x the round's planned DAC scale (uhd: radio/uhd_power.py)
        "round": int(plan.round), "seed": int(cfg.run.seed), "d": d,
        "alpha_u": float(plan.alpha_u) * float(plan.extra.get("tx_scale", 1.0)),
        "n_symbols": int(n_symbols if n_symbols is not None else (d + 1) // 2),
        "ref_amplitude": encode_complex(ref_amplitude), "phy": dataclasses.asdict(cfg.phy),
        "modem": modem_options(modem) if modem is not None else {},
        "air": air or cfg.air.name, "hw": hw, "attempt": int(attempt), "sigma_c2": float(plan.sigma_c2),
        "alpha_cj": float(plan.alpha_cj), "h_cj": encode_complex(plan.h_cj),
        "clients": int(sum(m != "silent" for m in plan.mode)),
        "t0": t0, "extra": extra or {},
        # what the clients did: each one's power factor alpha_i (eq. 14) and the channel it pre-inverted
        "alpha": [encode_complex(complex(a)) for a in np.asarray(plan.alpha).ravel()],
        "csi": [encode_complex(complex(h)) for h in np.asarray(plan.extra.get("csi", plan.h)).ravel()],
        "annotations": burst_annotations(modem, n_symbols if n_symbols is not None else (d + 1) // 2, plan,
                                         annotation_start) if modem is not None else [],
    }


def burst_annotations(modem, n_symbols: int, plan: "RoundPlan", start: int = 0) -> list[dict]:
    """SigMF annotations of one round's superposed bursts in a capture whose sample ``start`` is where the
    bursts (guard included, as ``Modem.modulate`` returns them) arrive: every client pre-compensates its
    delay, so all transmitting clients occupy the same window. Segments are at the symbols' pulse centres:
    the preamble, the payload with its boosted pilots, the jammer's window (payload slots only: it is gated
    out of the reference, ``Modem.jammer_mask``), and one annotation per transmitting client (alpha_i, mode)."""
    lay = modem.layout(n_symbols)
    sps, centre = modem.sps, start + modem.guard + (modem.ntaps - 1) // 2 - modem.sps // 2

    def seg(a: int, b: int, label: str, comment: str, **extra) -> dict:
        return {"start": int(centre + a * sps), "length": int((b - a) * sps), "label": label, "comment": comment,
                **extra}

    out = [seg(0, lay.preamble_len, "preamble", f"{lay.preamble_len // lay.zc_len} x Zadoff-Chu({lay.zc_len}), "
               f"sent by every client scaled by its reference gain"),
           seg(lay.preamble_len, lay.n_frame, "payload",
               f"{n_symbols} payload symbols (2 reals each) with a pilot of amplitude {lay.pilot_amplitude:.3g} "
               f"after every {lay.pilot_spacing} symbols ({lay.n_pilots} pilots)")]
    if plan.alpha_cj > 0:
        out.append(seg(lay.preamble_len, lay.n_frame, "jammer", f"artificial noise, alpha_cj = {plan.alpha_cj:.6g}, "
                       "gated off in the pilot slots"))
    for i, (a, mode) in enumerate(zip(np.asarray(plan.alpha).ravel(), plan.mode)):
        if mode != "silent" and a != 0:
            out.append(seg(0, lay.n_frame, f"client {i}", f"mode {mode}, alpha = {complex(a):.6g}", client=i))
    return out


def ofdm_round_meta(cfg: "Config", plan: "RoundPlan", lay, n_ofdm: int, carriers, start: int, *,
                    sample_rate: float, ref_amplitude, air: str, hw: str = "", receiver: dict | None = None) -> dict:
    """``round_meta`` of an OFDM round (phy/ofdm.py): ``ref_amplitude`` the mean superposed reference, the
    per-subcarrier one, the round's data carriers and the receiver's settings (``receiver``: ``search``,
    the first-prefix positions 0..search-1 it tried, in the recording's samples; ``backoff``;
    ``phase_noise``: what ``phy.ofdm.demodulate`` was called with, so that replay repeats it) under
    ``extra["ofdm"]``, and one annotation per OFDM symbol (``start``: the sample where the first training
    symbol's prefix begins in the recording)."""
    A = np.asarray(ref_amplitude, dtype=np.complex128)
    carriers = [int(c) for c in np.asarray(carriers).ravel()]
    meta = round_meta(cfg, plan, sample_rate=sample_rate, ref_amplitude=complex(np.mean(A)), air=air, hw=hw,
                      extra={"ofdm": {"n_ofdm": int(n_ofdm), "carriers": carriers,
                                      "ref_amplitude": [encode_complex(a) for a in A], **(receiver or {})}})
    L, notes = lay.symbol_len, []
    for s in range(lay.train + int(n_ofdm)):
        kind = "training" if s < lay.train else "payload"
        what = (f"training symbol {s}: every occupied subcarrier a pre-equalised Zadoff-Chu value" if s < lay.train
                else f"payload symbol {s - lay.train}: {len(carriers)} data subcarriers, {len(lay.pilot_pos)} comb pilots")
        notes.append({"start": int(start + s * L), "length": int(L), "label": f"ofdm {kind}",
                      "comment": f"{what}; cyclic prefix {lay.cp} + FFT {lay.fft} samples", "ofdm_symbol": s})
    if plan.alpha_cj > 0:
        notes.append({"start": int(start + lay.train * L), "length": int(n_ofdm * L), "label": "jammer",
                      "comment": f"artificial noise on the payload slots, alpha_cj = {plan.alpha_cj:.6g}"})
    meta["annotations"] = notes
    return meta


def mark_fault(meta: dict, undelivered: dict) -> dict:
    """``meta`` with the attempt's fault marked: ``otafl:fault`` (what was not delivered) and an annotation
    labelled ``fault`` over the whole capture: its protective noise was not delivered as planned, the
    ledger charged it at the noise that was there (rounds/accounting.fault_charge), and it was not used."""
    text = "protective noise not delivered: " + "; ".join(f"{k} {v}" for k, v in sorted(undelivered.items()))
    note = {"start": 0, "length": 2 ** 62, "label": "fault",
            "comment": text + "; charged in the ledger at the noise delivered; not used for learning"}
    return {**meta, "fault": text, "annotations": [note] + list(meta.get("annotations") or [])}


def _check_meta(meta: dict) -> None:
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise ValueError(f"recording metadata lacks {', '.join(missing)}")
    if not (math.isfinite(float(meta["sample_rate"])) and float(meta["sample_rate"]) > 0):
        raise ValueError(f"sample_rate must be > 0, got {meta['sample_rate']!r}")
    if not float(meta["alpha_u"]) > 0:
        raise ValueError(f"alpha_u must be > 0, got {meta['alpha_u']!r}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, complex):
        return [v.real, v.imag]
    return v


def record_round(path_dir: str | Path, round_: int, samples: np.ndarray, meta: dict,
                 attempt: int | None = None) -> Path:
    """Write ``path_dir/round_NNNN.sigmf-data`` + ``.sigmf-meta``; returns the ``.sigmf-meta`` path."""
    from sigmf import SigMFFile

    _check_meta(meta)
    attempt = int(meta.get("attempt", 0) if attempt is None else attempt)
    out = Path(path_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = out / round_name(round_, attempt)
    x = np.ascontiguousarray(samples, dtype="<c8").ravel()
    if not np.all(np.isfinite(x)):
        raise ValueError("received IQ holds NaN or inf; refusing to record it")
    data_path = base.with_suffix(SUFFIX_DATA)
    x.tofile(data_path)
    glob = {
        K_DATATYPE: DATATYPE,
        K_SAMPLE_RATE: float(meta["sample_rate"]),
        K_NUM_CHANNELS: 1,
        K_RECORDER: "otafl-sdr",
        K_DESCRIPTION: meta.get("description") or
        f"otafl-sdr round {int(round_)} received IQ ({meta.get('air', '?')} air)",
        K_EXTENSIONS: [{"name": NS, "version": NS_VERSION, "optional": True}],
    }
    if meta.get("hw"):
        glob[K_HW] = str(meta["hw"])
    keep = {k: meta[k] for k in REQUIRED + OPTIONAL
            if k in meta and k not in ("sample_rate", "center_freq", "hw", "datetime")}
    keep["round"] = int(round_)
    keep["attempt"] = attempt
    for k, v in keep.items():
        glob[f"{NS}:{k}"] = _jsonable(v)
    smf = SigMFFile(data_file=str(data_path), global_info=glob)
    for a in meta.get("annotations") or []:
        first, n = max(int(a["start"]), 0), int(a["length"]) - max(-int(a["start"]), 0)
        n = min(n, len(x) - first)
        if n > 0:
            note = {"core:label": a["label"], "core:comment": a.get("comment", "")}
            if "client" in a:
                note[f"{NS}:client"] = int(a["client"])
            smf.add_annotation(first, n, metadata=note)
    capture = {K_DATETIME: meta.get("datetime") or
               _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    if meta.get("center_freq") is not None:
        capture[K_FREQUENCY] = float(meta["center_freq"])
    smf.add_capture(0, metadata=capture)
    smf.validate()
    meta_path = base.with_suffix(SUFFIX_META)
    smf.tofile(str(meta_path))
    return meta_path


class Recorder:
    """``Recorder(out_dir).record(round, samples, meta, attempt=0)``: one SigMF pair per round."""

    def __init__(self, out_dir: str | Path):
        self.out_dir = Path(out_dir)
        self.paths: list[Path] = []

    def record(self, round_: int, samples: np.ndarray, meta: dict, attempt: int | None = None) -> Path:
        p = record_round(self.out_dir, round_, samples, meta, attempt)
        self.paths.append(p)
        return p


def _meta_path(path: str | Path) -> Path:
    p = Path(path)
    if p.suffix in (SUFFIX_DATA, SUFFIX_META):
        p = p.with_suffix(SUFFIX_META)
    elif p.is_dir():
        raise UserError(f"'{p}' is a folder; give one recording (e.g. {p}/round_0001.sigmf-meta)")
    else:
        p = p.with_name(p.name + SUFFIX_META)
    return p


def read_recording(path: str | Path) -> tuple[np.ndarray, dict]:
    """Read a recording (base name, ``.sigmf-meta`` or ``.sigmf-data``) -> (complex64 samples, meta).

    ``meta`` has the same keys :func:`round_meta` writes (``sample_rate`` and ``center_freq`` taken
    from the SigMF core fields). Raises UserError (one line) for a missing, corrupt or foreign file."""
    from sigmf import sigmffile
    from sigmf.error import SigMFError

    mp = _meta_path(path)
    dp = mp.with_suffix(SUFFIX_DATA)
    if not mp.is_file():
        raise UserError(f"recording '{mp}' not found")
    if not dp.is_file():
        raise UserError(f"recording data '{dp}' not found (a SigMF recording is a .sigmf-meta + .sigmf-data pair)")
    try:
        smf = sigmffile.fromfile(str(mp))
    except (SigMFError, json.JSONDecodeError, KeyError, ValueError) as e:
        raise UserError(f"recording '{mp}' is not valid SigMF: {type(e).__name__}: {e}".splitlines()[0]) from None
    glob = smf.get_global_info()
    dtype = glob.get(K_DATATYPE)
    if dtype != DATATYPE:
        raise UserError(f"recording '{mp}' has datatype {dtype!r}; otafl-sdr records and replays {DATATYPE}")
    meta: dict = {k[len(NS) + 1:]: v for k, v in glob.items() if k.startswith(NS + ":")}
    meta["sample_rate"] = glob.get(K_SAMPLE_RATE)
    caps = smf.get_captures()
    meta["center_freq"] = caps[0].get(K_FREQUENCY) if caps else None
    meta["datetime"] = caps[0].get(K_DATETIME) if caps else None
    meta["hw"] = glob.get(K_HW, meta.get("hw", ""))
    try:
        _check_meta(meta)
    except (ValueError, TypeError) as e:
        raise UserError(f"recording '{mp}' was not written by otafl-sdr or is incomplete: {e}") from None
    x = np.fromfile(dp, dtype="<c8")
    if x.size == 0:
        raise UserError(f"recording data '{dp}' is empty")
    return x, meta
