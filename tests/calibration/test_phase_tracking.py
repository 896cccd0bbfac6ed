"""Closed-loop phase tracking between rounds (calibration/phase_tracking.py, issue 34 item 3) against the simulated
lab's oscillator model (radio/uhd_sim_oscillator.py), fed with per-client phase estimates of 0.02 rad standard
error (calibration/client_coherence.py at 17 dB): with a shared 10 MHz 200 rounds of 18 s (an hour) hold within
the derived limit with no re-acquisition, and a retune is named in its round and recovered within three rounds; with
independent TCXOs 18 s apart the prediction cannot hold (the round must measure its phase again). A tracker,
not the round's frame: the frame does not carry per-client reference slots yet."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.calibration.coherence_limits import phase_limit
from otafl_sdr.calibration.phase_tracking import PhaseTracker, holds
from otafl_sdr.radio.uhd_sim_oscillator import LabOscillators

SIGMA = 0.02          # per-round phase estimate's standard error (rad)
LIMIT = phase_limit(0.02)


def _run(model: str, rounds: int, dt: float, events=None):
    lab = LabOscillators({"model": model, "seed": 1, "advance_s": dt}, 4)
    # the tracker knows the lab's clocking: a shared 10 MHz leaves no relative offset or drift (q = 0, the
    # offset known to be 0); independent TCXOs drift as the model's random walk and start from a calibrated
    # offset of 0.02 Hz standard error (calibration/phase_ref.py on the simulator lab)
    shared = bool(lab.cfg["shared_ref"])
    q = 0.0 if shared else (lab.cfg["drift_ppb"] * 1e-9 * lab.cfg["carrier_hz"]) ** 2
    trackers = {i: PhaseTracker(q_f=q, phase_q=1e-7, f0_std=1e-6 if shared else 0.02) for i in (1, 2, 3)}
    rng = np.random.default_rng(7)
    log = []
    for m in range(rounds):
        for ev in (events or {}).get(m, []):
            ev(lab)
        lab.open_round(0.0)
        row = {}
        for i, tr in trackers.items():
            pred, std = tr.predict(dt) if m else (0.0, math.inf)
            true = lab.relative_phase(i)
            err = abs(math.remainder(true - pred, 2 * math.pi))
            note = tr.update(true + rng.normal(0, SIGMA), SIGMA)
            if m == 0 and not shared:                  # acquisition: the calibrated offset, within its error
                tr.x[1] = lab.relative_cfo_hz(i) + rng.normal(0, 0.02)
            row[i] = (err, std, note)
        log.append(row)
    return log


def test_a_shared_reference_is_tracked_for_an_hour_and_a_retune_is_named_and_recovered():
    retune_at = 120
    log = _run("shared_ref", 200, 18.0, {retune_at: [lambda lab: lab.retune(2)]})
    for m, row in enumerate(log[1:], start=1):
        for i, (err, std, note) in row.items():
            if (m, i) == (retune_at, 2):
                assert note == "jump" and err > 0.1        # detected in its round, client 2 named
                continue
            assert note == "" and holds(std, LIMIT), (m, i, std)     # no re-acquisition, tracking holds
            if i == 2 and retune_at < m < retune_at + 3:
                continue                                   # re-acquiring: one measurement, then averaging
            assert err < LIMIT, (m, i, err)                # the pre-compensation would be within the limit


def test_independent_tcxos_eighteen_seconds_apart_cannot_be_tracked():
    log = _run("b210", 20, 18.0)
    stds = [row[i][1] for row in log[3:] for i in row]
    assert min(stds) > 1.0                                 # predicted phase error of radians: tracking cannot hold
    assert not any(holds(s, LIMIT) for s in stds)
    errs = [row[i][0] for row in log[3:] for i in row]
    assert np.median(errs) > 0.3
