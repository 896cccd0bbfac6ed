"""Link-health figures and drift limits (issue 25, item 2): calibration/link_health.py and the air.drift_* /
air.on_drift config keys (pure: no radio)."""
from __future__ import annotations

import cmath
import json

import pytest

from otafl_sdr.calibration.link_health import HEALTH_FIELDS, DriftLimits, drift, link_health
from otafl_sdr.errors import ConfigError
from otafl_sdr.configure.load import load_config


def test_the_figures_are_the_references_gain_phase_offset_and_timing_against_the_plan():
    extra = {"gain": 1.122 * cmath.exp(0.5j), "cfo": 2e-6, "cfo_std": 4e-7, "timing": 258, "nmse_pilots": 1e-3,
             "rho": 0.98, "iq": "never copied"}
    h = link_health(extra, lead=256)
    assert tuple(h) == HEALTH_FIELDS
    assert h["gain_db"] == pytest.approx(1.0, abs=1e-3) and h["phase_rad"] == pytest.approx(0.5)
    assert h["cfo"] == 2e-6 and h["cfo_std"] == 4e-7 and h["timing_offset"] == 2 and h["nmse_pilots"] == 1e-3
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


def test_precompensation_referenced_to_device_time_is_one_continuous_rotation_across_bursts():
    import numpy as np

    from otafl_sdr.calibration.csi import precompensate
    rate, cfo, t_ref = 1e6, 3e-6, 1_700_000_000.25
    ones = np.ones(1000, dtype=np.complex128)
    starts = [t_ref + 0.5, t_ref + 7.25 + 3e-6]          # two bursts seconds apart
    for t0 in starts:
        x, t_send = precompensate(ones, cfo, 0.0, rate, t0, t_ref=t_ref)
        k = (t_send - t_ref) * rate
        want = np.exp(-2j * np.pi * cfo * (k + np.arange(1000)))   # the rotator running since t_ref
        assert np.max(np.abs(x - want)) < 1e-6
    x, t_send = precompensate(ones, cfo, 2.5, rate, starts[0])      # per burst: phase 0 at its first sample
    assert x[0] == 1 and t_send == starts[0] - 2.5e-6
    assert np.angle(x[1]) == pytest.approx(-2 * np.pi * cfo, rel=1e-9)


def test_the_carrier_offset_comes_with_a_standard_error_that_is_its_scatter_on_a_calm_link():
    """phy/modem.cfo_precision (issue 34 item 2): through the burst modem on a zero-offset link, the reported
    cfo_std is the spread of the cfo readings (within 25 %), and a gate as tight as the readings' own
    noise (air.drift_cfo = 1 std) is tripped only CFO_SIGNIFICANCE standard errors beyond it: 60 calm frames
    raise no drift, a real offset of 10 std does."""
    import numpy as np

    from otafl_sdr.config.radio import PhyConfig
    from otafl_sdr.phy import Modem, pack_reals
    from otafl_sdr.phy.packing import symbols_for
    modem, rng, d = Modem(PhyConfig()), np.random.default_rng(34), 650
    n = symbols_for(d)

    def frame(cfo: float = 0.0):
        b = modem.modulate(0.05 * pack_reals(rng.standard_normal(d) / np.sqrt(d)), 1.0)
        x = np.concatenate([np.zeros(300), b, np.zeros(300)]) * np.exp(2j * np.pi * cfo * np.arange(len(b) + 600))
        x = x + 0.02 * (rng.standard_normal(len(x)) + 1j * rng.standard_normal(len(x)))
        res = modem.demodulate(x, n, 1.0)
        return link_health({"gain": res.gain, "cfo": res.cfo, "cfo_std": res.cfo_std, "timing": res.timing}, 300)
    calm = [frame() for _ in range(60)]
    cfo = np.array([h["cfo"] for h in calm])
    std = float(np.median([h["cfo_std"] for h in calm]))
    assert np.std(cfo) == pytest.approx(std, rel=0.25)
    tight = DriftLimits(cfo=std)
    assert not any(drift(h, tight) for h in calm)
    assert sum(abs(h["cfo"]) > tight.cfo for h in calm) >= 10      # the bare limit would have tripped
    off = frame(10 * std + tight.cfo)
    assert any("air.drift_cfo" in p for p in drift(off, tight))


def test_the_reference_constellation_is_the_received_preamble_over_the_sent_clustered_at_the_links_gain():
    """issue 36 item 4: link_health's ``reference`` (the live view's constellation) from the modem on a link
    whose reference arrives at a known complex gain g: at most REFERENCE_POINTS [re, im] pairs, plain JSON,
    their mean at g (the figures' gain_db and phase_rad), their spread the link's noise."""
    import numpy as np

    from otafl_sdr.calibration.link_health import REFERENCE_POINTS
    from otafl_sdr.config.radio import PhyConfig
    from otafl_sdr.phy import Modem, pack_reals
    from otafl_sdr.phy.packing import symbols_for
    modem, rng, d = Modem(PhyConfig()), np.random.default_rng(36), 650
    g = 0.8 * cmath.exp(0.6j)
    b = modem.modulate(0.05 * pack_reals(rng.standard_normal(d) / np.sqrt(d)), 1.0)
    x = g * np.concatenate([np.zeros(300), b, np.zeros(300)])
    x = x + 0.01 * (rng.standard_normal(len(x)) + 1j * rng.standard_normal(len(x)))
    res = modem.demodulate(x, symbols_for(d), 1.0)
    h = link_health({"gain": res.gain, "reference": res.reference, "timing": res.timing}, 300)
    pts = np.array(json.loads(json.dumps(h["reference"])))
    assert pts.shape == (REFERENCE_POINTS, 2) < (len(res.reference), 2)
    z = pts[:, 0] + 1j * pts[:, 1]
    assert abs(np.mean(z) - g) < 0.02 and np.std(np.abs(z - g)) < 0.05
    assert h["gain_db"] == pytest.approx(20 * np.log10(0.8), abs=0.1) and h["phase_rad"] == pytest.approx(0.6, abs=0.03)
    assert "reference" not in link_health({"gain": 1.0}, 0)          # no reference given: none written
