import numpy as np

from otafl_sdr.learning import datasets


def test_mnist5k_disk_cache_is_exact_and_survives_a_torn_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    datasets._mnist_arrays.cache_clear()
    try:
        x1, y1 = datasets._mnist_arrays()                  # decompresses and writes the cache
        path = datasets._mnist_cache_path()
        assert path.is_file()
        datasets._mnist_arrays.cache_clear()
        x2, y2 = datasets._mnist_arrays()                  # from the cache
        assert np.array_equal(x1, x2) and np.array_equal(y1, y2) and x2.dtype == x1.dtype
        path.write_bytes(b"torn")                          # a corrupt cache is rebuilt, not trusted
        datasets._mnist_arrays.cache_clear()
        x3, y3 = datasets._mnist_arrays()
        assert np.array_equal(x1, x3) and np.array_equal(y1, y3)
        assert x1.shape == (5000, 784) and set(np.unique(y1)) == set(range(10))
    finally:
        datasets._mnist_arrays.cache_clear()
