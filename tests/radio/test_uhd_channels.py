"""Two channels of one USRP as two radios (issue 13, item 2): the ``channel=N`` key of a device address,
the rule for transmitters that share a device, and a round with two clients on the two TX channels of
UHD's simulated E320 (real discovery, real UHD streamers; the simulator's second stream endpoint is our
work-around, otafl_sdr/radio/uhd_sim_daemon.py)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.cli.main import main as cli_main
from otafl_sdr.errors import ConfigError
from otafl_sdr.phy.pulse_shaping import rrc_taps
from otafl_sdr.radio.uhd_air import Radio
from otafl_sdr.radio.uhd_channels import combine_sends, silent_radio_zeros, split_channel

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

ROOT = Path(__file__).resolve().parents[2]
PRESET = ROOT / "sim_loopback" / "presets" / "uhd_sim.toml"


def test_the_channel_key_is_ours_and_checked():
    assert split_channel("serial=31A0B1C,channel=1", "k") == ("serial=31A0B1C", 1)
    assert split_channel("addr=192.168.10.2", "k") == ("addr=192.168.10.2", 0)
    for bad, why in (("serial=A,channel=x", "integer"), ("serial=A,channel=16", r"\[0, 15\]"),
                     ("serial=A,channel=0,channel=1", "2 times")):
        with pytest.raises(ConfigError, match=why):
            split_channel(bad, "uhd.tx_args[0]")


def test_bursts_of_radios_on_one_block_share_one_tx_time_with_their_offsets_kept():
    """Two clients on one device's channels: one timed burst per port from the earlier client's tx_time;
    the later one is shifted by its offset, 3 samples by position and 0.4 band-limited (the RRC pulse
    comes out as the pulse evaluated 0.4 samples later); a third radio alone on its block passes."""
    block, other = object(), object()
    a, b = Radio("client 0", "k0", "addr=x", {}, block=block), Radio("client 1", "k1", "addr=x", {}, block=block)
    c = Radio("client 2", "k2", "addr=y", {}, block=other)
    p = rrc_taps(2, 0.35, 8).astype(np.complex64)
    rate = 1e6
    out = combine_sends([(a, p, 1.0), (b, p, 1.0 + 3.4 / rate), (c, p, 2.0)], [a, b, c], rate)
    by = {r.role: (x, t) for r, x, t in out}
    assert by["client 2"][1] == 2.0 and np.array_equal(by["client 2"][0], p)
    (xa, ta), (xb, tb) = by["client 0"], by["client 1"]
    assert ta == tb == 1.0 and len(xa) == len(xb)
    np.testing.assert_allclose(xa[:len(p)], p, atol=1e-7)
    want = rrc_taps(2, 0.35, 8, delay=0.4)
    np.testing.assert_allclose(xb[3:3 + len(p)].real, want, atol=5e-3)        # up to the taps' truncation


def _run(tmp_path, capsys, *sets) -> SimpleNamespace:
    """The CLI's `run` in this process (its exit status and what it printed: the answer, not the process
    boundary, is under test)."""
    out = tmp_path / "run"
    capsys.readouterr()
    rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out),
                   "--set", "run.rounds=1", "--set", "data.clients=2", *[a for s in sets for a in ("--set", s)]])
    return SimpleNamespace(returncode=rc, stderr=capsys.readouterr().err)


def _one_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("otafl-sdr: error:")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_a_radio_with_nothing_to_send_gets_zeros_on_the_simulator_from_the_earliest_send():
    """The simulated lab's hub waits seconds for a stream that has not sent: the air fills every silent radio
    with zeros as long as the longest burst, from the earliest tx_time; nobody sending: the whole capture."""
    radios = [Radio(f"client {i}", f"k{i}", "addr=x", {}, block=object()) for i in range(2)]
    jammer = Radio("jammer", "kj", "addr=y", {}, block=object())
    sends = [(radios[0], np.ones(100), 1.0), (radios[1], np.ones(40), 0.5)]
    fill = silent_radio_zeros(sends, radios + [jammer], t_rx=0.25, n_cap=300)
    assert [(r, len(b), t) for r, b, t in fill] == [(jammer, 100, 0.5)] and not np.any(fill[0][1])
    assert silent_radio_zeros(sends + [(jammer, np.ones(5), 2.0)], radios + [jammer], 0.25, 300) == []
    none = silent_radio_zeros([], radios, t_rx=0.25, n_cap=300)
    assert [(r, len(b), t) for r, b, t in none] == [(radios[0], 300, 0.25), (radios[1], 300, 0.25)]


def test_two_clients_on_one_channel_of_one_usrp_are_refused(uhd_sim, tmp_path, capsys):
    r = _run(tmp_path, capsys, "uhd.tx_args=['addr=127.0.0.1', 'addr=127.0.0.1,channel=0']")
    line = _one_line(r)
    assert "client 1 and client 0 use the same USRP" in line and "channel 0" in line
    assert not (tmp_path / "run").exists()


def test_two_clients_on_the_two_tx_channels_of_one_e320_one_round_end_to_end(uhd_sim, tmp_path, capsys):
    """Two clients on TX channels 0 and 1 of the simulated E320 (one two-channel usrp_sink; the receiver
    streams both RX channels, as UHD's E3xx runs 2 x 2 only): the session's calibration sees two links,
    and one round goes TX -> simulator cable -> RX -> demodulator with the NMSE its plan predicts."""
    r = _run(tmp_path, capsys, "uhd.tx_args=['addr=127.0.0.1,channel=0', 'addr=127.0.0.1,channel=1']")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "run"
    cal = json.loads((out / "calibration.json").read_text())
    assert [c["id"] for c in cal["clients"]] == ["client 0", "client 1"]
    for c in cal["clients"]:                               # the cable: unity gain, sample-aligned, per channel
        assert abs(complex(*c["h"])) == pytest.approx(1.0, abs=0.06) and c["delay"] == pytest.approx(0.0, abs=0.1)
    assert cal["setup"]["devices"]["clients"] == ["addr=127.0.0.1,channel=0", "addr=127.0.0.1,channel=1"]
    (row,) = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines()]
    assert not row["lost"] and row["transmitting"] == 2
    assert row["aggregate_nmse"] == pytest.approx(row["aggregate_nmse_theory"], rel=0.25)
    radios = json.loads((out / "summary.json").read_text())["devices"]["radios"]
    assert [(d["role"], d["channel"]) for d in radios] == [("client 0", 0), ("client 1", 1), ("receiver", 0)]
