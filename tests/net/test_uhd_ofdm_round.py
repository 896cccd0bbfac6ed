"""The uhd testbed's OFDM pieces (net/uhd_ofdm_round.py) without radios: a client node's burst, built from its
own alpha_ik and the server's reference design, is the in-process air's burst (radio/uhd_ofdm.ofdm_bursts)
sample for sample; the messages' arrays encode; a node refuses bad carriers / delay / reference in one line."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.calibration.ofdm_channel import OfdmLinkEstimate, to_section
from otafl_sdr.errors import UserError
from otafl_sdr.net.messages import Message, decode, encode
from otafl_sdr.net.uhd_ofdm_round import add_arrays, attempt_design, client_burst, jammer_burst, own_alpha_sc
from otafl_sdr.phy.ofdm import OfdmLayout, subcarrier_response
from otafl_sdr.radio.uhd_ofdm import ofdm_bursts
from otafl_sdr.radio.uhd_round_signal import clip_to_dac


def _setup(seed=4):
    """A cj_adaptive plan for two clients carried per subcarrier on a calibrated two-tap channel section."""
    from otafl_sdr.config.schema import Config
    from otafl_sdr.power.base import SystemInfo
    from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy
    from otafl_sdr.power.ofdm_plan import plan_ofdm
    cfg = Config()
    cfg.phy.waveform, cfg.air.csi, cfg.power.jammer, cfg.data.clients = "ofdm", "calibrated", False, 2
    lay = OfdmLayout.from_phy(cfg.phy)
    K, d = 2, 1000
    H = subcarrier_response(np.array([[0.9, 0.0, 0.3j], [0.5 - 0.6j, 0.2, 0.0]]), lay)
    ests = [OfdmLinkEstimate(f"client {i}", H[i], np.full(lay.used, 1e-4), 0, 40.0, "delay", 0.99) for i in range(K)]
    csi = SimpleNamespace(file=SimpleNamespace(ofdm=to_section(lay, ests, 0.25, 3, 0)), path="mem")
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 10**6), power=np.full(K, 10 * d), dim=d, sigma_c2=1.0,
                      rounds=20, eps=1.0, delta=1e-5)
    h_flat = np.array([0.95, 0.8 + 0j])
    policy = CJAdaptivePolicy(cfg, info)
    u = np.random.default_rng(seed).standard_normal((K, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    plan = policy.plan(1, u, h_flat, 0.5 + 0j, np.random.default_rng(seed), csi=h_flat)
    plan.extra["csi"] = h_flat
    plan_ofdm(plan, cfg, info, csi)
    return cfg, lay, csi, policy, plan, u, h_flat


def test_a_client_node_sends_the_in_process_burst_from_its_own_decision_and_the_server_design():
    cfg, lay, csi, policy, plan, u, h_flat = _setup()
    design = attempt_design(cfg, plan, [0, 1], csi)
    od = plan.extra["ofdm"]
    assert np.allclose(design["ref"], od["ref"]) and np.allclose(design["ref_amp"], od["ref_amp"])
    bursts, _ = ofdm_bursts(plan, lay)
    sends = {f"client-{i}": ("transmit_at", {"round": 1, "attempt": 1, "tx_amp": 1.0}, {}) for i in range(2)}
    sends["jammer"] = ("jam_at", {"round": 1, "attempt": 1, "alpha_cj": 0.3, "dim": 1000}, {})
    add_arrays(sends, design)
    for i in range(2):
        own = np.zeros_like(u)
        own[i] = u[i]                        # the client's plan sees its own row only
        mine = policy.plan(1, own, h_flat, 0.5 + 0j, np.random.default_rng(9), csi=h_flat)
        dec = {"alpha_sc": own_alpha_sc(cfg, mine, i, csi, h_flat), "payload": u[i]}
        assert np.allclose(dec["alpha_sc"], od["alpha"][i])
        mtype, fields, arrays = sends[f"client-{i}"]
        msg = Message(mtype, fields, arrays)
        x = client_burst(SimpleNamespace(cfg=cfg, i=i), msg, dec)
        assert x.shape == bursts[i].shape and np.allclose(x, clip_to_dac(bursts[i]), atol=1e-12)
    jam = jammer_burst(cfg, Message("jam_at", *sends["jammer"][1:]))
    assert jam.shape == bursts[0].shape and np.all(np.isfinite(jam))


def test_the_ofdm_arrays_travel_and_a_node_refuses_bad_ones_in_one_line():
    cfg, lay, csi, policy, plan, u, h_flat = _setup()
    design = attempt_design(cfg, plan, [0], csi)                  # client 1 died before the attempt
    assert np.all(design["ref"][1] == 0) and np.any(design["ref"][0] != 0)
    fields = {"round": 1, "attempt": 1, "release": "r", "t_tx": 0.0, "t_rx": 0.0, "n": 10, "ref_gains": {},
              "offsets": {}, "t_ref": None, "tx_amp": 1.0, "sounding": 0, "slot": 0}
    sends = {"client-0": ("transmit_at", fields, {})}
    add_arrays(sends, design)
    frames = encode(Message("transmit_at", fields, sends["client-0"][2]))
    back = decode(frames)
    assert np.array_equal(back.arrays["ofdm_carriers"], design["carriers"])
    dec = {"alpha_sc": np.asarray(plan.extra["ofdm"]["alpha"][0]), "payload": u[0]}
    node = SimpleNamespace(cfg=cfg, i=0)
    for name, bad, why in [("ofdm_carriers", np.array([0, 0, 1]), ""),
                           ("ofdm_rx_delay", np.array([10 ** 6]), "ofdm_rx_delay"),
                           ("ofdm_ref", np.zeros((3, lay.used), complex), "ofdm_ref")]:
        arrays = dict(back.arrays, **{name: bad})
        with pytest.raises(UserError) as e:
            client_burst(node, Message("transmit_at", back.fields, arrays), dec)
        assert "\n" not in str(e.value) and why in str(e.value)


@pytest.mark.gnuradio          # the server's finish reads the capture with the uhd air's helpers (gr-uhd imported)
def test_the_nodes_sounding_reads_each_clients_phase_against_the_composite():
    """air.coherence = "measure" on the testbed: each client node continues its burst with its part of the
    per-client sounding (the in-process air's samples, the level from the shared reference), the server's
    finish reads it from the receiver's capture: through the calibrated two-tap channels, client 1's link
    turned by 0.3 rad reads +0.15 rad and client 0 -0.15 (equal shares of the composite), within 5 s.e."""
    from otafl_sdr.net.uhd_ofdm_round import capture_len, finish
    from otafl_sdr.phy.ofdm_client_sounding import OfdmSounding
    from otafl_sdr.radio.uhd_device import LEAD_SAMPLES
    from otafl_sdr.radio.uhd_ofdm import sounding_parts
    cfg, lay, csi, policy, plan, u, h_flat = _setup()
    design = attempt_design(cfg, plan, [0, 1], csi)
    design["sounding"] = OfdmSounding(lay, 2)
    sends = {f"client-{i}": ("transmit_at", {"round": 1, "attempt": 1, "tx_amp": 1.0, "sounding": 1, "slot": 0}, {})
             for i in range(2)}
    add_arrays(sends, design)
    bursts, _ = ofdm_bursts(plan, lay)
    parts, _ = sounding_parts(design["sounding"], plan, 0)
    taps = [np.array([0.9, 0.0, 0.3j]), np.array([0.5 - 0.6j, 0.2, 0.0])]       # the calibrated links (_setup)
    n = capture_len(design)
    y = np.zeros(n, np.complex128)
    for i in range(2):
        dec = {"alpha_sc": np.asarray(plan.extra["ofdm"]["alpha"][i]), "payload": u[i]}
        x = client_burst(SimpleNamespace(cfg=cfg, i=i), Message("transmit_at", *sends[f"client-{i}"][1:]), dec)
        assert np.allclose(x, np.concatenate([clip_to_dac(bursts[i]), clip_to_dac(parts[i])]), atol=1e-12)
        rx = np.convolve(x, taps[i])[:len(x)]
        y[LEAD_SAMPLES:LEAD_SAMPLES + len(rx)] += rx * (np.exp(0.3j) if i == 1 else 1.0)
    rng = np.random.default_rng(1)
    y += 1e-4 * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
    rec = finish(cfg, plan, design, y, {}, 0.0, {})
    assert rec.ok, rec.reason
    est = rec.extra["sounding"]
    for e in est:
        print(e)
    assert abs(est[1]["phase_rad"] - 0.15) < 5 * est[1]["phase_std"] + 0.01
    assert abs(est[0]["phase_rad"] + 0.15) < 5 * est[0]["phase_std"] + 0.01
    for e in est:
        assert abs(e["gain_db"]) < 0.2 and abs(e["cfo_hz"]) < 5 * e["cfo_std_hz"], e
