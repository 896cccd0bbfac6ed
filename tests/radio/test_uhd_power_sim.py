"""Per-radio TX gains on UHD's simulator (issue 25, item 6): real libuhd, gr-uhd and the simulated E320, whose
cable follows each TX channel's gain (``UhdSimulator(tx_gain_ref=40)``: amplitude 10^((G - 40) / 20), as a
linear PA would). Two clients on the E320's two channels, ``uhd.tx_gains`` giving client 1 6 dB less: the
received pilot of client 1 is 6 dB under client 0's, and each at what its gain says."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_sim.toml"


def _pilots(link, burst, amplitude: float = 0.25) -> list[complex]:
    from otafl_sdr.calibration.estimation import estimate_link
    from otafl_sdr.calibration.procedures import SLOT_GAP, Slots
    lo, hi = link.delay_search
    T = link.transmitters
    slots = Slots.make(T, burst.n_samples, gap=max(SLOT_GAP, hi + 64), tail=hi + 64)
    x = np.zeros((T, slots.length), dtype=np.complex64)
    for t in range(T):
        x[t, slots.starts[t]:slots.starts[t] + burst.n_samples] = amplitude * burst.samples
    y = np.asarray(link.exchange(x), dtype=np.complex128)
    out = []
    for t in range(T):
        e = estimate_link(y, burst, int(slots.starts[t]) + burst.frame_offset, amplitude, (lo, hi))
        assert e.found
        out.append(e.h)
    return out


def test_per_radio_tx_gains_move_each_clients_received_power(tmp_path):
    from uhd_sim_helpers import fresh_simulator

    from otafl_sdr.calibration.pilots import PilotBurst
    from otafl_sdr.phy import Modem
    from otafl_sdr.radio.calibration_flowgraphs import UhdLink
    from otafl_sdr.configure.load import load_config

    cfg = load_config(PRESET, overrides=["data.clients=2", "uhd.tx_args=['addr=127.0.0.1','addr=127.0.0.1,channel=1']",
                                         "uhd.tx_gains={'client-1' = 34.0}"])
    burst = PilotBurst(Modem(cfg.phy))
    with fresh_simulator(tmp_path, tx_gain_ref=40.0):
        link = UhdLink(cfg)
        link.start()
        try:
            gains = {d["role"]: d["gain"] for d in link.settings if d["role"] != "receiver"}
            h = _pilots(link, burst)
            link.set_tx_gain(37.0)                   # the sweep's step: every radio 3 dB under its own gain
            h_step = _pilots(link, burst)
        finally:
            link.close()
    assert gains == {"client 0": 40.0, "client 1": 34.0}      # each radio opened at its own gain
    db = [20 * np.log10(abs(v)) for v in h]
    assert db[0] == pytest.approx(0.0, abs=0.1)              # client 0 at the simulator's reference gain
    assert db[1] - db[0] == pytest.approx(-6.0, abs=0.1)     # client 1: 6 dB less, as uhd.tx_gains says
    db_step = [20 * np.log10(abs(v)) for v in h_step]
    assert db_step[0] == pytest.approx(-3.0, abs=0.1) and db_step[1] == pytest.approx(-9.0, abs=0.1)
