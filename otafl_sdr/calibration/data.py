"""The calibration file: what ``otafl-sdr calibrate`` measured, its format and its checks (issue 5).

A calibration file (TOML, or JSON by extension) holds what ``otafl-sdr calibrate`` measured: when
(``created``, UTC), on which air, the setup it is valid for (frequency, rate, TX/RX gains, the device
addresses and serials of every radio, the client ids; on the loopback air the run seed, sigma_c2 and
the ``[loopback]`` settings that fix the channel block's offsets), the pilots used, and per client the
complex gain h_i with its standard error, the carrier offset and its standard error, the arrival delay
(samples) and the pilot SNR; the jammer's path h_cj likewise; the noise floor sigma_c2 with its
standard error; per transmitter the transmit-power fit (:mod:`otafl_sdr.calibration.power_fit`).
Loopback calibrations also store the channel block's ground truth next to each estimate.

A run with ``air.csi = "calibrated"`` loads it through :meth:`CalibratedCsi.for_run`, which refuses a
file that does not match the run (one-line UserError naming what differs), logs one warning line when
it is older than ``calibration.max_age_days``, and raises a clear UserError for a missing or corrupt
file: never a silent fall-back to perfect CSI.
The CSI a run takes from it: calibration/csi.py."""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import tomli_w

from otafl_sdr.errors import UserError

FORMAT = "otafl-sdr calibration"
VERSION = 1
log = logging.getLogger("otafl_sdr.calibration")

FREQ_TOL_HZ = 1.0
RATE_TOL = 1e-9           # relative
GAIN_TOL_DB = 0.01
LOOPBACK_KEYS = ("client_cfo_max", "client_delay_max", "client_phase", "rx_cfo", "rx_delay", "rx_phase_noise",
                 "residual_cfo", "residual_delay", "residual_phase")
SIGMA_TOL = 1e-12         # relative, loopback sigma_c2 of the channel block


# ------------------------------------------------------------------------------------------------
@dataclass
class LinkRecord:
    """One transmitter's measured link. h: complex gain per unit digital amplitude (phase referred to
    its pilot's centre); h_std: sqrt(E|h_hat - h|^2); h_spread: std of the repeats' estimates (0 for one
    repeat); cfo / cfo_std in cycles/sample; delay: arrival delay in samples (fractional, the
    receiver's own delay included); snr_db: pilot SNR per symbol; truth: the loopback channel block's
    values {h, cfo, delay} (None on real radios)."""

    id: str
    h: complex
    h_std: float
    cfo: float = 0.0
    cfo_std: float = 0.0
    delay: float = 0.0
    snr_db: float = float("nan")
    h_spread: float = 0.0
    truth: dict | None = None
    t_ref: float | None = None        # device time (UTC s) h's phase refers to (uhd, phase referenced), else None
    phase_noise: float = 0.0          # the link's Wiener phase variance (rad^2 per sample) its pilots showed
                                      # (calibration/phase_wander.py); the per-round sounding's offset error uses it

    @property
    def rel_std(self) -> float:
        return self.h_std / abs(self.h) if self.h else float("inf")

    def rel_error(self) -> complex:
        """e = h_hat / h_true - 1 (loopback only: needs the ground truth)."""
        if not self.truth:
            raise UserError(f"link '{self.id}' has no ground truth (not a loopback calibration)")
        return complex(self.h / self.truth["h"] - 1)


@dataclass
class CalibrationFile:
    """The whole file (see the module docstring). ``noise``: {sigma_c2, sigma_c2_std, sigma_c2_raw,
    dc, symbols[, truth]}; ``power``: {transmitter id: PowerFit.to_dict()}."""

    air: str
    setup: dict
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    pilots: dict = field(default_factory=dict)
    clients: list[LinkRecord] | None = None
    jammer: LinkRecord | None = None
    noise: dict | None = None
    power: dict | None = None
    jammer_noise: dict | None = None     # JammerNoise.to_dict(): the jammer's delivered noise (jammer_noise.py)
    tx_plan: dict | None = None          # `calibrate gains`: the proposed per-radio TX gains (tx_gains.plan_gains)
    ofdm: dict | None = None             # phy.waveform = "ofdm": per-subcarrier H_ik (calibration/ofdm_channel.py)

    # ------------------------------------------------------------------ derived
    @property
    def created_at(self) -> datetime:
        t = datetime.fromisoformat(self.created)
        return t if t.tzinfo else t.replace(tzinfo=timezone.utc)

    def age_days(self, now: datetime | None = None) -> float:
        now = now or datetime.now(timezone.utc)
        return (now - self.created_at).total_seconds() / 86400.0

    @property
    def sigma_c2(self) -> float:
        if not self.noise:
            raise UserError("the calibration file holds no noise floor")
        return float(self.noise["sigma_c2"])

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict:
        d: dict = {"format": FORMAT, "version": VERSION, "created": self.created, "air": self.air,
                   "setup": _plain(self.setup), "pilots": _plain(self.pilots)}
        if self.clients is not None:
            d["clients"] = [_link_to_dict(c) for c in self.clients]
        if self.jammer is not None:
            d["jammer"] = _link_to_dict(self.jammer)
        if self.noise is not None:
            d["noise"] = _plain(self.noise)
        if self.power is not None:
            d["power"] = _plain(self.power)
        if self.jammer_noise is not None:
            d["jammer_noise"] = _plain(self.jammer_noise)
        if self.tx_plan is not None:
            d["tx_plan"] = _plain(self.tx_plan)
        if self.ofdm is not None:
            d["ofdm"] = _plain(self.ofdm)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CalibrationFile":
        """Parse and check types/values; raises ValueError/KeyError/TypeError on a malformed dict."""
        if d.get("format") != FORMAT:
            raise ValueError(f"'format' is not '{FORMAT}'")
        if d.get("version") != VERSION:
            raise ValueError(f"unsupported version {d.get('version')!r} (this reader knows {VERSION})")
        air = d["air"]
        if air not in ("loopback", "uhd"):
            raise ValueError(f"'air' must be 'loopback' or 'uhd', got {air!r}")
        cal = cls(air=air, setup=dict(d["setup"]), created=str(d["created"]), pilots=dict(d.get("pilots", {})))
        cal.created_at  # noqa: B018 - validates the date
        if "clients" in d:
            cal.clients = [_link_from_dict(c, f"clients[{i}]") for i, c in enumerate(d["clients"])]
            if not cal.clients:
                raise ValueError("'clients' is empty")
        if "jammer" in d:
            cal.jammer = _link_from_dict(d["jammer"], "jammer")
        if "noise" in d:
            n = dict(d["noise"])
            for k in ("sigma_c2", "sigma_c2_std"):
                v = float(n[k])
                if not (math.isfinite(v) and v >= 0) or (k == "sigma_c2" and v == 0):
                    raise ValueError(f"noise.{k} = {n[k]!r} is not a valid variance")
            cal.noise = n
        if "power" in d:
            from otafl_sdr.calibration.power_fit import PowerFit
            cal.power = {str(k): dict(v) for k, v in d["power"].items()}
            for k, v in cal.power.items():
                PowerFit.from_dict(v)
        if "jammer_noise" in d:
            from otafl_sdr.calibration.jammer_noise import JammerNoise
            JammerNoise.from_dict(dict(d["jammer_noise"]))             # validates
            cal.jammer_noise = dict(d["jammer_noise"])
        if "tx_plan" in d:
            cal.tx_plan = dict(d["tx_plan"])
        if "ofdm" in d:
            from otafl_sdr.calibration.ofdm_channel import check_section
            cal.ofdm = check_section(d["ofdm"])
        return cal

    def save(self, path: str | Path) -> Path:
        """Write atomically (TOML for .toml, JSON for .json)."""
        path = Path(path)
        fmt = _format_of(path)
        d = self.to_dict()
        text = tomli_w.dumps(d) if fmt == "toml" else json.dumps(d, indent=1) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "CalibrationFile":
        """Read a calibration file; UserError (one line) if it is missing or corrupt."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"calibration file '{path}' not found; make one with `otafl-sdr calibrate all "
                            f"--config CONFIG --out {path}`")
        fmt = _format_of(path)
        try:
            text = path.read_text()
            d = tomllib.loads(text) if fmt == "toml" else json.loads(text)
            if not isinstance(d, dict):
                raise ValueError("not a table")
            return cls.from_dict(d)
        except UnicodeDecodeError:
            raise UserError(f"calibration file '{path}' is corrupt (not a text file)") from None
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UserError(f"calibration file '{path}' is corrupt (not valid {fmt.upper()}: {why})") from None
        except KeyError as e:
            raise UserError(f"calibration file '{path}' is corrupt (missing key {e})") from None
        except (ValueError, TypeError, AttributeError, IndexError) as e:
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise UserError(f"calibration file '{path}' is corrupt ({why})") from None


def _format_of(path: Path) -> str:
    ext = path.suffix.lower()
    if ext == ".toml":
        return "toml"
    if ext == ".json":
        return "json"
    raise UserError(f"calibration file '{path}': use a .toml or .json name")


def _plain(x):
    """numpy / complex values -> TOML/JSON-friendly values (complex as [re, im])."""
    if isinstance(x, dict):       # None and NaN (unknown) entries are left out (JSON has no NaN)
        return {str(k): _plain(v) for k, v in x.items()
                if v is not None and not (isinstance(v, (float, np.floating)) and math.isnan(v))}
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in list(x)]
    if isinstance(x, (complex, np.complexfloating)):
        return [float(np.real(x)), float(np.imag(x))]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        return float(x)
    return x


def _complex(v, what: str) -> complex:
    if not (isinstance(v, list) and len(v) == 2):
        raise ValueError(f"{what} must be [re, im], got {v!r}")
    z = complex(float(v[0]), float(v[1]))
    if not (math.isfinite(z.real) and math.isfinite(z.imag)):
        raise ValueError(f"{what} is not finite")
    return z


def _link_to_dict(r: LinkRecord) -> dict:
    d = {"id": r.id, "h": r.h, "h_std": r.h_std, "h_spread": r.h_spread, "cfo": r.cfo, "cfo_std": r.cfo_std,
         "delay": r.delay, "snr_db": r.snr_db}
    if r.truth:
        d["truth"] = dict(r.truth)
    if r.t_ref is not None:
        d["t_ref"] = float(r.t_ref)
    if r.phase_noise > 0:
        d["phase_noise"] = float(r.phase_noise)
    return _plain(d)


def _link_from_dict(d: dict, where: str) -> LinkRecord:
    h = _complex(d["h"], f"{where}.h")
    if h == 0:
        raise ValueError(f"{where}.h is zero")
    vals = {}
    for k in ("h_std", "cfo", "cfo_std", "delay", "h_spread", "phase_noise"):
        v = float(d.get(k, 0.0))
        if not math.isfinite(v):
            raise ValueError(f"{where}.{k} is not finite")
        vals[k] = v
    if vals["h_std"] < 0 or vals["cfo_std"] < 0:
        raise ValueError(f"{where}: negative standard error")
    if vals["phase_noise"] < 0:
        raise ValueError(f"{where}.phase_noise is negative")
    truth = None
    if "truth" in d:
        t = d["truth"]
        truth = {"h": _complex(t["h"], f"{where}.truth.h"), "cfo": float(t["cfo"]), "delay": float(t["delay"])}
    t_ref = d.get("t_ref")
    if t_ref is not None and not math.isfinite(float(t_ref)):
        raise ValueError(f"{where}.t_ref is not finite")
    return LinkRecord(id=str(d["id"]), h=h, snr_db=float(d.get("snr_db", float("nan"))), truth=truth,
                      t_ref=None if t_ref is None else float(t_ref), **vals)


# ------------------------------------------------------------------------------------------------
# the setup a file is valid for
def device_address(args: str) -> str:
    """A device-address string without the clock/time keys (they do not name the radio)."""
    keep = []
    for part in (p.strip() for p in str(args).split(",")):
        key = part.partition("=")[0].strip()
        if part and key not in ("clock_source", "time_source"):
            keep.append(part)
    return ",".join(keep)


def calibration_air(cfg) -> str:
    """The air a run's calibration is measured on: 'uhd' for uhd runs, else the loopback channel."""
    return "uhd" if cfg.air.name == "uhd" else "loopback"


def run_setup(cfg, K: int, air: str | None = None) -> dict:
    """What a calibration must have been made with to serve this run (see :func:`check_matches`)."""
    u = cfg.uhd
    air = air or calibration_air(cfg)
    s = {"freq": float(u.freq), "rate": float(u.rate), "tx_gain": float(u.tx_gain), "rx_gain": float(u.rx_gain),
         "client_ids": list(range(int(K)))}
    if air == "uhd" and getattr(u, "tx_gains", None):      # per-radio gains (calibration/tx_gains.py)
        s["tx_gains"] = {str(k): float(v) for k, v in dict(u.tx_gains).items()}
    if air == "uhd":
        s["devices"] = {"clients": [device_address(a) for a in u.tx_args],
                        "jammer": device_address(u.jammer_args) if cfg.power.jammer else "",
                        "receiver": device_address(u.rx_args)}
    else:
        s["devices"] = {"clients": [f"loopback:{i}" for i in range(int(K))], "jammer": "loopback:jammer",
                        "receiver": "loopback:rx"}
        s["loopback"] = {"seed": int(cfg.run.seed), "sigma_c2": float(cfg.channel.sigma_c2),
                         **{k: getattr(cfg.loopback, k) for k in LOOPBACK_KEYS}}
    return s


def _fmt_hz(x: float) -> str:
    for div, unit in ((1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz")):
        if abs(x) >= div:
            return f"{x / div:.9g} {unit}"
    return f"{x:g} Hz"


def check_matches(cal: CalibrationFile, cfg, K: int, path: str | Path = "", air: str | None = None) -> None:
    """UserError (one line) naming the first thing in which the file and the run differ."""
    where = f"calibration file '{path}'" if path else "calibration file"
    fix = "recalibrate (`otafl-sdr calibrate all`) or point calibration.file at a matching file"
    run_air = air or calibration_air(cfg)
    if cal.air != run_air:
        raise UserError(f"{where} was measured on the '{cal.air}' air but the run uses '{air or cfg.air.name}'; {fix}")
    s, want = cal.setup, run_setup(cfg, K, run_air)

    def differ(msg: str):
        raise UserError(f"{where} does not match the run: {msg}; {fix}")
    try:
        ids = list(s["client_ids"])
        if len(ids) != K:
            differ(f"it holds {len(ids)} clients, the run has {K} (data.clients)")
        if ids != want["client_ids"]:
            differ(f"client ids {ids} are not the run's {want['client_ids']}")
        if abs(float(s["freq"]) - want["freq"]) > FREQ_TOL_HZ:
            differ(f"measured at {_fmt_hz(float(s['freq']))}, uhd.freq = {_fmt_hz(want['freq'])}")
        if abs(float(s["rate"]) - want["rate"]) > RATE_TOL * want["rate"]:
            differ(f"measured at {float(s['rate']):g} S/s, uhd.rate = {want['rate']:g} S/s")
        for k in ("tx_gain", "rx_gain"):
            if abs(float(s[k]) - want[k]) > GAIN_TOL_DB:
                differ(f"measured with {k} {float(s[k]):g} dB, uhd.{k} = {want[k]:g} dB")
        got_g, want_g = dict(s.get("tx_gains") or {}), dict(want.get("tx_gains") or {})
        for k in sorted(set(got_g) | set(want_g)):
            a, b = got_g.get(k), want_g.get(k)
            if a is None or b is None or abs(float(a) - float(b)) > GAIN_TOL_DB:
                differ(f"measured with uhd.tx_gains['{k}'] = {'unset' if a is None else f'{float(a):g} dB'}, the run "
                       f"has {'unset' if b is None else f'{float(b):g} dB'}")
        dev, wdev = s["devices"], want["devices"]
        for i, (a, b) in enumerate(zip(dev["clients"], wdev["clients"])):
            if a != b:
                differ(f"client {i} was radio '{a}', uhd.tx_args[{i}] is '{b}'")
        if len(dev["clients"]) != len(wdev["clients"]):
            differ(f"{len(dev['clients'])} client radios, the run has {len(wdev['clients'])}")
        for k, key in (("receiver", "uhd.rx_args"), ("jammer", "uhd.jammer_args")):
            if wdev[k] and dev.get(k, "") != wdev[k]:
                differ(f"the {k} was radio '{dev.get(k, '')}', {key} is '{wdev[k]}'")
        if run_air == "loopback":
            lb, wlb = s["loopback"], want["loopback"]
            if int(lb["seed"]) != wlb["seed"]:
                differ(f"made with run.seed = {lb['seed']} (it fixes the loopback offsets), the run has {wlb['seed']}")
            if abs(float(lb["sigma_c2"]) - wlb["sigma_c2"]) > SIGMA_TOL * wlb["sigma_c2"]:
                differ(f"the loopback channel had channel.sigma_c2 = {lb['sigma_c2']:g}, the run has {wlb['sigma_c2']:g}")
            for k in LOOPBACK_KEYS:
                if lb.get(k) != wlb[k]:
                    differ(f"made with loopback.{k} = {lb.get(k)!r}, the run has {wlb[k]!r}")
    except (KeyError, TypeError, ValueError) as e:
        raise UserError(f"{where} is corrupt (setup: {type(e).__name__} {e})") from None


def warn_if_old(cal: CalibrationFile, max_age_days: float, path: str | Path = "") -> bool:
    """One warning line when the file is older than ``max_age_days``; returns whether it warned."""
    age = cal.age_days()
    if age > float(max_age_days):
        log.warning("calibration file '%s' is %.1f days old (calibration.max_age_days = %g); recalibrate "
                    "before trusting the run", path, age, max_age_days)
        return True
    return False


def check_phase_age(cal: CalibrationFile, cfg, path: str | Path = "") -> None:
    """uhd: channel phases older than ``calibration.max_phase_age_min`` minutes are refused (an AD936x
    draws a new LO phase whenever it is tuned, e.g. when a run opens the radios); calibration.session
    measures them in the run itself."""
    limit = float(cfg.calibration.max_phase_age_min)
    if cal.air != "uhd" or limit <= 0:
        return
    minutes = cal.age_days() * 1440.0
    if minutes > limit:
        raise UserError(f"calibration file '{path}': its channel phases are {minutes:.0f} min old "
                        f"(calibration.max_phase_age_min = {limit:g}; a radio's LO phase changes whenever it is "
                        f"tuned); recalibrate, or set calibration.session = true to calibrate in the run")


# ------------------------------------------------------------------------------------------------
def merge(old: CalibrationFile | None, new: CalibrationFile) -> CalibrationFile:
    """``new`` with the sections it lacks taken from ``old`` (same setup: the caller checks); the
    merged file carries the older date when it keeps an old section."""
    if old is None:
        return new
    out = dataclasses.replace(new)
    kept = False
    for k in ("clients", "jammer", "noise", "power", "jammer_noise", "tx_plan", "ofdm"):
        if getattr(out, k) is None and getattr(old, k) is not None:
            setattr(out, k, getattr(old, k))
            kept = True
    if kept:                                       # the file is as old as its oldest section
        out.created = min(old.created_at, new.created_at).isoformat(timespec="seconds")
    if not out.pilots:
        out.pilots = old.pilots
    return out
