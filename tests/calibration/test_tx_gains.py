"""Transmit power planning (calibration/tx_gains.py, issue 25 item 6), pure: which gain each radio gets, the
compression onset and its one-line refusal, the planned DAC scale, the pilot-to-payload gain correction
checked against a simulated power-law PA, and the fixed-level DAC clip as a contraction of what the
receiver's matched filter sees (the booked sensitivity still bounds a clipped burst)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.calibration import tx_gains as T
from otafl_sdr.calibration.power_fit import fit_power
from otafl_sdr.errors import UserError


def _u(**gains):
    return SimpleNamespace(tx_gain=40.0, tx_gains=gains, tx_args=["serial=ABC", "serial=DEF"], jammer_args="serial=J1")


def test_each_radio_gets_its_own_gain_else_the_default():
    u = _u(**{"client-1": 31.5, "0": 35.0, "J1": 20.0})
    assert T.tx_gain_for(u, "client 0") == 35.0                  # by index
    assert T.tx_gain_for(u, "client 1") == 31.5                  # by name ('client 1' / 'client-1' alike)
    assert T.tx_gain_for(u, "jammer", serial="J1") == 20.0       # by serial
    assert T.tx_gain_for(_u(), "client 1") == 40.0               # none given: uhd.tx_gain
    assert T.tx_gains_problem(_u(**{"client-2": 1.0}), 2, True).startswith("'client-2' names no radio")
    assert T.tx_gains_problem(_u(**{"DEF": 1.0, "jammer": 3.0}), 2, True) == ""


def _sweep(compress_above: float | None):
    amps, gains, p = [], [], []
    for g in (34.0, 37.0, 40.0):
        for a in (0.05, 0.1, 0.2, 0.4, 0.8):
            d = 20 * math.log10(a) + g - 40
            loss = 0.0 if compress_above is None or d <= compress_above else 3.0 * (d - compress_above) + 1.5
            amps.append(a), gains.append(g), p.append(3.0 + d - loss)
    return fit_power(amps, gains, p, gain_ref=40.0)


def test_the_compression_onset_is_refused_in_one_line_naming_the_radio_and_the_db():
    fit = _sweep(-5.0)                                          # points driven past -5 dB fall under the line
    assert not fit.used.all() and fit.k_amp == pytest.approx(1.0, abs=1e-6)
    onset = T.compression_onset_db(fit, pilot_peak=1.0)
    assert onset == pytest.approx(min(20 * math.log10(a) + g - 40 for a, g, u in
                                      zip(fit.amplitude, fit.gain_db, fit.used) if not u))
    peak = 10 ** ((onset + 2.0) / 20)                           # 2 dB past it
    with pytest.raises(UserError) as e:
        T.refuse_compression({"client-0": 0.01, "client-1": peak}, {"client-0": 40.0, "client-1": 40.0},
                             {"client-1": fit}, pilot_peak=1.0, round_=3)
    msg = str(e.value)
    assert "\n" not in msg and "round 3: client-1 would drive its PA 2.0 dB into compression" in msg
    T.refuse_compression({"client-1": 10 ** ((onset - 0.1) / 20)}, {"client-1": 40.0}, {"client-1": fit}, 1.0)
    assert T.compression_onset_db(_sweep(None), 1.0) is None     # none seen: nothing refused on it
    assert T.over_compression(5.0, 40.0, _sweep(None), 1.0) == 0.0


def test_a_glitched_sweep_point_below_linear_ones_marks_no_compression():
    """A capture glitch (a late packet's zero fill on a loaded host) reads one low-drive point 10 dB under the
    line: the fit leaves it out, but linear points at higher drives show the PA was not compressed there
    (compression is monotone in drive), so it marks no onset; a real onset above is still found."""
    def sweep(compress_above):
        fit = _sweep(compress_above)
        p = fit.rx_power_db.copy()
        j = int(np.argmin(np.abs(fit.amplitude - 0.1) + np.abs(fit.gain_db - 34.0)))   # drive -26 dB
        p[j] -= 10.0
        return fit_power(fit.amplitude, fit.gain_db, p, gain_ref=40.0), j
    fit, j = sweep(None)
    assert not fit.used[j] and fit.used.sum() == len(fit.used) - 1          # left out of the line
    assert T.compression_onset_db(fit, 1.0) is None                         # but no compression
    T.refuse_compression({"client-0": 0.5}, {"client-0": 40.0}, {"client-0": fit}, 1.0)    # nothing refused
    real, j = sweep(-5.0)
    assert not real.used[j]
    assert T.compression_onset_db(real, 1.0) == pytest.approx(T.compression_onset_db(_sweep(-5.0), 1.0))


def test_the_dac_scale_is_planned_and_common():
    assert T.dac_scale([0.3, 0.9]) == 1.0
    assert T.dac_scale([0.5, 2.0, 4.0]) == 0.25
    # planned peak of alpha s(u), ||s|| <= 1: |alpha| / sqrt(n sps) x PAPR
    assert T.planned_peak(2.0, 100, 2, 12.0) == pytest.approx(2.0 / math.sqrt(200) * 10 ** 0.6)


def test_proposed_gains_put_the_planned_peak_at_the_dac_backoff():
    fit = _sweep(-5.0)
    gains, margin = T.propose_tx_gains({"client-0": 10 ** (-30 / 20), "client-1": 10 ** (2 / 20)},
                                       {"client-0": 40.0, "client-1": 40.0}, {"client-1": fit}, 1.0,
                                       dac_backoff_db=3.0)
    assert gains == {"client-0": 13.0, "client-1": 45.0}        # -30 dBFS -> -3 (27 dB less), +2 -> -3 (5 dB more)
    assert margin["client-0"] is None and margin["client-1"] == pytest.approx(T.compression_onset_db(fit, 1.0) - 2.0)


def test_the_pilot_to_payload_gain_ratio_matches_a_power_law_pa():
    from otafl_sdr.calibration.pilots import PilotBurst
    from otafl_sdr.config.schema import Config
    from otafl_sdr.phy import Modem
    modem = Modem(Config().phy)
    rng = np.random.default_rng(3)
    s = rng.standard_normal(20000) + 1j * rng.standard_normal(20000)
    pay = modem.modulate(0.3 * s / np.linalg.norm(s), 0.0)
    pay = pay[np.abs(pay) > 0]
    pil = PilotBurst(modem, 4096).samples * 0.25
    pil = pil[np.abs(pil) > 0]

    def ls_gain(x, k):                                          # y = |x|^(k-1) x, least-squares gain
        y = np.abs(x) ** (k - 1) * x
        return float(np.real(np.vdot(x, y)) / np.real(np.vdot(x, x)))
    for k in (0.9, 0.97, 1.05):
        measured = ls_gain(pay, k) / ls_gain(pil, k)
        rms = lambda x: float(np.sqrt(np.mean(np.abs(x[np.abs(x) > 0]) ** 2)))   # noqa: E731
        predicted = T.payload_gain_ratio(k, rms(pay), rms(pil), T.envelope_moment(pil, k))
        assert predicted == pytest.approx(measured, rel=0.01), k
        assert abs(20 * math.log10(measured)) > 0.1            # a real correction, not a rounding
    assert T.payload_gain_ratio(1.0, 0.01, 0.2, 1.0) == 1.0
    assert T.pa_correction(_sweep(None), 0.01, 0.2, pil) == 1.0  # linear fit: exactly 1 (rounds unchanged)


def test_the_fixed_level_dac_clip_is_a_contraction_of_what_the_receiver_sees():
    """||MF(clip x) - MF(clip x')|| <= ||x - x'|| = |alpha| ||s - s'||: the clip keeps the booked sensitivity."""
    from otafl_sdr.config.schema import Config
    from otafl_sdr.phy import Modem
    from otafl_sdr.phy.packing import pack_reals
    from otafl_sdr.radio.uhd_round_signal import clip_to_dac
    modem = Modem(Config().phy)
    rng = np.random.default_rng(7)
    d, alpha = 400, 40.0                                        # a peaky plan: samples well past full scale
    taps = modem.taps
    worst = 0.0
    for trial in range(30):
        u = rng.standard_normal(d)
        u /= max(np.linalg.norm(u), 1.0)
        v = u.copy()
        if trial % 2:
            v = -u                                              # the far side of the clip ball
        else:
            v[rng.integers(d)] += 0.5
            v /= max(np.linalg.norm(v), 1.0)
        x, xp = (modem.modulate(alpha * pack_reals(w), 0.0) for w in (u, v))
        assert np.max(np.abs(x)) > 1.5                         # the clip is active
        cx, cxp = clip_to_dac(x), clip_to_dac(xp)
        mf = lambda z: np.convolve(z, np.conj(taps[::-1]))      # noqa: E731  the matched filter (all phases)
        lhs = np.linalg.norm(mf(cx) - mf(cxp)) / math.sqrt(modem.sps)
        bound = alpha * np.linalg.norm(u - v)
        worst = max(worst, lhs / bound)
    assert worst <= 1.0 + 1e-9
    print(f"\nclip contraction: max ||MF(clip x) - MF(clip x')|| / (|alpha| ||s - s'||) = {worst:.4f}")


def test_calibrate_gains_proposes_from_the_calibration_and_keeps_the_record(tmp_path, capsys):
    """`otafl-sdr calibrate gains`: planned maxima from the limits, the file's channels and sweep -> gains."""
    from otafl_sdr.calibration.data import CalibrationFile, LinkRecord, run_setup
    from otafl_sdr.cli.main import main as cli_main
    from otafl_sdr.configure.load import load_config
    cfg_path = tmp_path / "lab.toml"
    cfg_path.write_text("[data]\nclients = 2\n[power]\njammer = true\nmax_snr_db = 20.0\njammer_max_snr_db = 10.0\n"
                        "[air]\nname = 'uhd'\ncsi = 'calibrated'\n[uhd]\ntx_args = ['serial=A', 'serial=B']\n"
                        "jammer_args = 'serial=J'\nrx_args = 'serial=R'\n")
    cfg = load_config(cfg_path)
    link = lambda h: LinkRecord(id="x", h=complex(h), h_std=0.0, h_spread=0.0, cfo=0.0, cfo_std=0.0, delay=0.0,  # noqa: E731
                                snr_db=30.0)
    fit = _sweep(-5.0)
    cal = CalibrationFile(air="uhd", setup=run_setup(cfg, 2, "uhd"), clients=[link(1.0), link(0.1)], jammer=link(0.5),
                          noise={"sigma_c2": 1e-4, "sigma_c2_std": 1e-6},
                          power={"client 0": fit.to_dict(), "client 1": _sweep(None).to_dict(), "jammer": fit.to_dict()})
    out = tmp_path / "cal.json"
    cal.save(out)
    assert cli_main(["calibrate", "gains", "--config", str(cfg_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rec = CalibrationFile.load(out).tx_plan
    # client 0: rms sqrt(2 1e-4 100 / sps) x 12 dB, |h| = 1; client 1 20 dB weaker -> 20 dB more gain
    rms = math.sqrt(2e-2 / cfg.phy.sps)
    assert rec["planned_peak_dbfs"]["client-0"] == pytest.approx(20 * math.log10(rms) + 12.0)
    assert rec["planned_peak_dbfs"]["client-1"] == pytest.approx(rec["planned_peak_dbfs"]["client-0"] + 20.0)
    assert rec["proposed"]["client-1"] - rec["proposed"]["client-0"] == pytest.approx(20.0, abs=0.5)
    assert "client-1" not in rec["pa_margin_db"] and rec["pa_margin_db"]["client-0"] > 0   # no compression seen: none
    assert "set uhd.tx_gains = {" in printed and "'jammer' = " in printed


def test_a_linear_radios_fit_is_never_corrected_and_a_compressing_one_is():
    """departs_from_linear: Student-t at the fit's residual degrees of freedom, 1e-4 two-sided. A linear radio
    measured with 0.1 dB noise on the sessions' 4 x 3 sweep (9 degrees of freedom): its fitted k_amp departs
    from 1 by more than 3 standard errors about 1.5 % of the time (the old gate: a correction out of noise),
    by the Student-t gate about 1e-4; a PA at k_amp = 0.9 is corrected every time."""
    from scipy.stats import t as student_t

    from otafl_sdr.calibration.power_fit import fit_power
    from otafl_sdr.calibration.tx_gains import _k_amp_se_dof, departs_from_linear

    rng = np.random.default_rng(7)
    amps, gains = np.meshgrid([0.05, 0.1, 0.2, 0.4], [34.0, 37.0, 40.0])
    a, g = amps.ravel(), gains.ravel()
    old, new, t_values = 0, 0, []
    for _ in range(2000):
        fit = fit_power(a, g, -20 + 20 * np.log10(a) + (g - 40) + rng.normal(0, 0.1, a.size))
        se, dof = _k_amp_se_dof(fit)
        assert dof == 9
        t_values.append(abs(fit.k_amp - 1) / se)
        old += abs(fit.k_amp - 1) > 3 * se
        new += departs_from_linear(fit)
    assert 0.005 < old / 2000 < 0.03                    # 2 x t_9 tail at 3: 0.0150
    assert new <= 2                                     # expected 0.2
    assert np.quantile(t_values, 0.99) == pytest.approx(student_t.ppf(0.995, 9), rel=0.15)
    for _ in range(50):                                 # a compressing PA: 0.9 dB out per dB in
        fit = fit_power(a, g, -20 + 0.9 * 20 * np.log10(a) + (g - 40) + rng.normal(0, 0.1, a.size))
        assert departs_from_linear(fit)
