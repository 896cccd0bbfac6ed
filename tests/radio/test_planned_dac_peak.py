"""The planned DAC peak with a PA correction (radio/uhd_power.PowerPlan.plan_round): a correction above 1 (a
fitted expansion, the payload driven under the pilots' level) must not push the round's common scale past the
DAC's full scale, and a correction under 1 leaves the peak under it; no UHD device is touched (planning only)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from otafl_sdr.calibration.pilots import PilotBurst
from otafl_sdr.calibration.power_fit import fit_power
from otafl_sdr.config.schema import Config
from otafl_sdr.phy import Modem
from otafl_sdr.radio.uhd_power import PowerPlan


def _fit(k_amp: float):
    amps, gains, p = [], [], []
    for g in (34.0, 37.0, 40.0):
        for a in (0.05, 0.1, 0.2, 0.4, 0.8):
            amps.append(a), gains.append(g), p.append(3.0 + k_amp * 20 * math.log10(a) + g - 40)
    return fit_power(amps, gains, p, gain_ref=40.0)


def _plan(alpha):
    return SimpleNamespace(dim=650, alpha=list(alpha), mode=["send"] * len(alpha), clients=len(alpha),
                           alpha_cj=0.0, round=1, extra={})


@pytest.mark.parametrize("k_amp", [1.15, 0.85])
def test_a_pa_correction_never_plans_a_peak_past_full_scale(k_amp):
    cfg = Config()
    cfg.uhd.payload_papr_db = 30.0                       # a peaky budget: the common scale f < 1
    pp = PowerPlan(cfg, 2)
    pp.fits = {"client-0": _fit(k_amp), "client-1": _fit(k_amp)}
    pp.pilot_samples = PilotBurst(Modem(cfg.phy), 4096).samples
    pp.pilot_amp = 0.5
    plan = _plan([3.0, 2.0])
    row = pp.plan_round(plan)
    corr = row["pa_correction"]
    assert all((c > 1.0) if k_amp > 1 else (c < 1.0) for c in corr), corr      # a real correction each way
    assert 0 < row["tx_scale"] < 1
    assert plan.extra["tx_amp"] == pytest.approx([row["tx_scale"] * c for c in corr])
    if k_amp > 1:       # the corrected peak is the one brought to full scale, not the uncorrected one
        assert row["planned_peak_dbfs"] == pytest.approx(0.0, abs=1e-9)
    else:               # a correction under 1 leaves the top client under full scale by exactly its correction
        assert row["planned_peak_dbfs"] == pytest.approx(20 * math.log10(corr[0]), abs=1e-9)
        assert row["planned_peak_dbfs"] < 0
