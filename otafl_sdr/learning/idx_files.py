"""MNIST and Fashion-MNIST from their IDX files in ``data.path`` (gzipped or not); registered as ``mnist``
and ``fashion_mnist``.

IDX (LeCun's format): two zero bytes, a type byte (0x08 unsigned byte, ... 0x0E double), a byte giving the
number of dimensions n, then n big-endian uint32 sizes and the values, big-endian, row-major. Both data sets
ship four files with the same names: ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte`` (each possibly ``.gz``; the dotted spelling
``train-images.idx3-ubyte`` is accepted too). They are looked for in ``data.path`` and in torchvision's
layout below it (``MNIST/raw``, ``FashionMNIST/raw``).

Scaling: pixels are unsigned bytes 0..255, divided by 255 into [0, 1]; nothing else (no mean/std
normalisation). The official split is kept: 60,000 training and 10,000 test images (``RawData.test``);
``data.test_fraction`` does not apply. A file whose magic, type, size or length does not match its header
is refused in one line naming the file; nothing larger than its header says is read (a gzip bomb stops at
the header's size plus one byte)."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.registry import DATASETS
from otafl_sdr.learning.data_files import find_folder
from otafl_sdr.learning.datasets import RawData, check_finite

IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
MAX_BYTES = 1 << 30                      # 1 GiB: MNIST's largest file is 47 MB
FILES = {"train_x": "train-images-idx3-ubyte", "train_y": "train-labels-idx1-ubyte",
         "test_x": "t10k-images-idx3-ubyte", "test_y": "t10k-labels-idx1-ubyte"}


def _open(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _read_exact(f, n: int, path: Path, what: str) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise UserError(f"data.path: '{path}' is truncated: {what} needs {n} bytes, the file has {len(b)}")
    return b


def read_idx(path) -> np.ndarray:
    """The array stored in one IDX file (native byte order); one-line UserError on a bad magic, an unknown
    type, a size over 1 GiB, a truncated file or trailing bytes."""
    path = Path(path)
    try:
        with _open(path) as f:
            head = _read_exact(f, 4, path, "the magic number")
            if head[0] != 0 or head[1] != 0 or head[2] not in IDX_TYPES or not 1 <= head[3] <= 4:
                raise UserError(f"data.path: '{path}' is not an IDX file (magic {head.hex()}; want 0000 then a "
                                f"type byte 08..0e and 1..4 dimensions)")
            n = head[3]
            dims = struct.unpack(f">{n}I", _read_exact(f, 4 * n, path, "the dimensions"))
            dtype = np.dtype(IDX_TYPES[head[2]])
            size = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
            if size > MAX_BYTES:
                raise UserError(f"data.path: '{path}' claims {dims} values ({size} bytes), more than the "
                                f"{MAX_BYTES >> 20} MiB an IDX file may hold here")
            body = _read_exact(f, size, path, f"{'x'.join(map(str, dims))} values")
            if f.read(1):
                raise UserError(f"data.path: '{path}' has bytes after the {'x'.join(map(str, dims))} values its "
                                f"header announces")
    except (OSError, EOFError, gzip.BadGzipFile, struct.error) as e:
        raise UserError(f"data.path: cannot read IDX file '{path}' ({type(e).__name__}: {e})") from None
    return np.frombuffer(body, dtype=dtype).reshape(dims).astype(dtype.newbyteorder("="))


def _find(folder: Path, stem: str) -> Path | None:
    a, b, c = stem.rsplit("-", 2)
    dotted = f"{a}.{b}-{c}"                                  # train-images-idx3-ubyte -> train-images.idx3-ubyte
    for name in (stem, stem + ".gz", dotted, dotted + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def load_idx_pair(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray, Path]:
    """(images (n, 28, 28) uint8, labels (n,) int64, the images' file) of ``split`` ("train" or "test")."""
    px, py = _find(folder, FILES[split + "_x"]), _find(folder, FILES[split + "_y"])
    if px is None or py is None:
        raise UserError(f"data.path: '{folder}' lacks {FILES[split + '_x' if px is None else split + '_y']}[.gz]")
    x, y = read_idx(px), read_idx(py)
    if x.dtype != np.uint8 or x.ndim != 3:
        raise UserError(f"data.path: '{px}' must hold unsigned bytes of shape (n, rows, cols), got {x.dtype} "
                        f"{x.shape}")
    if y.dtype != np.uint8 or y.ndim != 1 or len(y) != len(x):
        raise UserError(f"data.path: '{py}' must hold {len(x)} unsigned-byte labels (one per image of '{px.name}'), "
                        f"got {y.dtype} {y.shape}")
    if len(y) and y.max() > 9:
        raise UserError(f"data.path: '{py}' has label {int(y.max())}; MNIST / Fashion-MNIST labels are 0..9")
    return x, y.astype(np.int64), px


def load_idx_dataset(cfg, name: str, subfolder: str) -> RawData:
    """Both splits of an MNIST-like data set, pixels / 255 in [0, 1], official test split in ``test``."""
    folder = find_folder(cfg, name, lambda p: _find(p, FILES["train_x"]) is not None, [subfolder],
                         "train-images-idx3-ubyte[.gz]")
    xs, ys = [], []
    for split in ("train", "test"):
        x, y, px = load_idx_pair(folder, split)
        if xs and x.shape[1:] != xs[0].shape[1:]:
            raise UserError(f"data.path: '{px}' holds {x.shape[1]}x{x.shape[2]} images, the training file "
                            f"{xs[0].shape[1]}x{xs[0].shape[2]}")
        xs.append(x)
        ys.append(y)
    h, w = xs[0].shape[1:]
    x = np.concatenate(xs).reshape(-1, h * w).astype(np.float32) / np.float32(255.0)
    check_finite(x, f"'{folder}'")
    test = np.zeros(len(x), dtype=bool)
    test[len(xs[0]):] = True
    return RawData(x, np.concatenate(ys), 10, (1, h, w), test=test)


@DATASETS.register("mnist", "MNIST from its IDX files (gzipped or not) in data.path: 60,000 + 10,000 official test "
                            "digits, 28x28, pixels / 255 in [0,1]; data.download = true fetches them (torchvision)")
def load_mnist(cfg, rng: np.random.Generator) -> RawData:
    return load_idx_dataset(cfg, "mnist", "MNIST/raw")


@DATASETS.register("fashion_mnist", "Fashion-MNIST from its IDX files (gzipped or not) in data.path: 60,000 + "
                                    "10,000 official test images, 28x28, pixels / 255 in [0,1]; data.download = "
                                    "true fetches them (torchvision)")
def load_fashion_mnist(cfg, rng: np.random.Generator) -> RawData:
    return load_idx_dataset(cfg, "fashion_mnist", "FashionMNIST/raw")
