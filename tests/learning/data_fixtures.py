"""Tiny files in each data set's real format, written the way the data sets ship them: MNIST-style IDX
(big-endian header, magic 0x00000803 / 0x00000801, optionally gzipped), CIFAR python pickle batches (a dict
of a (n, 3072) uint8 array and a label list, as Python 3 pickles it) and LEAF JSON (FEMNIST)."""
import gzip
import json
import pickle
import struct
from pathlib import Path

import numpy as np


def idx_bytes(arr: np.ndarray) -> bytes:
    """An IDX file of an unsigned-byte array: 0x00 0x00 0x08 ndim, the sizes as big-endian uint32, the data."""
    arr = np.asarray(arr, dtype=np.uint8)
    return bytes([0, 0, 0x08, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def write_idx(path: Path, arr: np.ndarray, gz: bool = False) -> Path:
    b = idx_bytes(arr)
    if gz:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb") as f:
            f.write(b)
    else:
        path.write_bytes(b)
    return path


def class_images(y: np.ndarray, shape: tuple, seed: int) -> np.ndarray:
    """uint8 images whose class shows as a bright band (learnable in a round or two), plus noise."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 60, size=(len(y),) + shape, dtype=np.int64)
    rows = shape[-2]
    for i, c in enumerate(y):
        r = int(c) * rows // 10
        x[i, ..., r:r + max(1, rows // 10), :] = 255
    return x.astype(np.uint8)


def make_mnist(folder: Path, n_train: int = 120, n_test: int = 40, gz: bool = True, seed: int = 0) -> Path:
    """The four MNIST / Fashion-MNIST files (28x28, labels 0..9) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("t10k", n_test)):
        y = np.arange(n) % 10
        rng.shuffle(y)
        write_idx(folder / f"{split}-images-idx3-ubyte", class_images(y, (28, 28), seed + n), gz)
        write_idx(folder / f"{split}-labels-idx1-ubyte", y, gz)
    return folder


def cifar_batch(n: int, classes: int, label_key: str, seed: int) -> dict:
    y = np.arange(n) % classes
    x = class_images(y % 10, (3, 32, 32), seed).reshape(n, 3072)
    return {b"batch_label": b"tiny batch", label_key.encode(): [int(v) for v in y], b"data": x,
            b"filenames": [f"img_{i}.png".encode() for i in range(n)]}


def make_cifar10(folder: Path, per_batch: int = 20, n_test: int = 20) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, 6):
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(cifar_batch(per_batch, 10, "labels", i), protocol=4))
    (folder / "test_batch").write_bytes(pickle.dumps(cifar_batch(n_test, 10, "labels", 9), protocol=4))
    return folder


def make_cifar100(folder: Path, n_train: int = 100, n_test: int = 30) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, n, seed in (("train", n_train, 1), ("test", n_test, 2)):
        d = cifar_batch(n, 100, "fine_labels", seed)
        d[b"coarse_labels"] = [v // 5 for v in d[b"fine_labels"]]
        (folder / name).write_bytes(pickle.dumps(d, protocol=2))
    return folder


def make_leaf(folder: Path, writers: int = 4, per_writer: int = 20, seed: int = 0) -> Path:
    """One LEAF JSON file of FEMNIST-like writers (784 floats in [0, 1], labels among 'a'..'j' = 36..45)."""
    folder.mkdir(parents=True, exist_ok=True)
    users, data = [], {}
    for w in range(writers):
        y = 36 + (np.arange(per_writer) + w) % 10
        x = 1.0 - class_images(y - 36, (28, 28), seed + w).reshape(per_writer, 784) / 255.0
        users.append(f"f{w:04d}")
        data[users[-1]] = {"x": x.round(4).tolist(), "y": y.tolist()}
    blob = {"users": users, "num_samples": [per_writer] * writers, "user_data": data}
    (folder / "all_data_0.json").write_text(json.dumps(blob))
    return folder
