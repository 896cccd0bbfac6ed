"""Does a calibration's carrier offset state its error honestly on a shared 10 MHz reference (issue 34)? With
every radio locked to one reference the true relative offset is exactly 0 (radio/uhd_sim_oscillator.py,
``shared_ref``), so each client's calibrated offset over its stated standard error is a z-score that should
have mean 0 and rms 1; the 3-sigma gate (calibration/offset_gate.py) then refers a false offset to the
pre-compensation in 0.27 % of links.

Two ways, printed side by side:
- **hub model**: the channel step (calibration/procedures.measure_channels, 3 repeats, the uhd pilots) over a
  link that applies the lab's oscillators exactly as the simulator lab's hub does (each transmitter's seeded
  Wiener phase noise from the capture's start, the receiver's on the sum; LabOscillators, seed = trial), plus
  white noise at the pilots' 25 dB: cheap, hundreds of calibrations;
- **UHD lab** (``--seeds N``): `otafl-sdr calibrate channel` with the uhd_lab_shared_ref preset through real UHD
  against five simulated E320s (radio/uhd_sim_lab.py), one lab per seed (about 30 s each).

    .venv/bin/python benchmarks/bench_calibration_offsets.py [--trials 100] [--seeds 30] [--quick]

Runs the simulators itself when ``--seeds`` > 0 (no other lab may run: fixed ports); ``--quick`` (make test's
smoke) runs 2 hub-model trials and starts no lab."""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from otafl_sdr.calibration import procedures  # noqa: E402
from otafl_sdr.calibration.pilots import DEFAULT_PILOT_LEN, PilotBurst  # noqa: E402
from otafl_sdr.calibration.session import UHD_PILOT_AMPLITUDE  # noqa: E402
from otafl_sdr.configure.load import load_config  # noqa: E402
from otafl_sdr.phy.modem import Modem  # noqa: E402
from otafl_sdr.radio.uhd_sim_oscillator import LabOscillators  # noqa: E402

PRESET = ROOT / "sim_loopback" / "presets" / "uhd_lab_shared_ref.toml"
PILOT_SNR_DB = 25.0         # what the UHD lab's calibrations report for these pilots (24.9 dB)
REPEATS = 3                 # the uhd calibration's default (calibration/session.py)


class HubModelLink:
    """A calibration link (calibration/procedures.py's interface) that does to the streams what the lab's hub
    does (radio/uhd_sim_loopback.py): transmitter t is radio t + 1, its samples times its oscillator's rotation
    from the capture's first sample; the sum times the receiver's phase noise; white noise at PILOT_SNR_DB."""

    clients, has_jammer, transmitters = 3, True, 4
    delay_search = (-4, 64)

    def __init__(self, seed: int, burst: PilotBurst, amplitude: float):
        self.lab = LabOscillators({"model": "shared_ref", "seed": seed, "advance_s": 18.0}, n=5)
        self.rng = np.random.default_rng([seed, 4242])
        power = float(np.mean(np.abs(burst.samples) ** 2)) * amplitude ** 2
        self.sigma = math.sqrt(power / 10 ** (PILOT_SNR_DB / 10) / 2)

    def exchange(self, streams: np.ndarray) -> np.ndarray:
        self.lab.open_round(0.0)
        n = streams.shape[1]
        y = np.zeros(n, np.complex128)
        for t in range(self.transmitters):
            y += streams[t] * self.lab.rotation(t + 1, 0, n, 0.0)[0]
        y *= self.lab.receiver_rotation(n, 0.0)[0]
        return y + self.sigma * (self.rng.standard_normal(n) + 1j * self.rng.standard_normal(n))

    def truth(self, t: int, ref_sample: float):
        return None


def hub_model(trials: int) -> dict:
    cfg = load_config(PRESET, [])
    burst = PilotBurst(Modem(cfg.phy), DEFAULT_PILOT_LEN)
    z, bursts = [[] for _ in range(4)], []
    for seed in range(trials):
        for t, r in enumerate(procedures.measure_channels(HubModelLink(seed, burst, UHD_PILOT_AMPLITUDE), burst,
                                                          UHD_PILOT_AMPLITUDE, REPEATS)):
            z[t].append(r.cfo / r.cfo_std)
            bursts += [e.cfo / e.cfo_std for e in r.estimates]
    return {"z": z, "bursts": bursts}


def uhd_lab(seeds: int) -> dict:
    from otafl_sdr.radio.uhd_sim_lab import SimulatedLab
    z, failed = [[] for _ in range(3)], []
    with tempfile.TemporaryDirectory(prefix="bench-cal-offsets-") as tmp:
        for seed in range(1, seeds + 1):
            out = Path(tmp) / f"cal{seed}.json"
            with SimulatedLab(5, oscillators="shared_ref", seed=seed, advance_s=18.0, idle_s=2.0,
                              log_dir=Path(tmp) / f"lab{seed}"):
                p = subprocess.run([sys.executable, "-m", "otafl_sdr.cli.main", "calibrate", "channel", "--config",
                                    str(PRESET), "--set", f"run.seed={seed}", "--out", str(out)],
                                   capture_output=True, text=True, cwd=ROOT)
            if p.returncode:
                failed.append((seed, (p.stderr.strip().splitlines() or ["?"])[-1]))
                continue
            for t, c in enumerate(json.loads(out.read_text())["clients"]):
                z[t].append(c["cfo"] / c["cfo_std"])
            print(f"  seed {seed}: client z {[round(v[-1], 2) for v in z]}", flush=True)
    return {"z": z, "failed": failed}


def summary(name: str, z: list[list[float]]) -> str:
    every = [v for per in z for v in per]
    if not every:
        return f"{name}: nothing measured"
    rms = math.sqrt(float(np.mean(np.square(every))))
    per = ", ".join(f"{'jammer' if t == 3 else f'client {t}'} {math.sqrt(float(np.mean(np.square(v)))):.2f}"
                    for t, v in enumerate(z) if v)
    return (f"{name}: {len(every)} offsets, z mean {np.mean(every):+.3f} (s.e. {1 / math.sqrt(len(every)):.3f}), "
            f"rms {rms:.3f} (s.e. {1 / math.sqrt(2 * len(every)):.3f}); per link rms {per}; |z| > 3 (gate fires): "
            f"{sum(abs(v) > 3 for v in every)} (0.27 % expected: {0.0027 * len(every):.2f}); largest |z| "
            f"{max(map(abs, every)):.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100, help="hub-model calibrations")
    ap.add_argument("--seeds", type=int, default=30, help="UHD-lab calibrations (one lab per seed; 0: none)")
    ap.add_argument("--quick", action="store_true", help="smoke size (figures mean nothing)")
    a = ap.parse_args()
    trials, seeds = (2, 0) if a.quick else (a.trials, a.seeds)
    print("calibration offset z-scores on a shared reference (true offset 0): mean 0 and rms 1 when honest")
    t = time.perf_counter()
    hub = hub_model(trials)
    print(summary(f"hub model, {trials} calibrations x 4 links", hub["z"]))
    b = hub["bursts"]
    print(f"  one burst's offset: {len(b)} z-scores, rms {math.sqrt(float(np.mean(np.square(b)))):.3f}; "
          f"{time.perf_counter() - t:.0f} s")
    if seeds:
        t = time.perf_counter()
        lab = uhd_lab(seeds)
        print(summary(f"UHD lab, {seeds} seeds x 3 clients", lab["z"]) + f"; {time.perf_counter() - t:.0f} s")
        for seed, why in lab["failed"]:
            print(f"  seed {seed} failed: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
