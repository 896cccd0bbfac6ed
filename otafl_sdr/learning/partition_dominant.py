"""Partition ``dominant_class``: one dominant class per client (paper 003, Appendix E).

Paper 003 gives each wireless device 1110 MNIST samples of one class and 10 of each of the other nine
(a dominant fraction of 1110/1200 = 0.925). Here the fraction is ``data.dominant_fraction`` (f, default
0.8) and the pool is whatever the data set holds, so the split is stated as demand weights and every
sample is dealt out exactly once (the contract of ``partitions.partition``):

    dominant class of client i:  c_i = perm[i mod C]      (perm: a seeded permutation of the C classes)
    weight of client i for class c:  a_ic = f s_i            if c == c_i
                                          (1 - f) s_i/(C-1)   otherwise
    class c's samples go to the clients in proportion to a_ic (largest-remainder rounding, ties at random)

with s_i the client size weights (``data.unequal_sizes``; equal by default). When every class is the
dominant class of equally many clients (K a multiple of C, equal sizes, balanced classes) each client
holds a fraction f of its dominant class exactly (up to rounding); otherwise the fraction deviates where
a class is dominant for more or fewer clients than the others. f = 1/C gives an IID-like split; f = 1
gives every client a single class (a class that is nobody's dominant class then goes unused: ConfigError)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import PARTITIONS
from otafl_sdr.learning.partitions import split_counts, too_few_samples, allocate, size_weights


def dominant_classes(classes: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """(K,) the dominant class of each client: a seeded permutation of the classes, repeated."""
    perm = rng.permutation(classes)
    return perm[np.arange(K) % len(perm)]


@PARTITIONS.register("dominant_class", "paper 003: each client holds data.dominant_fraction of one dominant "
                                       "class, the rest spread evenly over the other classes")
def dominant_class(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    K, f = cfg.data.clients, float(cfg.data.dominant_fraction)
    if not 0 < f <= 1:
        raise ConfigError("data.dominant_fraction", f"must be in (0, 1], got {f}")
    if len(y) < K:
        raise too_few_samples(len(y), K)
    classes = np.unique(y)
    C = len(classes)
    dom = dominant_classes(classes, K, rng)
    s = size_weights(cfg, rng)
    other = (1.0 - f) / (C - 1) if C > 1 else 0.0
    parts: list[list[np.ndarray]] = [[] for _ in range(K)]
    for c in classes:
        a = np.where(dom == c, f, other) * s
        if a.sum() <= 0:
            raise ConfigError("data.dominant_fraction", f"= 1 leaves class {c} to nobody ({K} clients, {C} "
                                                        "classes); lower it or use data.clients >= classes")
        idx = rng.permutation(np.flatnonzero(y == c))
        order = rng.permutation(K)                            # rounding remainders fall on random clients
        for k, chunk in zip(order, split_counts(idx, allocate(len(idx), a[order]))):
            parts[k].append(chunk)
    return [np.concatenate(p) for p in parts]
