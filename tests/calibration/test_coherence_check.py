"""The high-SNR coherence check's verdict (calibration/coherence_check.judge), pure: rows as
experiment/coherence_rounds returns them, built here. A calm lab passes; a client whose residual phase passes
0.1 rad is named; an SNR where 0.1 rad would not show fails as not sensitive; nothing received fails."""
import math

import pytest

from otafl_sdr.calibration.coherence_check import check_sets, judge, report_lines
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import UserError


def _rows(n=5, ratio=1.0, theory=0.004, phases=(0.0, 0.0, 0.0), std=0.01):
    return [{"round": r, "clients": 3, "dim": 650, "ok": True, "reason": "", "ratio": ratio, "theory": theory,
             "link_health": {"clients": [{"client": i, "phase_rad": p, "phase_std": std, "cfo_hz": 0.1,
                                          "cfo_std_hz": 0.2} for i, p in enumerate(phases)]}}
            for r in range(1, n + 1)]


def test_a_calm_lab_passes_and_the_check_is_sensitive():
    v = judge(_rows(ratio=1.03), 3, 650)
    assert v["passed"] and v["sensitive"] and not v["failures"], v["failures"]
    # 0.1 rad on one of 3 clients at theory 0.004: +0.83 of the theory, against a tolerance of 0.05 + 4 sqrt(2 / 3250)
    assert math.isclose(v["visible_excess"], 0.01 / 3 / 0.004) and math.isclose(v["tolerance"], 0.05 + 4 * math.sqrt(2 / 3250))
    assert report_lines(v)[-1] == "coherence check: passed"


def test_a_client_off_by_more_than_the_visible_phase_is_named():
    v = judge(_rows(ratio=1.0 + 0.3 ** 2 / 3 / 0.004, phases=(0.0, 0.3, 0.01)), 3, 650)
    assert not v["passed"]
    assert v["failures"][0].startswith("client-1: residual phase +0.300") and len([f for f in v["failures"]
                                                                                  if f.startswith("client-")]) == 1
    assert any("NMSE is" in f and "no client" not in f for f in v["failures"])      # the sum's excess, explained


def test_a_phase_within_its_standard_errors_is_not_named():
    v = judge(_rows(phases=(0.0, 0.12, 0.0), std=0.05), 3, 650)            # 0.12 < 0.1 + 3 x 0.05 / sqrt(5)
    assert not [f for f in v["failures"] if f.startswith("client-")]


def _rounds(per_round_phases, std=0.002, ratio=1.0):
    """Rows whose client i reads per_round_phases[r][i] in round r."""
    rows = _rows(n=len(per_round_phases), ratio=ratio, std=std)
    for row, phases in zip(rows, per_round_phases):
        for c, p in zip(row["link_health"]["clients"], phases):
            c["phase_rad"] = p
    return rows


def test_a_client_near_pi_is_named_whichever_side_of_the_wrap_it_reads():
    """+3.10 and -3.10 rad are both 0.04 rad from pi: an arithmetic mean put this client at 0 and passed it."""
    v = judge(_rounds([(0.0, 3.10, 0.0), (0.0, -3.10, 0.0)] * 2, ratio=900.0), 3, 650)
    c1 = v["clients"][1]
    assert abs(abs(c1["phase_rad"]) - math.pi) < 1e-9 and c1["phase_wander_rad"] == pytest.approx(0.0416, abs=1e-3)
    assert v["failures"][0].startswith("client-1: residual phase ") and not v["passed"]


def test_a_client_whose_phase_wanders_between_rounds_is_named_as_unlocked():
    """Independent oscillators over the testbed's nodes (measured, not tracked): each round's phase anywhere, each
    read to 0.002 rad (the node lab with B210 TCXOs: NMSE / theory 308); a calm client's scatter is its noise."""
    import numpy as np
    rng = np.random.default_rng(5)
    rounds = [(float(rng.normal(0, 0.002)), float(rng.uniform(-np.pi, np.pi)), 0.0) for _ in range(3)]
    v = judge(_rounds(rounds, ratio=308.0), 3, 650)
    named = [f for f in v["failures"] if f.startswith("client-")]
    assert len(named) == 1 and named[0].startswith("client-1: its phase wanders between the check's rounds"), named
    assert "10 MHz / PPS reference" in named[0] and 'air.coherence = "track"' in named[0]
    assert v["clients"][0]["phase_wander_rad"] < 0.01
    assert judge(_rounds(rounds, ratio=308.0), 3, 650, tracked=True)["failures"] == [
        "the coherent sum's NMSE is 308.000 x its theory (tolerance 1 +- 0.178): each client's payload corrected by "
        "its own sounding, the sum still off (a client's gain, the receiver or the timing: recalibrate)"]


def test_an_snr_where_the_phase_would_not_show_fails_as_not_sensitive():
    v = judge(_rows(theory=1.5), 3, 650)
    assert not v["passed"] and any(f.startswith("not sensitive") and "power.max_snr_db" in f for f in v["failures"])


def test_an_unexplained_excess_and_nothing_received_fail():
    v = judge(_rows(ratio=1.6), 3, 650)
    assert not v["passed"] and any("no client's residual phase explains it" in f for f in v["failures"])
    lost = [{"round": 1, "ok": False, "reason": "no preamble detected", "ratio": None, "theory": 0.004}]
    v = judge(lost, 3, 650)
    assert not v["passed"] and v["failures"] == ["no check round was received (no preamble detected)"]


def test_the_check_runs_at_a_high_snr_and_sounds_each_client_as_the_run_will():
    cfg = load_config(None, ["air.name=uhd"])
    sets = check_sets(cfg)
    assert "power.jammer=false" in sets and "air.coherence=measure" in sets and "power.max_snr_db=20" in sets
    assert "air.coherence=measure" in check_sets(load_config(None, ["air.name=uhd", "phy.waveform=ofdm",
                                                                     "air.csi=calibrated"]))
    tracked = load_config(None, ["air.name=uhd", "air.coherence=track", "air.csi=calibrated"])
    assert not [s for s in check_sets(tracked) if s.startswith("air.coherence")]    # corrected, as the run's rounds


def test_the_checks_config_is_valid_where_the_run_gives_its_jammer_a_gain():
    """The check has no jammer, but the lab's jammer radio keeps the gain the run (and its calibration) gave it:
    the check's config is valid and its calibration setup the run's (the node lab's power test was refused at
    the check, exit 2: "'jammer' names no radio of the run")."""
    from otafl_sdr.calibration.data import run_setup
    from otafl_sdr.configure.load import with_overrides
    cfg = load_config(None, ["air.name=uhd", "power.jammer=true", "uhd.jammer_args=addr=127.0.0.3",
                             "uhd.tx_gains={'client-0' = 34.0, 'jammer' = 37.0}"])
    check = with_overrides(cfg, check_sets(cfg))
    assert not check.power.jammer and dict(check.uhd.tx_gains) == {"client-0": 34.0, "jammer": 37.0}
    assert run_setup(check, 1, "uhd")["tx_gains"] == run_setup(cfg, 1, "uhd")["tx_gains"]
    with pytest.raises(UserError, match="'jammer' names no radio"):     # no jammer radio at all: a stray key
        load_config(None, ["air.name=uhd", "power.jammer=false", "uhd.jammer_args=", "uhd.tx_gains={'jammer' = 37.0}"])


def test_a_tracked_check_names_no_client_by_the_phase_its_round_corrected():
    v = judge(_rows(phases=(0.0, 2.5, -1.0)), 3, 650, tracked=True)     # independent oscillators: large, corrected
    assert v["passed"] and v["tracked"], v["failures"]
    assert "(corrected in its round)" in report_lines(v)[1]
    v = judge(_rows(ratio=1.6, phases=(0.0, 2.5, -1.0)), 3, 650, tracked=True)
    assert not v["passed"] and any("corrected by its own sounding, the sum still off" in f for f in v["failures"])
