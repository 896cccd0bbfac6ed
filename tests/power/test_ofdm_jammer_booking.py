"""An OFDM round's jammer booked per subcarrier (issue 34: the OFDM jammer's delivered noise). The jammer
sends white noise over the payload subcarriers, but a multipath jammer link colours it: alpha_cj^2 |H_cj,k|^2
on subcarrier k. Booking its flat share (the old rule) credits the subcarriers in the link's notch with noise
they never get: an epsilon below the true one. With the calibration's jammer sounding the booking counts each
subcarrier's lower bound (power/ofdm_plan.jammer_noise_var), so the booked epsilon is at least the true one,
checked with dp-accounting; a file without the sounding is refused in one line."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dp_reference import independent_pld_epsilon
from otafl_sdr.calibration.ofdm_channel import OfdmLinkEstimate, to_section
from otafl_sdr.errors import UserError
from otafl_sdr.phy.ofdm import OfdmLayout, subcarrier_response
from otafl_sdr.privacy.subcarrier_mechanism import subcarrier_mechanism

K, D = 2, 1000
H_CJ = 0.9 + 0j                      # the jammer's flat gain the policy plans with
JAMMER_FIR = np.array([1.0, 0.0, 0.8])   # a 2-sample echo: |H_cj,k| from 0.2 to 1.8 over the band
STD = 1e-3                           # the soundings' standard error per subcarrier


def _plan(jammer_fir=JAMMER_FIR, sounding=True, efficiency=(1.0, 0.0)):
    """A cj_adaptive plan (jammer on) carried per subcarrier on a calibrated section whose clients' links are
    flat and whose jammer link is ``jammer_fir`` (scaled to the flat gain H_CJ)."""
    from otafl_sdr.config.schema import Config
    from otafl_sdr.power.base import SystemInfo
    from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy
    from otafl_sdr.power.ofdm_plan import plan_ofdm
    cfg = Config()
    cfg.phy.waveform, cfg.air.csi, cfg.power.jammer = "ofdm", "calibrated", True
    lay = OfdmLayout.from_phy(cfg.phy)
    h_flat = np.array([0.95, 0.8 + 0j])
    ests = [OfdmLinkEstimate(f"client {i}", np.full(lay.used, h_flat[i]), np.full(lay.used, STD), 0, 40.0, "delay",
                             0.99) for i in range(K)]
    H_cj = H_CJ * subcarrier_response(np.asarray(jammer_fir, complex)[None, :], lay)[0]
    if sounding:
        ests.append(OfdmLinkEstimate("jammer", H_cj, np.full(lay.used, STD), 0, 40.0, "delay", 0.99,
                                     efficiency=efficiency[0], efficiency_std=efficiency[1]))
    file = SimpleNamespace(ofdm=to_section(lay, ests, 0.25, 3, 0))
    csi = SimpleNamespace(file=file, path="cal.json")
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 * D), dim=D, sigma_c2=1.0,
                      rounds=20, eps=1.0, delta=1e-5)
    u = np.random.default_rng(0).standard_normal((K, D)) * 1e-3
    plan = CJAdaptivePolicy(cfg, info).plan(1, u, h_flat, H_CJ, np.random.default_rng(4), csi=h_flat)
    plan.extra["csi"] = h_flat
    flat = plan.mechanism
    plan_ofdm(plan, cfg, info, csi)
    return plan, flat, H_cj, lay, info, csi


def _eps(m, rounds=20):
    rec = {"uses_data": True, "sensitivity": m.sensitivity, "sigma_eff": m.sigma_eff, "sampling_prob": m.sampling_prob}
    return independent_pld_epsilon([rec] * rounds, 1e-5)


def test_a_multipath_jammer_link_is_booked_at_each_subcarriers_lower_bound_never_above_the_true_epsilon():
    plan, flat, H_cj, lay, info, _ = _plan()
    assert plan.alpha_cj > 0
    od, m = plan.extra["ofdm"], plan.mechanism
    a2 = (plan.alpha_cj / plan.alpha_u) ** 2
    base = flat.sigma_eff ** 2 - abs(H_CJ) ** 2 * a2
    lower = np.maximum(np.abs(H_cj) - 3 * STD, 0.0)
    np.testing.assert_allclose(od["noise_var"], base + lower ** 2 * a2, rtol=1e-12)
    np.testing.assert_allclose(od["noise_var_expected"], base + np.abs(H_cj) ** 2 * a2, rtol=1e-12)
    rec = m.extra["jammer_subcarriers"]
    assert rec["efficiency"] == 1.0 and rec["lower_db"][0] < -10 < 4 < rec["lower_db"][1]    # 0.2 .. 1.8 x flat
    # the booked worst subcarrier is among the data subcarriers where the jammer is weakest
    carriers = np.asarray(od["carriers"])
    assert m.extra["worst_subcarrier"] == carriers[np.argmin(np.abs(H_cj)[carriers])]
    # the truth: every subcarrier's real noise (the channel's plus |H_cj,k|^2 alpha_cj^2 / alpha_u^2)
    on = np.zeros(lay.used, bool)
    on[carriers] = True
    eff = np.where(on[None, :], od["eff_gain"], 0.0)
    true = subcarrier_mechanism(1, eff, plan.target_gain, info.payload_bound(), base + np.abs(H_cj) ** 2 * a2)
    old = subcarrier_mechanism(1, eff, plan.target_gain, info.payload_bound(), np.full(lay.used, flat.sigma_eff ** 2))
    eps_booked, eps_true, eps_old = _eps(m), _eps(true), _eps(old)
    print(f"eps over 20 rounds: booked {eps_booked:.3f}, true {eps_true:.3f}, flat jammer (old rule) {eps_old:.3f}")
    assert eps_booked >= eps_true > 1.3 * eps_old      # the flat rule under-books; the lower bounds never do


def test_the_ledger_keeps_the_per_subcarrier_jammer_and_a_flat_jammer_link_books_as_before():
    from otafl_sdr.workload.booking import ledger_mechanism
    plan, flat, *_ = _plan()
    csi = SimpleNamespace(gain_margin=lambda: np.array([1.01]), jammer_lower=lambda: 0.0)   # a flat-path bound of 0
    booked = ledger_mechanism(plan, csi, "uhd", delivered_jammer_gain=0.0)
    assert booked.sigma_eff == plan.mechanism.sigma_eff           # not restated a second time (flat bound 0)
    assert booked.sensitivity == pytest.approx(1.01 * plan.mechanism.sensitivity)
    plan_flat, flat_m, *_ = _plan(jammer_fir=[1.0])
    # a flat jammer link: the worst subcarrier's noise is the flat plan's, less the sounding's 3 s.e.
    a2 = (plan_flat.alpha_cj / plan_flat.alpha_u) ** 2
    want = flat_m.sigma_eff ** 2 - abs(H_CJ) ** 2 * a2 + (abs(H_CJ) - 3 * STD) ** 2 * a2
    assert plan_flat.mechanism.sigma_eff == pytest.approx(np.sqrt(want), rel=1e-12)


def test_the_jammers_noise_efficiency_scales_every_subcarrier_and_a_file_without_the_sounding_is_refused():
    lay = OfdmLayout()
    H_cj = H_CJ * subcarrier_response(JAMMER_FIR[None, :].astype(complex), lay)[0]
    plan, *_ = _plan(efficiency=(0.8, 0.01))                  # a PA compressing its noise: 0.8 of the coherent gain
    rec = plan.mechanism.extra["jammer_subcarriers"]
    assert rec["efficiency"] == pytest.approx(0.77, rel=1e-9)      # booked at 0.8 - 3 x 0.01
    plain, *_ = _plan()
    a2 = (plan.alpha_cj / plan.alpha_u) ** 2
    np.testing.assert_allclose(plan.extra["ofdm"]["noise_var"] - plain.extra["ofdm"]["noise_var"],
                               (0.77 - 1.0) * np.maximum(np.abs(H_cj) - 3 * STD, 0) ** 2 * a2, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(plan.extra["ofdm"]["jammer_expected"], 0.8 * np.abs(H_cj) ** 2 * a2, rtol=1e-9)
    over, *_ = _plan(efficiency=(1.2, 0.01))                 # never credited above its coherent gain
    assert over.mechanism.extra["jammer_subcarriers"]["efficiency"] == 1.0
    with pytest.raises(UserError) as e:
        _plan(sounding=False)
    assert "no jammer sounding" in str(e.value) and "recalibrate" in str(e.value) and "\n" not in str(e.value)


def test_the_section_keeps_the_jammer_apart_from_the_clients():
    from otafl_sdr.calibration.ofdm_channel import SubcarrierCsi, check_section
    *_, lay, _, csi = _plan()
    sec = check_section(csi.file.ofdm)
    assert [c["id"] for c in sec["clients"]] == ["client 0", "client 1"] and sec["jammer"]["id"] == "jammer"
    sub = SubcarrierCsi.from_section(sec, lay, K)
    assert sub.H.shape == (K, lay.used) and sub.jammer_H.shape == (lay.used,)
    bad = dict(sec, jammer=dict(sec["jammer"], H_std=[-1.0] * lay.used))
    with pytest.raises(ValueError, match="ofdm.jammer.H_std"):
        check_section(bad)
