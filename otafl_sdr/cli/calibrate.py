"""`otafl-sdr calibrate channel|noise|power|all --config F --out FILE [--air loopback|uhd] [--plots DIR]`.

channel: every client (then the jammer) sends the pilot burst alone in its own time slot; per link the
least-squares complex gain h with its standard error, the carrier offset and the arrival delay.
noise: a capture with every transmitter off gives sigma_c2. power: each transmitter steps its digital
amplitude and TX gain; the received power is fitted linear in dB. all: noise, power, channel (the
lab order: check the receiver, find the linear range, then measure the links at the run's gain).
coherence: the high-SNR check of the coherent sum with known payloads (calibration/coherence_check.py; a
JSON report in FILE, exit 1 when it fails, the client named). gains: no radio; from FILE's noise floor, channels and power sweep, the per-radio TX gains that put each
radio's planned peak --dac-backoff dB under the DAC's full scale, with each one's PA margin (kept in FILE
as tx_plan; copy them into uhd.tx_gains and recalibrate: firmware_notes/second_week.md, Power).
The results go into the calibration file FILE (TOML or JSON by extension); measuring one part updates
that part of an existing FILE made for the same setup (it refuses a FILE for another setup). Runs read
the file with ``air.csi = "calibrated"`` and ``calibration.file = FILE``.

On the loopback air the channel block's true values are printed next to the estimates. Bad input and
device problems: one line on stderr, exit status 2 (the CLI's convention)."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from otafl_sdr.calibration.session import DEFAULT_PILOT_SNR_DB, STEPS, UHD_PILOT_AMPLITUDE
from otafl_sdr.errors import UserError

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["channel", "noise", "power", "jammer", "all", "gains", "coherence"],
                   help="what to measure (jammer: its delivered noise; `all` skips it without a jammer; coherence: "
                        "the high-SNR check of the coherent sum, each client named where its phase is off)")
    p.add_argument("--config", required=True, help="the run's TOML config (radios, frequency, rate, gains)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a dotted config key")
    p.add_argument("--out", required=True, help="calibration file to write (.toml or .json)")
    p.add_argument("--air", choices=["loopback", "uhd"], help="default: uhd if air.name = 'uhd', else loopback")
    p.add_argument("--plots", metavar="DIR", help="write the calibration plots (PNG) into DIR")
    p.add_argument("--pilot-len", type=int, default=None, help="known pilot symbols per burst (default 4096)")
    p.add_argument("--pilot-amplitude", type=float, default=None,
                   help=f"digital amplitude of the pilots (default: uhd {UHD_PILOT_AMPLITUDE}; loopback from "
                        f"--pilot-snr-db)")
    p.add_argument("--pilot-snr-db", type=float, default=DEFAULT_PILOT_SNR_DB,
                   help="loopback: mean per-symbol pilot SNR that sets the default amplitude")
    p.add_argument("--repeats", type=int, default=None, help="channel exchanges to average (uhd 3, loopback 1)")
    p.add_argument("--noise-samples", type=int, default=1 << 16, help="samples of the silent capture")
    p.add_argument("--sweep-amplitudes", help="comma-separated digital amplitudes of the power sweep")
    p.add_argument("--sweep-gains", help="comma-separated TX gains (dB) of the power sweep")
    p.add_argument("--dac-backoff", type=float, default=3.0,
                   help="gains: put each radio's planned peak this many dB under the DAC's full scale (default 3)")
    p.add_argument("--rounds", type=int, default=5, help="coherence: check rounds of known payloads (default 5)")
    p.add_argument("--jammer-amplitude", type=float, default=None,
                   help="digital amplitude (per real coordinate) of the jammer's Gaussian test signal (default: "
                        "uhd 0.1; loopback 20 dB above the noise floor)")


def _floats(text: str | None, what: str) -> list[float] | None:
    if text is None:
        return None
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{what} must be comma-separated numbers, got '{text}'") from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise UserError(f"{what} must be comma-separated finite numbers, got '{text}'")
    return vals


def main(args) -> int:
    from otafl_sdr.configure.load import load_config
    cfg = load_config(args.config, args.set or [])
    what = STEPS if args.what == "all" else (args.what,)
    if args.repeats is not None and args.repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {args.repeats}")
    if args.pilot_len is not None and args.pilot_len < 16:
        raise UserError(f"--pilot-len must be >= 16 symbols, got {args.pilot_len}")
    if args.noise_samples < 1024:
        raise UserError(f"--noise-samples must be >= 1024, got {args.noise_samples}")
    out = Path(args.out)
    if out.suffix.lower() not in (".toml", ".json"):
        raise UserError(f"--out '{out}': use a .toml or .json name")
    if args.what == "gains":                                 # no radio: the file's sweep and channels
        return _gains(cfg, out, args.dac_backoff)
    if args.what == "coherence":
        return _coherence(args, cfg, out)
    from otafl_sdr.radio.calibration_flowgraphs import calibrate      # GNU Radio: only when measuring
    calibrate(cfg, what, out, air=args.air, plots=args.plots, pilot_len=args.pilot_len,
              pilot_amplitude=args.pilot_amplitude, pilot_snr_db=args.pilot_snr_db, repeats=args.repeats,
              noise_samples=args.noise_samples,
              sweep_amplitudes=_floats(args.sweep_amplitudes, "--sweep-amplitudes"),
              sweep_gains=_floats(args.sweep_gains, "--sweep-gains"), jammer_amplitude=args.jammer_amplitude)
    return 0


def _coherence(args, cfg, out: Path) -> int:
    """The high-SNR coherence check (calibration/coherence_check.py) on the run's uhd radios: its report into
    ``out`` (.json), the verdict printed; exit 1 when it fails (the client named where its phase explains it)."""
    import json
    from otafl_sdr.calibration.coherence_check import check_sets, judge, report_lines
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.results.files import atomic_write_text, to_plain
    if cfg.air.name != "uhd":
        raise UserError(f"calibrate coherence checks the uhd air's radios; --config gives air.name = '{cfg.air.name}'")
    if out.suffix.lower() != ".json":
        raise UserError(f"--out '{out}': the coherence report is JSON (.json)")
    if out.exists():
        raise UserError(f"--out '{out}' exists; a report is never overwritten")
    if not 1 <= args.rounds <= 1000:
        raise UserError(f"--rounds must be in [1, 1000], got {args.rounds}")
    sets = (args.set or []) + check_sets(cfg)
    check = load_config(args.config, sets)
    from otafl_sdr.experiment.coherence_rounds import coherence_rounds      # the radios: only when checking
    rows = coherence_rounds(check, out.parent / f"{out.stem}-session", args.rounds, take_recalibrations=False,
                            echo=lambda m: None)
    verdict = judge(rows, rows[0]["clients"] if rows else int(check.data.clients), rows[0]["dim"] if rows else 1,
                    tracked=check.air.coherence == "track")
    atomic_write_text(out, json.dumps(to_plain({"config": str(args.config), "sets": sets, "verdict": verdict,
                                                "rounds": rows}), indent=2) + "\n")
    for line in report_lines(verdict):
        print(line)
    print(f"report: {out}")
    return 0 if verdict["passed"] else 1


def _gains(cfg, out: Path, dac_backoff: float) -> int:
    """Propose per-radio TX gains from the calibration in ``out`` (calibration/tx_gains.plan_gains), print
    them and keep the proposal in the file (``tx_plan``)."""
    from otafl_sdr.calibration.data import CalibrationFile, check_matches
    from otafl_sdr.calibration.pilots import PilotBurst
    from otafl_sdr.calibration.session import SWEEP_PILOT_LEN
    from otafl_sdr.calibration.tx_gains import plan_gains
    from otafl_sdr.phy import Modem
    if not (0 <= dac_backoff <= 40 and math.isfinite(dac_backoff)):
        raise UserError(f"--dac-backoff must be in [0, 40] dB, got {dac_backoff}")
    if not out.exists():
        raise UserError(f"calibrate gains: '{out}' does not exist; run `otafl-sdr calibrate all --out {out}` first")
    cal = CalibrationFile.load(out)
    check_matches(cal, cfg, int(cfg.data.clients), out)
    peak = float(abs(PilotBurst(Modem(cfg.phy), SWEEP_PILOT_LEN).samples).max())
    cal.tx_plan, lines = plan_gains(cfg, cal, dac_backoff, peak)
    for ln in lines:
        print(ln)
    cal.save(out)
    print(f"proposal kept in {out} (tx_plan)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    from otafl_sdr.cli.main import main as cli_main
    sys.exit(cli_main(["calibrate", *sys.argv[1:]]))
