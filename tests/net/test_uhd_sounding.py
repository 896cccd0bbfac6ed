"""The uhd testbed's single-carrier per-client sounding (net/uhd_sounding.py) without radios: the parts two
client nodes append to their bursts (one level for both, from the attempt's planned reference gains), summed
through their links with client 1's turned by 0.2 rad and 3 Hz off, are read by the server as that client's
phase and offset (its own, against its calibration), each within 5 standard errors; a capture with a fault
reads nothing and clears the last round's alarms."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = pytest.mark.gnuradio          # the server's reader uses the uhd air's helpers (gr-uhd imported)


def test_two_clients_parts_are_read_per_client_by_the_server():
    from otafl_sdr.config.schema import Config
    from otafl_sdr.net.uhd_sounding import add_sounding, client_part, read_clients
    from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
    cfg = Config()
    cfg.data.clients, cfg.air.coherence, cfg.uhd.rate = 2, "measure", 1e6
    sends = {f"client-{i}": ("transmit_at", {"n": 100, "sounding": 0, "slot": 0}, {}) for i in range(2)}
    sends["jammer"] = ("jam_at", {"n": 100}, {})
    layout, n_cap = add_sounding(cfg, 2, sends, 500, 100)
    assert n_cap == 100 + layout.n_samples and all(f["n"] == n_cap for _, f, _ in sends.values())
    assert sends["client-1"][1]["sounding"] == 1 and sends["client-1"][1]["slot"] == 500
    h = np.array([0.8 * np.exp(0.4j), 0.5 * np.exp(-1.1j)])             # the calibrated links
    g = 0.05 / h                                                       # each client's planned reference gain
    ref_gains = {f"client-{i}": [float(g[i].real), float(g[i].imag)] for i in range(2)}
    parts = [client_part(cfg, i, ref_gains, 500) for i in range(2)]
    assert all(np.all(p[:500] == 0) for p in parts)                    # silent over the jammer's slot
    peak = max(float(np.max(np.abs(p))) for p in parts)
    assert 0.3 < peak <= 1.0                                           # one level: the largest part near -6 dBFS
    n = LEAD_SAMPLES + len(parts[0]) + LEAD_SAMPLES
    t = np.arange(len(parts[0]))
    y = np.zeros(n, np.complex128)
    y[LEAD_SAMPLES:LEAD_SAMPLES + len(t)] += h[0] * parts[0]
    y[LEAD_SAMPLES:LEAD_SAMPLES + len(t)] += h[1] * parts[1] * np.exp(1j * (0.2 + 2 * np.pi * 3.0 * (t - 500) / 1e6))
    rng = np.random.default_rng(2)
    y += 2e-3 * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
    air = SimpleNamespace(exp=SimpleNamespace(cfg=cfg), health={}, coherence=None, coherence_alarms=["stale"])
    read_clients(air, layout, y, LEAD_SAMPLES + 500, h, ref_gains, True)
    c0, c1 = air.health["clients"]
    print(c0, c1, sep="\n")
    assert abs(c0["phase_rad"]) < 5 * c0["phase_std"] and abs(c0["cfo_hz"]) < 5 * c0["cfo_std_hz"]
    assert abs(c1["cfo_hz"] - 3.0) < 5 * c1["cfo_std_hz"]
    # the phase at client 1's B block: 0.2 plus 3 Hz over the time from the part's first sample
    want = 0.2 + 2 * np.pi * 3.0 * (layout.b_centre_sample(1)) / 1e6
    assert abs(np.angle(np.exp(1j * (c1["phase_rad"] - want)))) < 5 * c1["phase_std"] + 2e-3, (c1, want)
    assert all(abs(c["gain_db"]) < 0.2 for c in (c0, c1))
    assert air.coherence_alarms == []                                   # 0.3 rad < air.drift_phase_rad 0.35
    air.health = {}
    air.coherence_alarms = ["stale"]
    read_clients(air, layout, y, LEAD_SAMPLES + 500, h, ref_gains, False)  # a fault: nothing read
    assert "clients" not in air.health and air.coherence_alarms == []


def test_the_parts_are_read_where_the_frames_timing_puts_them():
    """A burst that arrives 64 samples late (its frame found there: link health's ``timing_offset``) has its
    parts 64 samples late too: read there, each client within its errors; read at the schedule (the sounding
    searches +- 8 samples), client 0 read 20 dB low and far off (the node lab's first check round, a frame
    64 samples late: 2.4 rad, 16 kHz, -27 dB, named by the check)."""
    from otafl_sdr.config.schema import Config
    from otafl_sdr.net.uhd_sounding import add_sounding, client_part, read_clients
    from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
    cfg = Config()
    cfg.data.clients, cfg.air.coherence, cfg.uhd.rate = 2, "measure", 1e6
    layout, _ = add_sounding(cfg, 2, {}, 0, 0)
    h = np.array([0.8 * np.exp(0.4j), 0.5 * np.exp(-1.1j)])
    g = 0.05 / h
    ref_gains = {f"client-{i}": [float(g[i].real), float(g[i].imag)] for i in range(2)}
    parts = [client_part(cfg, i, ref_gains, 0) for i in range(2)]
    late = 64
    y = np.zeros(2 * LEAD_SAMPLES + len(parts[0]), np.complex128)
    y[LEAD_SAMPLES + late:LEAD_SAMPLES + late + len(parts[0])] = h[0] * parts[0] + h[1] * parts[1]
    y += 2e-3 * (np.random.default_rng(3).standard_normal(len(y)) + 1j * np.random.default_rng(4).standard_normal(len(y)))
    air = SimpleNamespace(exp=SimpleNamespace(cfg=cfg), health={"timing_offset": late}, coherence=None,
                          coherence_alarms=[])
    read_clients(air, layout, y, LEAD_SAMPLES, h, ref_gains, True)
    for c in air.health["clients"]:
        assert abs(c["phase_rad"]) < 5 * c["phase_std"] and abs(c["gain_db"]) < 0.2, c
    air.health = {"timing_offset": 0}                                   # where the schedule alone puts them
    read_clients(air, layout, y, LEAD_SAMPLES, h, ref_gains, True)
    assert air.health["clients"][0]["gain_db"] < -10, air.health["clients"][0]


def test_a_node_refuses_a_slot_it_cannot_hold_in_one_line():
    from otafl_sdr.config.schema import Config
    from otafl_sdr.errors import UserError
    from otafl_sdr.net.uhd_sounding import client_part
    cfg = Config()
    cfg.data.clients = 2
    for bad in (-1, 1 << 40):
        with pytest.raises(UserError) as e:
            client_part(cfg, 0, {"client-0": [1.0, 0.0]}, bad)
        assert "\n" not in str(e.value) and "slot" in str(e.value)
    part = client_part(cfg, 1, {"client-0": [1.0, 0.0], "client-x": [9.0, 9.0], "jammer": [1.0, 0.0]}, 0)
    assert not np.any(part)                  # client 1 has no gain in the message: its part is silent
