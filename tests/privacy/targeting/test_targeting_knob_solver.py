"""privacy/targeting.solve_knob: a knob bisected on planned rounds lands in [(1 - TOL) eps, eps] by an independent
dp-accounting composition, and unreachable ends are refused in one line."""
import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant

from otafl_sdr.errors import UserError
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.privacy.targeting import solve_knob

pytestmark = [pytest.mark.slow]


def _knob(lo, hi, private_when="higher"):
    box = {"v": lo}
    return PrivacyKnob(name="power.options.noise", get=lambda: box["v"], set=lambda v: box.update(v=v),
                       lo=lo, hi=hi, private_when=private_when, limit="test range")


def _pld(rounds, delta):
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    for z, q in rounds:
        ev = dp_accounting.GaussianDpEvent(noise_multiplier=z)
        acc.compose(ev if q >= 1 else dp_accounting.PoissonSampledDpEvent(q, ev))
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("q, n", [(1.0, 12), (0.3, 6)])
def test_noise_knob_lands_in_band_by_dp_accounting(q, n):
    """Heterogeneous rounds: round t has z_t = v * (1 + t / 10). Unsampled, 12 rounds (they compose in closed
    form); Poisson-sampled, 6 rounds: every distinct subsampled round is its own PLD at each bisection step
    (about 80 % of this file's CPU at 12 rounds), and six distinct ones compose heterogeneous sampled rounds
    just as twelve do."""
    def rounds_at(v):
        return [(v * (1 + t / 10), q) for t in range(n)]
    cal = solve_knob(1.0, 1e-5, "pld", _knob(0.05, 100.0), rounds_at)
    eps = _pld(rounds_at(cal.value), 1e-5)
    assert 0.99 <= eps <= 1.0 + 1e-3, eps
    assert cal.rounds == n and cal.sampling == q


def test_power_knob_lower_is_private():
    # z = 1 / v: a power scaling knob, smaller is more private
    cal = solve_knob(2.0, 1e-5, "pld", _knob(0.01, 10.0, "lower"), lambda v: [(1.0 / v, 1.0)] * 5)
    eps = _pld([(1.0 / cal.value, 1.0)] * 5, 1e-5)
    assert 1.98 <= eps <= 2.0 + 1e-3


def test_unreachable_ends_are_refused():
    with pytest.raises(UserError, match="cannot be met: even power.options.noise = 2 \\(test range\\)"):
        solve_knob(1.0, 1e-5, "pld", _knob(0.1, 2.0), lambda v: [(v, 1.0)] * 50)
    with pytest.raises(UserError, match="cannot be spent"):
        solve_knob(1.0, 1e-5, "pld", _knob(50.0, 100.0), lambda v: [(v, 1.0)])
