#!/usr/bin/env python3
"""Per-client channel estimation: every client (then the jammer) sends the pilot burst alone in its own
time slot; the least-squares gain h_i with its standard error, carrier offset and delay go into the
calibration file. Same as `otafl-sdr calibrate channel`:

    python calibration/calibrate_channels.py --config lab.toml --out cal/lab.toml [--air uhd] [--plots cal/plots]
        [--pilot-len 4096] [--pilot-amplitude 0.25] [--repeats 3]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otafl_sdr.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["calibrate", "channel", *sys.argv[1:]]))
