"""docs/extending.md's example mechanism, executed as the document writes it: a power policy that registers
itself (no central table edited), runs on the sim air, has its privacy knob solved for the target, and books
a ledger that dp-accounting recomputes."""
import json
import re
from pathlib import Path

import dp_accounting
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_guide_holds_the_example_and_its_run():
    blocks = _blocks()
    assert len(blocks) == 2 and "POWER_POLICIES.register" in blocks[0] and "otafl_sdr.run(" in blocks[1]


@pytest.mark.experiment
def test_the_example_mechanism_registers_runs_and_spends_its_target(capsys):
    from otafl_sdr.registry import POWER_POLICIES
    namespace: dict = {"__name__": "extending_example"}
    exec(compile(_blocks()[0], str(DOC), "exec"), namespace)        # the guide's policy, as written
    assert "weakest_link" in POWER_POLICIES.names()
    try:
        exec(compile(_blocks()[1], str(DOC), "exec"), namespace)    # the guide's run, as written
    finally:
        POWER_POLICIES.unregister("weakest_link")                   # the other tests see the built-in set
    result = namespace["result"]
    s = result.summary
    assert not result.stopped_reason
    assert s["calibrated_knob"] == "power.options.power_scale" and 0 < s["calibrated_value"] < 1
    assert 0.99 * 0.5 <= s["eps_pld"] <= 0.5                          # the target, spent within 1 %
    printed = capsys.readouterr().out.split()
    assert printed[0] == "power.options.power_scale" and float(printed[2]) == pytest.approx(s["eps_pld"])
    # the ledger, recomputed by dp-accounting directly: Gaussian rounds of noise multiplier sigma / Delta
    ledger = [json.loads(l) for l in (result.out / "privacy_ledger.jsonl").read_text().splitlines()]
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    for e in ledger:
        if e["uses_data"] and e["sensitivity"] > 0:
            acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier=e["sigma_eff"] / e["sensitivity"]))
    assert acc.get_epsilon(1e-5) == pytest.approx(s["eps_pld"], rel=2e-3)
    # the default algorithm (Upcycled-FL): 3 client rounds are 6 iterations, the server-only ones free
    assert len(ledger) == 6 and sum(e["sensitivity"] > 0 for e in ledger) == 3
