"""The `uhd` air without a USRP: the start failure (here, for real: this machine has no radio), and
everything around the device objects: device-address parsing, client bursts with the pre-equalised
reference, the jammer burst, fault handling and demodulation of a capture that went through real
GNU Radio blocks with the rx_time tags a usrp_source produces."""
import subprocess
import sys

import numpy as np
import pmt
import pytest
from gnuradio import blocks, gr

from otafl_sdr.airs import AIRS
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import AirError
from otafl_sdr.phy import Modem
from otafl_sdr.radio.uhd_air import UhdAir
from otafl_sdr.radio.uhd_device import find_usrps, parse_device_args, parse_find_devices_output
from otafl_sdr.radio.uhd_round_signal import client_bursts, dac_faults, finish_round, jammer_burst, known_channel
from otafl_sdr.radio.uhd_burst import time_pmt
from otafl_sdr.radio.uhd_events import merge_counts, rx_tag_faults
from otafl_sdr.transmission import Mechanism, RoundPlan, aggregate_nmse, aggregate_nmse_theory

pytestmark = [pytest.mark.gnuradio, pytest.mark.net,
              pytest.mark.xdist_group("uhd")]     # asserts no USRP answers: never beside a UHD simulator

FIND_OUTPUT = """[INFO] [UHD] linux; GNU C++ version 12.2.0; Boost_107400; UHD_4.3.0.0+ds1-5
--------------------------------------------------
-- UHD Device 0
--------------------------------------------------
Device Address:
    serial: 31A0B1C
    name: client0
    product: B210
    type: b200


--------------------------------------------------
-- UHD Device 1
--------------------------------------------------
Device Address:
    type: usrp2
    addr: 192.168.10.2
    name:
    serial: F4A123
"""


def _plan(rng, K=4, d=2001, sigma_c2=1e-4, silent=(), round_=1):
    payload = rng.standard_normal((K, d)) / np.sqrt(d)
    h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
    p = np.full(K, 1.0 / K)
    alpha_u = 4.0
    alpha = p * alpha_u / h
    mode = ["silent" if i in silent else "update" for i in range(K)]
    alpha = np.where([m == "silent" for m in mode], 0, alpha)
    return RoundPlan(round=round_, payload=payload, alpha=alpha, h=h, target_gain=p, alpha_u=alpha_u,
                     alpha_cj=0.0, h_cj=0j, sigma_c2=sigma_c2, mode=mode,
                     mechanism=Mechanism(round=round_, sensitivity=1.0, sigma_eff=0.1))


def _air(plan, rng, h_true, modem, rx_cfo=2e-5, delay=300):
    """What the antennas of a lab would deliver: sum_i h_i x_i, receiver CFO, a delay, AWGN."""
    bursts, ref_amp = client_bursts(plan, modem)
    y = sum(h_true[i] * b for i, b in enumerate(bursts) if b is not None)
    y = np.concatenate([np.zeros(delay), y, np.zeros(2 * 256 - delay)])
    y = y * np.exp(2j * np.pi * rx_cfo * np.arange(len(y)))
    y = y + np.sqrt(plan.sigma_c2) * (rng.standard_normal(len(y)) + 1j * rng.standard_normal(len(y)))
    return y.astype(np.complex64), ref_amp


# ------------------------------------------------------------------------------------------ start
def test_uhd_is_a_registered_air():
    assert AIRS.get("uhd") is UhdAir


def test_start_without_a_usrp_names_uhd_find_devices():
    assert find_usrps("") == []                       # this machine has no radio: the real check
    cfg = load_config(None, ["air.name=uhd", "data.clients=2", "uhd.tx_args=['serial=A1', 'serial=A2']",
                             "uhd.jammer_args=serial=J", "uhd.rx_args=serial=R"])
    for c in (cfg, load_config(None, ["air.name=uhd"])):
        air = UhdAir(c)
        with pytest.raises(AirError) as e:
            air.start()
        msg = str(e.value)
        assert "uhd_find_devices" in msg and "\n" not in msg
        air.close()                                   # safe after a failed start, and twice
        air.close()


def test_run_with_the_uhd_air_fails_in_one_line_through_the_cli(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[run]\nrounds = 1\nprogress = false\n[data]\nclients = 2\nmax_samples = 200\n'
                   '[model]\nhidden = 4\n[air]\nname = "uhd"\n[privacy]\ntargeting = "paper"\n')
    r = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "run", "--config", str(cfg), "--quiet",
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "uhd_find_devices" in lines[0] and lines[0].startswith("otafl-sdr: error:")


def test_device_args_and_find_output_parsing():
    assert parse_device_args("serial=31A0B1C, clock_source=external,time_source=gpsdo") == (
        "serial=31A0B1C", {"clock_source": "external", "time_source": "gpsdo"})
    assert parse_device_args("addr=192.168.10.2") == ("addr=192.168.10.2", {})
    devs = parse_find_devices_output(FIND_OUTPUT)
    assert devs == [{"serial": "31A0B1C", "name": "client0", "product": "B210", "type": "b200"},
                    {"type": "usrp2", "addr": "192.168.10.2", "name": "", "serial": "F4A123"}]
    assert parse_find_devices_output("[INFO] [UHD] linux\nNo UHD Devices Found\n") == []


# ------------------------------------------------------------------------------------------ signals
def test_client_bursts_superpose_into_the_aggregate():
    rng = np.random.default_rng(3)
    plan = _plan(rng, silent=(2,))
    modem = Modem(load_config(None, []).phy)
    bursts, _ = client_bursts(plan, modem)
    assert bursts[2] is None and all(b is not None for i, b in enumerate(bursts) if i != 2)
    assert all(b.size == modem.burst_samples((plan.dim + 1) // 2) for b in bursts if b is not None)
    y, ref_amp = _air(plan, rng, plan.h, modem)
    rec = finish_round(plan, modem, y, ref_amp, {})
    assert rec.ok and rec.faults == {} and rec.channel_uses == modem.channel_uses((plan.dim + 1) // 2)
    nmse = aggregate_nmse(rec.aggregate, plan.expected_aggregate())
    assert nmse < 2 * aggregate_nmse_theory(plan)
    assert rec.extra["timing"] == 300 and "iq" not in rec.extra


def test_clients_precompensate_with_the_channel_they_know():
    """The air never uses plan.h: with CSI that is off by a common factor, the reference absorbs it."""
    rng = np.random.default_rng(4)
    plan = _plan(rng)
    h_true = plan.h * 1.3 * np.exp(0.4j)                  # the real channel; the plan only knows plan.h
    plan.h = np.ones(plan.clients, complex)               # garbage 'ground truth' must not matter
    assert np.allclose(known_channel(plan), h_true / (1.3 * np.exp(0.4j)))
    modem = Modem(load_config(None, []).phy, correct_gain=True)
    y, ref_amp = _air(plan, rng, h_true, modem)
    rec = finish_round(plan, modem, y, ref_amp, {})
    assert rec.ok and aggregate_nmse(rec.aggregate, plan.expected_aggregate()) < 0.05
    plan.extra["csi"] = h_true                            # a policy may state its CSI explicitly
    np.testing.assert_array_equal(known_channel(plan), h_true)


def test_jammer_burst_has_alpha_cj_squared_per_real_coordinate_in_the_payload_slots():
    from otafl_sdr.phy.pulse_shaping import matched_filter, zf_equalise
    modem = Modem(load_config(None, []).phy)
    n_sym = 20_000
    jam = jammer_burst(modem, n_sym, 0.5, np.random.default_rng(0))
    assert jam.size == modem.burst_samples(n_sym)                     # aligned with the clients' bursts
    np.testing.assert_array_equal(jam, jammer_burst(modem, n_sym, 0.5, np.random.default_rng(0)))  # seeded
    lay = modem.layout(n_sym)
    L = (len(modem._c) - 1) // 2
    y = matched_filter(np.concatenate([np.zeros(L * modem.sps), jam[modem.guard:], np.zeros(L * modem.sps)]),
                       modem.taps, modem.sps, 0, lay.n_frame + 2 * L)
    z = zf_equalise(y, modem._c)                                      # what the receiver sees per symbol
    pay = z[lay.payload_idx]
    assert abs(np.var(pay.real) / 0.25 - 1) < 0.03 and abs(np.var(pay.imag) / 0.25 - 1) < 0.03
    assert np.max(np.abs(z[:lay.preamble_len])) < 1e-6                  # silent on the reference
    assert abs(np.sum(np.abs(jam) ** 2) / (0.25 * 2 * n_sym) - 1) < 0.03  # energy alpha_cj^2 d


def test_dac_full_scale_is_a_fault():
    assert dac_faults([np.full(4, 0.5), None]) == {}
    assert dac_faults([np.full(4, 1.5), np.full(4, 2.0j), None]) == {"dac_clip": 2}
    rng = np.random.default_rng(9)
    plan = _plan(rng, d=201)
    rec = finish_round(plan, Modem(load_config(None, []).phy), np.zeros(0, np.complex64), 1.0, {"dac_clip": 1})
    assert not rec.ok and rec.reason == "uhd: burst beyond DAC full scale x1"


# ------------------------------------------------------------------------------------------ faults
def test_a_round_with_async_events_is_lost_not_used():
    rng = np.random.default_rng(5)
    plan = _plan(rng)
    modem = Modem(load_config(None, []).phy)
    y, ref_amp = _air(plan, rng, plan.h, modem)
    faults = merge_counts({"time_error": 1, "burst_ack": 3}, {"time_error": 1}, {"missing_burst_ack": 0})
    cfg = load_config(None, ["air.name=uhd", "air.record_iq=true"])
    from otafl_sdr.radio.recording import round_meta
    meta = round_meta(cfg, plan, sample_rate=1e6, ref_amplitude=ref_amp, modem=modem, air="uhd")
    rec = finish_round(plan, modem, y, ref_amp, faults, record_meta=meta)
    assert not rec.ok and rec.aggregate is None           # the samples were fine, but never silently used
    assert rec.reason == "uhd: late command x2" and rec.faults == {"time_error": 2}
    assert rec.extra["iq"].dtype == np.complex64 and rec.extra["iq_meta"]["extra"]["faults"] == {"time_error": 2}


def _capture_through_gnuradio(y, t_rx, rate, gap_at=None):
    """A capture as the receiver's vector sink holds it: rx_time on sample 0 (and after an overflow)."""
    def tag(off, t):
        tg = gr.tag_t()
        tg.offset, tg.key, tg.value = off, pmt.intern("rx_time"), time_pmt(t)
        return tg
    tags = [tag(0, t_rx)]
    if gap_at is not None:
        tags.append(tag(gap_at, t_rx + (gap_at + 5000) / rate))
    src = blocks.vector_source_c(y, False, 1, tags)
    sink = blocks.vector_sink_c()
    tb = gr.top_block()
    tb.connect(src, sink)
    tb.run()
    return np.array(sink.data(), dtype=np.complex64), sink.tags()


def test_capture_with_rx_time_tags_demodulates_or_reports_the_overflow():
    rng = np.random.default_rng(6)
    plan = _plan(rng)
    modem = Modem(load_config(None, []).phy)
    y, ref_amp = _air(plan, rng, plan.h, modem)
    rate, t_rx = 1e6, 12.499744
    x, tags = _capture_through_gnuradio(y, t_rx, rate)
    faults = rx_tag_faults(tags, len(y), len(x), t_rx, rate)
    rec = finish_round(plan, modem, x, ref_amp, faults)
    assert faults == {} and rec.ok
    np.testing.assert_array_equal(rec.aggregate, finish_round(plan, modem, y, ref_amp, {}).aggregate)
    assert aggregate_nmse(rec.aggregate, plan.expected_aggregate()) < 3 * aggregate_nmse_theory(plan)
    x, tags = _capture_through_gnuradio(y, t_rx, rate, gap_at=1000)
    rec = finish_round(plan, modem, x, ref_amp, rx_tag_faults(tags, len(y), len(x), t_rx, rate))
    assert not rec.ok and rec.reason == "uhd: overflow x1" and rec.faults == {"rx_overflow": 1}
    x, tags = _capture_through_gnuradio(y, t_rx + 0.002, rate)       # stream started late
    rec = finish_round(plan, modem, x, ref_amp, rx_tag_faults(tags, len(y), len(x), t_rx, rate))
    assert not rec.ok and rec.reason == "uhd: rx late command x1"


def test_noise_only_capture_is_a_lost_round_with_the_modem_reason():
    rng = np.random.default_rng(8)
    plan = _plan(rng)
    modem = Modem(load_config(None, []).phy)
    noise = (0.01 * (rng.standard_normal(modem.burst_samples(1001) + 512))).astype(np.complex64)
    rec = finish_round(plan, modem, noise, 1.0, {})
    assert not rec.ok and rec.aggregate is None and "preamble" in rec.reason


def test_radios_without_a_shared_reference_are_refused_unless_allowed():
    """Two USRPs on internal clocks would not superpose their bursts in time: refused at start, before
    any device call, unless air.allow_unsynced (then a warning is recorded)."""
    from otafl_sdr.errors import ConfigError
    from otafl_sdr.radio.uhd_air import Radio
    cfg = load_config(None, ["air.name=uhd", "data.clients=1", "power.jammer=false", "uhd.tx_args=['serial=A1']",
                             "uhd.rx_args=serial=B1,clock_source=external,time_source=external"])
    air = UhdAir(cfg)
    air._clients = [Radio("client 0", "uhd.tx_args[0]", "serial=A1", {}, serial="A1")]
    air._rx = Radio("receiver", "uhd.rx_args", "serial=B1", {"clock_source": "external", "time_source": "external"},
                     serial="B1")
    with pytest.raises(ConfigError, match="air.allow_unsynced"):
        air._align_time()
