"""A seeded generator of hostile files for the readers' property tests (test_hostile_files.py): each kind
replaces one file of a results folder, a recording or a sweep with something otafl-sdr never writes."""
import json
import math
import random
import shutil
import tomllib
from pathlib import Path

import numpy as np
import tomli_w

COMMON = ["empty", "folder", "garbage", "truncated", "missing"]
JSON_KINDS = COMMON + ["deep_array", "deep_object", "wrong_types", "non_object", "nan", "huge_number", "huge_int",
                       "long_line", "bool_round"]
TOML_KINDS = COMMON + ["deep_array", "wrong_types", "nan", "huge_number", "huge_int", "not_utf8"]
CSV_KINDS = COMMON + ["wrong_types", "not_utf8"]
JUNK = [None, "x", [], {}, -1, 0, 1e308, True, [[1]], "NaN", 10**30, -1e-300, "\u202e\x00", {"round": 1}]


def variants(name: str) -> list[str]:
    """The kinds of hostile file that fit a file of this name."""
    if name.endswith((".json", ".jsonl", ".sigmf-meta")):
        return JSON_KINDS
    if name.endswith(".toml"):
        return TOML_KINDS
    if name.endswith(".csv"):
        return CSV_KINDS
    return COMMON                                   # checkpoint.pt, .sigmf-data: binary


def _mutate(obj, rng: random.Random, p: float):
    """``obj`` with leaves (and some containers) replaced by junk of another type with probability p."""
    if isinstance(obj, dict):
        return {k: (rng.choice(JUNK) if rng.random() < p / 3 else _mutate(v, rng, p)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_mutate(v, rng, p) for v in obj]
    return rng.choice(JUNK) if rng.random() < p else obj


def _numbers(obj, rng: random.Random, values):
    if isinstance(obj, dict):
        return {k: _numbers(v, rng, values) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_numbers(v, rng, values) for v in obj]
    if isinstance(obj, (int, float)) and not isinstance(obj, bool) and rng.random() < 0.7:
        return rng.choice(values)
    return obj


def _json_docs(text: str, jsonl: bool) -> list:
    if jsonl:
        return [json.loads(x) for x in text.splitlines() if x.strip()]
    return [json.loads(text)]


def _dump_json(docs: list, jsonl: bool) -> str:
    if jsonl:
        return "".join(json.dumps(d, allow_nan=True) + "\n" for d in docs)
    return json.dumps(docs[0], allow_nan=True)


def write_variant(path: Path, kind: str, rng: random.Random) -> None:
    """Replace ``path`` (which holds a genuine file, or nothing) by a hostile file of ``kind``."""
    path = Path(path)
    original = path.read_bytes() if path.is_file() else b""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    jsonl = path.suffix == ".jsonl"
    if kind == "missing":
        return
    if kind == "folder":
        path.mkdir()
        (path / "inner").write_text("x")
        return
    data: bytes
    if kind == "empty":
        data = b""
    elif kind == "garbage":
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096)))
    elif kind == "not_utf8":
        data = original[: len(original) // 2] + b"\xff\xfe\x00\xc3" + original[len(original) // 2:]
    elif kind == "truncated":
        data = original[: rng.randrange(max(1, len(original)))]
    elif kind == "deep_array":
        deep = "[" * 100_000 + "]" * 100_000
        if path.suffix == ".toml":
            data = (f"x = {deep}\n").encode() + original
        elif jsonl:
            lines = original.decode().splitlines()
            lines.insert(rng.randrange(len(lines) + 1), deep)
            data = ("\n".join(lines) + "\n").encode()
        else:
            data = deep.encode()
    elif kind == "deep_object":
        data = ('{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n").encode()
    elif kind == "non_object":
        data = (rng.choice(["[1, 2]", '"x"', "null", "3", "true"]) + "\n").encode()
    elif kind == "long_line":
        data = original + b'{"round": 99, "x": "' + b"A" * 3_000_000 + b'"}\n'
    elif kind == "huge_int":
        big = "9" * 5000
        data = (f"x = {big}\n".encode() + original if path.suffix == ".toml"
                else original.replace(b"1", big.encode(), 3))
    elif path.suffix == ".toml":
        cfg = tomllib.loads(original.decode())
        if kind == "wrong_types":
            cfg = _mutate(cfg, rng, 0.3)
            cfg = {k: v for k, v in cfg.items() if v is not None}
            data = _toml(cfg)
        else:
            values = [math.nan, math.inf, -math.inf] if kind == "nan" else [1e308, -1e308, 2**62, -(2**62)]
            data = _toml(_numbers(cfg, rng, values))
    elif path.suffix == ".csv":
        data = b"final_accuracy,arm\n" + b"\n".join(rng.choice([b"x,y", b"1e999,a", b",", b"nan,,,,"]) for _ in range(5))
    else:                                            # JSON / JSONL / SigMF metadata
        docs = _json_docs(original.decode(), jsonl)
        if kind == "wrong_types":
            docs = [_mutate(d, rng, 0.3) for d in docs]
        elif kind == "nan":
            docs = [_numbers(d, rng, [math.nan, math.inf, -math.inf]) for d in docs]
        elif kind == "huge_number":
            docs = [_numbers(d, rng, [1e308, -1e308, 10**30, 2**64]) for d in docs]
        elif kind == "bool_round":
            docs = [{**d, "round": True} if isinstance(d, dict) and "round" in d else d for d in docs]
        data = _dump_json(docs, jsonl).encode()
    path.write_bytes(data)


def _toml(obj) -> bytes:
    def clean(v):
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items() if x is not None}
        if isinstance(v, list):
            return [clean(x) for x in v if x is not None]
        return v
    try:
        return tomli_w.dumps(clean(obj)).encode()
    except (TypeError, ValueError):
        return b"[run]\nrounds = 'x'\n"


def make_recording(folder: Path) -> Path:
    """A genuine SigMF recording of one round (two clients' bursts through the phy modem, d = 101), as
    tests/radio/test_recording_sigmf.py makes them; returns its .sigmf-meta."""
    from otafl_sdr.config.schema import Config
    from otafl_sdr.phy import Modem, pack_reals
    from otafl_sdr.phy.reference import reference_gains
    from otafl_sdr.radio.recording import Recorder, round_meta
    from otafl_sdr.transmission import Mechanism, RoundPlan
    rng = np.random.default_rng(7)
    K, d = 2, 101
    payload = rng.standard_normal((K, d)) / np.sqrt(d)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    p = np.full(K, 1.0 / K)
    alpha = p * 5.0 / h
    plan = RoundPlan(round=1, payload=payload, alpha=alpha, h=h, target_gain=p, alpha_u=5.0, alpha_cj=0.0, h_cj=0j,
                     sigma_c2=1e-4, mode=["update"] * K, mechanism=Mechanism(round=1, sensitivity=1.0, sigma_eff=0.1))
    cfg = Config()
    modem = Modem(cfg.phy)
    n_sym = (d + 1) // 2
    ref_gain, ref_amp = reference_gains(h, np.ones(K), modem.layout(n_sym).n_reference)
    y = sum(h[i] * modem.modulate(alpha[i] * pack_reals(payload[i]), ref_gain[i]) for i in range(K))
    y = np.concatenate([np.zeros(20), y, np.zeros(20)])
    y = y + 1e-2 * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    meta = round_meta(cfg, plan, sample_rate=1e6, ref_amplitude=ref_amp, n_symbols=n_sym, modem=modem,
                      air="loopback", hw="test")
    return Path(Recorder(folder).record(1, y.astype(np.complex64), meta))
