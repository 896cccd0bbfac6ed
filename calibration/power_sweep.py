#!/usr/bin/env python3
"""Transmit power calibration: each transmitter steps its digital amplitude and TX gain, one at a time;
received power is fitted as P_rx[dB] = c0 + k_amp 20 log10(a) + k_gain (G - uhd.tx_gain), compressed
points left out. Same as `otafl-sdr calibrate power`:

    python calibration/power_sweep.py --config lab.toml --out cal/lab.toml [--air uhd] [--plots cal/plots]
        [--sweep-amplitudes 0.05,0.1,0.2,0.4] [--sweep-gains 34,37,40]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otafl_sdr.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["calibrate", "power", *sys.argv[1:]]))
