"""Typed run configuration: TOML in, dataclasses out, clear errors (naming the key) for bad values.

Every section is a dataclass; ``load_config`` reads TOML, applies ``--set a.b=value`` overrides, and
validates. ``to_toml`` writes the resolved config so that a run is reproducible from ``DIR/config.toml``.
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

from .errors import ConfigError, UserError


@dataclass
class RunConfig:
    seed: int = 0
    rounds: int = 20            # FL rounds M (Upcycled-FL runs 2M iterations, of which M use clients)
    name: str = "default"
    progress: bool = True       # progress bar per round
    checkpoint_every: int = 1   # rounds between checkpoints
    torch_threads: int = 2
    eval_every: int = 1


@dataclass
class DataConfig:
    dataset: str = "digits"           # digits | mnist5k | synthetic | femnist
    path: str = ""                    # FEMNIST LEAF JSON folder (required for femnist)
    femnist_classes: str = "a-j"      # class filter, remapped to 0..n-1 (paper 000: 'a'..'j')
    partition: str = "classes_per_client"  # iid | classes_per_client | dirichlet | dominant_class
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
    name: str = "mlp"                 # mlp | cnn | logreg
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


@dataclass
class ChannelConfig:
    sigma_c2: float = 1.0             # noise variance per real coordinate
    fading: str = "rayleigh"          # rayleigh | awgn (h = 1)
    jammer_fading: str = "rayleigh"


@dataclass
class AirConfig:
    name: str = "sim"                 # sim | loopback | zmq | uhd
    record_iq: bool = False           # SigMF recording of each round's received IQ
    retries: int = 1                  # a lost burst is retried this many times, then the round is skipped
    csi: str = "perfect"              # perfect | calibrated (needs calibration.file)


@dataclass
class PhyConfig:
    sps: int = 2                      # samples per symbol
    rolloff: float = 0.35             # RRC roll-off
    rrc_span: int = 8                 # RRC span in symbols
    preamble_len: int = 139           # Zadoff-Chu length (prime)
    pilot_spacing: int = 1024         # a pilot symbol every N payload symbols (0 = none)
    guard: int = 64                   # silent samples around a burst


@dataclass
class LoopbackConfig:
    client_cfo_max: float = 0.0       # per-client carrier offset, cycles/sample (pre-compensated)
    client_delay_max: int = 0         # per-client integer delay, samples (pre-compensated)
    client_phase: bool = True         # per-client random phase (part of h)
    rx_cfo: float = 0.0               # receiver frequency offset, cycles/sample
    rx_delay: int = 0                 # receiver timing offset, samples
    rx_phase_noise: float = 0.0       # receiver phase-noise std per sample (rad, random walk)
    residual_cfo: float = 0.0         # uncompensated per-client residual CFO (sync study)
    residual_delay: int = 0           # uncompensated per-client residual delay, samples
    residual_phase: float = 0.0       # uncompensated per-client residual phase std, rad


@dataclass
class UhdConfig:
    tx_args: list = field(default_factory=list)   # device args per client radio, e.g. ["serial=31A0B1C"]
    jammer_args: str = ""
    rx_args: str = ""
    freq: float = 915e6
    rate: float = 1e6
    tx_gain: float = 40.0
    rx_gain: float = 30.0
    start_delay: float = 0.5          # seconds between command and timed burst


@dataclass
class NetConfig:
    bind: str = "127.0.0.1"
    port: int = 0                     # 0 = pick a free port
    keys_dir: str = ""                # CURVE keys (required when binding a non-loopback address)
    timeout_s: float = 60.0
    heartbeat_s: float = 1.0
    dead_client_policy: str = "drop"  # drop | abort
    insecure: bool = False            # local zmq runs without CURVE (default: ephemeral keys per run)
    diagnostics: bool = False         # clients also send norms, losses and their update in the clear:
                                      # the run is then marked "not private (diagnostics)"


@dataclass
class CalibrationConfig:
    file: str = ""                    # calibration file consumed by runs (air.csi = calibrated)
    max_age_days: float = 7.0


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


# ---------------------------------------------------------------------------------------------
def _coerce(key: str, typ: Any, value: Any) -> Any:
    """Convert a TOML / command-line value to the field's type, or raise ConfigError."""
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ConfigError(key, f"expected true or false, got {value!r}")
    if typ is int:
        if isinstance(value, bool):
            raise ConfigError(key, f"expected an integer, got {value!r}")
        v = None
        if isinstance(value, int):
            v = value
        elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
            v = int(value)
        elif isinstance(value, str):
            try:
                v = int(value)
            except ValueError:
                pass
        if v is None:
            raise ConfigError(key, f"expected an integer, got {value!r}")
        if abs(v) > MAX_INT:
            raise ConfigError(key, f"{v} is out of range (|value| <= {MAX_INT})")
        return v
    if typ is float:
        if isinstance(value, bool):
            raise ConfigError(key, f"expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            v = float(value)
        elif isinstance(value, str):
            try:
                v = float(value)
            except ValueError:
                raise ConfigError(key, f"expected a number, got {value!r}") from None
        else:
            raise ConfigError(key, f"expected a number, got {value!r}")
        if not math.isfinite(v):
            raise ConfigError(key, f"expected a finite number, got {v}")
        return v
    if typ is str:
        if isinstance(value, str):
            return value
        raise ConfigError(key, f"expected a string, got {value!r}")
    if typ is list:
        if isinstance(value, str):
            value = _parse_literal(key, value, list)
        if not isinstance(value, list):
            raise ConfigError(key, f"expected a list, got {value!r}")
        if _depth(value) > MAX_DEPTH:
            raise ConfigError(key, f"nested deeper than {MAX_DEPTH} levels")
        return value
    if typ is dict:
        if isinstance(value, str):
            value = _parse_literal(key, value, dict)
        if not isinstance(value, dict):
            raise ConfigError(key, f"expected a table, got {value!r}")
        if _depth(value) > MAX_DEPTH:
            raise ConfigError(key, f"nested deeper than {MAX_DEPTH} levels")
        return value
    return value


def _parse_literal(key: str, text: str, typ: type) -> Any:
    try:
        parsed = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        raise ConfigError(key, f"cannot parse {text!r} as a TOML {typ.__name__}") from None
    if not isinstance(parsed, typ):
        raise ConfigError(key, f"expected a {typ.__name__}, got {text!r}")
    return parsed


def _apply(obj: Any, data: dict, prefix: str = "") -> None:
    hints = get_type_hints(type(obj))
    names = {f.name for f in dataclasses.fields(obj)}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if k not in names:
            raise ConfigError(key, f"unknown key; allowed: {', '.join(sorted(names))}")
        current = getattr(obj, k)
        if dataclasses.is_dataclass(current):
            if not isinstance(v, dict):
                raise ConfigError(key, "expected a table (section)")
            _apply(current, v, key + ".")
        else:
            setattr(obj, k, _coerce(key, hints[k], v))


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
    except tomllib.TOMLDecodeError:
        value = raw
    cur[parts[-1]] = value


def _merge(base: dict, extra: dict) -> dict:
    for k, v in extra.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict) and k != "options":
            _merge(base[k], v)
        else:
            base[k] = v
    return base


def load_config(path: str | Path | None = None, overrides: list[str] | tuple = (),
                validate_now: bool = True) -> Config:
    data: dict = {}
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise UserError(f"config file '{p}' not found")
        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise UserError(f"config file '{p}' is not valid TOML: {e}") from None
        except UnicodeDecodeError:
            raise UserError(f"config file '{p}' is not a text file") from None
    over: dict = {}
    for o in overrides:
        _set_dotted(over, o)
    _merge(data, over)
    cfg = Config()
    _apply(cfg, data)
    if validate_now:
        validate(cfg)
    return cfg


DEFAULT_EXPERIMENT = Path(__file__).resolve().parent / "default_experiment.toml"


def default_experiment(overrides: list[str] | tuple = ()) -> Config:
    """The default experiment (`make run`, `otafl-sdr run` and `otafl-sdr config` without --config): the
    packaged copy of sim_loopback/default.toml (a test keeps the two equal)."""
    return load_config(DEFAULT_EXPERIMENT, overrides)


def config_from_dict(data: dict) -> Config:
    cfg = Config()
    _apply(cfg, data)
    validate(cfg)
    return cfg


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def to_toml(cfg: Config) -> str:
    return tomli_w.dumps(to_dict(cfg))


# ---------------------------------------------------------------------------------------------
def _require(cond: bool, key: str, message: str) -> None:
    if not cond:
        raise ConfigError(key, message)


def _check_types(cfg: Config) -> None:
    """A Config built in code gets the same type checks as a TOML file (coerce every field again)."""
    for section in dataclasses.fields(cfg):
        obj = getattr(cfg, section.name)
        hints = get_type_hints(type(obj))
        for f in dataclasses.fields(obj):
            key = f"{section.name}.{f.name}"
            setattr(obj, f.name, _coerce(key, hints[f.name], getattr(obj, f.name)))


def validate(cfg: Config) -> None:
    """Range checks and registry look-ups; raises ConfigError naming the key."""
    from . import registry
    registry.load_plugins()
    r, d, t, pr, pw, ch = cfg.run, cfg.data, cfg.train, cfg.privacy, cfg.power, cfg.channel
    _check_types(cfg)
    _require(0 <= r.seed, "run.seed", f"must be >= 0, got {r.seed}")
    _require(1 <= r.rounds <= 100_000, "run.rounds", f"must be in [1, 100000], got {r.rounds}")
    _require(r.torch_threads <= 1024, "run.torch_threads", "must be <= 1024")
    _require(1 <= d.clients <= 100_000, "data.clients", f"must be in [1, 100000], got {d.clients}")
    _require(d.dirichlet_alpha >= 1e-3, "data.dirichlet_alpha", f"must be >= 1e-3, got {d.dirichlet_alpha}")
    _require(d.unequal_sizes <= 10, "data.unequal_sizes", "must be in [0, 10]")
    _require(d.synthetic_alpha >= 0 and d.synthetic_beta >= 0, "data.synthetic_alpha",
             "synthetic_alpha and synthetic_beta must be >= 0")
    _require(1 <= d.synthetic_dim <= 100_000, "data.synthetic_dim", "must be in [1, 100000]")
    _require(2 <= d.synthetic_classes <= 1000, "data.synthetic_classes", "must be in [2, 1000]")
    _require(d.synthetic_samples <= 10_000_000, "data.synthetic_samples", "must be <= 1e7")
    _require(cfg.model.hidden <= 100_000, "model.hidden", "must be <= 100000")
    _require(t.local_epochs <= 10_000, "train.local_epochs", "must be <= 10000")
    _require(t.lr <= 1e3, "train.lr", f"must be in (0, 1000], got {t.lr}")
    _require(t.tau <= 1e6, "train.tau", f"must be in (0, 1e6], got {t.tau}")
    _require(-200 <= pw.max_snr_db <= 200, "power.max_snr_db", f"must be in [-200, 200] dB, got {pw.max_snr_db}")
    _require(-200 <= pw.jammer_max_snr_db <= 200, "power.jammer_max_snr_db",
             f"must be in [-200, 200] dB, got {pw.jammer_max_snr_db}")
    _require(pw.alpha_u == 0 or 1e-6 <= pw.alpha_u <= 1e12, "power.alpha_u",
             f"must be 0 (automatic) or in [1e-6, 1e12], got {pw.alpha_u}")
    _require(pw.jammer_multiple <= 1e6, "power.jammer_multiple", "must be in [1, 1e6]")
    _require(1e-300 < pr.delta, "privacy.delta", f"must be in (1e-300, 1), got {pr.delta}")
    _require(1e-12 <= ch.sigma_c2 <= 1e12, "channel.sigma_c2", f"must be in [1e-12, 1e12], got {ch.sigma_c2}")
    lb = cfg.loopback
    for k in ("client_cfo_max", "rx_cfo", "residual_cfo"):
        _require(abs(getattr(lb, k)) <= 0.5, f"loopback.{k}", "must be within +-0.5 cycles/sample")
    for k in ("client_delay_max", "rx_delay", "residual_delay"):
        _require(0 <= getattr(lb, k) <= 100_000, f"loopback.{k}", "must be in [0, 100000] samples")
    for k in ("rx_phase_noise", "residual_phase"):
        _require(0 <= getattr(lb, k) <= 10, f"loopback.{k}", "must be in [0, 10] rad")
    u = cfg.uhd
    _require(all(isinstance(a, str) for a in u.tx_args), "uhd.tx_args", "must be a list of device-argument strings")
    _require(u.freq <= 7e9, "uhd.freq", "must be in (0, 7 GHz]")
    _require(u.rate <= 1e9, "uhd.rate", "must be in (0, 1 GS/s]")
    _require(-20 <= u.tx_gain <= 120 and -20 <= u.rx_gain <= 120, "uhd.tx_gain", "gains must be in [-20, 120] dB")
    _require(0 <= u.start_delay <= 60, "uhd.start_delay", "must be in [0, 60] s")
    _require(1 <= cfg.phy.rrc_span <= 64, "phy.rrc_span", "must be in [1, 64] symbols")
    _require(0 <= cfg.phy.guard <= 1_000_000, "phy.guard", "must be in [0, 1e6] samples")
    _require(cfg.phy.sps <= 64 and cfg.phy.preamble_len <= 100_000, "phy.sps", "sps <= 64, preamble_len <= 1e5")
    _require(0 < cfg.net.heartbeat_s <= 3600, "net.heartbeat_s", "must be in (0, 3600] s")
    _require(cfg.net.timeout_s <= 86_400, "net.timeout_s", "must be in (0, 86400] s")
    _require(0 < cfg.calibration.max_age_days <= 3650, "calibration.max_age_days", "must be in (0, 3650]")
    # tiny positive values that parse but mean nothing (a 1e-320 learning rate, a 1e-300 s timeout, ...)
    for key, v, lo, hi in (("train.lr", t.lr, 1e-12, 1e3), ("train.tau", t.tau, 1e-12, 1e6),
                           ("train.sample_clip", t.sample_clip, 0.0, 1e6), ("algorithm.mu", cfg.algorithm.mu, 0.0, 1e4),
                           ("data.synthetic_alpha", d.synthetic_alpha, 0.0, 1e3),
                           ("data.synthetic_beta", d.synthetic_beta, 0.0, 1e3),
                           ("data.dirichlet_alpha", d.dirichlet_alpha, 1e-3, 1e6),
                           ("data.test_fraction", d.test_fraction, 0.01, 0.9),
                           ("data.dominant_fraction", d.dominant_fraction, 0.01, 1.0),
                           ("power.alpha_u_quantile", pw.alpha_u_quantile, 1e-6, 1 - 1e-6),
                           ("phy.rolloff", cfg.phy.rolloff, 0.01, 1.0), ("uhd.freq", cfg.uhd.freq, 1e3, 7e9),
                           ("uhd.rate", cfg.uhd.rate, 1e3, 1e9), ("net.timeout_s", cfg.net.timeout_s, 0.01, 86_400),
                           ("net.heartbeat_s", cfg.net.heartbeat_s, 0.01, 3600)):
        _require(v == 0 and lo == 0 or lo <= v <= hi, key, f"must be in [{lo:g}, {hi:g}], got {v:g}")
    _require(r.rounds >= 1, "run.rounds", f"must be >= 1, got {r.rounds}")
    _require(r.checkpoint_every >= 1, "run.checkpoint_every", "must be >= 1")
    _require(r.torch_threads >= 1, "run.torch_threads", "must be >= 1")
    _require(r.eval_every >= 1, "run.eval_every", "must be >= 1")
    _require(d.clients >= 1, "data.clients", f"must be >= 1, got {d.clients}")
    _require(d.classes_per_client >= 1, "data.classes_per_client", "must be >= 1")
    _require(0 <= d.iid_devices <= d.clients, "data.iid_devices", f"must be in [0, data.clients], got {d.iid_devices}")
    _require(d.dirichlet_alpha > 0, "data.dirichlet_alpha", "must be > 0")
    _require(0 < d.dominant_fraction <= 1, "data.dominant_fraction", f"must be in (0, 1], got {d.dominant_fraction}")
    _require(d.unequal_sizes >= 0, "data.unequal_sizes", "must be >= 0")
    _require(0 < d.test_fraction < 1, "data.test_fraction", "must be in (0, 1)")
    _require(d.max_samples >= 0, "data.max_samples", "must be >= 0")
    _require(d.synthetic_samples >= d.clients, "data.synthetic_samples", "must be >= data.clients")
    _require(d.synthetic_dim >= 1 and d.synthetic_classes >= 2, "data.synthetic_dim", "dim >= 1, classes >= 2")
    registry.DATASETS.check(d.dataset)
    registry.PARTITIONS.check(d.partition)
    if d.dataset == "femnist":
        _require(bool(d.path), "data.path", "femnist needs the path of a LEAF JSON folder")
        _require(Path(d.path).exists(), "data.path", f"'{d.path}' does not exist")
    registry.MODELS.check(cfg.model.name)
    _require(cfg.model.hidden >= 1, "model.hidden", "must be >= 1")
    _require(t.local_epochs >= 1, "train.local_epochs", "must be >= 1")
    _require(t.batch_size >= 1, "train.batch_size", "must be >= 1")
    _require(t.lr > 0, "train.lr", f"must be > 0, got {t.lr}")
    _require(0 <= t.momentum < 1, "train.momentum", "must be in [0, 1)")
    _require(t.tau > 0 and math.isfinite(t.tau), "train.tau", f"must be > 0, got {t.tau}")
    registry.ALGORITHMS.check(cfg.algorithm.name)
    _require(cfg.algorithm.mu >= 0, "algorithm.mu", "must be >= 0")
    last = 0
    for item in cfg.algorithm.lambda_schedule:
        _require(isinstance(item, list) and len(item) == 2
                 and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in item)
                 and item[1] >= 0 and item[0] >= 1 and item[0] > last and float(item[0]).is_integer(),
                 "algorithm.lambda_schedule",
                 "must be a list of [last_m, lambda] pairs with increasing integer last_m >= 1 and lambda >= 0")
        last = item[0]
    registry.POWER_POLICIES.check(pw.policy)
    _require(math.isfinite(pw.max_snr_db), "power.max_snr_db", "must be finite")
    _require(pw.alpha_u >= 0, "power.alpha_u", f"must be >= 0 (0 = automatic), got {pw.alpha_u}")
    _require(0 < pw.alpha_u_quantile < 1, "power.alpha_u_quantile", "must be in (0, 1)")
    _require(pw.jammer_multiple >= 1, "power.jammer_multiple", "must be >= 1")
    _require(pr.eps > 0 and math.isfinite(pr.eps), "privacy.eps", f"must be > 0, got {pr.eps}")
    _require(0 < pr.delta < 1, "privacy.delta", f"must be in (0, 1), got {pr.delta}")
    registry.ACCOUNTANTS.check(pr.accountant)
    _require(pr.accountant not in ("fdp", "fdp_feasible"), "privacy.accountant",
             f"'{pr.accountant}' bounds what the last model reveals, but the server sees every round's "
             "aggregate: it may be reported (privacy.report), not enforced; use rdp or pld")
    for name in pr.report:
        _require(isinstance(name, str), "privacy.report", f"must be a list of accountant names, got {name!r}")
        registry.ACCOUNTANTS.check(name, "privacy.report")
    from .privacy.sensitivity import UNITS
    _require(pr.unit in UNITS, "privacy.unit", f"must be one of {', '.join(UNITS)}, got {pr.unit!r}")
    _require(t.sample_clip >= 0 and math.isfinite(t.sample_clip), "train.sample_clip",
             f"must be a finite number >= 0 (0 = off), got {t.sample_clip}")
    _require(ch.sigma_c2 > 0 and math.isfinite(ch.sigma_c2), "channel.sigma_c2", f"must be > 0, got {ch.sigma_c2}")
    _require(ch.fading in ("rayleigh", "awgn"), "channel.fading", "must be 'rayleigh' or 'awgn'")
    _require(ch.jammer_fading in ("rayleigh", "awgn"), "channel.jammer_fading", "must be 'rayleigh' or 'awgn'")
    registry.AIRS.check(cfg.air.name)
    _require(cfg.air.retries >= 0, "air.retries", "must be >= 0")
    _require(cfg.air.csi in ("perfect", "calibrated"), "air.csi", "must be 'perfect' or 'calibrated'")
    _require(cfg.phy.sps >= 1, "phy.sps", "must be >= 1")
    _require(0 < cfg.phy.rolloff <= 1, "phy.rolloff", "must be in (0, 1]")
    _require(cfg.phy.preamble_len >= 7, "phy.preamble_len", "must be >= 7")
    _require(cfg.phy.pilot_spacing >= 0, "phy.pilot_spacing", "must be >= 0")
    _require(cfg.uhd.rate > 0, "uhd.rate", "must be > 0")
    _require(cfg.uhd.freq > 0, "uhd.freq", "must be > 0")
    _require(cfg.net.timeout_s > 0, "net.timeout_s", "must be > 0")
    _require(cfg.net.dead_client_policy in ("drop", "abort"), "net.dead_client_policy", "must be 'drop' or 'abort'")
    _require(0 <= cfg.net.port < 65536, "net.port", "must be in [0, 65535]")
    # policy / algorithm specific options are validated by their own classes
    registry.POWER_POLICIES.get(pw.policy).validate_options(pw.options)
    registry.ALGORITHMS.get(cfg.algorithm.name).validate_options(cfg.algorithm.options)
