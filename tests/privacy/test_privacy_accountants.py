"""Accountants ``paper``, ``rdp``, ``pld`` against hand-computed values and direct dp-accounting runs."""
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant as DpRdp
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

from otafl_sdr.privacy import paper000, pld, rdp
from otafl_sdr.privacy.paper000 import PaperAccountant, paper_epsilon
from otafl_sdr.privacy.pld import PldAccountant
from otafl_sdr.privacy.rdp import RdpAccountant
from otafl_sdr.registry import ACCOUNTANTS
from otafl_sdr.transmission import Mechanism

DELTA = 1e-5
ALL = (PaperAccountant, RdpAccountant, PldAccountant)


def run(acc, mechs):
    for m in mechs:
        acc.step(m)
    return acc.epsilon()


def test_registered_on_import():
    for name, cls in (("paper", PaperAccountant), ("rdp", RdpAccountant), ("pld", PldAccountant)):
        assert ACCOUNTANTS.get(name) is cls and cls.name == name


def test_paper_matches_hand_computed_value():
    # rounds (Delta, sigma) = (1, 10), (2, 10), (1, 5):
    # S = 1/200 + 4/200 + 1/50 = 0.005 + 0.02 + 0.02 = 0.045
    # S log(1/delta) = 0.045 * 11.512925464970229 = 0.51808164592366
    # eps = 2 sqrt(0.51808164592366) + 0.045 = 2 * 0.71977888 + 0.045 = 1.48455777
    acc = PaperAccountant(DELTA)
    eps = run(acc, [Mechanism(1, 1.0, 10.0), Mechanism(2, 2.0, 10.0), Mechanism(3, 1.0, 5.0)])
    assert acc.S == pytest.approx(0.045, rel=1e-15)
    assert eps == pytest.approx(1.4845577736564242, rel=1e-12)
    assert eps == pytest.approx(1.48455777, abs=1e-8)


def test_paper_equals_theorem_3_in_the_papers_variables():
    # Theorem 3: X = (1/(2|D|^2)) sum_m 1/((s^m)^2 (sigma^m)^2), |D| = 100, s = (1, 2, 1),
    # sigma = (0.1, 0.04, 0.05): X = (100 + 156.25 + 400) / 20000 = 0.0328125; Delta = 1/(s |D|)
    D, s, sig = 100, (1, 2, 1), (0.1, 0.04, 0.05)
    acc = PaperAccountant(DELTA)
    eps = run(acc, [Mechanism(m, 1.0 / (si * D), g) for m, (si, g) in enumerate(zip(s, sig))])
    X = 0.0328125
    assert acc.S == pytest.approx(X, rel=1e-12)
    assert eps == pytest.approx(2 * math.sqrt(X * math.log(1 / DELTA)) + X, rel=1e-12)


@pytest.mark.parametrize("z,T", [(1.0, 1), (3.7, 40), (25.0, 200)])
def test_rdp_matches_direct_dp_accounting(z, T):
    ours = RdpAccountant(DELTA)
    eps = run(ours, [Mechanism(t, 0.02, 0.02 * z) for t in range(T)])
    direct = DpRdp(orders=rdp.DEFAULT_ORDERS)
    direct.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), T))
    assert eps == pytest.approx(direct.get_epsilon(DELTA), rel=1e-9, abs=1e-12)
    # and with dp-accounting's own default orders
    ours_default = RdpAccountant(DELTA, rdp_orders=DEFAULT_RDP_ORDERS)
    eps_d = run(ours_default, [Mechanism(t, 0.02, 0.02 * z) for t in range(T)])
    d2 = DpRdp()
    d2.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), T))
    assert eps_d == pytest.approx(d2.get_epsilon(DELTA), rel=1e-9, abs=1e-12)
    assert eps <= eps_d + 1e-12             # more orders can only help


@pytest.mark.parametrize("z,T", [(1.0, 1), (3.7, 40), (25.0, 200)])
def test_pld_matches_direct_dp_accounting(z, T):
    ours = PldAccountant(DELTA)
    eps = run(ours, [Mechanism(t, 0.5, 0.5 * z) for t in range(T)])
    direct = PLDAccountant(value_discretization_interval=pld.DEFAULT_INTERVAL)
    direct.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(z), T))
    exact = get_epsilon_gaussian(z / math.sqrt(T), DELTA)
    assert eps == pytest.approx(exact, rel=1e-12)             # the exact curve of the merged Gaussian
    assert eps <= direct.get_epsilon(DELTA) <= eps + 1e-4      # dp-accounting's PLD: pessimistic, close


def test_heterogeneous_rounds_compose():
    rng = np.random.default_rng(7)
    sens = rng.uniform(0.005, 0.02, 30)
    sig = rng.uniform(0.05, 0.3, 30)
    mechs = [Mechanism(t, float(a), float(b)) for t, (a, b) in enumerate(zip(sens, sig))]
    z = sig / sens
    # paper: S = sum Delta^2 / (2 sigma^2)
    p = PaperAccountant(DELTA)
    assert run(p, mechs) == pytest.approx(paper_epsilon(float(np.sum(1 / (2 * z ** 2))), DELTA), rel=1e-12)
    # rdp: the same as one ComposedDpEvent of the 30 Gaussians
    r = RdpAccountant(DELTA)
    direct = DpRdp(orders=rdp.DEFAULT_ORDERS)
    direct.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(float(x)) for x in z]))
    assert run(r, mechs) == pytest.approx(direct.get_epsilon(DELTA), rel=1e-9)
    # pld: close to dp-accounting composing the 30 PLDs one by one (which carries 30 discretisations),
    # and above the exact epsilon of the composed Gaussian, 1/z_eff^2 = sum 1/z^2
    q = PldAccountant(DELTA)
    eps = run(q, mechs)
    one_by_one = PLDAccountant(value_discretization_interval=1e-4)
    for x in z:
        one_by_one.compose(dp_accounting.GaussianDpEvent(float(x)))
    exact = get_epsilon_gaussian(1 / math.sqrt(float(np.sum(1 / z ** 2))), DELTA)
    assert eps == pytest.approx(exact, rel=1e-12)
    assert eps <= one_by_one.get_epsilon(DELTA) <= eps + 1e-3
    # order of the rounds does not matter
    assert run(PaperAccountant(DELTA), mechs[::-1]) == pytest.approx(p.epsilon(), rel=1e-12)
    assert run(RdpAccountant(DELTA), mechs[::-1]) == pytest.approx(r.epsilon(), rel=1e-9)


@pytest.mark.parametrize("delta", [1e-5, 1e-2])
@pytest.mark.parametrize("z,T", [(0.5, 10), (2.0, 80), (10.0, 1), (10.0, 200), (50.0, 80), (300.0, 200),
                                 (2000.0, 1)])
def test_true_ordering_exact_pld_rdp_paper(z, T, delta):
    """What holds (checked over eps from 1e-3 to 500): exact <= pld <= rdp <= paper. PLD is a pessimistic
    estimate of the exact Gaussian curve; RDP's (improved) conversion is looser; the paper's bound is
    the plain zCDP conversion rho + 2 sqrt(rho log(1/delta)), the loosest."""
    mechs = [Mechanism(t, 1.0, z) for t in range(T)]
    e_paper, e_rdp, e_pld = (run(cls(delta), mechs) for cls in ALL)
    exact = get_epsilon_gaussian(z / math.sqrt(T), delta)
    assert exact <= e_pld * (1 + 1e-9) + 1e-12
    assert e_pld <= e_rdp + 1e-12
    assert e_rdp <= e_paper
    if exact > 0.05:
        assert e_rdp < e_paper and e_pld < e_rdp        # strictly, away from the eps ~ 0 corner


@pytest.mark.parametrize("cls", ALL)
def test_rounds_without_data_cost_nothing(cls):
    paid = [Mechanism(1, 0.01, 0.1), Mechanism(3, 0.02, 0.3)]
    free = [Mechanism(2, 0.0, 0.0, uses_data=False), Mechanism(4, 0.0, 0.2),
            Mechanism(5, 0.01, 0.0, uses_data=False), Mechanism(6, 0.01, 0.1, sampling_prob=0.0)]
    assert run(cls(DELTA), free) == 0.0
    a, b = cls(DELTA), cls(DELTA)
    run(a, paid)
    run(b, [paid[0], free[0], free[1], paid[1], free[2], free[3]])
    assert a.epsilon() == b.epsilon()
    assert all(cls(DELTA).applies(m) for m in free)


@pytest.mark.parametrize("cls", ALL)
def test_noiseless_release_is_not_private(cls):
    acc = cls(DELTA)
    acc.step(Mechanism(1, 0.01, 0.1))
    assert acc.peek(Mechanism(2, 0.01, 0.0)) == math.inf
    acc.step(Mechanism(2, 0.01, 0.0))
    assert acc.epsilon() == math.inf


def test_poisson_sampled_rounds():
    q, z, T = 0.3, 2.0, 4
    mechs = [Mechanism(t, 0.1, 0.1 * z, sampling_prob=q) for t in range(T)]
    event = dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z))
    # rdp
    direct = DpRdp(orders=rdp.DEFAULT_ORDERS)
    direct.compose(event, T)
    e_rdp = run(RdpAccountant(DELTA), mechs)
    assert e_rdp == pytest.approx(direct.get_epsilon(DELTA), rel=1e-9)
    # pld: composed one round at a time, as dp-accounting does for a sequence of events
    dpld = PLDAccountant(value_discretization_interval=pld.DEFAULT_INTERVAL)
    for _ in range(T):
        dpld.compose(event)
    e_pld = run(PldAccountant(DELTA), mechs)
    assert e_pld == pytest.approx(dpld.get_epsilon(DELTA), rel=1e-9)
    assert e_pld <= e_rdp
    # amplification: cheaper than full participation
    full = [Mechanism(t, 0.1, 0.1 * z) for t in range(T)]
    assert e_rdp < run(RdpAccountant(DELTA), full) and e_pld < run(PldAccountant(DELTA), full)
    # the paper's analysis does not cover subsampling: None from that round on
    p = PaperAccountant(DELTA)
    assert not p.applies(mechs[0]) and p.peek(mechs[0]) is None
    p.step(full[0])
    assert p.epsilon() is not None
    p.step(mechs[1])
    p.step(full[2])
    assert p.epsilon() is None and p.uncovered_round == 1
    assert p.would_exceed(full[3], 1e9)                 # cannot vouch -> refuse


def test_pld_mixes_gaussian_and_subsampled_rounds():
    mechs = [Mechanism(0, 0.1, 1.0), Mechanism(1, 0.1, 0.3, sampling_prob=0.5), Mechanism(2, 0.1, 0.8)]
    ours = run(PldAccountant(DELTA), mechs)
    direct = PLDAccountant(value_discretization_interval=pld.DEFAULT_INTERVAL)
    for m in mechs:
        g = dp_accounting.GaussianDpEvent(m.sigma_eff / m.sensitivity)
        direct.compose(g if m.sampling_prob == 1 else dp_accounting.PoissonSampledDpEvent(m.sampling_prob, g))
    assert ours == pytest.approx(direct.get_epsilon(DELTA), abs=2e-3)


def _mixed():
    return [Mechanism(1, 0.01, 0.08), Mechanism(2, 0.0, 0.0, uses_data=False), Mechanism(3, 0.02, 0.1),
            Mechanism(4, 0.02, 0.09, sampling_prob=0.5), Mechanism(5, 0.01, 0.05, extra={"s_min": 1.0})]


@pytest.mark.parametrize("cls", ALL)
def test_state_dict_rebuilds_exactly(cls):
    a = cls(DELTA)
    run(a, _mixed())
    b = cls(DELTA)
    b.load_state_dict(a.state_dict())
    assert b.epsilon() == a.epsilon() and len(b.history) == len(a.history)
    nxt = Mechanism(6, 0.01, 0.07)
    assert b.peek(nxt) == a.peek(nxt)
    a.step(nxt)
    b.step(nxt)
    assert b.epsilon() == a.epsilon()
    # loading into a used accountant replaces its state
    c = cls(DELTA)
    run(c, [Mechanism(9, 1.0, 0.5)])
    c.load_state_dict(b.state_dict())
    assert c.epsilon() == b.epsilon()


@pytest.mark.parametrize("cls", ALL)
def test_peek_changes_nothing_and_step_after_peek_is_exact(cls):
    mechs = _mixed()
    plain = cls(DELTA)
    run(plain, mechs)
    peeky = cls(DELTA)
    for i, m in enumerate(mechs):
        before = peeky.epsilon()
        other = Mechanism(m.round, 0.05, 0.06, sampling_prob=0.7 if i == 1 else 1.0)
        peeky.peek(other)                               # peek something else first ...
        assert peeky.epsilon() == before
        e = peeky.peek(m)                               # ... then the round itself
        assert peeky.epsilon() == before
        peeky.step(m)
        assert peeky.epsilon() == e
    assert peeky.epsilon() == plain.epsilon()
    # a peek followed by a DIFFERENT step must not reuse the peeked result
    a, b = cls(DELTA), cls(DELTA)
    a.peek(Mechanism(1, 0.05, 0.1, sampling_prob=0.5))
    a.step(Mechanism(1, 0.01, 0.1, sampling_prob=0.5))
    b.step(Mechanism(1, 0.01, 0.1, sampling_prob=0.5))
    assert a.epsilon() == b.epsilon()


def test_epsilon_at_another_delta():
    for cls in ALL:
        acc = cls(DELTA)
        run(acc, [Mechanism(1, 0.01, 0.05)])
        assert acc.epsilon(1e-3) < acc.epsilon() == acc.epsilon(DELTA)


def test_context_options():
    m = [Mechanism(1, 1.0, 3.0, sampling_prob=0.5)]      # the grid matters only for subsampled rounds
    coarse = run(PldAccountant(DELTA, pld_value_discretization_interval=1e-2), m)
    fine = run(PldAccountant(DELTA, pld_value_discretization_interval=1e-4), m)
    assert fine <= coarse
    assert run(PldAccountant(DELTA, pld_value_discretization_interval=1e-2), [Mechanism(1, 1.0, 3.0)]) == \
        pytest.approx(get_epsilon_gaussian(3.0, DELTA), rel=1e-9)
    few = run(RdpAccountant(DELTA, rdp_orders=[2.0, 8.0]), m)
    assert few >= run(RdpAccountant(DELTA), m)
    assert paper000.round_cost(1.0, 3.0) == pytest.approx(1 / 18)


def test_pld_full_participation_uses_the_exact_gaussian_curve():
    """Full-participation rounds merge into one Gaussian whose exact epsilon is reported (O(1); z ~ 0.004
    would need GBs of PLD grid); it agrees with dp-accounting's own PLDAccountant from below within 0.1 %."""
    from dp_accounting.gaussian_mechanism import get_epsilon_gaussian
    from dp_accounting.pld import PLDAccountant
    from otafl_sdr.privacy.pld import PldAccountant
    from otafl_sdr.transmission import Mechanism
    acc = PldAccountant(1e-5)
    for t in range(1, 4):
        acc.step(Mechanism(round=t, sensitivity=1.0, sigma_eff=0.004))
    assert acc.epsilon() == pytest.approx(get_epsilon_gaussian(0.004 / 3 ** 0.5, 1e-5), rel=1e-12)
    for z, T in ((0.25, 1), (2.0, 100), (20.0, 7)):
        acc2 = PldAccountant(1e-5)
        independent = PLDAccountant(value_discretization_interval=1e-4)
        for t in range(1, T + 1):
            acc2.step(Mechanism(round=t, sensitivity=1.0, sigma_eff=z))
        independent.compose(dp_accounting.GaussianDpEvent(z), T)
        ref = independent.get_epsilon(1e-5)
        assert ref * (1 - 1e-3) <= acc2.epsilon() <= ref


@pytest.mark.parametrize("delta", [1e-10, 1e-5, 1e-2, 0.3])
def test_fast_gaussian_epsilon_equals_dp_accounting_exact_curve(delta):
    """pld.gaussian_epsilon (log-space, O(1)) against dp-accounting's get_epsilon_gaussian over z = 0.003..300."""
    for z in np.geomspace(0.003, 300, 40):
        ref = get_epsilon_gaussian(float(z), delta)
        assert pld.gaussian_epsilon(float(z), delta) == pytest.approx(ref, rel=1e-9, abs=1e-12)
