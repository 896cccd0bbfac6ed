"""Validation of a run configuration: types (the same coercion as a TOML file, so a Config built in code is
checked like one), ranges and meaning for every key, registry look-ups. ConfigError names the key."""
from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import get_type_hints

from otafl_sdr.config.schema import Config, coerce_value, show
from otafl_sdr.errors import ConfigError

TARGETINGS = ("target", "paper")       # privacy.targeting (privacy/targeting.py)


def _require(cond: bool, key: str, message: str) -> None:
    if not cond:
        raise ConfigError(key, message)


def _check_types(cfg: Config) -> None:
    """A Config built in code gets the same type checks as a TOML file (coerce every field again); a
    section replaced by something else (a dict, None) is refused naming it."""
    if not isinstance(cfg, Config):
        raise ConfigError("config", f"must be an otafl_sdr.config.schema.Config, got {type(cfg).__name__}")
    for section in dataclasses.fields(cfg):
        obj = getattr(cfg, section.name)
        expected = section.default_factory
        if type(obj) is not expected:
            raise ConfigError(section.name, f"must be the {expected.__name__} section, got {show(obj)}")
        hints = get_type_hints(type(obj))
        for f in dataclasses.fields(obj):
            key = f"{section.name}.{f.name}"
            setattr(obj, f.name, coerce_value(key, hints[f.name], getattr(obj, f.name)))


_ADDRESS = re.compile(r"\*|[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[?[0-9A-Fa-f:.%A-Za-z]{2,100}\]?")
_DEVICE_ARG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}=[^,=]*")


def _no_traversal(key: str, path: str) -> None:
    """A configured path names its target directly: no '..' component (a relative path climbing out of the
    working folder resolves elsewhere when a sweep or --resume runs from another folder; write it absolute)."""
    _require(".." not in re.split(r"[/\\]", path), key,
             f"must not climb with '..' ({show(path)}); give the absolute path or one below the working folder")


def _check_strings(cfg: Config) -> None:
    """Strings that name addresses, device arguments and paths: the shape each must have (printable text of
    bounded length is checked for every string by config.coerce_value)."""
    bind = cfg.net.bind
    _require(bool(_ADDRESS.fullmatch(bind)) and ".." not in bind, "net.bind",
             f"must be an IP address, a host or interface name, or '*', got {show(bind)}")
    for key, path in (("net.keys_dir", cfg.net.keys_dir), ("calibration.file", cfg.calibration.file),
                      ("data.path", cfg.data.path)):
        _no_traversal(key, path)
    for key, args in ([(f"uhd.tx_args[{i}]", a) for i, a in enumerate(cfg.uhd.tx_args)]
                      + [("uhd.jammer_args", cfg.uhd.jammer_args), ("uhd.rx_args", cfg.uhd.rx_args)]):
        if not isinstance(args, str):
            continue                                     # uhd.tx_args' type is checked with the ranges
        for part in (p.strip() for p in args.split(",")):
            _require(not part or bool(_DEVICE_ARG.fullmatch(part)), key.split("[")[0],
                     f"must be UHD device arguments key=value[,key=value] (e.g. 'serial=31A0B1C'), got {show(args)}")
            _no_traversal(key.split("[")[0], part.partition("=")[2])


def validate(cfg: Config) -> None:
    """Range checks and registry look-ups; raises ConfigError naming the key."""
    from otafl_sdr import registry
    from otafl_sdr.configure.plugins import load_plugins
    load_plugins()
    r, d, t, pr, pw, ch = cfg.run, cfg.data, cfg.train, cfg.privacy, cfg.power, cfg.channel
    _check_types(cfg)
    _require(0 <= r.seed, "run.seed", f"must be >= 0, got {r.seed}")
    _require(bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,99}", r.name)), "run.name",
             f"must be 1-100 characters of letters, digits and ._+=- (it names the results folder), got {r.name!r}")
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
    _require(0 <= pw.jammer_max_snr_db <= 200, "power.jammer_max_snr_db",
             f"must be in [0, 200] dB (below 0 dB the jammer is quieter than the noise floor it is meant to raise; "
             f"power.jammer = false runs without one), got {pw.jammer_max_snr_db:g}")
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
    _require(-20 <= u.tx_gain <= 120, "uhd.tx_gain", f"must be in [-20, 120] dB, got {u.tx_gain:g}")
    _require(-20 <= u.rx_gain <= 120, "uhd.rx_gain", f"must be in [-20, 120] dB, got {u.rx_gain:g}")
    _require(all(isinstance(v, (int, float)) and not isinstance(v, bool) and -20 <= v <= 120
                 for v in u.tx_gains.values()), "uhd.tx_gains", "every gain must be a number in [-20, 120] dB")
    if u.tx_gains:
        from otafl_sdr.calibration.tx_gains import tx_gains_problem
        # the jammer's radio may keep its gain with the jammer off (power.jammer = false: a lab's config, the
        # coherence check's): it is named by uhd.jammer_args either way
        why = tx_gains_problem(u, cfg.data.clients, cfg.power.jammer or bool(str(u.jammer_args).strip()))
        _require(not why, "uhd.tx_gains", why)
    _require(0 <= u.payload_papr_db <= 40, "uhd.payload_papr_db", f"must be in [0, 40] dB, got {u.payload_papr_db:g}")
    _require(0 <= u.start_delay <= 60, "uhd.start_delay", "must be in [0, 60] s")
    _require(0 < u.clock_tolerance_s <= 10, "uhd.clock_tolerance_s", "must be in (0, 10] s")
    _require(u.lo_offset == 0 or u.rate / 2 <= abs(u.lo_offset) <= 100e6, "uhd.lo_offset",
             f"must be 0 or between rate / 2 ({u.rate / 2:g} Hz, the LO leakage then falls outside the band) and "
             f"100 MHz, got {u.lo_offset:g}")
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
    _check_strings(cfg)
    for key, v, hi in (("run.checkpoint_every", r.checkpoint_every, 1_000_000), ("run.eval_every", r.eval_every, 1_000_000),
                       ("data.classes_per_client", d.classes_per_client, 100_000), ("train.batch_size", t.batch_size, 10_000_000),
                       ("air.retries", cfg.air.retries, 1000), ("phy.pilot_spacing", cfg.phy.pilot_spacing, 10_000_000)):
        _require(v <= hi, key, f"must be <= {hi:g}, got {v}")
    _require(pr.eps <= 1e6, "privacy.eps", f"must be in (0, 1e6], got {pr.eps:g}")
    _require(r.rounds >= 1, "run.rounds", f"must be >= 1, got {r.rounds}")
    _require(r.checkpoint_every >= 1, "run.checkpoint_every", "must be >= 1")
    _require(r.torch_threads >= 1, "run.torch_threads", "must be >= 1")
    _require(r.eval_every >= 1, "run.eval_every", "must be >= 1")
    _require(r.device in ("cpu", "cuda", "auto"), "run.device", f"must be one of cpu, cuda, auto, got {r.device!r}")
    if r.tensorboard:
        import importlib.util
        _require(importlib.util.find_spec("tensorboard") is not None, "run.tensorboard",
                 "needs the 'tensorboard' package, which is not installed here (pip install tensorboard); "
                 "or set it to false")
    if r.mlflow:
        import importlib.util
        _require(importlib.util.find_spec("mlflow") is not None, "run.mlflow",
                 "needs the 'mlflow' package, which is not installed here (pip install -e \".[mlflow]\"); "
                 "or set it to false")
    if r.device == "cuda":
        from otafl_sdr.learning.trainer import resolve_device
        resolve_device(r.device)           # refused at once where torch sees no GPU
    _require(d.clients >= 1, "data.clients", f"must be >= 1, got {d.clients}")
    _require(d.classes_per_client >= 1, "data.classes_per_client", "must be >= 1")
    _require(0 <= d.iid_devices <= d.clients, "data.iid_devices", f"must be in [0, data.clients], got {d.iid_devices}")
    _require(d.dirichlet_alpha > 0, "data.dirichlet_alpha", "must be > 0")
    _require(0 < d.dominant_fraction <= 1, "data.dominant_fraction", f"must be in (0, 1], got {d.dominant_fraction}")
    _require(d.unequal_sizes >= 0, "data.unequal_sizes", "must be >= 0")
    _require(0 < d.test_fraction < 1, "data.test_fraction", "must be in (0, 1)")
    _require(d.max_samples >= 0, "data.max_samples", "must be >= 0")
    _require(d.dataset != "synthetic" or d.synthetic_samples >= d.clients, "data.clients",
             f"is {d.clients}, but the synthetic data set has data.synthetic_samples = {d.synthetic_samples} "
             f"samples; at most one client per sample")
    _require(d.synthetic_dim >= 1 and d.synthetic_classes >= 2, "data.synthetic_dim", "dim >= 1, classes >= 2")
    registry.DATASETS.check(d.dataset)
    registry.PARTITIONS.check(d.partition)
    if d.dataset == "femnist":
        _require(bool(d.path), "data.path", "femnist needs the path of a LEAF JSON folder")
        _require(Path(d.path).exists(), "data.path", f"'{d.path}' does not exist")
    from otafl_sdr.learning.data_files import DOWNLOADABLE
    _require(not d.download or d.dataset in DOWNLOADABLE, "data.download",
             f"only {', '.join(DOWNLOADABLE)} can be downloaded, not '{d.dataset}'")
    if d.dataset in DOWNLOADABLE:
        _require(bool(d.path), "data.path", f"{d.dataset} needs the folder of its files (or, with "
                 "data.download = true, the folder to fetch them into)")
        _require(d.download or Path(d.path).is_dir(), "data.path", f"'{d.path}' is not a folder "
                 "(data.download = true fetches the files there)")
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
                 and 0 <= item[1] <= 1e3 and 1 <= item[0] <= 1_000_000 and item[0] > last
                 and float(item[0]).is_integer(),
                 "algorithm.lambda_schedule",
                 "must be a list of [last_m, lambda] pairs with increasing integer last_m in [1, 1e6] and lambda "
                 f"in [0, 1000], got {show(item)}")
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
    from otafl_sdr.privacy.sensitivity import UNITS
    _require(pr.targeting in TARGETINGS, "privacy.targeting",
             f"must be one of {', '.join(TARGETINGS)}, got {pr.targeting!r}")
    algorithm = (registry.ALGORITHMS.get(cfg.algorithm.name)
                 if cfg.algorithm.name in registry.ALGORITHMS.names() else None)
    from otafl_sdr.learning.algorithms import FLAlgorithm
    own_knob = algorithm is not None and algorithm.privacy_knob is not FLAlgorithm.privacy_knob   # e.g. paper 002
    _require(not (pr.targeting == "target" and pw.policy == "cj_adaptive" and not pw.jammer and pw.alpha_u > 0
                  and not own_knob),
             "power.alpha_u", "is the knob that privacy.targeting = 'target' solves when power.jammer = false: "
             "leave it 0, or set privacy.targeting = 'paper' to fix it")
    _require(pr.unit in UNITS, "privacy.unit", f"must be one of {', '.join(UNITS)}, got {pr.unit!r}")
    _require(t.sample_clip >= 0 and math.isfinite(t.sample_clip), "train.sample_clip",
             f"must be a finite number >= 0 (0 = off), got {t.sample_clip}")
    _require(ch.sigma_c2 > 0 and math.isfinite(ch.sigma_c2), "channel.sigma_c2", f"must be > 0, got {ch.sigma_c2}")
    _require(ch.fading in ("rayleigh", "awgn"), "channel.fading", "must be 'rayleigh' or 'awgn'")
    _require(ch.jammer_fading in ("rayleigh", "awgn"), "channel.jammer_fading", "must be 'rayleigh' or 'awgn'")
    _check_multipath(cfg)
    _check_waveform(cfg)
    registry.AIRS.check(cfg.air.name)
    _require(cfg.air.retries >= 0, "air.retries", "must be >= 0")
    _require(cfg.air.csi in ("perfect", "calibrated"), "air.csi", "must be 'perfect' or 'calibrated'")
    from otafl_sdr.airs import air_capabilities
    _require(not cfg.calibration.session or (air_capabilities(cfg.air.name).in_session_calibration
                                             and cfg.air.csi == "calibrated"),
             "calibration.session", "needs an air that calibrates in session (air.name = 'uhd') and "
             "air.csi = 'calibrated'")
    _require(not cfg.air.record_iq or air_capabilities(cfg.air.name).iq, "air.record_iq",
             f"records the received IQ, and air.name = '{cfg.air.name}' carries none (a symbol-level model): "
             f"record on air.name = 'loopback' (the same channel as GNU Radio IQ), or leave it false")
    _require(0 <= cfg.calibration.coherence_check <= 1000, "calibration.coherence_check", "must be in [0, 1000] rounds")
    _require(0 <= cfg.calibration.max_phase_age_min <= 1e7, "calibration.max_phase_age_min", "must be in [0, 1e7] min")
    _require(0 <= cfg.air.recalibrate_every <= 1_000_000, "air.recalibrate_every", "must be in [0, 1e6] rounds")
    for k, hi in (("drift_gain_db", 60.0), ("drift_phase_rad", math.pi), ("drift_cfo", 0.5), ("drift_timing", 1e6)):
        v = getattr(cfg.air, k)
        _require(isinstance(v, (int, float)) and math.isfinite(v) and 0 < v <= hi, f"air.{k}", f"must be in (0, {hi:g}]")
    _require(cfg.air.on_drift in ("recalibrate", "stop", "ignore"), "air.on_drift",
             "must be 'recalibrate', 'stop' or 'ignore'")
    _require(cfg.air.coherence in ("off", "measure", "track"), "air.coherence", "must be 'off', 'measure' or 'track'")
    _require(cfg.air.coherence == "off" or cfg.air.name == "uhd", "air.coherence",
             "per-client sounding needs air.name = 'uhd'")
    _require(cfg.air.coherence != "track" or cfg.phy.waveform == "single_carrier", "air.coherence",
             "'track' corrects single-carrier payloads; an OFDM round's receiver equalises the composite, so OFDM "
             "takes 'measure' (each client's phase, offset and gain in link_health)")
    _require(0 < cfg.uhd.feedback_gap_s <= 1, "uhd.feedback_gap_s", "must be in (0, 1] s")
    _require(cfg.phy.sps >= 1, "phy.sps", "must be >= 1")
    _require(0 < cfg.phy.rolloff <= 1, "phy.rolloff", "must be in (0, 1]")
    _require(cfg.phy.preamble_len >= 7, "phy.preamble_len", "must be >= 7")
    _require(cfg.phy.pilot_spacing >= 0, "phy.pilot_spacing", "must be >= 0")
    _require(cfg.uhd.rate > 0, "uhd.rate", "must be > 0")
    _require(cfg.uhd.freq > 0, "uhd.freq", "must be > 0")
    _require(cfg.net.timeout_s > 0, "net.timeout_s", "must be > 0")
    _require(cfg.net.dead_client_policy in ("drop", "abort"), "net.dead_client_policy", "must be 'drop' or 'abort'")
    _require(0 <= cfg.net.port < 65536, "net.port", "must be in [0, 65535]")
    _require(1 <= cfg.net.max_attacked_rounds <= 1_000_000, "net.max_attacked_rounds", "must be in [1, 1000000]")
    # policy / algorithm specific options are validated by their own classes
    registry.POWER_POLICIES.get(pw.policy).validate_options(pw.options)
    registry.ALGORITHMS.get(cfg.algorithm.name).validate_config(cfg)


def _check_waveform(cfg) -> None:
    """phy.waveform and the phy.ofdm_* keys (phy/ofdm.py): ranges, and a cyclic prefix that covers the
    configured channel's delay extent plus one sample of timing error."""
    from otafl_sdr.phy.ofdm import SMOOTHING
    ph = cfg.phy
    _require(ph.waveform in ("single_carrier", "ofdm"), "phy.waveform",
             f"must be 'single_carrier' or 'ofdm', got {ph.waveform!r}")
    _require(8 <= ph.ofdm_fft <= 4096, "phy.ofdm_fft", f"must be in [8, 4096] subcarriers, got {ph.ofdm_fft}")
    _require(0 <= ph.ofdm_cp < ph.ofdm_fft, "phy.ofdm_cp", f"must be in [0, ofdm_fft) samples, got {ph.ofdm_cp}")
    _require(2 <= ph.ofdm_used <= ph.ofdm_fft - 1, "phy.ofdm_used",
             f"must be in [2, ofdm_fft - 1] (DC is never used), got {ph.ofdm_used}")
    _require(ph.ofdm_pilot_spacing == 0 or 2 <= ph.ofdm_pilot_spacing <= ph.ofdm_used, "phy.ofdm_pilot_spacing",
             f"must be 0 (no comb pilots) or in [2, ofdm_used], got {ph.ofdm_pilot_spacing}")
    _require(2 <= ph.ofdm_train <= 64, "phy.ofdm_train", f"must be in [2, 64] symbols (the timing search correlates "
             f"all but the last, so it never sees the payload), got {ph.ofdm_train}")
    _require(isinstance(ph.ofdm_truncation, (int, float)) and 0 <= ph.ofdm_truncation < 1, "phy.ofdm_truncation",
             f"must be in [0, 1) (|G|^2, linear), got {ph.ofdm_truncation}")
    _require(ph.ofdm_smoothing in SMOOTHING, "phy.ofdm_smoothing",
             f"must be one of {', '.join(SMOOTHING)}, got {ph.ofdm_smoothing!r}")
    if ph.waveform != "ofdm":
        return
    from otafl_sdr.channel.ofdm_sim import delay_extent
    ext = delay_extent(cfg)
    _require(ph.ofdm_cp >= ext + 1, "phy.ofdm_cp",
             f"{ph.ofdm_cp} samples is shorter than the channel's delay extent ({ext} samples: channel.multipath = "
             f"{cfg.channel.multipath!r} at {cfg.channel.delay_spread_ns:g} ns x uhd.rate) plus 1 sample of timing error")
    uhd_cal = cfg.air.name == "uhd" and cfg.air.csi == "calibrated"   # radio/uhd_ofdm.py, per-subcarrier calibration
    _require(cfg.air.name in ("sim", "loopback", "zmq_inproc", "zmq") or uhd_cal, "phy.waveform",
             "'ofdm' runs on the sim, loopback, zmq_inproc and zmq airs (and uhd on a per-subcarrier calibration, "
             "air.csi = 'calibrated')")
    _require(cfg.air.name not in ("zmq_inproc", "zmq") or not any(getattr(cfg.loopback, k) for k in (
        "client_cfo_max", "client_delay_max", "residual_cfo", "residual_delay", "residual_phase")), "phy.waveform",
             "'ofdm' on the zmq airs does not model loopback.client_* / residual_* offsets yet (radio/zmq_ofdm.py)")
    _require(cfg.air.csi == "perfect" or uhd_cal, "phy.waveform",
             "'ofdm' plans on perfect CSI, or on uhd on a per-subcarrier calibration (air.csi = 'calibrated')")
    from otafl_sdr import registry
    why = registry.POWER_POLICIES.get(cfg.power.policy).ofdm_refusal(cfg.power.options)   # the class says
    _require(why is None, "phy.waveform", f"'ofdm' cannot carry power.policy = {cfg.power.policy!r}: it {why}")
    from otafl_sdr.learning.algorithms import FLAlgorithm
    from otafl_sdr.learning.noisy_fedavg import NoisyFedAvg        # its client noise restated per subcarrier
    alg = (registry.ALGORITHMS.get(cfg.algorithm.name) if cfg.algorithm.name in registry.ALGORITHMS.names() else None)
    _require(alg is None or alg.privacy_knob is FLAlgorithm.privacy_knob or issubclass(alg, NoisyFedAvg), "phy.waveform",
             f"'ofdm' does not restate algorithm {cfg.algorithm.name!r}'s own client noise per subcarrier")
    from otafl_sdr.channel.front_end import FrontEnd
    from otafl_sdr.channel.ofdm_impairments import capture_keys, offset_keys, pilots_mirror
    from otafl_sdr.phy.ofdm import OfdmLayout
    fe = FrontEnd.from_config(cfg)
    _require(not fe.iq or pilots_mirror(OfdmLayout.from_phy(ph)), "channel.iq_mag_db",
             "with phy.waveform = 'ofdm' needs comb pilots whose mirror subcarriers are pilots too (an even "
             "phy.ofdm_used and a symmetric phy.ofdm_pilot_spacing): the IQ image would put payload on a pilot")
    cap = [f"channel.{k}" for k in capture_keys(fe)] + offset_keys(cfg, cfg.air.name)
    _require(not cap or cfg.privacy.targeting != "target" or not cfg.power.jammer, "phy.waveform",
             f"'ofdm' with {', '.join(cap)} is booked at the capture, where the jammer's noise does not "
             "count (channel/ofdm_impairments.py): set power.jammer = false (alpha_u is then the knob) or "
             "privacy.targeting = 'paper'")
    _require(not (fe.iq or cap) or alg is None or alg.privacy_knob is FLAlgorithm.privacy_knob, "phy.waveform",
             f"'ofdm' with channel.* impairments is booked against the power policy's per-subcarrier mechanism "
             f"(channel/ofdm_impairments.py); algorithm {cfg.algorithm.name!r} restates it with its client noise: "
             "not combined yet")


def _check_multipath(cfg) -> None:
    """channel.multipath / delay_spread_ns / rician_k (channel/multipath.py)."""
    from otafl_sdr.channel.multipath import PROFILES, Multipath
    ch = cfg.channel
    _require(ch.multipath in PROFILES, "channel.multipath", f"must be one of {', '.join(PROFILES)}, got {ch.multipath!r}")
    _require(0 <= ch.delay_spread_ns <= 1e6, "channel.delay_spread_ns", f"must be in [0, 1e6] ns, got {ch.delay_spread_ns}")
    _require(0 <= ch.rician_k <= 1e6, "channel.rician_k", f"must be in [0, 1e6] (linear), got {ch.rician_k}")
    _require(math.isfinite(ch.delay_spread_ns * 1e-9 * cfg.uhd.rate), "channel.delay_spread_ns",
             "times uhd.rate must be a finite number of samples")
    mp = Multipath.from_config(cfg)
    _require(ch.multipath == "flat" or len(mp.delays) > 1, "channel.multipath",
             f"{ch.multipath!r} with channel.delay_spread_ns = {ch.delay_spread_ns:g} is one tap at uhd.rate "
             f"({cfg.uhd.rate:g} S/s), the flat channel: give channel.delay_spread_ns a spread of at least one "
             f"sample, or channel.multipath = 'flat'")
    _require(ch.multipath != "flat" or ch.delay_spread_ns == 0, "channel.delay_spread_ns",
             f"{ch.delay_spread_ns:g} ns does nothing with channel.multipath = 'flat': choose a profile "
             f"(exponential, tdl-a, tdl-b, tdl-c) or leave the spread 0")
    _require(mp.length <= 2048, "channel.delay_spread_ns",
             f"spreads the channel over {mp.length} samples at uhd.rate; at most 2048")
    _require(not mp.enabled or cfg.air.name in ("sim", "loopback")
             or (cfg.phy.waveform == "ofdm" and cfg.air.name in ("zmq_inproc", "zmq")), "channel.multipath",
             "is emulated on the sim and loopback airs only (and for OFDM on the zmq airs; uhd sees the air it runs on)")
    _check_front_end(cfg)


def _check_front_end(cfg) -> None:
    """channel.* front-end impairments (channel/front_end.py): ranges, and only where they are emulated."""
    ch, rate = cfg.channel, float(cfg.uhd.rate)
    for key, lo, hi, unit in (("phase_noise", 0, 0.5, "rad per sqrt(sample)"), ("iq_mag_db", -6, 6, "dB"),
                              ("iq_phase_deg", -30, 30, "degrees"), ("dc_offset", 0, 10, "x RMS amplitude"),
                              ("pa_p", 0.1, 100, ""), ("sro_ppm", 0, 1000, "ppm"),
                              ("residual_cfo_hz", 0, 0.01 * rate, "Hz (1 % of uhd.rate)"),
                              ("doppler_hz", 0, 1e-3 * rate, "Hz (0.1 % of uhd.rate)")):
        v = getattr(ch, key)
        _require(isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi, f"channel.{key}",
                 f"must be in [{lo:g}, {hi:g}] {unit}".rstrip() + f", got {v}")
    _require(isinstance(ch.pa_a_sat, (int, float)) and (ch.pa_a_sat == 0 or 0.1 <= ch.pa_a_sat <= 1000),
             "channel.pa_a_sat", f"must be 0 (linear PA) or in [0.1, 1000] x the planned RMS amplitude, got {ch.pa_a_sat}")
    from otafl_sdr.channel.front_end import FrontEnd
    _require(not FrontEnd.from_config(cfg).enabled or cfg.air.name in ("sim", "loopback"), "channel.phase_noise",
             "and the other front-end impairments are emulated on the sim and loopback airs only (zmq and uhd "
             "radios have their own)")
