"""Typed run configuration: TOML in, dataclasses out, clear errors (naming the key) for bad values.

Every section is a dataclass; ``parse_config`` reads TOML and applies ``--set a.b=value`` overrides
(run_config.load_config adds the checks that need the registered plugins: configure/validation.py).
``to_toml`` writes the resolved config so that a run is reproducible from ``DIR/config.toml``.
Units: ``channel.sigma_c2`` is the noise variance per *real* coordinate (complex baseband noise is
CN(0, 2 sigma_c2) per symbol), so that SNR_i = P_i / (d sigma_c2) as in paper 000, sec. V."""
from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import tomli_w

from otafl_sdr.config.radio import (AirConfig, CalibrationConfig, LoopbackConfig, NetConfig,  # noqa: F401 (re-exported)
                           PhyConfig, UhdConfig)
from otafl_sdr.errors import ConfigError, UserError, did_you_mean


@dataclass
class RunConfig:
    seed: int = 0
    rounds: int = 20            # FL rounds M (Upcycled-FL runs 2M iterations, of which M use clients)
    name: str = "default"
    progress: bool = True       # progress bar (client rounds; iterations where Upcycled-FL runs two per round)
    checkpoint_every: int = 1   # iterations between checkpoints
    torch_threads: int = 2
    eval_every: int = 1
    device: str = "cpu"         # local training on: cpu | cuda | auto (cuda where torch sees a GPU)
    tensorboard: bool = False   # TensorBoard event files in DIR/tensorboard from each round's row (needs tensorboard)
    mlflow: bool = False        # the same to an MLflow store: MLFLOW_TRACKING_URI, else DIR/mlflow (needs mlflow)
    figures: bool = True        # draw the run's figures (PNG, PDF, SVG) at its end; false: none (`otafl-sdr report DIR` draws them)


@dataclass
class DataConfig:
    dataset: str = "digits"           # digits, mnist5k, mnist, fashion_mnist, cifar10, cifar100, femnist, synthetic
    path: str = ""                    # folder of the files: femnist LEAF JSON, mnist IDX, cifar python batches
    download: bool = False            # fetch mnist / fashion_mnist / cifar10 / cifar100 into data.path first
    femnist_classes: str = "a-j"      # class filter, remapped to 0..n-1 (paper 000: 'a'..'j')
    partition: str = "classes_per_client"  # how the pool is split over the clients (otafl-sdr list: partitions)
    clients: int = 10
    classes_per_client: int = 5
    iid_devices: int = 0              # partition iid_noniid_mix: how many clients are IID (paper 004 Fig. 6)
    dirichlet_alpha: float = 0.5
    dominant_fraction: float = 0.8    # dominant_class: share of a client's data from its one dominant class
    unequal_sizes: float = 0.0        # lognormal sigma of client sizes (0 = equal sizes); gives p_i
    test_fraction: float = 0.2
    max_samples: int = 0              # 0 = all
    synthetic_alpha: float = 1.0      # Synthetic(alpha, beta) of FedProx
    synthetic_beta: float = 1.0
    synthetic_iid: bool = False
    synthetic_dim: int = 60
    synthetic_classes: int = 10
    synthetic_samples: int = 4000


@dataclass
class ModelConfig:
    name: str = "mlp"                 # mlp, logreg, cnn, lenet5, cnn2fc, cnn2fc_norm, resnet18 (otafl-sdr list)
    hidden: int = 196                 # paper 000: one hidden layer of 14x14 = 196 units


@dataclass
class TrainConfig:
    local_epochs: int = 2
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.5
    tau: float = 1.0                  # L2 bound on each client's update (Assumption 1), enforced by clipping
    sample_clip: float = 0.0          # per-sample gradient clip C (DP-SGD style; 0 = off); privacy.unit="sample"


@dataclass
class AlgorithmConfig:
    name: str = "fedavg"              # fedavg | fedprox | upcycled_fl | ...
    mu: float = 0.1                   # proximal weight (FedProx, Upcycled-FL)
    # Upcycled-FL lambda_m schedule (paper 000 sec. V): [[last_m, lambda], ...]
    lambda_schedule: list = field(default_factory=lambda: [[25, 0.15], [50, 0.4], [75, 0.9], [80, 1.9]])
    options: dict = field(default_factory=dict)


@dataclass
class PowerConfig:
    policy: str = "cj_adaptive"       # paper 000 decentralised power control (+ jammer)
    max_snr_db: float = 1.0           # SNR_i = P_i / (d sigma_c2), paper 000 sec. V
    alpha_u: float = 0.0              # server scaling; 0 = automatic (see power.alpha_u_quantile)
    alpha_u_quantile: float = 0.5     # auto alpha_u: a client with |h| at this Rayleigh quantile meets P_i at s_i=1
    jammer: bool = True               # cooperative jammer available
    jammer_multiple: float = 7.0      # CJ factor = multiple x Theorem-2 lower bound (paper uses 7)
    jammer_max_snr_db: float = 60.0   # jammer power limit P_cj / (d sigma_c2), dB (rows report cj_capped)
    options: dict = field(default_factory=dict)


@dataclass
class PrivacyConfig:
    eps: float = 1.0                  # target/budget epsilon
    delta: float = 1e-5
    accountant: str = "rdp"           # the accountant that enforces the budget
    report: list = field(default_factory=lambda: ["paper", "rdp", "pld"])
    enforce: bool = True              # refuse a round that would exceed the budget
    unit: str = "client"              # client | client_replace | sample | sample_paper (privacy/sensitivity.py)
    targeting: str = "target"         # target: eps/delta are the TARGET; before round 1 the policy's one privacy
                                      # knob (cj_adaptive: jammer factor, or alpha_u without a jammer) is solved
                                      # by bisection on the tight accountant (privacy.accountant if pld/rdp, else
                                      # pld) so the planned rounds spend [0.99 eps, eps] (privacy/targeting.py);
                                      # unreachable targets are refused at start. paper: the paper's rules
                                      # (auto/fixed alpha_u, jammer = Theorem 2 x power.jammer_multiple).
                                      # (privacy.calibrate, its name before, is read as privacy.targeting)
                                      # noisy_fedavg/noisy_fedprox (paper 002): the knob is the clients' noise
                                      # algorithm.options.sigma (the policy keeps its paper rule); paper: the
                                      # configured sigma (privacy/targeting.py)


@dataclass
class ChannelConfig:
    sigma_c2: float = 1.0             # noise variance per real coordinate
    fading: str = "rayleigh"          # rayleigh | awgn (h = 1)
    jammer_fading: str = "rayleigh"
    multipath: str = "flat"           # flat | exponential | tdl-a | tdl-b | tdl-c (channel/multipath.py; sim, loopback)
    delay_spread_ns: float = 0.0      # RMS delay spread, ns (x uhd.rate -> samples); 0 = flat
    rician_k: float = 0.0             # Rician K (linear) of the first tap; 0 = Rayleigh taps
    # front-end impairments of the radios (channel/front_end.py; sim and loopback; 0 = off, today's channel)
    phase_noise: float = 0.0          # Wiener phase noise of each radio's oscillator, rad per sqrt(sample)
    iq_mag_db: float = 0.0            # IQ gain imbalance of each client and of the receiver, dB (gr-channels iqbal_gen)
    iq_phase_deg: float = 0.0         # IQ phase imbalance of each client and of the receiver, degrees
    dc_offset: float = 0.0            # LO leakage of each transmitter, amplitude relative to its planned RMS amplitude
    pa_a_sat: float = 0.0             # Rapp PA saturation amplitude of each client / its planned RMS amplitude; 0 = linear
    pa_p: float = 2.0                 # Rapp PA smoothness p (large: a hard limiter)
    sro_ppm: float = 0.0              # each client's sample-clock offset, uniform in +-sro_ppm (ppm)
    residual_cfo_hz: float = 0.0      # each transmitter's uncompensated carrier offset, uniform in +-Hz
    doppler_hz: float = 0.0           # max Doppler of each link within a burst (Clarke), Hz; 0 = block fading


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    power: PowerConfig = field(default_factory=PowerConfig)
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    air: AirConfig = field(default_factory=AirConfig)
    phy: PhyConfig = field(default_factory=PhyConfig)
    loopback: LoopbackConfig = field(default_factory=LoopbackConfig)
    uhd: UhdConfig = field(default_factory=UhdConfig)
    net: NetConfig = field(default_factory=NetConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)


MAX_INT = 2**31 - 1          # integer keys are counts, sizes, seeds, ports: 32-bit signed at most
MAX_DEPTH = 8                # nesting of tables / lists in a config value


def _depth(v, d=0) -> int:
    if d > MAX_DEPTH:
        return d
    if isinstance(v, dict):
        return max([_depth(x, d + 1) for x in v.values()] or [d + 1])
    if isinstance(v, list):
        return max([_depth(x, d + 1) for x in v] or [d + 1])
    return d


MAX_STR = 4096               # characters in any string value (a name, a path, an address, device args)
# bidirectional-text controls (a path that reads differently from what it is) and other invisible formats
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 5,000-character string or a deep list stays one short line)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_text(key: str, value: str) -> str:
    """A string value: at most MAX_STR characters, printable (no NUL, control or bidirectional characters)."""
    if len(value) > MAX_STR:
        raise ConfigError(key, f"is {len(value)} characters long; at most {MAX_STR}")
    bad = next((c for c in value if not c.isprintable() or c in _BIDI), None)
    if bad is not None:
        raise ConfigError(key, f"holds the non-printable character U+{ord(bad):04X}; use plain printable text")
    return value


def _numpy_scalar(value: Any) -> Any:
    """A numpy scalar (numpy.int64, numpy.float32, numpy.bool_, numpy.str_) as the Python value it holds."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        return value.item()
    return value


def _plain(key: str, value: Any) -> Any:
    """A list / table value as plain TOML data: numpy scalars converted, strings checked; None, bytes and
    other objects (which TOML cannot hold) refused naming the key."""
    value = _numpy_scalar(value)
    if isinstance(value, dict):
        return {check_text(key, k) if isinstance(k, str) else _bad_key(key, k): _plain(key, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(key, v) for v in value]
    if isinstance(value, str):
        return check_text(key, value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(key, f"holds {value}; only finite numbers are allowed")
    if isinstance(value, (bool, int, float)):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**63 - 1:
            raise ConfigError(key, f"holds {show(value)}, out of range (|value| < 2**63)")
        return value
    raise ConfigError(key, f"holds {show(value)} ({type(value).__name__}); only numbers, strings, booleans, "
                           f"lists and tables are allowed")


def _bad_key(key: str, k: Any):
    raise ConfigError(key, f"has the key {show(k)}; table keys are strings")


# ---------------------------------------------------------------------------------------------
def coerce_value(key: str, typ: Any, value: Any) -> Any:
    """Convert a TOML / command-line / API value to the field's type, or raise ConfigError (numpy scalars
    are read as the Python numbers they hold; None, bytes and other objects are refused)."""
    value = _numpy_scalar(value)
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(key, f"expected true or false, got {show(value)}")
    if typ is int:
        if isinstance(value, bool):
            raise ConfigError(key, f"expected an integer, got {show(value)}")
        v = None
        if isinstance(value, int):
            v = value
        elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
            v = int(value)
        elif isinstance(value, str) and len(value) <= 40:
            try:
                v = int(value)
            except ValueError:
                pass
        if v is None:
            raise ConfigError(key, f"expected an integer, got {show(value)}")
        if abs(v) > MAX_INT:
            raise ConfigError(key, f"{show(v)} is out of range (|value| <= {MAX_INT})")
        return v
    if typ is float:
        if isinstance(value, bool):
            raise ConfigError(key, f"expected a number, got {show(value)}")
        try:
            if isinstance(value, (int, float)):
                v = float(value)
            elif isinstance(value, str) and len(value) <= 400:
                v = float(value)
            else:
                raise ValueError
        except (ValueError, OverflowError):
            raise ConfigError(key, f"expected a finite number, got {show(value)}") from None
        if not math.isfinite(v):
            raise ConfigError(key, f"expected a finite number, got {v}")
        return v
    if typ is str:
        if isinstance(value, str):
            return check_text(key, value)
        raise ConfigError(key, f"expected a string, got {show(value)}")
    if typ in (list, dict):
        if isinstance(value, str):
            value = _parse_literal(key, check_text(key, value), typ)
        if typ is list and isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, typ):
            raise ConfigError(key, f"expected a {'list' if typ is list else 'table'}, got {show(value)}")
        if _depth(value) > MAX_DEPTH:
            raise ConfigError(key, f"nested deeper than {MAX_DEPTH} levels")
        return _plain(key, value)
    return value


def _parse_literal(key: str, text: str, typ: type) -> Any:
    try:
        parsed = tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, ValueError):
        raise ConfigError(key, f"cannot parse {show(text)} as a TOML {typ.__name__}") from None
    except RecursionError:
        raise ConfigError(key, f"nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(parsed, typ):
        raise ConfigError(key, f"expected a {typ.__name__}, got {show(text)}")
    return parsed


# keys renamed since results folders were first written: old name -> new name (read as the new one)
RENAMED_KEYS = {"privacy.calibrate": "privacy.targeting"}


def rename_old_keys(data: dict) -> dict:
    """``data`` (nested dicts from one source: a file, the overrides, the API) with RENAMED_KEYS' old names
    read as the new ones (a copy; ``data`` is left as it was); both names in one source are refused."""
    for old, new in RENAMED_KEYS.items():
        section, _, old_key = old.rpartition(".")
        sec = data.get(section)
        if isinstance(sec, dict) and old_key in sec:
            new_key = new.rpartition(".")[2]
            if new_key in sec:
                raise ConfigError(old, f"is the old name of {new}; set only one of them")
            data = {**data, section: {(new_key if k == old_key else k): v for k, v in sec.items()}}
    return data


def apply_values(obj: Any, data: dict, prefix: str = "") -> None:
    hints = get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if k not in names:
            raise ConfigError(key, f"unknown key{did_you_mean(k, names, prefix)}; allowed: {', '.join(sorted(names))}")
        current = getattr(obj, k)
        if dataclasses.is_dataclass(current):
            if not isinstance(v, dict):
                raise ConfigError(key, "expected a table (section)")
            apply_values(current, v, key + ".")
        else:
            setattr(obj, k, coerce_value(key, hints[k], v))


def _set_dotted(data: dict, dotted: str) -> None:
    if "=" not in dotted:
        raise ConfigError(dotted, "an override must look like key=value (e.g. run.rounds=5)")
    key, raw = dotted.split("=", 1)
    key = key.strip()
    parts = key.split(".")
    cur = data
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
        if not isinstance(cur, dict):
            raise ConfigError(key, "is not a section")
    raw = raw.strip()
    try:  # TOML literal if it parses (numbers, booleans, lists, quoted strings), else a bare string
        value = tomllib.loads(f"v = {raw}")["v"]
    except (tomllib.TOMLDecodeError, ValueError):
        value = raw
    except RecursionError:
        raise ConfigError(key, f"nested deeper than {MAX_DEPTH} levels") from None
    cur[parts[-1]] = value


def parse_overrides(overrides: list[str] | tuple) -> dict:
    """Overrides ("section.key=value", as --set) as nested dicts, each value a TOML literal or a bare string."""
    over: dict = {}
    for o in overrides:
        _set_dotted(over, o)
    return over


def _merge(base: dict, extra: dict) -> dict:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict) and k != "options":
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def parse_config(path: str | Path | None = None, overrides: list[str] | tuple = ()) -> Config:
    """The TOML file (None: all defaults) with ``overrides`` ("section.key=value") on top, coerced to the
    dataclasses' types; NOT checked against ranges and registered names (run_config.load_config does)."""
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise UserError(f"config file '{p}' not found")
        try:
            if p.stat().st_size > 16 << 20:
                raise UserError(f"config file '{p}' is over 16 MiB; not a config")
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"config file '{p}' is not valid TOML: {e}") from None
        except UnicodeDecodeError:
            raise UserError(f"config file '{p}' is not a text file") from None
        except RecursionError:
            raise UserError(f"config file '{p}' is nested deeper than TOML's parser goes; not a config") from None
        except ValueError as e:              # e.g. an integer of more digits than Python converts
            raise UserError(f"config file '{p}' cannot be read: {str(e).splitlines()[0][:120]}") from None
        except OSError as e:
            raise UserError(f"cannot read config file '{p}' ({e.strerror or type(e).__name__})") from None
    data = _merge(rename_old_keys(data), rename_old_keys(parse_overrides(overrides)))
    cfg = Config()
    apply_values(cfg, data)
    return cfg


DEFAULT_EXPERIMENT = Path(__file__).resolve().parent / "default_experiment.toml"


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def to_toml(cfg: Config) -> str:
    return tomli_w.dumps(to_dict(cfg))


# keys added after results folders were first written, hashed only when set away from this value, so that a
# folder written before the key existed keeps its ledger's chain (its config.toml lacks the key)
HASHED_WHEN_SET = {"run.tensorboard": False, "run.mlflow": False, "run.figures": True, "data.download": False, "air.drift_gain_db": 1.0,
                   "air.drift_phase_rad": 0.35, "air.drift_cfo": 1e-5, "air.drift_timing": 1.0, "air.on_drift": "recalibrate",
                   "uhd.tx_gains": {}, "uhd.payload_papr_db": 12.0,
                   "uhd.clock_tolerance_s": 0.05, "air.coherence": "off", "uhd.feedback_gap_s": 0.002,
                   "calibration.coherence_check": 3}

HASHED_WHEN_SET.update({"channel.phase_noise": 0.0, "channel.iq_mag_db": 0.0, "channel.iq_phase_deg": 0.0,
                        "channel.dc_offset": 0.0, "channel.pa_a_sat": 0.0, "channel.pa_p": 2.0,
                        "channel.sro_ppm": 0.0, "channel.residual_cfo_hz": 0.0, "channel.doppler_hz": 0.0})


HASHED_WHEN_SET.update({"phy.waveform": "single_carrier", "phy.ofdm_fft": 64, "phy.ofdm_cp": 16,
                        "phy.ofdm_used": 52, "phy.ofdm_pilot_spacing": 13, "phy.ofdm_train": 4,
                        "phy.ofdm_truncation": 0.01, "phy.ofdm_smoothing": "delay"})


def hashed_toml(cfg: Config) -> str:
    """The text the privacy ledger's genesis and the checkpoint hash (privacy/ledger.genesis): the config
    under its keys' first names (RENAMED_KEYS reversed, in place), so that renaming a key keeps the hash
    chains of results folders written before the rename; HASHED_WHEN_SET keys at their value are left out."""
    d = to_dict(cfg)
    for dotted, unset in HASHED_WHEN_SET.items():
        section, _, key = dotted.rpartition(".")
        if d[section].get(key) == unset:
            d[section] = {k: v for k, v in d[section].items() if k != key}
    for old, new in RENAMED_KEYS.items():
        section, _, old_key = old.rpartition(".")
        new_key = new.rpartition(".")[2]
        d[section] = {(old_key if k == new_key else k): v for k, v in d[section].items()}
    return tomli_w.dumps(d)
