"""CIFAR-10 and CIFAR-100 from their python pickle batches in ``data.path``; registered as ``cifar10`` and
``cifar100``.

The files (Krizhevsky's "python version"): CIFAR-10 ``data_batch_1`` .. ``data_batch_5`` (50,000 training
images) and ``test_batch`` (10,000), CIFAR-100 ``train`` (50,000) and ``test`` (10,000); each a pickled dict
whose ``data`` is a (n, 3072) uint8 array (1024 red, 1024 green, 1024 blue values of a 32x32 image, row-major)
and whose ``labels`` (CIFAR-10) or ``fine_labels`` (CIFAR-100, 100 classes) is a list of ints. They are looked
for in ``data.path`` and in ``cifar-10-batches-py`` / ``cifar-100-python`` below it (the archives' and
torchvision's layout).

Safety: a pickle can name any function to call. These are read by :class:`BatchUnpickler`, which refuses every
global except what a numpy array needs (numpy's own array reconstructors, ``numpy.ndarray``, ``numpy.dtype``;
``_codecs.encode`` only to latin-1 bytes); a file naming anything else (``os.system``, ``builtins.eval``, a
class) is refused in one line before anything it names is looked up, let alone called. Files over 1 GiB are
refused unread.

Scaling: values are unsigned bytes 0..255, divided by 255 into [0, 1]; no per-channel normalisation. The
official split is kept (``RawData.test``); ``data.test_fraction`` does not apply."""
from __future__ import annotations

import codecs
import io
import pickle
from pathlib import Path

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.registry import DATASETS
from otafl_sdr.learning.data_files import find_folder
from otafl_sdr.learning.datasets import RawData, check_finite

MAX_BYTES = 1 << 30
CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
CIFAR100_FILES = ["train", "test"]


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    """``_codecs.encode`` as Python 3 writes bytes into a protocol-2 pickle: latin-1 only."""
    if encoding != "latin1" or not isinstance(obj, str) or errors != "strict":
        raise pickle.UnpicklingError(f"_codecs.encode to {encoding!r} is not allowed")
    return codecs.encode(obj, "latin1")


def _allowed_globals() -> dict:
    a = np.zeros((1, 1), dtype=np.uint8)
    reconstruct, frombuffer = a.__reduce__()[0], a.__reduce_ex__(5)[0]
    allowed = {("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("_codecs", "encode"): _latin1_encode}
    for core in ("numpy.core", "numpy._core"):           # numpy 1 and numpy 2 write different module names
        allowed[(f"{core}.multiarray", "_reconstruct")] = reconstruct
        allowed[(f"{core}.numeric", "_frombuffer")] = frombuffer
    return allowed


class BatchUnpickler(pickle.Unpickler):
    """An unpickler that builds only dicts, lists, strings, numbers and numpy arrays."""

    _ALLOWED = _allowed_globals()

    def find_class(self, module, name):
        fn = self._ALLOWED.get((module, name))
        if fn is None:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a CIFAR batch never does "
                                         f"(refused unexecuted)")
        return fn

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it holds a persistent id, which a CIFAR batch never does")


def read_batch(path) -> dict:
    """The dict of one CIFAR pickle, keys as str; one-line UserError for a hostile, torn or foreign file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise UserError(f"data.path: '{path}' is {size >> 20} MiB; a CIFAR batch is under {MAX_BYTES >> 20} "
                            f"MiB (refused unread)")
        blob = path.read_bytes()
    except OSError as e:
        raise UserError(f"data.path: cannot read '{path}' ({type(e).__name__}: {e})") from None
    try:
        obj = BatchUnpickler(io.BytesIO(blob), encoding="latin1").load()
    except Exception as e:          # only allowed globals ran: any failure is a bad file, said in one line
        msg = " ".join(str(e).split())[:200]
        raise UserError(f"data.path: '{path}' is not a CIFAR python batch ({type(e).__name__}: {msg})") from None
    if not isinstance(obj, dict):
        raise UserError(f"data.path: '{path}' is not a CIFAR python batch (a {type(obj).__name__}, not a dict)")
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def batch_arrays(path, label_key: str, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(data (n, 3072) uint8, labels (n,) int64) of one batch file, checked."""
    d = read_batch(path)
    x, y = d.get("data"), d.get(label_key)
    if not isinstance(x, np.ndarray) or x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072:
        what = f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__
        raise UserError(f"data.path: '{path}': 'data' must be a (n, 3072) uint8 array, got {what}")
    try:
        y = np.asarray(y, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        y = None
    if y is None or y.ndim != 1 or len(y) != len(x):
        raise UserError(f"data.path: '{path}': '{label_key}' must be a list of {len(x)} integer labels")
    if len(y) and (y.min() < 0 or y.max() >= num_classes):
        raise UserError(f"data.path: '{path}': labels must be in 0..{num_classes - 1}, got {int(y.min())}.."
                        f"{int(y.max())}")
    return x, y


def load_cifar(cfg, name: str, files: list[str], subfolder: str, label_key: str, num_classes: int) -> RawData:
    folder = find_folder(cfg, name, lambda p: all((p / f).is_file() for f in files), [subfolder],
                         ", ".join(files))
    xs, ys = zip(*(batch_arrays(folder / f, label_key, num_classes) for f in files))
    x = np.concatenate(xs).astype(np.float32) / np.float32(255.0)
    check_finite(x, f"'{folder}'")
    test = np.zeros(len(x), dtype=bool)
    test[len(x) - len(xs[-1]):] = True                    # the last file is the test batch
    return RawData(x, np.concatenate(ys), num_classes, (3, 32, 32), test=test)


@DATASETS.register("cifar10", "CIFAR-10 from its python pickle batches in data.path (read by a restricted "
                              "unpickler): 50,000 + 10,000 official test colour images, 3x32x32, 10 classes, "
                              "values / 255 in [0,1]; data.download = true fetches them (torchvision)")
def load_cifar10(cfg, rng: np.random.Generator) -> RawData:
    return load_cifar(cfg, "cifar10", CIFAR10_FILES, "cifar-10-batches-py", "labels", 10)


@DATASETS.register("cifar100", "CIFAR-100 from its python pickles 'train' and 'test' in data.path (read by a "
                               "restricted unpickler): 50,000 + 10,000 official test images, 3x32x32, the 100 "
                               "fine labels, values / 255 in [0,1]; data.download = true fetches them (torchvision)")
def load_cifar100(cfg, rng: np.random.Generator) -> RawData:
    return load_cifar(cfg, "cifar100", CIFAR100_FILES, "cifar-100-python", "fine_labels", 100)
