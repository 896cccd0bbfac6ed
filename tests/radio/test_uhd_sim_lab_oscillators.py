"""A lab with oscillators (issue 34 item 1) through real UHD: two simulators (the hub 127.0.0.1 and a transmitter
127.0.0.2 driven by its own process through gr-uhd's ``usrp_sink``), the hub captured with gr-uhd's
``usrp_source``. What the transmitter's known burst arrives with (carrier offset and phase, fitted from the
capture alone) is what the hub's oscillators say they applied (``SimulatedLab.truth``): independent B210
TCXOs (a kHz-scale offset, a phase that moves between rounds 18 s of device time apart, a retune's new LO
phase, an injected 5 Hz step) and a shared 10 MHz (no offset, the phase held round after round)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_uhd_sim_lab import IDLE_S, LEAD, N_CAP, Receiver, Transmitter, _delay  # noqa: E402
from uhd_sim_lab_tx import PRIMER_SAMPLES, RATE, lab_burst  # noqa: E402

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

# idle_s: every round ends with the hub's wait on a silent stream (test_uhd_sim_lab.IDLE_S, not the lab's 6 s)
B210 = {"n": 2, "lead_samples": LEAD, "oscillators": "b210", "seed": 7, "advance_s": 18.0, "idle_s": IDLE_S}
SHARED = {"n": 2, "lead_samples": LEAD, "oscillators": "shared_ref", "seed": 7, "advance_s": 18.0, "idle_s": IDLE_S}


def _measure(x: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(carrier offset Hz, phase at the round's first sample rad) of burst ``b`` in capture ``x``: the
    derotated product x conj(b), phase unwrapped and fitted by a line over the burst (the capture's sample
    LEAD is the round's sample 0)."""
    d = _delay(x, b[:128])                     # a short piece: a kHz offset turns the whole burst's correlation
    z = x[d:d + len(b)].astype(np.complex128) * np.conj(b)
    k = np.arange(len(b)) + (d - LEAD)          # sample index within the round
    # coarse offset from lag-1 products, then the unwrapped phase's line
    f0 = np.angle(np.sum(z[1:] * np.conj(z[:-1]))) / (2 * np.pi)
    ph = np.unwrap(np.angle(z * np.exp(-2j * np.pi * f0 * k)))
    slope, icpt = np.polyfit(k, ph, 1)
    return float((f0 + slope / (2 * np.pi)) * RATE), float(np.angle(np.exp(1j * icpt)))


def _wrap(a: float) -> float:
    return float(np.angle(np.exp(1j * a)))


def _rounds(lab, rx, tx, m: int) -> list[tuple[float, float, dict]]:
    out = []
    for _ in range(m):
        x = rx.capture(N_CAP, lambda: tx.send(0.5))
        tx.expect("sent")
        out.append((*_measure(x, lab_burst(tx.seed)), lab.truth()[-1]["radios"]["1"]))
    return out


def _open(lab):
    rx = Receiver(lab.receiver_args)
    rx.capture(1000)                           # the hub's cable listens from now on
    tx = Transmitter(lab.device_args[1], 1)
    tx.expect("open")
    rx.capture(LEAD + PRIMER_SAMPLES, lambda: tx.send("prime"))    # the primer in a round of its own
    tx.expect("sent")
    return rx, tx


@pytest.mark.parametrize("uhd_lab", [B210], indirect=True)
def test_independent_tcxos_reach_the_hub_with_their_offsets_phases_retunes_and_steps(uhd_lab):
    rx, tx = _open(uhd_lab)
    try:
        calm = _rounds(uhd_lab, rx, tx, 2)
        uhd_lab.retune(1)
        (ret,) = _rounds(uhd_lab, rx, tx, 1)
        uhd_lab.step_carrier(1, 5.0)
        (stepped,) = _rounds(uhd_lab, rx, tx, 1)
    finally:
        tx.close()
        rx.close()
    for f, ph, truth in [*calm, ret, stepped]:
        assert abs(truth["cfo_hz"]) > 50.0                  # two TCXOs are never this close by chance here
        assert f == pytest.approx(truth["cfo_hz"], abs=0.5), (f, truth)
        assert abs(_wrap(ph - truth["phase_rad"])) < 0.1, (ph, truth)
    assert abs(_wrap(calm[1][1] - calm[0][1])) > 0.1     # 18 s of device time at a kHz offset moved the phase
    assert ret[2]["tunes"] == calm[1][2]["tunes"] + 1
    assert stepped[0] - ret[0] == pytest.approx(5.0, abs=0.5)   # the injected step (+ 18 s of slow drift)
    truths = uhd_lab.truth()
    assert truths[-1]["t_s"] - truths[-2]["t_s"] == pytest.approx(18.0)
    print("b210 lab: measured / true (Hz, rad):", [(round(f, 2), round(t["cfo_hz"], 2), round(ph, 3),
                                                   round(t["phase_rad"], 3)) for f, ph, t in [*calm, ret, stepped]])


@pytest.mark.parametrize("uhd_lab", [SHARED], indirect=True)
def test_a_shared_reference_leaves_no_offset_and_holds_the_phase(uhd_lab):
    rx, tx = _open(uhd_lab)
    try:
        rows = _rounds(uhd_lab, rx, tx, 3)
    finally:
        tx.close()
        rx.close()
    for f, ph, truth in rows:
        assert truth["cfo_hz"] == 0.0
        assert abs(f) < 0.5
        assert abs(_wrap(ph - truth["phase_rad"])) < 0.1
    assert max(abs(_wrap(ph - rows[0][1])) for _, ph, _ in rows) < 0.05
