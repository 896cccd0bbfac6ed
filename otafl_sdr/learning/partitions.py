"""How the training pool is split over the K = data.clients clients, registered in ``registry.PARTITIONS``.

A partition is ``fn(y, groups, num_classes, cfg, rng) -> list of K index arrays`` into the pool; every
sample is assigned exactly once (``natural`` keeps whole writers/devices) and every client gets >= 1
sample, otherwise a ConfigError names the key to change. Client sizes: data.unequal_sizes = sigma of
lognormal size weights (0 = equal), which sets p_i = |D_i| / sum_j |D_j| (paper 000, eq. 7)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import PARTITIONS


def allocate(total: int, weights: np.ndarray, minimum: int = 0) -> np.ndarray:
    """Integer counts summing to ``total``, each >= ``minimum``, the rest split in proportion to
    ``weights`` (largest-remainder rounding). Raises ValueError when total < minimum * len(weights)."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    rest = total - minimum * n
    if rest < 0:
        raise ValueError(f"{total} items cannot give {n} parts at least {minimum} each")
    w = np.ones(n) if w.sum() <= 0 else w / w.sum()
    share = rest * w
    counts = np.floor(share).astype(np.int64)
    left = rest - int(counts.sum())
    if left > 0:
        order = np.argsort(-(share - counts), kind="stable")
        counts[order[:left]] += 1
    return counts + minimum


def size_weights(cfg, rng: np.random.Generator) -> np.ndarray:
    """Relative client sizes: ones, or lognormal(0, data.unequal_sizes) when that is > 0."""
    K, sigma = cfg.data.clients, cfg.data.unequal_sizes
    return np.ones(K) if sigma == 0 else rng.lognormal(0.0, sigma, K)


def split_counts(idx: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    return np.split(idx, np.cumsum(counts)[:-1])


def too_few_samples(n: int, K: int) -> ConfigError:
    return ConfigError("data.clients", f"{K} clients but only {n} training samples; every client needs >= 1 "
                                       "(lower data.clients or raise data.max_samples / data.test_fraction)")


@PARTITIONS.register("iid", "shuffle the pool and deal it out (sizes from data.unequal_sizes)")
def iid(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    K = cfg.data.clients
    if len(y) < K:
        raise too_few_samples(len(y), K)
    counts = allocate(len(y), size_weights(cfg, rng), minimum=1)
    return split_counts(rng.permutation(len(y)), counts)


def class_assignment(classes: np.ndarray, K: int, C: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Client k holds classes perm[(k C + j) mod n], j < C: C distinct classes each, every class held
    by floor or ceil(K C / n) clients (so all are used when K C >= n)."""
    perm = rng.permutation(classes)
    n = len(perm)
    return [perm[(k * C + np.arange(C)) % n] for k in range(K)]


@PARTITIONS.register("classes_per_client", "paper 000: each client holds data.classes_per_client classes; "
                                           "every class is used")
def classes_per_client(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    K, C = cfg.data.clients, cfg.data.classes_per_client
    classes = np.unique(y)
    n = len(classes)
    if C > n:
        raise ConfigError("data.classes_per_client", f"is {C} but the training data has only {n} classes")
    if K * C < n:
        raise ConfigError("data.classes_per_client", f"{K} clients x {C} classes cannot cover all {n} classes; "
                                                     "raise data.clients or data.classes_per_client")
    held = class_assignment(classes, K, C, rng)
    w = size_weights(cfg, rng)
    parts: list[list[np.ndarray]] = [[] for _ in range(K)]
    for c in classes:
        holders = np.array([k for k in range(K) if c in held[k]])
        idx = rng.permutation(np.flatnonzero(y == c))
        if len(idx) < len(holders):
            raise ConfigError("data.classes_per_client", f"class {c} has {len(idx)} training samples for "
                                                         f"{len(holders)} clients holding it; lower data.clients")
        for k, chunk in zip(holders, split_counts(idx, allocate(len(idx), w[holders], minimum=1))):
            parts[k].append(chunk)
    return [np.concatenate(p) for p in parts]


@PARTITIONS.register("dirichlet", "per class, client shares ~ Dirichlet(data.dirichlet_alpha)")
def dirichlet(y, groups, num_classes, cfg, rng, tries: int = 100) -> list[np.ndarray]:
    K, a = cfg.data.clients, cfg.data.dirichlet_alpha
    if len(y) < K:
        raise too_few_samples(len(y), K)
    w = size_weights(cfg, rng)
    by_class = [rng.permutation(np.flatnonzero(y == c)) for c in np.unique(y)]
    for _ in range(tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(K)]
        for idx in by_class:
            q = rng.dirichlet(np.full(K, a)) * w
            for k, chunk in enumerate(split_counts(idx, allocate(len(idx), q))):
                parts[k].append(chunk)
        out = [np.concatenate(p) for p in parts]
        if min(len(o) for o in out) >= 1:
            return out
    raise ConfigError("data.dirichlet_alpha", f"{a} left some of the {K} clients without data in {tries} draws; "
                                              "raise it or lower data.clients")


@PARTITIONS.register("dirichlet_equal", "paper 002: equal client sizes (data.unequal_sizes = 0), each client's "
                                        "class mix ~ Dirichlet(data.dirichlet_alpha)")
def dirichlet_equal(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    """Paper 002, Sec. 5: every client holds the same number of samples (600 MNIST / 500 CIFAR-10 images at m =
    100) under a Dir-0.1 label skew. Client k draws its class mix p_k ~ Dir(alpha 1_C) and fills its
    |D_k| = len(y) / K slots (sizes from data.unequal_sizes, equal by default) by class from p_k, a class whose
    samples are used up dropping out (p_k renormalised over those left); clients fill in random order."""
    K, a = cfg.data.clients, cfg.data.dirichlet_alpha
    if len(y) < K:
        raise too_few_samples(len(y), K)
    sizes = allocate(len(y), size_weights(cfg, rng), minimum=1)
    classes = np.unique(y)
    by_class = [rng.permutation(np.flatnonzero(y == c)) for c in classes]
    left = np.array([len(i) for i in by_class], dtype=np.int64)
    counts = np.zeros((K, len(classes)), dtype=np.int64)
    for k in rng.permutation(K):
        p, need = rng.dirichlet(np.full(len(classes), a)), int(sizes[k])
        while need > 0:
            avail = left - counts[k] > 0
            q = p * avail if (p * avail).sum() > 0 else avail.astype(np.float64)
            draw = np.minimum(rng.multinomial(need, q / q.sum()), left - counts[k])
            counts[k] += draw
            need -= int(draw.sum())
        left -= counts[k]
    parts: list[list[np.ndarray]] = [[] for _ in range(K)]
    for c, idx in enumerate(by_class):
        for k, chunk in enumerate(split_counts(idx, counts[:, c])):
            parts[k].append(chunk)
    return [np.concatenate(p) for p in parts]


@PARTITIONS.register("natural", "the data set's own writers/devices (femnist, synthetic), grouped into "
                                "data.clients clients")
def natural(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    K = cfg.data.clients
    if groups is None:
        raise ConfigError("data.partition", f"'natural' needs a data set with writers/devices "
                                            f"(femnist, synthetic), not '{cfg.data.dataset}'")
    owners = np.unique(groups)
    if len(owners) < K:
        raise ConfigError("data.clients", f"'natural' partition: only {len(owners)} writers/devices for "
                                          f"{K} clients")
    if len(owners) == K:
        chunks = [owners[k:k + 1] for k in range(K)]          # keep device k -> client k (synthetic)
    else:
        chunks = np.array_split(rng.permutation(owners), K)
    return [np.flatnonzero(np.isin(groups, ch)) for ch in chunks]


def partition(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    """Run the configured partition and check its contract (each sample once, each client >= 1)."""
    parts = PARTITIONS.get(cfg.data.partition)(y, groups, num_classes, cfg, rng)
    if len(parts) != cfg.data.clients:
        raise RuntimeError(f"partition '{cfg.data.partition}' gave {len(parts)} parts for {cfg.data.clients} clients")
    for k, p in enumerate(parts):
        if len(p) == 0:
            raise ConfigError("data.clients", f"partition '{cfg.data.partition}' left client {k} without data; "
                                              "lower data.clients")
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
