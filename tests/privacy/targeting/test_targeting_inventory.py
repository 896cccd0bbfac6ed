"""Issue 14's inventory, derived from the classes (issue 33 item 3: no table to edit): every mechanism a config
can select (a power policy, or an algorithm with its own noise) has a target calibration, its
``privacy_knob()`` (a PrivacyKnob or a ClosedFormKnob; an algorithm's client noise knob). That each one spends
its target, recomputed with dp-accounting, is checked for every registered class by
tests/privacy/test_mechanism_contracts.py::test_every_registered_mechanism_spends_its_target. A failure names
the class and the file to edit."""
from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.learning.algorithms import FLAlgorithm
from otafl_sdr.power.base import PowerPolicy, defined_in
from otafl_sdr.registry import ALGORITHMS, POWER_POLICIES


def test_every_policy_has_a_target_calibration():
    load_plugins()
    for name in POWER_POLICIES.names():
        cls = POWER_POLICIES.get(name)
        assert cls.privacy_knob is not PowerPolicy.privacy_knob, (
            f"power policy {name!r} ({cls.__name__} in {defined_in(cls)}) has no target calibration: implement "
            f"privacy_knob() there (privacy/knobs.py; docs/extending.md)")


def test_the_spending_check_covers_every_mechanism_by_construction():
    from mechanism_contract import registered_mechanisms
    ids = {p.id for p in registered_mechanisms()}
    assert ids == {f"policy-{n}" for n in POWER_POLICIES.names()} | {f"algorithm-{n}" for n in ALGORITHMS.names()}
    noisy = [n for n in ALGORITHMS.names() if ALGORITHMS.get(n).privacy_knob is not FLAlgorithm.privacy_knob]
    assert {"noisy_fedavg", "noisy_fedprox"} <= set(noisy)
