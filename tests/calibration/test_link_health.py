"""Link-health figures and drift limits (issue 25, item 2): calibration/link_health.py and the air.drift_* /
air.on_drift config keys (pure: no radio)."""
from __future__ import annotations

import cmath
import json

import pytest

from otafl_sdr.calibration.link_health import HEALTH_FIELDS, DriftLimits, drift, link_health
from otafl_sdr.errors import ConfigError
from otafl_sdr.run_config import load_config


def test_the_figures_are_the_references_gain_phase_offset_and_timing_against_the_plan():
    extra = {"gain": 1.122 * cmath.exp(0.5j), "cfo": 2e-6, "timing": 258, "nmse_pilots": 1e-3, "rho": 0.98,
             "iq": "never copied"}
    h = link_health(extra, lead=256)
    assert tuple(h) == HEALTH_FIELDS
    assert h["gain_db"] == pytest.approx(1.0, abs=1e-3) and h["phase_rad"] == pytest.approx(0.5)
    assert h["cfo"] == 2e-6 and h["timing_offset"] == 2 and h["nmse_pilots"] == 1e-3
    json.dumps(h)                                          # plain JSON for rounds.jsonl
    assert link_health({}, 256) is None                    # a frame that was not demodulated has none
    assert link_health({"gain": 1.0, "nmse_pilots": float("nan")}, 0)["nmse_pilots"] is None


def test_each_figure_beyond_its_limit_is_one_drift_phrase_naming_its_config_key():
    lim = DriftLimits()
    calm = {"gain_db": 0.05, "phase_rad": -0.02, "cfo": 1e-7, "timing_offset": 0, "nmse_pilots": 1e-4, "rho": 0.98}
    assert drift(calm, lim) == [] and drift(None, lim) == []
    bad = dict(calm, gain_db=-1.5, phase_rad=1.0, cfo=3e-5, timing_offset=-2)
    out = drift(bad, lim)
    assert len(out) == 4
    assert [k in p for k, p in zip(("air.drift_gain_db", "air.drift_phase_rad", "air.drift_cfo", "air.drift_timing"), out)] == [True] * 4
    assert drift(dict(calm, phase_rad=1.0), DriftLimits(phase_rad=1.5)) == []


def test_the_drift_keys_default_to_a_lab_cadence_and_refuse_nonsense_in_one_line():
    air = load_config(None).air
    assert air.recalibrate_every == 20 and air.on_drift == "recalibrate"
    assert DriftLimits.from_config(air) == DriftLimits()
    for bad in ("air.drift_gain_db=0", "air.drift_phase_rad=4", "air.drift_cfo=-1e-5", "air.drift_timing=inf",
                "air.on_drift=maybe"):
        with pytest.raises(ConfigError) as e:
            load_config(None, [bad])
        assert bad.split("=")[0] in str(e.value) and "\n" not in str(e.value)
