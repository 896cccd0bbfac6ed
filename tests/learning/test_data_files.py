"""The file data sets (MNIST / Fashion-MNIST IDX, CIFAR-10/100 python pickles, FEMNIST LEAF JSON) read from
``data.path`` through the real config path: tiny files in each real format, the official test split, the
scaling, and one-line refusals of bad files (wrong magic, truncated, a hostile pickle that is never run)."""
import gzip
import os
import pickle

import numpy as np
import pytest

from data_fixtures import cifar_batch, idx_bytes, make_cifar10, make_cifar100, make_leaf, make_mnist, write_idx
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.learning import cifar_files, data_files, idx_files
from otafl_sdr.learning.datasets import load_raw
from otafl_sdr.learning.federated_data import load_federated
from otafl_sdr.configure.load import load_config


def cfg_of(*overrides, validate=True):
    return load_config(None, list(overrides), validate_now=validate)


def one_line(e) -> str:
    msg = str(e.value)
    assert "\n" not in msg and msg
    return msg


# ------------------------------------------------------------------ IDX
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trips_the_header_and_values(tmp_path, gz):
    a = np.arange(2 * 3 * 5, dtype=np.uint8).reshape(2, 3, 5)
    p = write_idx(tmp_path / "a-idx3-ubyte", a, gz)
    b = idx_files.read_idx(p)
    assert b.dtype == np.uint8 and b.shape == (2, 3, 5) and (b == a).all()


@pytest.mark.parametrize("layout", ["flat_gz", "torchvision_raw"])
def test_mnist_and_fashion_mnist_load_with_the_official_split_and_scale(tmp_path, layout):
    if layout == "flat_gz":
        root = make_mnist(tmp_path / "m", n_train=120, n_test=40, gz=True)
        name = "mnist"
    else:
        make_mnist(tmp_path / "m" / "FashionMNIST" / "raw", n_train=120, n_test=40, gz=False)
        root, name = tmp_path / "m", "fashion_mnist"
    raw = load_raw(cfg_of(f"data.dataset={name}", f"data.path={root}"), np.random.default_rng(0))
    assert raw.x.shape == (160, 784) and raw.input_shape == (1, 28, 28) and raw.num_classes == 10
    assert raw.x.dtype == np.float32 and raw.x.min() == 0.0 and raw.x.max() == 1.0      # bytes / 255
    assert raw.test.sum() == 40 and not raw.test[:120].any()
    fd = load_federated(cfg_of(f"data.dataset={name}", f"data.path={root}", "data.clients=4",
                               "data.partition=iid", "data.test_fraction=0.5"))
    assert len(fd.test_y) == 40 and fd.sizes.sum() == 120          # official split; test_fraction unused
    # the test set is exactly the t10k file's images, in order
    t10k = idx_files.read_idx(next((root if name == "mnist" else root / "FashionMNIST" / "raw").glob("t10k-images*")))
    assert np.array_equal(fd.test_x.numpy(), t10k.reshape(40, 784).astype(np.float32) / 255)


def test_a_cap_keeps_both_sides_of_the_official_split(tmp_path):
    root = make_mnist(tmp_path / "m", n_train=200, n_test=100)
    fd = load_federated(cfg_of("data.dataset=mnist", f"data.path={root}", "data.clients=3", "data.partition=iid",
                               "data.max_samples=150"))
    assert fd.sizes.sum() + len(fd.test_y) == 150 and 25 <= len(fd.test_y) <= 75


@pytest.mark.parametrize("damage, words", [
    (lambda b: b"\x08\x00" + b[2:], "is not an IDX file"),                  # wrong magic
    (lambda b: b[:4] + b[4:8] + b[8:-7], "is truncated"),                   # values cut short
    (lambda b: b[:6], "is truncated"),                                     # header cut short
    (lambda b: b + b"\x00", "has bytes after"),                            # trailing garbage
    (lambda b: b[:3] + b"\x07" + b[4:], "is not an IDX file"),              # 7 dimensions
])
def test_a_damaged_idx_file_is_one_line_naming_it(tmp_path, damage, words):
    root = make_mnist(tmp_path / "m", gz=False)
    p = root / "train-labels-idx1-ubyte"
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=mnist", f"data.path={root}"), np.random.default_rng(0))
    assert words in one_line(e) and str(p) in str(e.value)


def test_a_truncated_gzip_and_a_header_claiming_too_much_are_refused(tmp_path):
    root = make_mnist(tmp_path / "m", gz=True)
    p = root / "t10k-images-idx3-ubyte.gz"
    p.write_bytes(p.read_bytes()[:-30])                                    # torn gzip stream
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=mnist", f"data.path={root}"), np.random.default_rng(0))
    assert str(p) in one_line(e)
    big = tmp_path / "big-idx3-ubyte"
    big.write_bytes(bytes([0, 0, 8, 3]) + (70000).to_bytes(4, "big") + (4096).to_bytes(4, "big") * 2)
    with pytest.raises(UserError) as e:
        idx_files.read_idx(big)
    assert "more than the 1024 MiB" in one_line(e)


def test_idx_labels_out_of_range_or_miscounted_are_refused(tmp_path):
    root = make_mnist(tmp_path / "m", n_train=30, n_test=10, gz=False)
    write_idx(root / "train-labels-idx1-ubyte", np.full(30, 10))
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=mnist", f"data.path={root}"), np.random.default_rng(0))
    assert "label 10" in one_line(e)
    write_idx(root / "train-labels-idx1-ubyte", np.zeros(29))
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=mnist", f"data.path={root}"), np.random.default_rng(0))
    assert "30 unsigned-byte labels" in one_line(e)


# ------------------------------------------------------------------ CIFAR
def test_cifar10_and_cifar100_load_with_the_official_split_and_scale(tmp_path):
    c10 = make_cifar10(tmp_path / "c" / "cifar-10-batches-py", per_batch=20, n_test=30)
    raw = load_raw(cfg_of("data.dataset=cifar10", f"data.path={tmp_path / 'c'}"), np.random.default_rng(0))
    assert raw.x.shape == (130, 3072) and raw.input_shape == (3, 32, 32) and raw.num_classes == 10
    assert raw.x.min() == 0.0 and raw.x.max() == 1.0 and raw.test.sum() == 30 and raw.test[-30:].all()
    first = pickle.loads((c10 / "data_batch_1").read_bytes())
    assert np.array_equal(raw.x[:20], first[b"data"].astype(np.float32) / 255)
    assert raw.y[:20].tolist() == first[b"labels"]
    make_cifar100(tmp_path / "c100", n_train=100, n_test=30)          # protocol 2: bytes via _codecs.encode
    raw = load_raw(cfg_of("data.dataset=cifar100", f"data.path={tmp_path / 'c100'}"), np.random.default_rng(0))
    assert raw.num_classes == 100 and raw.x.shape == (130, 3072) and raw.y.max() == 99 and raw.test.sum() == 30


class Hostile:
    """A pickle payload that would create a folder when unpickled by a plain pickle.load."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.mark.parametrize("payload", ["reduce", "eval", "class"])
def test_a_hostile_pickle_is_refused_without_running(tmp_path, payload):
    root = make_cifar10(tmp_path / "c", per_batch=5, n_test=5)
    marker = tmp_path / "pwned"
    if payload == "reduce":
        blob = {b"data": Hostile(marker), b"labels": [0]}
    elif payload == "eval":
        blob = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [0], b"x": Hostile(marker)}
    else:
        blob = {b"data": np.zeros((1, 3072), np.uint8), b"labels": [0], b"x": UserError("x")}
    (root / "data_batch_3").write_bytes(pickle.dumps(blob, protocol=2))
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=cifar10", f"data.path={root}"), np.random.default_rng(0))
    msg = one_line(e)
    assert "data_batch_3" in msg and "refused unexecuted" in msg
    assert not marker.exists()
    # a plain pickle.load would have run it: the payload is real
    if payload == "reduce":
        pickle.loads((root / "data_batch_3").read_bytes())
        assert marker.is_dir()


def test_the_cli_refuses_a_hostile_pickle_with_exit_2_and_one_line(tmp_path, capsys):
    from otafl_sdr.cli.main import main
    root = make_cifar10(tmp_path / "c", per_batch=5, n_test=5)
    marker = tmp_path / "pwned"
    (root / "test_batch").write_bytes(pickle.dumps({b"data": Hostile(marker), b"labels": [0]}))
    rc = main(["run", "--out", str(tmp_path / "r"), "--quiet", "--set", "data.dataset=cifar10",
               "--set", f"data.path={root}", "--set", "model.name=lenet5", "--set", "air.name=sim",
               "--set", "run.rounds=1", "--set", "run.progress=false"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "posix.mkdir" in err and "Traceback" not in err
    assert not marker.exists()


@pytest.mark.parametrize("blob, words", [
    ([1, 2, 3], "not a dict"),
    ({b"data": np.zeros((2, 3071), np.uint8), b"labels": [0, 1]}, "(n, 3072) uint8"),
    ({b"data": np.zeros((2, 3072), np.float64), b"labels": [0, 1]}, "(n, 3072) uint8"),
    ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, "list of 2 integer labels"),
    ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, "labels must be in 0..9"),
    (None, "is not a CIFAR python batch"),
])
def test_a_foreign_or_torn_cifar_batch_is_one_line(tmp_path, blob, words):
    root = make_cifar10(tmp_path / "c", per_batch=5, n_test=5)
    raw = pickle.dumps(blob, protocol=4) if blob is not None else (root / "data_batch_1").read_bytes()[:-100]
    (root / "data_batch_2").write_bytes(raw)
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=cifar10", f"data.path={root}"), np.random.default_rng(0))
    assert words in one_line(e) and "data_batch_2" in str(e.value)


def test_cifar_batches_refuse_globals_even_numpy_ones_beyond_array_reconstruction(tmp_path):
    p = tmp_path / "b"
    p.write_bytes(pickle.dumps({b"data": np.load, b"labels": []}, protocol=4))
    with pytest.raises(UserError) as e:
        cifar_files.read_batch(p)
    assert "numpy.load" in one_line(e) or "numpy.lib.npyio.load" in str(e.value)
    p.write_bytes(pickle.dumps(cifar_batch(3, 10, "labels", 0), protocol=5))   # numpy's protocol-5 path works
    assert cifar_files.read_batch(p)["data"].shape == (3, 3072)


# ------------------------------------------------------------------ FEMNIST, missing files, download
def test_femnist_still_reads_leaf_json(tmp_path):
    root = make_leaf(tmp_path / "leaf", writers=4, per_writer=20)
    raw = load_raw(cfg_of("data.dataset=femnist", f"data.path={root}"), np.random.default_rng(0))
    assert raw.x.shape == (80, 784) and raw.num_classes == 10 and raw.test is None
    assert np.bincount(raw.groups).tolist() == [20] * 4 and 0.0 <= raw.x.min() and raw.x.max() <= 1.0


def test_missing_files_name_data_download_and_nothing_is_fetched(tmp_path):
    (tmp_path / "empty").mkdir()
    for name, what in (("mnist", "train-images-idx3-ubyte"), ("cifar10", "data_batch_1"), ("cifar100", "train")):
        with pytest.raises(UserError) as e:
            load_raw(cfg_of(f"data.dataset={name}", f"data.path={tmp_path / 'empty'}"), np.random.default_rng(0))
        assert what in one_line(e) and "data.download = true" in str(e.value)
    assert list((tmp_path / "empty").iterdir()) == []


def test_download_without_torchvision_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torchvision", None)       # as where it is not installed
    monkeypatch.setitem(__import__("sys").modules, "torchvision.datasets", None)
    with pytest.raises(UserError) as e:
        load_raw(cfg_of("data.dataset=fashion_mnist", f"data.path={tmp_path / 'fm'}", "data.download=true"),
                 np.random.default_rng(0))
    assert "needs torchvision" in one_line(e) and "data.path" in str(e.value)


@pytest.mark.parametrize("sets, key", [
    (["data.dataset=mnist"], "data.path"),
    (["data.dataset=cifar10", "data.path=/nonexistent/cifar"], "data.path"),
    (["data.dataset=femnist", "data.path=/tmp", "data.download=true"], "data.download"),
    (["data.dataset=cifar1000"], "data.dataset"),
    (["model.name=resnet19"], "model.name"),
])
def test_config_keys_are_validated_in_one_line(sets, key):
    with pytest.raises(ConfigError) as e:
        cfg_of(*sets)
    assert e.value.key == key and "\n" not in str(e.value)


def test_a_gzip_bomb_stops_at_the_headers_size(tmp_path):
    p = tmp_path / "bomb-idx1-ubyte.gz"
    with gzip.open(p, "wb") as f:                                     # header says 10 values; 50 MB follow
        f.write(idx_bytes(np.zeros(10)))
        f.write(bytes(50 << 20))
    with pytest.raises(UserError) as e:
        idx_files.read_idx(p)
    assert "has bytes after" in one_line(e)
    assert data_files.FILE_DATASETS[0] == "femnist"


class HugeArray:
    """Pickles as numpy's own array reconstructor asked for a 10 TB array (allowed global, hostile size)."""

    def __reduce__(self):
        return (np.zeros(1).__reduce__()[0], (np.ndarray, (10 ** 13,), b"b"))


def test_an_allowed_reconstructor_asked_for_a_huge_array_is_one_line(tmp_path):
    p = tmp_path / "data_batch_1"
    p.write_bytes(pickle.dumps({b"data": HugeArray(), b"labels": [0]}, protocol=2))
    with pytest.raises(UserError) as e:
        cifar_files.read_batch(p)
    assert "is not a CIFAR python batch (" in one_line(e)       # MemoryError here; any overcommit: one line
