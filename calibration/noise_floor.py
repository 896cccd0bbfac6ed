#!/usr/bin/env python3
"""Noise floor sigma_c2 from a silent capture (every transmitter off), per real coordinate after the
matched filter, with its standard error. Same as `otafl-sdr calibrate noise`:

    python calibration/noise_floor.py --config lab.toml --out cal/lab.toml [--air uhd] [--noise-samples 65536]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from otafl_sdr.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["calibrate", "noise", *sys.argv[1:]]))
