"""Every random stream of a run derives from the run seed plus a fixed key path, so a run (and a
resumed run) is reproducible from its saved config: ``rng("channel", m)`` is the same in every process."""
from __future__ import annotations

import zlib

import numpy as np


def _key(part: object) -> int:
    if isinstance(part, (int, np.integer)):
        return int(part)
    return zlib.crc32(str(part).encode())


def seed_sequence(seed: int, *keys: object) -> np.random.SeedSequence:
    return np.random.SeedSequence([int(seed)] + [_key(k) for k in keys])


def rng(seed: int, *keys: object) -> np.random.Generator:
    """numpy Generator for the stream named by ``keys`` (e.g. rng(seed, "noise", m))."""
    return np.random.default_rng(seed_sequence(seed, *keys))


def int_seed(seed: int, *keys: object) -> int:
    """A 31-bit integer seed for libraries that take ints (GNU Radio noise sources, torch)."""
    return int(seed_sequence(seed, *keys).generate_state(1, dtype=np.uint32)[0] & 0x7FFFFFFF)


def torch_generator(seed: int, *keys: object) -> "torch.Generator":
    """A torch Generator for the stream named by ``keys`` (torch imported here: the numpy-only processes, a
    testbed's channel, receiver and jammer nodes, never load it, about 2 s of CPU each)."""
    import torch
    g = torch.Generator()
    g.manual_seed(int_seed(seed, *keys))
    return g
