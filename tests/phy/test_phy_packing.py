"""pack_reals / unpack_reals: exact, two reals per complex channel use (issue 3)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from otafl_sdr.channel import sim_air
from otafl_sdr.phy.packing import pack_reals, symbols_for, unpack_reals


@pytest.mark.parametrize("d", [1, 2, 3, 10, 155_862, 155_863])
def test_round_trip_exact(d):
    x = np.random.default_rng(d).standard_normal(d)
    s = pack_reals(x)
    assert s.shape == (symbols_for(d),) == ((d + 1) // 2,)
    y = unpack_reals(s, d)
    assert y.dtype == np.float64 and np.array_equal(y, x)


def test_pairs_map_to_i_and_q():
    s = pack_reals(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    assert np.array_equal(s, np.array([1 + 2j, 3 + 4j, 5 + 0j]))


def test_batch_rows_independent():
    x = np.random.default_rng(0).standard_normal((4, 7))
    s = pack_reals(x)
    assert s.shape == (4, 4)
    for i in range(4):
        assert np.array_equal(s[i], pack_reals(x[i]))
    assert np.array_equal(unpack_reals(s, 7), x)


def test_unpack_refuses_too_many_reals():
    with pytest.raises(ValueError, match="cannot unpack"):
        unpack_reals(np.zeros(3, complex), 7)


def test_sim_air_uses_the_same_functions():
    """The sim air packs with pack_reals or with its memory view (even d), and unpacks with the float64 view
    of y: both are these functions' maps bit for bit (the air itself: tests/channel/test_sim_air_fast.py)."""
    assert sim_air.pack_reals is pack_reals
    x = np.random.default_rng(1).standard_normal((3, 10))
    assert np.array_equal(x.view(np.complex128), pack_reals(x))
    s = pack_reals(x)
    assert np.array_equal(s.view(np.float64)[..., :9], unpack_reals(s, 9))


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, st.integers(1, 300), elements=st.floats(allow_nan=False, allow_infinity=False, width=64)))
def test_property_exact(x):
    assert np.array_equal(unpack_reals(pack_reals(x), len(x)), x)
