"""Who sends the pre-equalised reference, and at what gain, depends only on planned quantities (issue 24,
item 2): a plan without a finite power limit gives the same reference for an all-zero payload and a large
one on every air (the sim air's multipath receiver, loopback, the zmq airs' ``reference_design``, uhd).
Before, the fallback was the payload's own energy: an all-zero payload sent no reference at all."""
import dataclasses

import numpy as np
import pytest

from otafl_sdr.channel.multipath_rx import reference_senders
from otafl_sdr.phy import Modem
from otafl_sdr.phy.reference_design import allowance, reference_design
from otafl_sdr.radio.uhd_round_signal import client_bursts

from loopback_helpers import make_cfg, make_plan

K, D = 6, 2001

LIMITS = {
    "none": lambda P: None,
    "all_inf": lambda P: np.full_like(P, np.inf),
    "some_inf": lambda P: np.where(np.arange(len(P)) % 2 == 0, np.inf, P),
}


def _plans(limit: str):
    """(cfg, zero-payload plan, large-payload plan): one paper-000 plan, its payload replaced."""
    cfg = make_cfg()
    plan = make_plan(cfg, K, D, np.random.default_rng(5))
    plan.power_limit = LIMITS[limit](np.asarray(plan.power_limit, dtype=float))
    plan.alpha[2] = 0                                             # one client that does not send
    plan.mode[2] = "silent"
    zero = dataclasses.replace(plan, payload=np.zeros_like(plan.payload))
    big = dataclasses.replace(plan, payload=1e3 * np.asarray(plan.payload))
    return cfg, zero, big


def _active(plan) -> np.ndarray:
    return np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)


@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_reference_does_not_depend_on_the_payload(limit):
    cfg, zero, big = _plans(limit)
    a0, a1 = allowance(zero, _active(zero)), allowance(big, _active(big))
    assert np.array_equal(a0, a1)
    assert a0[2] == 0 and np.all(a0[_active(zero)] > 0)          # senders get a reference, silent ones not
    modem = Modem(cfg.phy)
    g0, A0 = reference_design(modem, zero.h, a0, D)               # the zmq airs and the testbed's server
    g1, A1 = reference_design(modem, big.h, a1, D)
    assert np.array_equal(g0, g1) and A0 == A1 and A0 > 0
    assert np.array_equal(reference_senders(zero, _active(zero), cfg.phy),      # sim air, multipath receiver
                          reference_senders(big, _active(big), cfg.phy))
    assert reference_senders(zero, _active(zero), cfg.phy).any()
    (b0, r0), (b1, r1) = client_bursts(zero, modem), client_bursts(big, modem)  # uhd
    assert r0 == r1 == pytest.approx(A0)


def test_the_planned_bound_without_a_limit_and_the_limit_where_finite():
    from otafl_sdr.phy.reference_design import planned_energy
    cfg, zero, _ = _plans("some_inf")
    P = np.asarray(make_plan(make_cfg(), K, D, np.random.default_rng(5)).power_limit, dtype=float)
    a = allowance(zero, _active(zero))
    bound = planned_energy(zero)
    assert np.allclose(bound, np.abs(zero.alpha) ** 2)            # |alpha_i|^2 W^2, W = 1 (u_i / tau clipped)
    finite = np.isfinite(np.asarray(zero.power_limit))
    assert np.array_equal(a[finite & _active(zero)], P[finite & _active(zero)])   # P_i kept where finite
    assert np.array_equal(a[~finite & _active(zero)], bound[~finite & _active(zero)])
    # a plan with paper 001's artificial noise rows: its planned variance counts, not the row's values
    zero.row_noise_var = np.full(K, 0.5)
    assert np.allclose(planned_energy(zero), np.abs(zero.alpha) ** 2 * (1 + 0.5 * D))


def test_a_finite_limit_is_used_as_before():
    """Defaults (every policy sets P_i): the allowance is P_i for a sender, 0 otherwise, whatever the data."""
    cfg = make_cfg()
    plan = make_plan(cfg, K, D, np.random.default_rng(7))
    plan.mode[1] = "silent"
    act = _active(plan)
    assert np.array_equal(allowance(plan, act), np.where(act, plan.power_limit, 0.0))


@pytest.mark.gnuradio
@pytest.mark.parametrize("limit", ["none", "all_inf"])
def test_loopback_sends_the_same_reference_for_any_payload(limit):
    from otafl_sdr.radio.loopback_air import LoopbackAir
    cfg, zero, big = _plans(limit)
    with LoopbackAir(cfg) as air:
        r0 = air.transmit(zero, np.random.default_rng(1))
        r1 = air.transmit(big, np.random.default_rng(1))
    assert r0.ok and r1.ok, (r0.reason, r1.reason)
    assert r0.extra["ref_amplitude"] == r1.extra["ref_amplitude"] > 0
    assert r0.extra["ref_senders"] == r1.extra["ref_senders"] > 0
