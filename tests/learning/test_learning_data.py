"""Data sets, partitions and the federated loader (otafl_sdr.learning)."""
import json

import numpy as np
import pytest

from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.learning import datasets, partitions
from otafl_sdr.learning.federated_data import load_federated
from otafl_sdr.registry import DATASETS, PARTITIONS


def cfg_of(*overrides):
    return load_config(None, list(overrides), validate_now=False)


def test_registered_names():
    assert {"digits", "mnist5k", "synthetic", "femnist"} <= set(DATASETS.names())
    assert {"iid", "classes_per_client", "dirichlet", "natural"} <= set(PARTITIONS.names())


def test_digits_shapes_and_scale():
    raw = datasets.load_raw(cfg_of("data.dataset=digits"), np.random.default_rng(0))
    assert raw.x.shape == (1797, 64) and raw.x.dtype == np.float32
    assert raw.input_shape == (1, 8, 8) and raw.num_classes == 10
    assert raw.x.min() == 0.0 and raw.x.max() == 1.0
    assert set(np.unique(raw.y)) == set(range(10)) and raw.groups is None


def test_mnist5k_shapes_and_scale():
    raw = datasets.load_raw(cfg_of("data.dataset=mnist5k"), np.random.default_rng(0))
    assert raw.x.shape == (5000, 784) and raw.input_shape == (1, 28, 28)
    assert raw.x.max() == 1.0 and raw.x.min() == 0.0
    assert np.bincount(raw.y).tolist() == [500] * 10


def test_synthetic_noniid_vs_iid():
    common = ["data.dataset=synthetic", "data.clients=8", "data.synthetic_samples=3200", "data.synthetic_dim=20",
              "data.synthetic_classes=5"]
    non = datasets.load_raw(cfg_of(*common), np.random.default_rng(1))
    iid = datasets.load_raw(cfg_of(*common, "data.synthetic_iid=true"), np.random.default_rng(1))
    for raw in (non, iid):
        assert raw.x.shape == (3200, 20) and raw.input_shape == (20,) and raw.num_classes == 5
        assert np.bincount(raw.groups).tolist() == [400] * 8            # one group per device, equal sizes
        assert raw.y.min() >= 0 and raw.y.max() <= 4
    # IID: v = 0 for every device, so device means stay near 0; non-IID: v_k ~ N(B_k, 1) spreads them
    mean_iid = np.array([iid.x[iid.groups == k].mean() for k in range(8)])
    mean_non = np.array([non.x[non.groups == k].mean() for k in range(8)])
    assert np.abs(mean_iid).max() < 0.1
    assert mean_non.std() > 0.3
    # Sigma_jj = j^-1.2 (within device, IID has v = 0)
    var = iid.x.var(axis=0)
    assert var[0] == pytest.approx(1.0, rel=0.15) and var[-1] == pytest.approx(20 ** -1.2, rel=0.15)
    # IID: one shared softmax-linear rule => a single linear classifier separates the pooled data well
    from sklearn.linear_model import LogisticRegression
    acc = LogisticRegression(max_iter=2000).fit(iid.x, iid.y).score(iid.x, iid.y)
    assert acc > 0.9


def test_synthetic_unequal_sizes():
    raw = datasets.load_raw(cfg_of("data.dataset=synthetic", "data.clients=10", "data.unequal_sizes=1.5",
                                   "data.synthetic_samples=2000"), np.random.default_rng(0))
    counts = np.bincount(raw.groups)
    assert counts.sum() == 2000 and counts.min() >= 1 and counts.max() > 2 * counts.min()


# ---------------------------------------------------------------------------------------------
def write_leaf(folder, users, seed=0):
    """users: {name: labels}; writes two LEAF JSON files splitting the users."""
    rng = np.random.default_rng(seed)
    names = list(users)
    for f, chunk in enumerate((names[: len(names) // 2], names[len(names) // 2:])):
        blob = {"users": chunk, "num_samples": [len(users[u]) for u in chunk],
                "user_data": {u: {"x": rng.random((len(users[u]), 784)).round(3).tolist(),
                                  "y": list(map(int, users[u]))} for u in chunk}}
        (folder / f"part{f}.json").write_text(json.dumps(blob))


def test_femnist_labels():
    assert datasets.femnist_labels("a-j") == list(range(36, 46))
    assert datasets.femnist_labels("0-9,A-C") == list(range(0, 13))
    assert datasets.femnist_labels("za") == [36, 61]
    assert datasets.femnist_labels("all") == list(range(62))
    for bad in ("a-Z", "j-a", "a-j,", "?"):
        with pytest.raises(ConfigError, match="data.femnist_classes"):
            datasets.femnist_labels(bad)


def test_femnist_load_filter_and_natural_partition(tmp_path):
    users = {f"w{i}": [36 + (i + j) % 10 for j in range(12)] + [3, 12, 50] for i in range(6)}  # a..j + noise
    write_leaf(tmp_path, users)
    cfg = cfg_of("data.dataset=femnist", f"data.path={tmp_path}", "data.femnist_classes=a-j", "data.clients=3",
                 "data.partition=natural", "data.test_fraction=0.25")
    raw = datasets.load_raw(cfg, np.random.default_rng(0))
    assert raw.x.shape == (72, 784) and raw.num_classes == 10 and raw.input_shape == (1, 28, 28)
    assert sorted(np.unique(raw.y)) == list(range(10))            # 36..45 -> 0..9, digits/upper/'o' dropped
    assert np.bincount(raw.groups).tolist() == [12] * 6
    fd = load_federated(cfg)
    assert fd.clients == 3 and fd.sizes.sum() + len(fd.test_y) == 72
    assert fd.sizes.tolist() == [18, 18, 18]                        # 2 writers x (12 - 3 test) each
    # every writer's training samples land with exactly one client
    fd2 = load_federated(cfg_of("data.dataset=femnist", f"data.path={tmp_path}", "data.clients=4",
                                "data.partition=classes_per_client", "data.classes_per_client=3"))
    assert all(len(c) == 3 for c in fd2.client_classes())          # generic partitions pool the writers


def test_femnist_bad_paths(tmp_path):
    with pytest.raises(UserError, match="data.path.*does not exist"):
        datasets.load_raw(cfg_of("data.dataset=femnist", f"data.path={tmp_path / 'nope'}"), np.random.default_rng(0))
    with pytest.raises(UserError, match="no \\*.json"):
        datasets.load_raw(cfg_of("data.dataset=femnist", f"data.path={tmp_path}"), np.random.default_rng(0))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(UserError, match="not a LEAF JSON") as e:
        datasets.load_raw(cfg_of("data.dataset=femnist", f"data.path={tmp_path}"), np.random.default_rng(0))
    assert "\n" not in str(e.value)
    (tmp_path / "bad.json").write_text(json.dumps({"users": ["u"], "user_data": {"u": {"x": [[0.0] * 5], "y": [40]}}}))
    with pytest.raises(UserError, match="784"):
        datasets.load_raw(cfg_of("data.dataset=femnist", f"data.path={tmp_path}"), np.random.default_rng(0))


# ---------------------------------------------------------------------------------------------
def run_partition(name, y, groups=None, seed=0, **over):
    cfg = cfg_of(f"data.partition={name}", *[f"data.{k}={v}" for k, v in over.items()])
    return partitions.partition(y, groups, int(y.max()) + 1, cfg, np.random.default_rng(seed))


def assert_exact_cover(parts, n):
    allidx = np.concatenate(parts)
    assert len(allidx) == n and len(np.unique(allidx)) == n
    assert all(len(p) >= 1 for p in parts)


def test_allocate():
    c = partitions.allocate(10, np.array([1.0, 1.0, 2.0]), minimum=1)
    assert c.sum() == 10 and c.min() >= 1 and c[2] >= c[0]
    with pytest.raises(ValueError):
        partitions.allocate(2, np.ones(3), minimum=1)


@pytest.mark.parametrize("K,C", [(50, 5), (7, 3), (3, 4), (10, 1)])
def test_classes_per_client_exact(K, C):
    y = np.repeat(np.arange(10), 97)
    parts = run_partition("classes_per_client", y, clients=K, classes_per_client=C)
    assert len(parts) == K
    assert_exact_cover(parts, len(y))
    assert all(len(np.unique(y[p])) == C for p in parts)
    assert len(np.unique(np.concatenate([np.unique(y[p]) for p in parts]))) == 10   # every class used


def test_classes_per_client_errors():
    y = np.repeat(np.arange(10), 20)
    with pytest.raises(ConfigError, match="data.classes_per_client"):
        run_partition("classes_per_client", y, clients=2, classes_per_client=4)       # 8 < 10 classes
    with pytest.raises(ConfigError, match="data.classes_per_client"):
        run_partition("classes_per_client", y, clients=5, classes_per_client=11)


def test_iid_sizes_equal_and_unequal():
    y = np.repeat(np.arange(10), 50)
    parts = run_partition("iid", y, clients=7)
    assert_exact_cover(parts, 500)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    parts = run_partition("iid", y, clients=20, unequal_sizes=1.0)
    assert_exact_cover(parts, 500)
    assert max(map(len, parts)) > 3 * min(map(len, parts))
    with pytest.raises(ConfigError, match="data.clients"):
        run_partition("iid", y[:5], clients=6)


def test_dirichlet_reproducible_and_skewed():
    y = np.repeat(np.arange(10), 100)
    a = run_partition("dirichlet", y, clients=10, dirichlet_alpha=0.1)
    b = run_partition("dirichlet", y, clients=10, dirichlet_alpha=0.1)
    c = run_partition("dirichlet", y, clients=10, dirichlet_alpha=0.1, seed=1)
    assert_exact_cover(a, len(y))
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    assert not all(np.array_equal(p, q) for p, q in zip(a, c))
    # alpha = 0.1 concentrates each client on few classes; alpha = 1000 is close to uniform
    top = np.mean([np.bincount(y[p], minlength=10).max() / len(p) for p in a])
    flat = run_partition("dirichlet", y, clients=10, dirichlet_alpha=1000.0)
    top_flat = np.mean([np.bincount(y[p], minlength=10).max() / len(p) for p in flat])
    assert top > 0.5 and top_flat < 0.2


def test_natural_needs_groups():
    y = np.zeros(20, dtype=np.int64)
    with pytest.raises(ConfigError, match="data.partition"):
        run_partition("natural", y, clients=2)
    groups = np.repeat(np.arange(5), 4)
    parts = run_partition("natural", y, groups, clients=2)
    assert_exact_cover(parts, 20)
    assert len(np.intersect1d(groups[parts[0]], groups[parts[1]])) == 0      # whole writers per client
    with pytest.raises(ConfigError, match="data.clients"):
        run_partition("natural", y, groups, clients=6)


# ---------------------------------------------------------------------------------------------
def test_load_federated_digits():
    cfg = cfg_of("data.dataset=digits", "data.clients=10", "data.classes_per_client=2", "data.test_fraction=0.25",
                 "data.unequal_sizes=0.8")
    fd = load_federated(cfg)
    assert fd.clients == 10 and fd.num_classes == 10 and fd.input_shape == (1, 8, 8)
    assert fd.sizes.sum() + len(fd.test_y) == 1797
    assert len(fd.test_y) == pytest.approx(0.25 * 1797, abs=10)
    assert np.bincount(fd.test_y.numpy()).min() >= 40                  # stratified test split
    assert fd.p.sum() == pytest.approx(1.0) and np.allclose(fd.p, fd.sizes / fd.sizes.sum())
    assert all(len(c) == 2 for c in fd.client_classes())
    assert all(x.dtype.is_floating_point and x.shape == (len(y), 64) for x, y in zip(fd.client_x, fd.client_y))
    again = load_federated(cfg)
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(fd.client_y, again.client_y))
    other = load_federated(cfg_of("data.dataset=digits", "data.clients=10", "data.classes_per_client=2",
                                  "data.test_fraction=0.25", "data.unequal_sizes=0.8", "run.seed=1"))
    assert not np.array_equal(fd.sizes, other.sizes)


def test_load_federated_cap_and_too_many_clients():
    fd = load_federated(cfg_of("data.dataset=digits", "data.max_samples=300", "data.partition=iid", "data.clients=4"))
    assert fd.sizes.sum() + len(fd.test_y) == 300
    with pytest.raises(ConfigError, match="data.clients"):
        load_federated(cfg_of("data.dataset=digits", "data.max_samples=30", "data.partition=iid", "data.clients=40"))


def test_synthetic_natural_one_device_per_client():
    fd = load_federated(cfg_of("data.dataset=synthetic", "data.partition=natural", "data.clients=5",
                               "data.synthetic_samples=500", "data.unequal_sizes=1.0"))
    assert fd.clients == 5 and fd.input_shape == (60,)
    assert fd.sizes.sum() + len(fd.test_y) == 500 and fd.sizes.std() > 0
