"""Issue 14's inventory: every mechanism a config can select (power policy, or an algorithm's own noise) has a
target calibration (its ``privacy_knob()``: a PrivacyKnob or a ClosedFormKnob; an algorithm's client noise knob) and a test that
runs it at eps = 1, delta = 1e-5 and recomposes privacy_ledger.jsonl with dp-accounting directly. A new
policy or noisy algorithm fails here until it is calibrated and covered."""
import importlib

import pytest

from otafl_sdr.learning.algorithms import FLAlgorithm
from otafl_sdr.power.base import PowerPolicy
from otafl_sdr.registry import ALGORITHMS, POWER_POLICIES

# mechanism -> the tests (module::function) that spend its target and recompute eps independently
from otafl_sdr.configure.plugins import load_plugins

# mechanism -> the tests (module::function) that spend its target and recompute eps independently
COVERED = {
    "cj_adaptive": ["test_targeting_cj::test_a_calibrated_run_spends_its_target"],
    "cdpb_noisy": ["test_targeting_cdpb::test_each_paper001_mechanism_spends_its_target"],
    "cdpb_idle": ["test_targeting_cdpb::test_each_paper001_mechanism_spends_its_target"],
    "cdpb_mixed": ["test_targeting_cdpb::test_each_paper001_mechanism_spends_its_target"],
    "gamma_bar": ["test_targeting_cdpb::test_each_paper001_mechanism_spends_its_target"],
    "noise_free": ["test_targeting_cdpb::test_each_paper001_mechanism_spends_its_target",
                   "test_targeting_cdpb::test_noise_free_is_protected_by_the_channel_noise_alone"],
    "h_min": ["test_targeting_cdpb::test_each_paper001_mechanism_spends_its_target",
              "test_targeting_cdpb::test_h_min_with_artificial_noise_spends_its_target"],
    "independent_sampling": ["test_targeting_cdpb::test_independent_sampling_spends_its_target_whatever_the_coins"],
    "lapa": ["test_targeting_lapa::test_lapa_spends_its_target_on_every_seed"],
    "ddpg": ["test_targeting_lapa::test_lapa_spends_its_target_on_every_seed"],
    "otafd_prop1": ["test_targeting_otafd::test_otafd_spends_its_target"],
    "noisy_fedavg": ["test_targeting_noisy::test_a_calibrated_noisy_run_spends_its_target"],
    "noisy_fedprox": ["test_targeting_noisy::test_a_calibrated_noisy_run_spends_its_target"],
}


def _calibrated(cls) -> bool:
    return cls.privacy_knob is not PowerPolicy.privacy_knob


def test_every_policy_and_noisy_algorithm_is_calibrated_and_covered():
    load_plugins()
    for name in POWER_POLICIES.names():
        assert _calibrated(POWER_POLICIES.get(name)), f"power policy {name!r} has no target calibration"
        assert name in COVERED, f"power policy {name!r}: no test spends its target"
    for name in ALGORITHMS.names():
        if ALGORITHMS.get(name).privacy_knob is not FLAlgorithm.privacy_knob:
            assert name in COVERED, f"algorithm {name!r} has a noise knob but no test spends its target"


@pytest.mark.parametrize("ref", sorted({r for refs in COVERED.values() for r in refs}))
def test_the_covering_tests_exist_and_recompute_with_dp_accounting(ref):
    module, func = ref.split("::")
    mod = importlib.import_module(module)
    assert callable(getattr(mod, func, None)), ref
    src = open(mod.__file__).read()
    assert "PLDAccountant" in src or "independent_pld_epsilon" in src    # dp-accounting, not the project's code
