"""OFDM on the uhd air with a per-subcarrier session calibration (issue 26): the sounding step
(calibration/ofdm_channel.py) through the real loopback channel block against its known TDL channel, the
refusals, the uhd round's bursts under a NaN payload, and two OFDM rounds end to end on UHD's simulated
E320 (two clients on its two TX channels, radio/uhd_ofdm.py)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dp_reference import independent_pld_epsilon
from uhd_sim_helpers import assert_calm_ofdm_link
from otafl_sdr.calibration.ofdm_channel import SubcarrierCsi, to_section, OfdmLinkEstimate
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.phy.ofdm import OfdmLayout, demodulate, subcarrier_response
from otafl_sdr.phy.packing import unpack_reals
from otafl_sdr.configure.load import load_config

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"
TDL = ["run.seed=3", "data.clients=2", "phy.waveform=ofdm", "channel.multipath=exponential",
       "channel.delay_spread_ns=1000", "uhd.rate=1e6", "channel.sigma_c2=0.5", "power.jammer=false"]


@pytest.mark.gnuradio
def test_the_session_sounding_recovers_a_tdl_channel_per_subcarrier_within_its_stated_error(tmp_path):
    """The session's channel step with phy.waveform = "ofdm" sounds each client in its own slot through the
    loopback channel block with an exponential-PDP FIR (11 samples, 1 us RMS at 1 MS/s): the file's ofdm
    section holds H_ik on all 52 subcarriers, frequency selective, each within 4.5 of its stated standard
    errors of the block's truth (P ~ e^-20 a subcarrier if the errors are what they say) and the
    mean-square error / mean stated variance of the 104 estimates near 1 (its spread, delay-smoothed: 0.26
    per client over 12 seeds; 0.18 for two clients: band 1 +- 4 x 0.18)."""
    from otafl_sdr.calibration.session import run_calibration
    from otafl_sdr.channel.ofdm_sim import round_firs
    from otafl_sdr.radio.calibration_flowgraphs import LoopbackLink
    cfg = load_config(None, TDL)
    lay = OfdmLayout.from_phy(cfg.phy)
    h = np.array([1.1 * np.exp(0.3j), 0.8 * np.exp(-2j)])
    out = tmp_path / "cal.json"
    with LoopbackLink(cfg, 2, h=h, fir=round_firs(cfg, 0, 2)) as link:
        lines: list[str] = []
        run_calibration(cfg, ("noise", "channel"), out, air="loopback", link=link, pilot_snr_db=15.0,
                        echo=lines.append)
    assert sum(ln.startswith("ofdm client") for ln in lines) == 2
    sec = json.loads(out.read_text())["ofdm"]
    assert [c["fit"] for c in sec["clients"]] == ["delay", "delay"] and sec["ref_delay"] == 0
    sub = SubcarrierCsi.from_section(sec, lay, 2, out)
    assert sub.H.shape == (2, 52) and sub.truth is not None
    z = np.abs(sub.H - sub.truth) / sub.H_std
    assert z.max() < 4.5, z.max()
    ratio = float(np.mean(np.abs(sub.H - sub.truth) ** 2) / np.mean(sub.H_std ** 2))
    assert 0.28 < ratio < 1.72, ratio
    sel = 20 * np.log10(np.abs(sub.truth).max(axis=1) / np.abs(sub.truth).min(axis=1))
    assert np.all(sel > 3.0), sel                                          # a frequency-selective channel
    m = sub.gain_margin()                          # deepest fade: the largest relative error, the largest margin
    assert np.all(m >= 1.0) and np.argmax(m[0]) == np.argmin(np.abs(sub.H[0]))


@pytest.mark.gnuradio
def test_the_jammer_sounds_in_its_own_slot_and_its_section_entry_is_its_link():
    """With the jammer on, the OFDM step sounds it after the clients (its noise is not pre-equalised, so only
    |H_cj,k| matters; power/ofdm_plan books its per-subcarrier lower bound): the section's ``jammer`` entry is
    the loopback block's jammer gain on every subcarrier within 4.5 of its stated standard errors, its noise
    test reads the linear chain's delivered noise (efficiency 1 against the block's true gain) within 4 of its
    standard errors, and the clients' entries are
    unchanged by it (each client's H_ik within 4.5 s.e. of the truth)."""
    from otafl_sdr.calibration.ofdm_channel import measure_ofdm_channels
    from otafl_sdr.radio.calibration_flowgraphs import LoopbackLink
    cfg = load_config(None, ["run.seed=3", "data.clients=2", "phy.waveform=ofdm", "power.jammer=true",
                             "channel.sigma_c2=0.5"])
    lay = OfdmLayout.from_phy(cfg.phy)
    h = np.array([1.1 * np.exp(0.3j), 0.8 * np.exp(-2j)])
    with LoopbackLink(cfg, 2, h=h, h_cj=0.7 * np.exp(0.4j)) as link:
        assert link.has_jammer and link.transmitters == 3
        ests = measure_ofdm_channels(link, lay, 3.0, 2, 0)
    assert [e.name for e in ests] == ["client 0", "client 1", "jammer"]
    for e in ests:
        assert e.truth is not None
        z = np.abs(e.H - e.truth) / e.H_std
        assert z.max() < 4.5, (e.name, z.max())
    jam = ests[-1]
    assert np.allclose(np.abs(jam.H), 0.7, atol=5 * float(jam.H_std.max())), np.abs(jam.H)
    # the noise it delivered over its estimated gain; against the block's true gain that is 1 (a linear chain)
    data = lay.data_pos
    r_true = jam.efficiency * float(np.sum(np.abs(jam.H[data]) ** 2) / np.sum(np.abs(jam.truth[data]) ** 2))
    print(f"jammer noise efficiency {jam.efficiency:.4f} +- {jam.efficiency_std:.4f}, against the truth {r_true:.4f}")
    assert 0 < jam.efficiency_std < 0.01 and abs(r_true - 1) < 4 * jam.efficiency_std
    sec = to_section(lay, ests, 3.0, 2, 0)
    assert [c["id"] for c in sec["clients"]] == ["client 0", "client 1"] and sec["jammer"]["id"] == "jammer"
    sub = SubcarrierCsi.from_section(sec, lay, 2)
    np.testing.assert_allclose(sub.jammer_lower(), np.abs(jam.H) - 3 * jam.H_std)          # the booked bound
    assert sub.jammer_efficiency == (jam.efficiency, jam.efficiency_std)
    assert np.all(sub.jammer_lower() < 0.7 + 1.5 * jam.H_std)     # below the truth bar 1.5 s.e. (3 - 4.5)


@pytest.mark.gnuradio
def test_a_channel_longer_than_the_prefix_is_refused_in_one_line():
    """A link whose echo arrives 30 samples late (prefix 16): the sounding refuses it in one line naming
    phy.ofdm_cp; a configured channel longer than the prefix is refused by the config check already."""
    from otafl_sdr.calibration.ofdm_channel import measure_ofdm_channels
    from otafl_sdr.radio.calibration_flowgraphs import LoopbackLink
    cfg = load_config(None, ["run.seed=3", "data.clients=2", "phy.waveform=ofdm", "power.jammer=false"])
    fir = np.zeros((2, 31), complex)
    fir[:, 0], fir[:, 30] = 1.0, 0.7
    with LoopbackLink(cfg, 2, fir=fir) as link, pytest.raises(UserError) as e:
        measure_ofdm_channels(link, OfdmLayout.from_phy(cfg.phy), 3.0, 1, 0)
    assert "beyond the cyclic prefix" in str(e.value) and "phy.ofdm_cp" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="shorter than the channel's delay extent"):
        load_config(None, TDL + ["phy.ofdm_cp=8"])


def _calibrated_plan(payload_rows, seed=4):
    """A cj_adaptive plan for two clients carried per subcarrier on a calibrated section of a two-tap channel."""
    from otafl_sdr.config.schema import Config
    from otafl_sdr.power.base import SystemInfo
    from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy
    from otafl_sdr.power.ofdm_plan import plan_ofdm
    cfg = Config()
    cfg.phy.waveform, cfg.air.csi, cfg.power.jammer = "ofdm", "calibrated", False
    lay = OfdmLayout.from_phy(cfg.phy)
    K, d = 2, 1000
    fir = np.array([[0.9, 0.0, 0.3j], [0.5 - 0.6j, 0.2, 0.0]])
    H = subcarrier_response(fir, lay)
    ests = [OfdmLinkEstimate(f"client {i}", H[i], np.full(lay.used, 1e-4), 0, 40.0, "delay", 0.99) for i in range(K)]
    csi = SimpleNamespace(file=SimpleNamespace(ofdm=to_section(lay, ests, 0.25, 3, 0)), path="mem")
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 * d), dim=d, sigma_c2=1.0,
                      rounds=20, eps=1.0, delta=1e-5)
    h_flat = np.array([0.95, 0.8 + 0j])
    plan = CJAdaptivePolicy(cfg, info).plan(1, payload_rows, h_flat, 0.5 + 0j, np.random.default_rng(seed), csi=h_flat)
    plan.extra["csi"] = h_flat
    plan_ofdm(plan, cfg, info, csi)
    return cfg, lay, fir, plan


def test_a_nan_payload_changes_neither_timing_nor_csi_of_the_uhd_ofdm_round():
    """The uhd round's bursts (radio/uhd_ofdm.ofdm_bursts) through the calibrated two-tap channels: a NaN
    payload row is sent as zeros at the planned power (bit-identical bursts), and the receiver's timing, CFO
    and per-subcarrier estimate are the very ones a zero or a random payload gives (the search never
    correlates the payload; the CSI is the calibration's). The random payload's aggregate is the planned one
    within the noise (NMSE / theory in 1 +- 5 sqrt(2 / d))."""
    from otafl_sdr.power.ofdm_plan import planned_aggregate
    from otafl_sdr.radio.uhd_ofdm import ofdm_bursts
    rng = np.random.default_rng(0)
    u = rng.standard_normal((2, 1000))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    variants = {"random": u, "zero": np.zeros_like(u), "nan": np.where(np.arange(1000) % 7 == 0, np.nan, u)}
    sigma = 1e-3
    noise = sigma * (rng.standard_normal(20000) + 1j * rng.standard_normal(20000))
    out = {}
    for name, payload in variants.items():
        cfg, lay, fir, plan = _calibrated_plan(np.nan_to_num(payload))
        if name == "nan":
            plan.payload = payload                                    # the air gets the row as it is
        bursts, frame = ofdm_bursts(plan, lay)
        y = np.zeros(frame.n_samples + 200, complex)
        for i, b in enumerate(bursts):
            y[:len(b) + 2] += np.convolve(b, fir[i])
        y += noise[:len(y)]
        od = plan.extra["ofdm"]
        with np.errstate(invalid="ignore"):
            res = demodulate(y, lay, 500, frame.carriers, frame.n_ofdm, od["ref_amp"], search=frame.search, backoff=4)
        out[name] = (res, bursts, plan)
    assert np.array_equal(out["nan"][1][0], out["zero"][1][0])        # NaN row: zeros at the planned power
    for name in ("nan", "random"):
        assert out[name][0].timing == out["zero"][0].timing == frame.lead * lay.symbol_len
        assert out[name][0].extra["cfo"] == out["zero"][0].extra["cfo"]
        assert np.array_equal(out[name][0].gain, out["zero"][0].gain)
    res, _, plan = out["random"]
    agg = unpack_reals(res.symbols, 1000) / plan.alpha_u
    want = planned_aggregate(plan)
    ratio = float(np.sum((agg - want) ** 2) / (1000 * sigma ** 2 / plan.alpha_u ** 2))
    assert abs(ratio - 1) < 5 * math.sqrt(2 / 1000), ratio


def _run(tmp_path, capsys, *sets) -> SimpleNamespace:
    """The CLI's `run` in this process (its exit status and stderr: the answer, not the process boundary,
    is under test)."""
    from otafl_sdr.cli.main import main as cli_main
    capsys.readouterr()
    rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out",
                   str(tmp_path / "run"), "--set", "run.rounds=2", "--set", "data.clients=2", "--set", "phy.waveform=ofdm",
                   "--set", "air.record_iq=true",
                   "--set", "uhd.tx_args=['addr=127.0.0.1,channel=0', 'addr=127.0.0.1,channel=1']",
                   *[a for s in sets for a in ("--set", s)]])
    return SimpleNamespace(returncode=rc, stderr=capsys.readouterr().err)


@pytest.mark.gnuradio
@pytest.mark.uhd_sim
@pytest.mark.net
@pytest.mark.slow
def test_two_ofdm_rounds_end_to_end_on_the_simulated_e320_with_a_per_subcarrier_session_calibration(
        uhd_sim, tmp_path, capsys):
    """Two clients on the E320's two TX channels, the session calibration per subcarrier, two OFDM rounds
    through UHD's streamers and the simulator's cable: the calibration file holds every client's H_ik (the
    cable: |H| ~ 1, flat, delay-smoothed); every round is carried by both clients with the per-subcarrier
    factors in rounds.jsonl; NMSE / theory within its statistics (||z||^2 / (d sigma^2) ~ chi2_d / d:
    5 sqrt(2/d), plus the floor's booked 2 s.e. and the calibration's gain error (3 rel s.e.)^2 / theory);
    the ledger's epsilon as dp-accounting computes it; `verify` OK; one SigMF annotation per OFDM symbol."""
    r = _run(tmp_path, capsys)
    assert r.returncode == 0, r.stderr[-3000:]
    out = tmp_path / "run"
    cal = json.loads((out / "calibration.json").read_text())
    sec = cal["ofdm"]
    assert [c["id"] for c in sec["clients"]] == ["client 0", "client 1"] and sec["used"] == 52
    rel = 0.0
    for c in sec["clients"]:
        H = np.array([complex(*v) for v in c["H"]])
        assert np.all(np.abs(np.abs(H) - 1.0) < 0.05) and c["fit"] == "delay", np.abs(H)
        rel = max(rel, float(np.max(np.asarray(c["H_std"]) / np.abs(H))))
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    summary = json.loads((out / "summary.json").read_text())
    d = summary["model_dim"]
    floor = 2 * cal["noise"]["sigma_c2_std"] / cal["noise"]["sigma_c2"]
    assert len(rows) == 2
    for row in rows:
        assert not row["lost"] and row["transmitting"] == 2 and row["ofdm_data_carriers"] == 48
        assert len(row["ofdm_alpha"]) == 2 and all(lo > 0 and hi / lo < 1.2 for lo, hi in row["ofdm_alpha"])
        t = row["aggregate_nmse_theory"]
        ratio = row["aggregate_nmse"] / t
        print(f"round {row['round']}: NMSE {row['aggregate_nmse']:.4g} theory {t:.4g} ratio {ratio:.4f}")
        band = 5 * math.sqrt(2 / d)
        assert 1 - band <= ratio <= 1 + band + floor + (3 * rel) ** 2 / t, ratio
        assert_calm_ofdm_link(row["link_health"])
    ledger = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    booked = [x for x in ledger if x["uses_data"]]
    assert len(booked) == 2 and all(x["extra"]["waveform"] == "ofdm" for x in booked)
    assert all(x["extra"]["sensitivity_flat"] < x["sensitivity"] for x in booked)   # the calibration's margin
    eps = independent_pld_epsilon(ledger, 1e-5)
    print(f"eps: ledger {summary['eps_pld']:.4f}, dp-accounting {eps:.4f}")
    assert eps == pytest.approx(summary["eps_pld"], rel=2e-3) and eps <= 1.0 + 2e-3
    from otafl_sdr.cli.main import main as cli_main
    rc = cli_main(["verify", str(out)])
    v = capsys.readouterr()
    assert rc == 0 and "OK" in v.out, v.out + v.err
    meta = json.loads((out / "iq" / "round_0001.sigmf-meta").read_text())
    notes = [a for a in meta["annotations"] if a["core:label"].startswith("ofdm")]
    n_ofdm = meta["global"]["otafl:extra"]["ofdm"]["n_ofdm"]
    assert len(notes) == 4 + n_ofdm and [a["core:sample_start"] for a in notes[:2]] == [80, 160]

