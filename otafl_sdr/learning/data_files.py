"""Where a file data set's files are (``data.path``, or torchvision's layout below it) and, only when the
user asks (``data.download = true``), fetching them through torchvision (an optional package: not installed,
or no network, is one line naming what to do instead). Nothing is ever downloaded otherwise."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from otafl_sdr.errors import UserError

# data.dataset -> torchvision.datasets class that downloads it (same files the readers take)
DOWNLOADABLE = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST", "cifar10": "CIFAR10", "cifar100": "CIFAR100"}
FILE_DATASETS = ("femnist",) + tuple(DOWNLOADABLE)         # read from data.path


def find_folder(cfg, name: str, has_files: Callable[[Path], bool], subfolders: list[str], what: str) -> Path:
    """The first of ``data.path`` and ``data.path/<subfolder>`` for which ``has_files`` holds; when none does
    and ``data.download`` is true, fetch the data set into ``data.path`` first. One line when absent."""
    d = cfg.data
    if not d.path:
        raise UserError(f"data.path: {name} needs the folder of its files ({what}); data.path is empty")
    root = Path(d.path)

    def look() -> Path | None:
        for p in [root] + [root / s for s in subfolders]:
            if p.is_dir() and has_files(p):
                return p
        return None

    found = look()
    asked = bool(getattr(d, "download", False))
    if found is None and asked:
        download(name, root)
        found = look()
    if found is None:
        hint = "" if asked else "; data.download = true fetches them there (torchvision, needs the network)"
        raise UserError(f"data.path: no {name} files ({what}) in '{root}' or in {', '.join(subfolders)} "
                        f"below it{hint}")
    return found


def download(name: str, root: Path) -> None:
    """Both splits of ``name`` into ``root`` by torchvision.datasets (its own checksums); one-line UserError
    when torchvision is missing or the fetch fails (no network, full disk, bad checksum)."""
    if name not in DOWNLOADABLE:
        raise UserError(f"data.download: {name} cannot be downloaded here; put its files in data.path")
    try:
        import torchvision.datasets as tvd
    except ImportError:
        raise UserError(f"data.download: fetching {name} needs torchvision, which is not installed "
                        f"(pip install torchvision), or put the files in data.path yourself") from None
    try:
        root.mkdir(parents=True, exist_ok=True)
        cls = getattr(tvd, DOWNLOADABLE[name])
        for train in (True, False):
            cls(str(root), train=train, download=True)
    except Exception as e:                # urllib, OSError, torchvision's RuntimeError: all one line
        msg = " ".join(str(e).split())[:300]
        raise UserError(f"data.download: could not fetch {name} into '{root}' ({type(e).__name__}: {msg}); "
                        f"check the network, or put the files in data.path yourself") from None
