"""Per-client coherence through real UHD against the simulated lab with oscillators (issue 34 items 2-3): the
in-process uhd air's coherent rounds (radio/uhd_coherent_round.py) on the lab presets, five simulated E320s
(three clients, the jammer, the receiver), known independent payloads (d = 2,410) at a theory NMSE near 0.04, where a
(+0.1, -0.1, 0) rad per-client error costs 17 % (experiment/coherence_rounds.py; benchmarks/bench_coherence_lab.py
runs the 200-round version). Independent TCXOs, the lab's clock 95 s a round (40 rounds: an hour): tracked, both
20-round windows within 1.00 +- 0.05, a 5 Hz carrier step measured and corrected in its round, nothing to
recalibrate, a retune its host made named for its client in its round; the same air and calibration without
tracking fail the window and name the drifting clients. A
shared 10 MHz: the window holds, no drift alarm, a 5 Hz carrier step and a retune are named for their clients in
their rounds (events, not alarms: the round corrects them)."""
from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.calibration.link_health import DriftLimits, drift
from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.coherence_rounds import coherence_rounds, windows

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.slow]

PRESETS = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets"
SNR = ["privacy.eps=1000", "power.max_snr_db=11"]     # as benchmarks/bench_coherence_lab.py
# known payloads of d = 2,410 (an MLP's size, not the presets' logistic regression at 650): one round's NMSE /
# theory scatters sqrt(2 / d) = 2.9 % (6 % at 650), so a 20-round window's mean is within +-1.3 % (2 sigma) of
# its expectation, which the receiver's reference fit puts about 1-2 % above the noise-only theory. At d = 650
# a window read 1.053 once in CI (1.023 quiet): a 2-sigma draw, not a coherence error. Same wall time here.
PAYLOAD = ["model.name=mlp", "model.hidden=32"]
B210 = {"n": 5, "oscillators": "b210", "seed": 1, "advance_s": 95.0, "idle_s": 2.0}
SHARED = {"n": 5, "oscillators": "shared_ref", "seed": 1, "advance_s": 18.0, "idle_s": 2.0}


def _cfg(preset: str, mode: str):
    cfg = load_config(PRESETS / preset, [f"air.coherence={mode}", "run.progress=false", *SNR, *PAYLOAD])
    assert cfg.run.seed == 1                             # the lab is seeded with the run's seed
    return cfg


def _event(row, client):
    return next((c["event"] for c in row["link_health"]["clients"] if c and c["client"] == client), None)


@pytest.mark.parametrize("uhd_lab", [B210], indirect=True)
def test_independent_tcxos_tracked_hold_the_window_and_untracked_fail_it(uhd_lab, tmp_path):
    def before(r, air):
        if r == 21:
            tunes_before.append(uhd_lab.truth()[-1]["radios"]["2"]["tunes"])
            air.retune(1)                                # client 1's host hops its radio away and back (real UHD)
        if r == 26:
            uhd_lab.step_carrier(3, 5.0)                 # client 2: +5 Hz
        if r == 41:                                       # the same air and calibration, no correction
            air.cfg.air.coherence, air.coherence = "measure", None
    tunes_before: list = []
    rows = coherence_rounds(_cfg("uhd_lab_b210.toml", "track"), tmp_path / "run", 60, before_round=before,
                            take_recalibrations=False)
    tracked, untracked = rows[:40], rows[40:]
    ratios = [r["ratio"] for r in rows]
    theory = float(np.median([r["theory"] for r in rows]))
    truth = uhd_lab.truth()
    print(f"b210: theory {theory:.4f}; tracked windows {np.round(windows(ratios[:40]), 3)}; untracked "
          f"{np.round(windows(ratios[40:]), 2)}; rounds 26-29 {[None if x is None else round(x, 3) for x in ratios[25:29]]}")
    print("lost attempts:", [(r["round"], r["lost"]) for r in rows if r["lost"]], "ratios:",
          [None if x is None else round(x, 2) for x in ratios], "not ok:", [(r["round"], r["reason"]) for r in rows if not r["ok"]])
    assert 0.02 <= theory <= 0.05
    assert truth[-21]["t_s"] - truth[-61]["t_s"] >= 3600           # the 40 tracked rounds: an hour of drift
    assert all(r["ok"] for r in rows), [(r["round"], r["reason"]) for r in rows if not r["ok"]]   # (retried: air.retries)
    assert all(abs(w - 1.0) <= 0.05 for w in windows(ratios[:40])), ratios[:40]
    assert abs(windows(ratios[40:])[0] - 1.0) > 0.5, ratios[40:]
    assert not any(r["due"] for r in tracked), [r["due"] for r in tracked if r["due"]]
    assert all("not tracked" in r["due"] for r in untracked[1:])    # the drifting clients named, every round
    # every client, every round: phase, offset and gain with their standard errors
    for r in tracked:
        cl = r["link_health"]["clients"]
        assert [c["client"] for c in cl] == [0, 1, 2]
        assert all(c["phase_std"] > 0 and c["cfo_std_hz"] > 0 and c["gain_db_std"] > 0 for c in cl)
        assert all(abs(c["gain_db"]) < 1.0 for c in cl)
    # the step is measured in its own round (its sounding reads it, +- the 95 s wander of ~1 Hz) and that
    # round's payload is already corrected; at 95 s a round the wander is too wide for a 5-sigma event to be
    # sure (the preset's 18 s names it: benchmarks/bench_coherence_lab.py; the shared reference below)
    assert rows[25]["link_health"]["clients"][2]["cfo_hz"] == pytest.approx(5.0, abs=3.0)
    assert abs(np.mean(ratios[20:24]) - 1.0) < 0.15 and abs(np.mean(ratios[25:29]) - 1.0) < 0.15
    # the host's retune went through UHD to the simulated AD9361 (the lab drew radio 2's LO phases anew, and
    # no other radio's: no round tunes a radio), and link_health names it for client 1 in its round: a new
    # LO phase no estimator could tell from 95 s of independent wander (docs/lab.md)
    tunes = {k: {t["radios"][k]["tunes"] for t in truth[-61:]} for k in ("1", "2", "3")}
    print("tunes over the rounds:", tunes, "before the retune:", tunes_before)
    assert tunes["1"] == {min(tunes["1"])} and tunes["3"] == {min(tunes["3"])}, tunes
    assert max(tunes["2"]) > tunes_before[0], (tunes, tunes_before)
    assert _event(rows[20], 1) == "retuned by its host"
    # the untracked rounds (no jammer noise at this eps) still cover every stream: the hub never waited its
    # seconds for a silent radio (radio/uhd_channels.silent_radio_zeros; 3 s a round before)
    hub_log = Path(uhd_lab.simulators[0].log_path).read_text()
    assert "without a burst from radio" not in hub_log, hub_log[-2000:]
    assert [(r["round"], c) for r in rows for c in range(3) if _event(r, c) == "retuned by its host"] == [(21, 1)]


@pytest.mark.parametrize("uhd_lab", [SHARED], indirect=True)
def test_a_shared_reference_holds_the_window_raises_no_alarm_and_names_a_retune(uhd_lab, tmp_path):
    cfg = _cfg("uhd_lab_shared_ref.toml", "track")

    def before(r, air):
        if r == 15:
            uhd_lab.step_carrier(2, 5.0)                 # client 1's radio: +5 Hz
        if r == 20:
            uhd_lab.retune(3)                            # client 2's radio: a new LO phase

    rows = coherence_rounds(cfg, tmp_path / "run", 20, before_round=before, take_recalibrations=False)
    ratios = [r["ratio"] for r in rows]
    print("lost attempts:", [(r["round"], r["lost"]) for r in rows if r["lost"]],
          "not ok:", [(r["round"], r["reason"]) for r in rows if not r["ok"]])
    print(f"shared_ref: window {np.round(windows(ratios), 3)}; cfo +- std "
          f"{[(round(c['cfo_hz'], 3), round(c['cfo_std_hz'], 3)) for c in rows[-2]['link_health']['clients']]}")
    assert all(r["ok"] for r in rows), [(r["round"], r["reason"]) for r in rows if not r["ok"]]
    assert abs(windows(ratios)[0] - 1.0) <= 0.05, ratios
    # a shared reference has no offset: its pilots' offsets are ~0.3 Hz off each (the radios' phase noise), and
    # the calibration states that error (calibration/phase_wander.py), not the thermal 0.02-0.04 Hz at which
    # their mean passed the 3-sigma gate as an offset (in the node lab then referred by a fit over repeats 18 s
    # apart that picked a wrong cycle: tests/calibration/test_repeats_offset.py)
    cal = json.loads((tmp_path / "run" / "calibration.json").read_text())
    for link in cal["clients"] + [cal["jammer"]]:
        print(f"{link['id']}: offset {link['cfo'] * 1e6:+.3f} +- {link['cfo_std'] * 1e6:.3f} Hz, t_ref {link.get('t_ref')}")
        assert link["cfo_std"] > 1e-7, link
        # its phase noise, the hub's 2 x (1.2e-4 rad)^2 per sample (TX and RX synthesizers), found by its pilots
        assert 0.5 < link["phase_noise"] / (2 * 1.2e-4 ** 2) < 2.0, link
    # so each round's sounding states its offset's error with that phase noise: the calm rounds' offsets
    # (before the step) scatter as stated (with the thermal error alone they read 3-6 x beyond it)
    calm = [c["cfo_hz"] / c["cfo_std_hz"] for r in rows[:14] for c in r["link_health"]["clients"]]
    print(f"calm rounds' offset z rms {np.sqrt(np.mean(np.square(calm))):.3f} over {len(calm)}")
    assert np.sqrt(np.mean(np.square(calm))) < 1.6, calm
    limits = DriftLimits.from_config(cfg.air)
    assert not any(drift(r["link_health"], limits) for r in rows)
    assert not any(r["due"] for r in rows)
    events = [(r["round"], c, _event(r, c)) for r in rows for c in range(3) if _event(r, c)]
    assert events == [(15, 1, "carrier step"), (20, 2, "phase jump")], events
    assert rows[14]["link_health"]["clients"][1]["cfo_hz"] == pytest.approx(5.0, abs=1.0)
