"""A jammer's slot must hold one power throughout (radio/jammer_slots.unsteady_slot): a slot with a gap (a radio's
underflow; in the simulated lab a stream the hub's capture read past: on CI's loaded host a round read 0.75
of its jammer's power, three quarters of the slot there, and was charged at that bound as if the frame had
carried it) is not measured: the jammer is put in the attempt's ``undelivered`` and the real release rule
charges its share away and retries. A steady slot never raises it (400 captures at the module's false-alarm
rate of 1e-6). Captures are built with the air's own modem and the jammer's own slot noise."""
import numpy as np
import pytest

from otafl_sdr.config.schema import PhyConfig, PrivacyConfig
from otafl_sdr.phy.modem import Modem
from otafl_sdr.privacy.ledger import PrivacyLedger, read_chain
from otafl_sdr.radio.jammer_slots import JAMMER_SAMPLES, QUIET_SAMPLES, attach, measure, slot_noise
from otafl_sdr.rounds.accounting import release
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import Attempt

FLOOR, ALPHA_CJ, ALPHA_U, FRAME = 0.01, 0.05, 0.1, 4000     # receiver noise per coordinate (rms), the round's factors


def _capture(rng, modem, cut: float = 0.0, alpha_cj: float = ALPHA_CJ) -> np.ndarray:
    """| quiet | frame (FRAME samples of anything) | jammer only |, receiver noise throughout; the jammer's
    slot missing its last ``cut`` share (zero-filled, as the hub hands a capture over without a stream)."""
    jam = slot_noise(modem, alpha_cj, rng)
    if cut:
        jam[int(len(jam) * (1 - cut)):] = 0
    y = np.concatenate([np.zeros(QUIET_SAMPLES), 0.1 * np.ones(FRAME), jam]).astype(np.complex128)
    return y + FLOOR * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))


def _measure(y, modem):
    return measure(y, QUIET_SAMPLES + FRAME, modem, ALPHA_U)


def test_a_steady_slot_is_measured_and_never_called_unsteady():
    modem, rng = Modem(PhyConfig()), np.random.default_rng(7)
    got = [_measure(_capture(rng, modem), modem) for _ in range(400)]
    assert not [m["gap"] for m in got if "gap" in m]
    # what the jammer added per real coordinate through the matched filter: its slot noise's variance
    v = np.array([m["jammer_var"] for m in got])
    assert np.std(v) / np.mean(v) < 0.03 and np.mean([m["delivered_std"] / m["delivered"] for m in got]) < 0.02


@pytest.mark.parametrize("cut", [0.25, 0.05])
def test_a_slot_with_a_gap_is_named_and_its_jammer_charged_away(tmp_path, cut):
    modem, rng = Modem(PhyConfig()), np.random.default_rng(8)
    m = _measure(_capture(rng, modem, cut=cut), modem)
    whole = _measure(_capture(rng, modem), modem)
    assert m["delivered"] / whole["delivered"] == pytest.approx(1 - cut, abs=0.04)     # what the slot alone reads
    assert "its slot is not steady" in m["gap"] and "a gap in its burst" in m["gap"]
    if cut == 0.25:
        assert m["gap"].split(": ")[1].startswith("1.") and " / 0.0" in m["gap"]   # the last quarter empty

    # through the real release rule: booked, then charged at channel noise only, retried; the retry is clean
    ledger = PrivacyLedger(PrivacyConfig(eps=50.0, delta=1e-5, accountant="pld", report=["pld"]),
                           tmp_path / "privacy_ledger.jsonl")
    # booked below what a whole slot delivers (the matched filter's worst phase reads about 0.82 of alpha_cj^2):
    # the clean retry is not charged a shortfall
    sigma_c2, h_cj = 0.04, 0.85
    jam_share = (h_cj * ALPHA_CJ / ALPHA_U) ** 2
    mech = Mechanism(1, 0.05, float(np.sqrt(sigma_c2 / ALPHA_U ** 2 + jam_share)))
    from types import SimpleNamespace
    plan = SimpleNamespace(round=1, mechanism=mech, extra={}, alpha_u=ALPHA_U, sigma_c2=sigma_c2, alpha_cj=ALPHA_CJ,
                           h_cj=h_cj + 0j)
    captures = iter([_capture(rng, modem, cut=cut), _capture(rng, modem)])

    def send(attempt):
        rec = Reception(np.ones(4), ok=True, extra={})
        attach(rec, _measure(next(captures), modem))
        return Attempt(rec)
    out = release(ledger, plan, 1, retries=1, enforce=True, send=send)
    assert out.reception.ok and out.attempts == 2
    assert any("its slot is not steady" in n for n in out.notes)
    entries, torn = read_chain(tmp_path / "privacy_ledger.jsonl")
    assert not torn
    faults = [e for e in entries if e["extra"].get("fault")]
    assert len(faults) == 1 and faults[0]["extra"]["fault"].startswith("jammer its slot is not steady")
    assert faults[0]["extra"]["charged"] == "channel noise only"
    assert faults[0]["sigma_eff"] == pytest.approx(np.sqrt(sigma_c2) / ALPHA_U)
    assert [e.get("attempt", 0) for e in entries if not e["extra"].get("fault")] == [0, 1]


def test_too_short_a_capture_is_not_measured():
    modem = Modem(PhyConfig())
    assert measure(np.zeros(QUIET_SAMPLES + FRAME + JAMMER_SAMPLES // 2, complex), QUIET_SAMPLES + FRAME, modem,
                   ALPHA_U) is None
