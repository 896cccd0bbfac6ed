"""``load_federated(cfg)``: data set -> cap -> test split -> partition, as torch tensors per client. The test
split is the data set's own where it ships one (MNIST, Fashion-MNIST, CIFAR: ``RawData.test``; a cap by
``data.max_samples`` keeps about its proportion), else a random ``data.test_fraction``.

All randomness comes from ``seeding.rng(cfg.run.seed, "data")``, so the same config gives the same
clients in every process (server, client nodes) and after a resume."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from otafl_sdr import seeding
from otafl_sdr.errors import ConfigError
from otafl_sdr.learning.datasets import RawData, load_raw
from otafl_sdr.learning.partitions import partition


@dataclass
class FederatedData:
    """client_x[i]: (|D_i|, F) float32, client_y[i]: (|D_i|,) int64; test_x/test_y: the pooled test set;
    input_shape: what the model sees, e.g. (1, 28, 28) (features are stored flattened)."""

    client_x: list
    client_y: list
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int
    input_shape: tuple

    @property
    def clients(self) -> int:
        return len(self.client_y)

    @property
    def sizes(self) -> np.ndarray:
        """(K,) |D_i|."""
        return np.array([len(y) for y in self.client_y], dtype=np.int64)

    @property
    def p(self) -> np.ndarray:
        """(K,) p_i = |D_i| / sum_j |D_j|  (eq. 7 of paper 000)."""
        s = self.sizes.astype(np.float64)
        return s / s.sum()

    @property
    def features(self) -> int:
        return int(np.prod(self.input_shape))

    def client_classes(self) -> list[np.ndarray]:
        return [np.unique(y.numpy()) for y in self.client_y]


def holdout_split(y: np.ndarray, groups: np.ndarray | None, fraction: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(train_idx, test_idx). Stratified by writer/device when the data has groups (as LEAF does),
    else by class; a stratum keeps >= 1 training sample."""
    strata = groups if groups is not None else y
    train, test = [], []
    for s in np.unique(strata):
        idx = rng.permutation(np.flatnonzero(strata == s))
        n_test = min(int(round(len(idx) * fraction)), len(idx) - 1)
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    tr, te = np.sort(np.concatenate(train)), np.sort(np.concatenate(test))
    if len(te) == 0:
        raise ConfigError("data.test_fraction", f"{fraction} leaves an empty test set for {len(y)} samples; raise it")
    return tr, te


def cap_samples(raw: RawData, max_samples: int, rng: np.random.Generator) -> RawData:
    """Keep a random subset of ``max_samples`` samples (0 = all)."""
    if max_samples <= 0 or max_samples >= len(raw):
        return raw
    keep = np.sort(rng.choice(len(raw), size=max_samples, replace=False))
    g = None if raw.groups is None else raw.groups[keep]
    t = None if raw.test is None else raw.test[keep]
    return RawData(raw.x[keep], raw.y[keep], raw.num_classes, raw.input_shape, g, t)


def official_split(raw: RawData) -> tuple[np.ndarray, np.ndarray]:
    """(train_idx, test_idx) of a data set that ships its own test split (MNIST, CIFAR); a cap that left
    either side empty is named in one line."""
    tr, te = np.flatnonzero(~raw.test), np.flatnonzero(raw.test)
    if len(te) == 0 or len(tr) == 0:
        raise ConfigError("data.max_samples", f"leaves {len(tr)} training and {len(te)} test samples of the "
                          f"data set's official split; raise it")
    return tr, te


def load_federated(cfg) -> FederatedData:
    rng = seeding.rng(cfg.run.seed, "data")
    raw = load_raw(cfg, rng)
    raw = cap_samples(raw, cfg.data.max_samples, rng)
    if raw.test is not None:                     # the data set's own test split (data.test_fraction unused)
        tr, te = official_split(raw)
    else:
        tr, te = holdout_split(raw.y, raw.groups, cfg.data.test_fraction, rng)
    if cfg.data.clients > len(tr):      # named here, where the data set's size is known (any loader)
        raise ConfigError("data.clients", f"is {cfg.data.clients}, but data set '{cfg.data.dataset}' has {len(raw)} "
                          f"samples ({len(tr)} for training); at most one client per training sample")
    y_tr = raw.y[tr]
    g_tr = None if raw.groups is None else raw.groups[tr]
    parts = partition(y_tr, g_tr, raw.num_classes, cfg, rng)
    x_tr = raw.x[tr]
    client_x = [torch.from_numpy(np.ascontiguousarray(x_tr[p])) for p in parts]
    client_y = [torch.from_numpy(np.ascontiguousarray(y_tr[p])) for p in parts]
    return FederatedData(client_x, client_y, torch.from_numpy(raw.x[te]), torch.from_numpy(raw.y[te]),
                         raw.num_classes, tuple(raw.input_shape))
