"""Every registered accountant checked against dp-accounting (issue 33 item 3), parametrized over the registry:
on plain Gaussian rounds (three with every client) it reports either None
(its analysis does not cover them: ``applies``) or an epsilon no smaller than dp-accounting's exact PLD value
of the same composition (``pld`` equals it; rdp against dp-accounting's RdpAccountant and subsampled
rounds: tests/privacy/test_privacy_accountants.py). A closed form
(``closed_form = True``) may fall below (the summary then flags it, experiment/orchestrator.privacy_verdicts)
but must say so. An accountant planted here to report half the PLD value fails the check."""
import pytest

from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.privacy.pld import PldAccountant
from otafl_sdr.registry import ACCOUNTANTS

from mechanism_contract import DELTA, ROUNDS, check_accountant, exact, reported

load_plugins()
@pytest.mark.parametrize("name", ACCOUNTANTS.names())
def test_every_registered_accountant_never_reports_below_dp_accounting(name):
    check_accountant(ACCOUNTANTS.get(name))


def test_pld_is_dp_accountings_exact_value():
    assert reported(ACCOUNTANTS.get("pld"), ROUNDS) == pytest.approx(exact(len(ROUNDS)), rel=1e-4)


class HalfPld(PldAccountant):
    """Planted: reports half the exact value."""

    name = "contract_half_pld"

    def epsilon(self, delta=None):
        eps = super().epsilon(delta)
        return None if eps is None else eps / 2


def test_an_accountant_reporting_half_fails_the_check():
    with pytest.raises(AssertionError, match="contract_half_pld"):
        check_accountant(HalfPld)
