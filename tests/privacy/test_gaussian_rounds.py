"""gaussian_rounds.py (the `account` command's fast path, no dp-accounting import) against dp-accounting
itself: the same order grid, the same RDP conversion, the same exact Gaussian curve, within 0.1 % (the
issue's tolerance; they agree far closer)."""
from __future__ import annotations

import subprocess
import sys

import dp_accounting
import pytest
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from otafl_sdr import gaussian_rounds as gr
from otafl_sdr.privacy.rdp import DEFAULT_ORDERS

pytestmark = [pytest.mark.net, pytest.mark.usefixtures("figures_not_drawn")]

CASES = [(2.0, 1000, 1e-5), (0.8, 30, 1e-5), (5.0, 1, 1e-3), (1.1, 200, 0.01), (20.0, 80, 1e-5)]


def test_the_order_grid_is_dp_accountings_plus_the_ledgers():
    assert tuple(float(o) for o in rdp_privacy_accountant.DEFAULT_RDP_ORDERS) == tuple(
        float(o) for o in gr.DP_ACCOUNTING_ORDERS)
    assert gr.ORDERS == tuple(DEFAULT_ORDERS)


@pytest.mark.parametrize("z,T,delta", CASES)
def test_rdp_closed_form_equals_dp_accounting(z, T, delta):
    acc = rdp_privacy_accountant.RdpAccountant(orders=list(gr.ORDERS))
    acc.compose(dp_accounting.GaussianDpEvent(z), T)
    assert gr.epsilon("rdp", z, T, delta) == pytest.approx(acc.get_epsilon(delta), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("z,T,delta", CASES)
def test_pld_closed_form_equals_dp_accounting(z, T, delta):
    exact = dp_accounting.get_epsilon_gaussian(z / T ** 0.5, delta) if hasattr(dp_accounting, "get_epsilon_gaussian") \
        else None
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(z), T)
    v = gr.epsilon("pld", z, T, delta)
    assert v == pytest.approx(acc.get_epsilon(delta), rel=1e-3)          # the discretised PLD is pessimistic
    if exact is not None:
        assert v == pytest.approx(exact, rel=1e-6)


def test_the_account_command_prints_the_same_figures_by_both_paths():
    """Full participation goes through the closed forms; a sampling of 1 - 1e-12 through dp-accounting."""
    def run(*extra):
        r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "account", "--sigma", "1.5", "--rounds", "300",
                            "--accountants", "rdp,pld", *extra], capture_output=True, text=True, check=True)
        return {ln.split()[0]: float(ln.split()[1]) for ln in r.stdout.splitlines() if ln.strip().startswith("eps_")}
    fast, slow = run(), run("--sampling", "0.999999999999")
    assert fast.keys() == slow.keys() == {"eps_rdp", "eps_pld"}
    for k in fast:
        assert fast[k] == pytest.approx(slow[k], rel=1e-3)
