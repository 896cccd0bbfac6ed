"""What every config key means: ``otafl-sdr config --explain [KEY]`` and the comments of ``otafl-sdr config``.

Nothing is written twice: the type and default come from the dataclasses (config/schema.py), the meaning from the
comment beside each field there (MEANING below only for the fields that have none), the range from what
``config_validation.validate`` says when the key is set out of bounds (probed on the default experiment),
the default experiment's value from default_experiment.toml. Units and papers are per key (UNITS, PAPERS).
``tests/cli/test_config_explain.py`` fails when a key has no meaning."""
from __future__ import annotations

import copy
import dataclasses
import inspect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import get_type_hints

import tomli_w

from otafl_sdr.config.schema import Config, to_dict
from otafl_sdr.errors import ConfigError, UserError

# fields of config.py without a comment beside them (keep these few; a comment in config.py is preferred)
MEANING = {
    "run.seed": "seed of everything seeded (data split, model init, channels; the noise too on sim / loopback)",
    "run.name": "names the results folder (results/NAME-TIMESTAMP) and the run in tables",
    "run.torch_threads": "CPU threads torch uses for local training",
    "run.eval_every": "evaluate the model on the test set every N iterations (and always at the last one)",
    "data.clients": "number of clients K (devices) the training data is split over",
    "data.classes_per_client": "partition classes_per_client: how many classes each client holds",
    "data.dirichlet_alpha": "partition dirichlet: concentration of the per-client class mix (small = skewed)",
    "data.test_fraction": "share of the data set held out as the pooled test set",
    "data.synthetic_beta": "Synthetic(alpha, beta) of FedProx: beta (how much the devices' inputs differ)",
    "data.synthetic_iid": "synthetic data set: every device draws from one model (IID) instead of its own",
    "data.synthetic_dim": "synthetic data set: feature dimension",
    "data.synthetic_classes": "synthetic data set: number of classes",
    "data.synthetic_samples": "synthetic data set: samples over all devices",
    "train.local_epochs": "local epochs per client round",
    "train.batch_size": "local mini-batch size (>= a client's data: one full-batch step)",
    "train.lr": "local learning rate",
    "train.momentum": "local SGD momentum",
    "algorithm.lambda_schedule": "Upcycled-FL's lambda_m: [[last_m, lambda], ...], lambda for client rounds m <= last_m",
    "algorithm.options": "the algorithm's own options table (see `otafl-sdr list` and docs/extending.md)",
    "power.options": "the power policy's own options table (see `otafl-sdr list` and docs/extending.md)",
    "privacy.delta": "the delta of the (eps, delta) target / budget",
    "privacy.report": "accountants whose epsilon is reported beside the enforcing one",
    "channel.jammer_fading": "fading of the jammer's channel: rayleigh | awgn (h_cj = 1)",
    "uhd.jammer_args": "UHD device arguments of the jammer radio",
    "uhd.rx_args": "UHD device arguments of the receiver (server) radio",
    "uhd.freq": "carrier frequency",
    "uhd.rate": "sample rate of every radio",
    "uhd.tx_gain": "transmit gain of the client and jammer radios",
    "uhd.tx_gains": "per-radio transmit gains ('client-0', 'jammer' or a serial -> dB), the others at uhd.tx_gain; "
                    "pick them with `otafl-sdr calibrate gains` (firmware_notes/second_week.md, Power)",
    "uhd.payload_papr_db": "the payload's planned peak over its rms: a round's planned peak above the DAC's full "
                           "scale is scaled down (tx_scale in rounds.jsonl); past a PA's compression onset refused",
    "uhd.rx_gain": "receive gain of the server's radio",
    "net.bind": "address the server's control plane binds (127.0.0.1: this machine only)",
    "net.timeout_s": "seconds to wait for a node's answer before it counts as dead",
    "net.heartbeat_s": "seconds between the nodes' heartbeats",
}

UNITS = {
    "run.rounds": "client rounds", "run.checkpoint_every": "iterations", "run.eval_every": "iterations",
    "train.local_epochs": "epochs", "train.batch_size": "samples", "train.tau": "L2 norm (model units)",
    "train.sample_clip": "L2 norm (gradient units)", "data.max_samples": "samples",
    "data.synthetic_samples": "samples", "model.hidden": "units",
    "power.max_snr_db": "dB (P_i / (d sigma_c2))", "power.jammer_max_snr_db": "dB (P_cj / (d sigma_c2))",
    "power.jammer_multiple": "x Theorem 2's lower bound", "power.alpha_u_quantile": "Rayleigh quantile",
    "privacy.eps": "epsilon", "privacy.delta": "probability", "channel.sigma_c2": "variance per real coordinate",
    "channel.delay_spread_ns": "ns (RMS)", "channel.rician_k": "linear (K factor)", "air.retries": "attempts",
    "channel.phase_noise": "rad per sqrt(sample)", "channel.iq_mag_db": "dB", "channel.iq_phase_deg": "degrees",
    "channel.dc_offset": "x planned RMS amplitude", "channel.pa_a_sat": "x planned RMS amplitude",
    "channel.sro_ppm": "ppm", "channel.residual_cfo_hz": "Hz", "channel.doppler_hz": "Hz",
    "air.recalibrate_every": "iterations", "phy.sps": "samples per symbol", "phy.rrc_span": "symbols",
    "phy.preamble_len": "symbols", "phy.pilot_spacing": "symbols", "phy.guard": "samples",
    "phy.ofdm_fft": "subcarriers (FFT size)", "phy.ofdm_cp": "samples", "phy.ofdm_used": "subcarriers",
    "phy.ofdm_pilot_spacing": "subcarriers", "phy.ofdm_train": "OFDM symbols", "phy.ofdm_truncation": "|G|^2 (linear)",
    "loopback.client_cfo_max": "cycles/sample", "loopback.rx_cfo": "cycles/sample",
    "loopback.residual_cfo": "cycles/sample", "loopback.client_delay_max": "samples", "loopback.rx_delay": "samples",
    "loopback.residual_delay": "samples", "loopback.rx_phase_noise": "rad per sample",
    "loopback.residual_phase": "rad", "uhd.freq": "Hz", "uhd.rate": "samples/s", "uhd.tx_gain": "dB",
    "uhd.tx_gains": "dB per radio", "uhd.payload_papr_db": "dB",
    "uhd.rx_gain": "dB", "uhd.start_delay": "s", "uhd.feedback_gap_s": "s", "uhd.clock_tolerance_s": "s", "uhd.lo_offset": "Hz", "net.port": "TCP port",
    "net.timeout_s": "s", "net.heartbeat_s": "s", "net.max_attacked_rounds": "rounds",
    "calibration.max_age_days": "days", "calibration.max_phase_age_min": "min",
}

PAPERS = {
    "run.rounds": "paper 000 sec. V (M rounds; Upcycled-FL's 2M iterations)",
    "algorithm.lambda_schedule": "paper 000 sec. V", "algorithm.mu": "paper 000 (Upcycled-FL), FedProx",
    "power.policy": "paper 000 (cj_adaptive), 001 (cdpb_*), 004 (lapa, ddpg)",
    "power.max_snr_db": "paper 000 sec. V", "power.alpha_u": "paper 000 eq. 16",
    "power.alpha_u_quantile": "paper 000 eq. 16", "power.jammer": "paper 000 (cooperative jammer)",
    "power.jammer_multiple": "paper 000 Theorem 2", "power.jammer_max_snr_db": "paper 000",
    "privacy.eps": "every paper's (eps, delta) target", "privacy.delta": "every paper's (eps, delta) target",
    "privacy.unit": "paper 000 (1/|D| sample-level), privacy/sensitivity.py",
    "privacy.targeting": "paper 000 Theorem 2 (paper), privacy/targeting.py (target)",
    "privacy.accountant": "paper 000 closed form, RDP (Mironov), PLD (dp-accounting)",
    "train.tau": "paper 000 Assumption 1", "train.sample_clip": "DP-SGD (Abadi et al.)",
    "channel.sigma_c2": "paper 000 sec. V (SNR_i = P_i / (d sigma_c2))", "channel.fading": "paper 000 sec. V",
    "data.dataset": "paper 000 (MNIST, FEMNIST), FedProx (synthetic)", "data.synthetic_alpha": "FedProx sec. 5.1",
    "data.synthetic_beta": "FedProx sec. 5.1", "data.femnist_classes": "paper 000 (FEMNIST 'a'..'j')",
    "data.iid_devices": "paper 004 Fig. 6", "model.hidden": "paper 000 (14x14 = 196 hidden units)",
    "algorithm.name": "paper 000 (upcycled_fl), 002 (noisy_fedavg), 003 (otafd)",
}


@dataclass
class KeyInfo:
    key: str
    type: str
    default: object
    experiment: object          # the default experiment's value
    meaning: str
    unit: str
    paper: str
    range: str = ""             # filled by explain() (probing validation costs a few seconds for every key)
    rules: list = field(default_factory=list)   # what ties the key to others (configure/key_rules.py)
    shown_default: str = ""     # the default as printed where it is not one value (an option's, per implementation)

    def lines(self) -> list[str]:
        def show(v):                  # one line, lists of lists included
            if isinstance(v, list):
                return "[" + ", ".join(show(x) for x in v) + "]"
            return tomli_w.dumps({"v": v})[4:].strip() if not isinstance(v, dict) else (str(v) if v else "{}")
        out = [f"{self.key}  ({self.type}{', ' + self.unit if self.unit else ''})", f"  meaning:  {self.meaning}"]
        d = f"  default:  {self.shown_default or show(self.default)}"
        if self.experiment != self.default:
            d += f"  (the default experiment: {show(self.experiment)})"
        out += [d, f"  range:    {self.range}"] + [f"  rule:     {r}" for r in self.rules]
        return out + [f"  paper:    {self.paper}"]


def _comments(cls) -> dict[str, str]:
    """{field: the comment beside it in config.py, its continuation lines joined}."""
    out, last = {}, None
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+): [^=]+=.*?(?:#\s*(.*))?$", line)
        if m and not line.strip().startswith("#"):
            last = m.group(1) if m.group(2) else None
            if m.group(2):
                out[last] = m.group(2).strip()
            continue
        c = re.match(r"\s+#\s*(.*)$", line)
        if c and last:
            out[last] += " " + c.group(1).strip()
        else:
            last = None
    return out


def _type_name(t) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "table"}.get(t, str(t))


_PROBES = {int: (-(2**31 - 1), -1, 0, 2**31 - 1), float: (-1e12, -1.0, 0.0, 1e-320, 1e12),
           str: ("?",), bool: (), list: (), dict: ()}


def _range(cfg: Config, section: str, name: str, typ) -> str:
    """What validation says of out-of-bounds values of the key (its own words, 'got ...' dropped)."""
    from otafl_sdr.configure.validation import validate
    said: list[str] = []
    for v in _PROBES.get(typ, ()):
        c = copy.deepcopy(cfg)
        setattr(getattr(c, section), name, v)
        try:
            validate(c)
        except ConfigError as e:
            if e.key == f"{section}.{name}":
                msg = re.sub(r",? got .*$", "", str(e).split(": ", 1)[1]).strip().rstrip(";,")
                msg = re.sub(r"^unknown [\w ]+ '\?'; allowed:", "one of:", msg)
                if msg and msg not in said:
                    said.append(msg)
        except Exception:  # noqa: BLE001 - a probe that validation does not take as a config error says nothing
            pass
    if not said:
        return {bool: "true or false", list: "a list", dict: "a table of the implementation's options"}.get(
            typ, "any value of its type (checked when the run is built)")
    return one_range(said)


_INTERVAL = re.compile(r"^must be (?:in|within) [\[(]")
_BOUND = re.compile(r"^must be (>=|>|<=|<) ([-+0-9.eE]+)$")


def one_range(said: list[str]) -> str:
    """What validation said of a key's out-of-bounds values as one range: the first interval it states (two
    checks of one key may state the same interval twice, in other words), or its lower and upper bounds
    joined into one; other conditions (a choice, a shape) beside it."""
    intervals = [m for m in said if _INTERVAL.match(m)]
    bounds = [_BOUND.match(m) for m in said]
    rest = [m for m, b in zip(said, bounds) if not b and m not in intervals]
    if intervals:
        return "; ".join(intervals[:1] + rest)
    low = next((b for b in bounds if b and b.group(1).startswith(">")), None)
    high = next((b for b in bounds if b and b.group(1).startswith("<")), None)
    if low and high:
        joined = (f"must be in {'[' if low.group(1) == '>=' else '('}{low.group(2)}, "
                  f"{high.group(2)}{']' if high.group(1) == '<=' else ')'}")
        return "; ".join([joined] + rest)
    return "; ".join([b.group(0) for b in (low, high) if b] + rest)


@lru_cache(maxsize=1)
def explain_all() -> dict[str, KeyInfo]:
    """{dotted key: KeyInfo} for every key of the config, in the order `otafl-sdr config` prints them."""
    from otafl_sdr.configure.load import default_experiment
    exp = default_experiment()
    base = Config()
    out: dict[str, KeyInfo] = {}
    for sec in dataclasses.fields(Config):
        cls = sec.default_factory
        comments, hints = _comments(cls), get_type_hints(cls)
        for f in dataclasses.fields(cls):
            key = f"{sec.name}.{f.name}"
            typ = hints[f.name]
            out[key] = KeyInfo(key=key, type=_type_name(typ), default=getattr(getattr(base, sec.name), f.name),
                               experiment=getattr(getattr(exp, sec.name), f.name),
                               meaning=MEANING.get(key) or comments.get(f.name, ""), unit=UNITS.get(key, ""),
                               paper=PAPERS.get(key, "the testbed (no paper)"))
            out[key].probe = (sec.name, f.name, typ)
    return out


def one_line(key: str) -> str:
    """The key's meaning cut to its first sentence (the comment `otafl-sdr config` writes above it)."""
    info = explain_all()[key]
    text = info.meaning.split("; ")[0] if len(info.meaning) > 110 else info.meaning
    text = text if len(text) <= 110 else text[:107] + "..."
    return text + (f" [{info.unit}]" if info.unit else "")


def explain(key: str | None = None) -> str:
    """``otafl-sdr config --explain [KEY]``: one key, a section (``run``), or every key."""
    infos = {**explain_all(), **_option_infos()}
    if key:
        chosen = [i for k, i in infos.items() if k == key or k.startswith(key + ".")]
        if not chosen:
            sections = sorted({k.split(".")[0] for k in infos})
            raise UserError(f"config --explain: no key '{key}'; give a dotted key (run.rounds) or a section "
                            f"({', '.join(sections)})")
    else:
        chosen = list(infos.values())
    from otafl_sdr.configure.key_rules import key_rules
    if any(not i.range for i in chosen):
        from otafl_sdr.configure.load import default_experiment
        from otafl_sdr.configure.option_keys import option_range
        exp = default_experiment()
        for i in (i for i in chosen if not i.range):
            i.range = _range(exp, *i.probe) if hasattr(i, "probe") else option_range(i.key)
    for i in chosen:                   # every key's ties to others, a boolean's too (its range is fixed)
        i.rules = key_rules().get(i.key, [])
    return "\n".join("\n".join(i.lines() + _options_lines(i.key)) for i in chosen) + "\n"


@lru_cache(maxsize=1)
def _option_infos() -> dict[str, KeyInfo]:
    """The option tables' dotted keys (power.options.rho, ...) as KeyInfos, after the table's own key."""
    from otafl_sdr.configure.option_keys import option_keys
    out = {}
    for key, o in option_keys().items():
        defaults = o["defaults"]
        values = {repr(v) for v in defaults.values()}
        shown = (f"{next(iter(defaults.values()))!r} ({', '.join(defaults)})" if len(values) == 1 else
                 ", ".join(f"{n}: {v!r}" for n, v in defaults.items()))
        table = key.rpartition(".")[0]
        out[key] = KeyInfo(key=key, type=_type_name(o["type"]), default=None, experiment=None,
                           meaning=o["meaning"] or f"an option of {', '.join(defaults)} ({table})",
                           unit="", paper=f"the implementation's own (otafl-sdr list; {table})", shown_default=shown)
    return out


def _options_lines(key: str) -> list[str]:
    """power.options / algorithm.options: each registered implementation's option names and defaults (its
    ``Options`` dataclass, which validates the table)."""
    from otafl_sdr.registry import ALGORITHMS, POWER_POLICIES
    reg = {"power.options": POWER_POLICIES, "algorithm.options": ALGORITHMS}.get(key)
    if reg is None:
        return []
    out = ["  options by implementation (name = default):"]
    for name in reg.names():
        opts = getattr(reg.get(name), "Options", None)
        fields = dataclasses.fields(opts) if opts is not None and dataclasses.is_dataclass(opts) else ()
        shown = ", ".join(f"{f.name} = {_default(f)}" for f in fields) or "none"
        out.append(f"    {name}: {shown}")
    return out


def _default(f) -> str:
    if f.default is not dataclasses.MISSING:
        return repr(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return repr(f.default_factory())
    return "(required)"


def commented_toml(cfg: Config) -> str:
    """The config as TOML (loads back to the same values) with each key's one-line meaning above it."""
    d = to_dict(cfg)
    parts: list[str] = []
    for section, values in d.items():
        parts.append(f"[{section}]")
        tables = {}
        for k, v in values.items():
            if isinstance(v, dict):
                tables[k] = v
                continue
            parts.append(f"# {one_line(f'{section}.{k}')}")
            parts.append(tomli_w.dumps({k: v}).rstrip("\n"))
        for k, v in tables.items():
            parts.append(f"# {one_line(f'{section}.{k}')}")
            parts.append(tomli_w.dumps({section: {k: v}}).rstrip("\n") if v else f"[{section}.{k}]")
        parts.append("")
    return "\n".join(parts)
