"""Partition ``dominant_class`` (paper 003, Appendix E: one dominant class per device)."""
import numpy as np
import pytest

from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.learning.partitions import partition


def cfg_for(*sets):
    return load_config(None, ["data.partition=dominant_class", *sets])


def test_each_client_holds_the_dominant_fraction_of_one_class():
    y = np.repeat(np.arange(10), 120)                         # 10 balanced classes
    rng = np.random.default_rng(0)
    parts = partition(y, None, 10, cfg_for("data.clients=10", "data.dominant_fraction=0.8"), rng)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(y)))      # every sample exactly once
    dom = []
    for p in parts:
        counts = np.bincount(y[p], minlength=10)
        assert counts.max() == 96 and abs(len(p) - 120) <= 9   # 0.8 x 120 of one class
        others = np.delete(counts, counts.argmax())
        assert others.min() >= 2 and others.max() <= 3      # (0.2 x 120) / 9 each, rounded
        dom.append(int(counts.argmax()))
    assert sorted(dom) == list(range(10))                    # every class dominant somewhere
    # the paper's split: 1110 of one class + 10 of each other (fraction 1110/1200)
    y = np.repeat(np.arange(10), 1200)
    parts = partition(y, None, 10, cfg_for("data.clients=10", f"data.dominant_fraction={1110 / 1200}"), rng)
    for p in parts:
        c = np.bincount(y[p], minlength=10)
        assert sorted(c.tolist()) == [10] * 9 + [1110]


def test_more_clients_than_classes_and_iid_limit():
    y = np.repeat(np.arange(5), 200)
    rng = np.random.default_rng(1)
    parts = partition(y, None, 5, cfg_for("data.clients=10", "data.dominant_fraction=0.6"), rng)
    for p in parts:
        c = np.bincount(y[p], minlength=5)
        assert c.max() / c.sum() == pytest.approx(0.6, abs=0.02)
    parts = partition(y, None, 5, cfg_for("data.clients=5", "data.dominant_fraction=0.2"), rng)   # 1/C: IID
    for p in parts:
        assert (np.bincount(y[p], minlength=5) == 40).all()


def test_bad_fraction_names_the_key():
    for bad in ("0", "1.5", "-0.1"):
        with pytest.raises(ConfigError, match=r"data\.dominant_fraction"):
            cfg_for(f"data.dominant_fraction={bad}")
    y = np.repeat(np.arange(10), 20)
    with pytest.raises(ConfigError, match=r"data\.dominant_fraction"):   # class 9 would go to nobody
        partition(y, None, 10, cfg_for("data.clients=3", "data.dominant_fraction=1"), np.random.default_rng(0))
