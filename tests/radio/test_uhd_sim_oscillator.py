"""The simulated lab's oscillators (otafl_sdr/radio/uhd_sim_oscillator.py, issue 34 item 1): seeded, the
datasheet ranges, a shared reference leaving no relative offset, the drift's statistics, a retune's new LO
phase, an injected carrier step; and the hub's cable (uhd_sim_loopback) applying them to a stream's samples.
Pure numpy (the end-to-end check through real UHD is tests/radio/test_uhd_sim_lab_oscillators.py)."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from otafl_sdr.radio import uhd_sim_loopback as cable
from otafl_sdr.radio.uhd_sim_oscillator import LabOscillators, oscillator_config

FC = 915e6


def _rounds(lab: LabOscillators, m: int, radios=(1, 2, 3)) -> list[dict]:
    out = []
    for _ in range(m):
        lab.open_round(0.0)
        out.append(lab.truth(list(radios)))
    return out


def test_the_same_seed_gives_the_same_oscillators_and_another_seed_others():
    a = _rounds(LabOscillators({"model": "b210", "seed": 5, "advance_s": 18.0}, 4), 5)
    b = _rounds(LabOscillators({"model": "b210", "seed": 5, "advance_s": 18.0}, 4), 5)
    c = _rounds(LabOscillators({"model": "b210", "seed": 6, "advance_s": 18.0}, 4), 5)
    assert a == b
    assert a[0]["radios"]["1"]["cfo_hz"] != c[0]["radios"]["1"]["cfo_hz"]


def test_independent_tcxos_are_within_the_b210_datasheet_and_a_shared_reference_leaves_no_relative_offset():
    cfos = [LabOscillators({"model": "b210", "seed": s}, 2).relative_cfo_hz(1) for s in range(200)]
    # each TCXO within +-2 ppm (Ettus B200/B210 spec sheet), so two of them within +-4 ppm of each other
    assert max(abs(f) for f in cfos) <= 4e-6 * FC
    assert np.std(cfos) == pytest.approx(2e-6 * FC * np.sqrt(2 / 3), rel=0.15)   # difference of two U(-2, 2) ppm
    shared = LabOscillators({"model": "shared_ref", "seed": 3, "advance_s": 18.0}, 4)
    rows = _rounds(shared, 50)
    assert all(r["radios"][k]["cfo_hz"] == 0.0 for r in rows for k in ("1", "2", "3"))
    for k in ("1", "2", "3"):                     # a random LO phase per radio, then held while nothing retunes
        assert len({round(r["radios"][k]["phase_rad"], 12) for r in rows}) == 1
    assert len({rows[0]["radios"][k]["phase_rad"] for k in ("1", "2", "3")}) == 3
    assert abs(shared.radios[1].offset_ppm()) <= 0.025          # the common offset: a GPSDO-class reference


def test_the_drift_is_a_random_walk_of_drift_ppb_per_root_second():
    lab = LabOscillators({"model": "b210", "seed": 11, "advance_s": 4.0, "drift_ppb": 0.2}, 9)
    eps = []
    for _ in range(300):
        lab.open_round(0.0)
        eps.append([r.offset_ppm() for r in lab.radios])
    steps = np.diff(np.asarray(eps), axis=0) * 1e3             # ppb per 4 s
    assert np.std(steps) == pytest.approx(0.2 * np.sqrt(4.0), rel=0.1)
    assert abs(np.mean(steps)) < 0.05
    # 200 rounds of 18 s: the lab's device time passes an hour
    hour = LabOscillators({"model": "b210", "seed": 1, "advance_s": 18.0}, 2)
    assert _rounds(hour, 201, (1,))[-1]["t_s"] == pytest.approx(3600.0)


def test_a_retune_draws_a_new_lo_phase_and_a_step_moves_only_that_radios_carrier():
    lab = LabOscillators({"model": "shared_ref", "seed": 2, "advance_s": 1.0}, 4)
    before = _rounds(lab, 1)[0]["radios"]
    lab.retune(2)
    lab.set_step(3, 5.0)
    after = _rounds(lab, 1)[0]["radios"]
    assert after["1"] == before["1"]
    assert after["2"]["cfo_hz"] == 0.0 and after["2"]["tunes"] == before["2"]["tunes"] + 1
    assert abs(np.angle(np.exp(1j * (after["2"]["phase_rad"] - before["2"]["phase_rad"])))) > 1e-3
    assert after["3"]["cfo_hz"] == pytest.approx(5.0, abs=1e-9)
    third = _rounds(lab, 1)[0]["radios"]["3"]                  # 1 s later a 5 Hz step has turned 5 cycles
    assert np.angle(np.exp(1j * (third["phase_rad"] - after["3"]["phase_rad"]))) == pytest.approx(0.0, abs=1e-6)


def test_the_rotation_carries_the_carrier_offset_sample_by_sample():
    lab = LabOscillators({"model": "b210", "seed": 4, "phase_noise": 0.0, "rate": 1e6}, 3)
    lab.open_round(0.0)
    rot, _ = lab.rotation(1, 100, 1000)
    step = np.angle(rot[1:] * np.conj(rot[:-1]))
    assert np.allclose(step, 2 * np.pi * lab.relative_cfo_hz(1) / 1e6, atol=1e-9)
    assert np.angle(rot[0]) == pytest.approx(
        np.angle(np.exp(1j * (lab.relative_phase(1) + 2 * np.pi * lab.relative_cfo_hz(1) * 100 / 1e6))), abs=1e-9)
    noisy = LabOscillators({"model": "b210", "seed": 4, "phase_noise": 1e-3}, 3)
    noisy.open_round(0.0)
    rot, end = noisy.rotation(1, 0, 20000)
    pn = np.unwrap(np.angle(rot)) - np.angle(rot[0]) - 2 * np.pi * noisy.relative_cfo_hz(1) / 1e6 * np.arange(20000)
    assert np.std(np.diff(pn)) == pytest.approx(1e-3, rel=0.05)


@pytest.mark.parametrize("bad", [{"model": "x310"}, {"model": "b210", "ppm": -1}, {"model": "b210", "volts": 3},
                                 {"model": "b210", "rate": 0}])
def test_a_bad_oscillator_setting_is_refused(bad):
    with pytest.raises(ValueError):
        oscillator_config(**bad)


@pytest.fixture
def hub(tmp_path):
    """The hub's cable module with a lab's oscillators loaded in this process; reset after."""
    desc = tmp_path / "osc.json"
    events = tmp_path / "events.json"
    truth = tmp_path / "truth.jsonl"
    desc.write_text(json.dumps({"n": 3, "config": oscillator_config("b210", seed=9, advance_s=18.0, phase_noise=0.0),
                                "events": str(events), "truth": str(truth)}))
    saved = dict(cable._OSC)
    try:
        yield str(desc), events, truth
    finally:
        cable._OSC.clear()
        cable._OSC.update(saved)
        cable._SINKS.clear()


def test_the_hubs_cable_turns_each_radios_samples_by_its_offset_and_phase(hub):
    desc, events, truth = hub
    sink = cable.LoopbackSink(oscillators=desc, radio=2)
    x = np.full(3000, 1000, dtype=np.int32)                    # I = Q = 1000: a constant burst
    for m in range(2):
        time.sleep(cable.JOIN_S + 0.01)                        # (sooner: the other RX channel of one capture)
        cable.LoopbackSource(oscillators=desc)                 # a capture opens the round
        sink._add(x[:1000])
        sink._add(x[1000:])                                    # two packets: the phase runs on across them
        buf = cable._ROUND["buf"]
        iq = (buf[0::2] + 1j * buf[1::2]) / (1000 + 1000j)
        t = json.loads(truth.read_text().splitlines()[-1])
        assert t["round"] == m + 1 and t["t_s"] == pytest.approx(18.0 * m)
        f, ph = t["radios"]["2"]["cfo_hz"], t["radios"]["2"]["phase_rad"]
        k = np.arange(iq.size)
        assert np.max(np.abs(iq - np.exp(1j * (ph + 2 * np.pi * f / 1e6 * k)))) < 2e-3   # sc16 rounding
    events.write_text(json.dumps({"retunes": {"2": 1}, "steps_hz": {"1": 5.0}}))
    time.sleep(cable.JOIN_S + 0.01)
    cable.LoopbackSource(oscillators=desc)
    t2 = json.loads(truth.read_text().splitlines()[-1])["radios"]
    assert t2["2"]["tunes"] == t["radios"]["2"]["tunes"] + 1
    assert t2["1"]["cfo_hz"] - t["radios"]["1"]["cfo_hz"] == pytest.approx(5.0, abs=1.0)   # + 18 s of drift


@pytest.mark.parametrize("name,model", [("uhd_lab_b210", "b210"), ("uhd_lab_shared_ref", "shared_ref")])
def test_the_lab_presets_load_and_name_the_command_that_starts_their_oscillators(name, model):
    """Three clients on separate radios, the jammer and the receiver; the header's simulator command starts as
    many radios as the preset addresses, with this model and the preset's own seed."""
    import re
    from pathlib import Path

    from otafl_sdr.configure.load import load_config
    from otafl_sdr.radio.uhd_sim_lab import lab_address
    path = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / f"{name}.toml"
    cfg = load_config(path, [])
    addrs = [*cfg.uhd.tx_args, cfg.uhd.jammer_args, cfg.uhd.rx_args]
    assert cfg.data.clients == 3 and cfg.power.jammer and len(set(addrs)) == 5
    cmd = re.search(r"uhd_simulator --radios (\d+) --oscillators (\w+) --seed (\d+)", path.read_text())
    assert cmd and (int(cmd[1]), cmd[2], int(cmd[3])) == (5, model, cfg.run.seed)
    assert sorted(addrs) == [f"addr={lab_address(i)}" for i in range(5)]
    assert cfg.uhd.rx_args == f"addr={lab_address(0)}"          # the receiver on the hub
