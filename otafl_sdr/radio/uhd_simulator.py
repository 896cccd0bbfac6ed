"""``python -m otafl_sdr.radio.uhd_simulator``: UHD's device simulator (a simulated E320, uhd_sim_device.py)
or, with ``--radios N``, a lab of N simulated USRPs joined by one cable (uhd_sim_lab.py), in the foreground
until Ctrl-C (firmware_notes/uhd_simulator.md)."""
from __future__ import annotations

import signal
import sys
import time

from otafl_sdr.errors import AirError
from otafl_sdr.radio.uhd_sim_device import DEVICE_ARGS, NOISE_RMS, UhdSimulator
from otafl_sdr.radio.uhd_sim_lab import LAB_IDLE_S, MAX_RADIOS, SimulatedLab


def main(argv=None) -> int:
    """``python -m otafl_sdr.radio.uhd_simulator``: run the simulator (or, with ``--radios N``, a lab of N
    simulated USRPs on 127.0.0.1 .. 127.0.0.N joined by one cable) in the foreground until Ctrl-C."""
    import argparse
    p = argparse.ArgumentParser(description="Run UHD's device simulator (simulated E320) on 127.0.0.1")
    p.add_argument("--no-loopback", action="store_true", help="null sample streams instead of the TX->RX cable")
    p.add_argument("--noise-rms", type=float, default=NOISE_RMS,
                   help="receiver noise of the cable per real coordinate, as a fraction of full scale")
    p.add_argument("--radios", type=int, default=1,
                   help="simulated USRPs, one per 127.0.0.N, all heard by the first (the receiver's); default 1")
    p.add_argument("--oscillators", choices=["none", "b210", "shared_ref"], default="none",
                   help="lab only: every radio's oscillator (uhd_sim_oscillator.py): b210 independent TCXOs "
                        "(+-2 ppm, drift), shared_ref a shared 10 MHz / PPS; LO phase random at each tune")
    p.add_argument("--seed", type=int, default=0, help="the oscillators' seed: the run's run.seed (default 0)")
    p.add_argument("--advance-s", type=float, default=0.0,
                   help="the lab's device time advances this much per capture (0: wall time)")
    p.add_argument("--idle-s", type=float, default=LAB_IDLE_S,
                   help=f"lab only: how long the hub waits on a silent radio before handing a capture over (default "
                        f"{LAB_IDLE_S:g} s, for node labs); in-process runs and `calibrate` against the lab: 2")
    a = p.parse_args(argv)
    if not 0.0 <= a.noise_rms < 1.0:
        print("error: --noise-rms must be in [0, 1)", file=sys.stderr)
        return 2
    if not 1 <= a.radios <= MAX_RADIOS:
        print(f"error: --radios must be in [1, {MAX_RADIOS}]", file=sys.stderr)
        return 2
    if a.radios > 1 and a.no_loopback:
        print("error: --radios joins the simulators by the cable; drop --no-loopback", file=sys.stderr)
        return 2
    if a.oscillators != "none" and a.radios < 2:
        print("error: --oscillators needs a lab (--radios 2 or more)", file=sys.stderr)
        return 2
    if not 0.1 <= a.idle_s <= 60:
        print("error: --idle-s must be in [0.1, 60] seconds", file=sys.stderr)
        return 2
    if not (a.advance_s >= 0 and a.advance_s < 1e6):
        print("error: --advance-s must be in [0, 1e6) seconds", file=sys.stderr)
        return 2
    osc = None if a.oscillators == "none" else a.oscillators
    lab = (SimulatedLab(a.radios, noise_rms=a.noise_rms, oscillators=osc, seed=a.seed, advance_s=a.advance_s,
                        idle_s=a.idle_s)
           if a.radios > 1 else None)
    sim = lab or UhdSimulator(loopback=not a.no_loopback, noise_rms=a.noise_rms)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    signal.signal(signal.SIGINT, signal.default_int_handler)   # also when started with '&' (SIGINT inherited ignored)
    try:
        sim.start()
        if lab is None:
            print(f"UHD simulator up: device args '{DEVICE_ARGS}' (log {sim.log_path}); Ctrl-C stops it", flush=True)
        else:
            print(f"UHD simulator lab up: {lab.n} simulated USRPs joined by one cable; Ctrl-C stops them", flush=True)
            if lab.oscillators:
                print(f"  oscillators: {a.oscillators} (seed {a.seed}, device time +{a.advance_s:g} s per capture); "
                      f"truth in {lab.truth_path}", flush=True)
            for i, s in enumerate(lab.simulators):
                role = "the receiver's (hears every radio)" if i == 0 else "transmits to the receiver's"
                print(f"  radio {i}: device args '{s.device_args}' (serial {s.serial}), {role}; log {s.log_path}",
                      flush=True)
        while sim.alive():
            time.sleep(0.5)
        print(f"UHD simulator exited: {sim.log_tail()}", file=sys.stderr)
        return 1
    except AirError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        sim.close()


if __name__ == "__main__":
    sys.exit(main())
