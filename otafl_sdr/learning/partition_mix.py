"""Partition ``iid_noniid_mix`` (paper 004, Fig. 6): data.iid_devices IID devices, the rest non-IID.

Paper 004 mixes K = 15 devices as 3 IID + 12 non-IID, 5 + 10, 7 + 8, 9 + 6 and 0 + 15 without giving the
non-IID split ("lower label diversity"). Here: devices 0 .. n_iid-1 are IID, each taking a class-stratified
random sample of its share of the pool (its label PMF follows the global one); devices n_iid .. K-1 hold
data.classes_per_client classes each (assigned as in ``classes_per_client``, so that every class is held
by about the same number of devices) and split the rest of each of their classes. Samples of a class no
non-IID device holds go to the IID devices. Shares follow data.unequal_sizes (0 = equal). Every sample is
assigned exactly once; ``PRESETS`` names the paper's five mixes for K = 15."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import ConfigError
from otafl_sdr.registry import PARTITIONS
from otafl_sdr.learning.partitions import split_counts, too_few_samples, allocate, class_assignment, size_weights

PRESETS = {"3+12": 3, "5+10": 5, "7+8": 7, "9+6": 9, "0+15": 0}   # K = 15: label -> data.iid_devices


@PARTITIONS.register("iid_noniid_mix", "paper 004 Fig. 6: data.iid_devices IID devices, the others hold "
                                       "data.classes_per_client classes")
def iid_noniid_mix(y, groups, num_classes, cfg, rng) -> list[np.ndarray]:
    K, n_iid, C = cfg.data.clients, cfg.data.iid_devices, cfg.data.classes_per_client
    if not 0 <= n_iid <= K:
        raise ConfigError("data.iid_devices", f"must be in [0, data.clients = {K}], got {n_iid}")
    N = len(y)
    if N < K:
        raise too_few_samples(N, K)
    classes = np.unique(y)
    n_non = K - n_iid
    if n_non and C > len(classes):
        raise ConfigError("data.classes_per_client", f"is {C} but the training data has only {len(classes)} classes")
    if n_iid == 0 and n_non * C < len(classes):
        raise ConfigError("data.classes_per_client", f"{n_non} non-IID devices x {C} classes cannot cover all "
                                                     f"{len(classes)} classes and there is no IID device")
    w = size_weights(cfg, rng)
    shares = allocate(N, w, minimum=1)
    by_class = {c: list(rng.permutation(np.flatnonzero(y == c))) for c in classes}
    parts: list[list[np.ndarray]] = [[] for _ in range(K)]
    # IID devices: a class-stratified sample of their share (largest remainder per device)
    freq = np.array([len(by_class[c]) for c in classes], dtype=np.float64) / N
    if n_non:
        for k in range(n_iid):
            take = allocate(int(shares[k]), freq)
            for c, n in zip(classes, take):
                n = min(int(n), len(by_class[c]))
                parts[k].append(np.asarray(by_class[c][:n], dtype=np.int64))
                by_class[c] = by_class[c][n:]
        held = class_assignment(classes, n_non, C, rng)
        for c in classes:
            holders = [n_iid + j for j in range(n_non) if c in held[j]]
            idx = np.asarray(by_class[c], dtype=np.int64)
            if not holders:                      # no non-IID device holds c: the IID devices share it
                holders = list(range(n_iid))
            if len(idx) < len(holders):
                raise ConfigError("data.clients", f"class {c} has {len(idx)} samples left for {len(holders)} "
                                                  "devices holding it; lower data.clients or data.iid_devices")
            for k, chunk in zip(holders, split_counts(idx, allocate(len(idx), w[holders], minimum=1))):
                parts[k].append(chunk)
    else:                                        # all IID: deal the shuffled pool out
        for k, chunk in enumerate(split_counts(rng.permutation(N), shares)):
            parts[k].append(chunk)
    out = [np.concatenate(p) if p else np.zeros(0, np.int64) for p in parts]
    for k, p in enumerate(out):
        if len(p) == 0:
            raise ConfigError("data.clients", f"iid_noniid_mix left device {k} without data; lower data.clients")
    return out
