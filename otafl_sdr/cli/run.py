"""`otafl-sdr run` (with --dry-run, --resume DIR [--extend N]) and `otafl-sdr report` (a run's folder, or a
sweep / compare folder: sweeps/folder_report.py); the parser lives in cli.py."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from otafl_sdr.errors import UserError

EXIT_BUDGET = 3
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); SIGTERM gives 143 (128 + 15): 128 + the signal that stopped the run
EXIT_RADIO = 4          # a radio failed mid-run (checkpoint and ledger kept; --resume once it is back)
AIRS = ("sim", "loopback", "zmq", "uhd", "zmq_inproc")


def print_ledger_head(summary: dict, out) -> None:
    """The ledger's head for the operator to write down (`otafl-sdr verify DIR --head HEX` checks it)."""
    if summary.get("ledger_head"):
        kind = "HMAC-SHA256, key outside the folder" if summary.get("ledger_keyed") else "unkeyed (legacy)"
        print(f"ledger head: {summary['ledger_head']} ({kind}; write it down: otafl-sdr verify {out} --head HEX)")


def _check_eps(args) -> float | None:
    """--eps E: with --resume DIR --extend N only, a finite number > 0 (above the run's target: the run checks)."""
    import math
    e = getattr(args, "eps", None)
    if e is None:
        return None
    if not (args.resume and getattr(args, "extend", None) is not None):
        raise UserError("--eps E raises a run's privacy budget: give it with --resume DIR --extend N")
    if not math.isfinite(e) or e <= 0:
        raise UserError(f"--eps must be a finite epsilon > 0, got {e}")
    if args.dry_run:
        raise UserError("--eps is not planned by --dry-run; run `otafl-sdr run --resume DIR --extend N --eps E`")
    return float(e)


def _check_extend(args) -> int:
    n = getattr(args, "extend", None)
    if n is None:
        return 0
    if not args.resume:
        raise UserError("--extend N continues a run: give it with --resume DIR")
    if not 1 <= n <= 100_000:
        raise UserError(f"--extend must be a number of client rounds in [1, 100000], got {n}")
    return n


def _already_complete(out, cfg, summary: dict) -> int:
    from otafl_sdr.results.files import format_table
    print(format_table(summary))
    print(f"otafl-sdr: '{out}' is already complete ({summary.get('client_rounds')} client rounds, "
          f"{summary.get('rounds')} iterations); nothing was run or changed. Continue it with "
          f"`otafl-sdr run --resume {out} --extend N` (N more client rounds under the same budget; a targeted run: "
          f"`--extend N --eps E` raises its budget to E).")
    return 0


def cmd_run(args) -> int:
    from otafl_sdr.results import files as results
    from otafl_sdr.airs import air_capabilities
    from otafl_sdr.experiment.orchestrator import completed_summary, make_experiment, read_extension, resume_experiment
    from otafl_sdr.results.files import format_table
    from otafl_sdr.configure.load import default_experiment, load_config

    extend = _check_extend(args)
    eps = _check_eps(args)
    if args.resume:
        if args.config or args.set or args.air:
            raise UserError("--resume takes the config saved in the results folder; drop --config/--set/--air")
        saved = Path(args.resume) / "config.toml"
        if args.dry_run:                               # the plan of the run (and of its extension)
            if not saved.is_file():
                raise UserError(f"cannot plan: '{args.resume}' holds no config.toml (not a results folder)")
            cfg = load_config(saved)
            _check_resumable(Path(args.resume), cfg)   # a damaged or rolled-back folder: refused as --resume
            return _dry_run(cfg, cfg.run.rounds + read_extension(Path(args.resume)) + extend)
        if saved.is_file() and air_capabilities(load_config(saved).air.name).testbed:
            cfg = load_config(saved)
            if extend:
                raise UserError(f"--extend runs in process; a testbed run (air '{cfg.air.name}') is extended by "
                                f"starting a new run")
            results.lock_out_dir(Path(args.resume))         # checked as the in-process resume checks it
            try:
                done = completed_summary(Path(args.resume), cfg, read_extension(Path(args.resume)))
            finally:
                results.unlock_out_dir(Path(args.resume))
            if done is not None:
                return _already_complete(args.resume, cfg, done)
            _check_resumable(Path(args.resume), cfg)   # before the testbed writes its logs into the folder
            from otafl_sdr.net.testbed import run_testbed   # a testbed run resumes as a testbed
            return run_testbed(cfg, args.resume, progress=cfg.run.progress and not args.quiet, resume=True)
        exp = resume_experiment(args.resume, progress=False if args.quiet else None, extend=extend, eps=eps)
    else:
        sets = list(args.set or [])
        if args.air:
            _refuse_contradicting_air(args.air, sets)
            sets.append(f"air.name={args.air}")
        cfg = load_config(args.config, sets) if args.config else default_experiment(sets)
        if args.dry_run:
            return _dry_run(cfg)
        out = args.out or f"results/{cfg.run.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        if air_capabilities(cfg.air.name).testbed:
            from otafl_sdr.net.testbed import run_testbed   # separate processes, one per radio
            return run_testbed(cfg, out, progress=cfg.run.progress and not args.quiet)
        exp = make_experiment(cfg, out, progress=cfg.run.progress and not args.quiet)   # --quiet or the key
    outcome = exp.run()
    if outcome.already_complete:
        return _already_complete(outcome.out, exp.cfg, outcome.summary)
    print(format_table(outcome.summary))
    print(f"results: {outcome.out}")
    print_ledger_head(outcome.summary, outcome.out)
    if outcome.stopped_reason:
        print(f"otafl-sdr: run stopped: {outcome.stopped_reason}", file=sys.stderr)
        if outcome.stopped_by_signal:             # Ctrl-C: 130; SIGTERM: 143
            return 128 + outcome.stopped_by_signal
        return EXIT_RADIO if outcome.stopped_reason.startswith("radio failure") else EXIT_BUDGET
    return 0


def _check_resumable(out: Path, cfg) -> None:
    """Every check `run --resume` runs (workload/ledger_checks.check_resume, reads only), the booked figures
    re-derived where the run can be rebuilt: one "cannot resume: ..." line otherwise."""
    from otafl_sdr.configure.plugins import load_plugins
    from otafl_sdr.experiment.verify import rebuild_run
    from otafl_sdr.workload.ledger_checks import check_resume
    load_plugins()
    parts, _ = rebuild_run(cfg, out)
    check_resume(out, cfg, parts)


def _refuse_contradicting_air(air: str, sets: list) -> None:
    """--air AIR is --set air.name=AIR: a --set air.name of another air would be silently overridden."""
    for s in sets:
        key, _, value = s.partition("=")
        if key.strip() == "air.name" and value.strip().strip("'\"") != air:
            raise UserError(f"--air {air} contradicts --set {s.strip()}; give one of them")


def _dry_run(cfg, client_rounds: int | None = None) -> int:
    from otafl_sdr.experiment.dry_run import dry_run_text
    print(dry_run_text(cfg, client_rounds))
    return 0


def cmd_report(args) -> int:
    from otafl_sdr.results.figure_presets import preset
    from otafl_sdr.results.folders import kind
    out = Path(args.dir)
    figure_preset = preset(getattr(args, "figure", None))      # an unknown preset: one line, nothing drawn
    if kind(out, "report") == "sweep":
        if args.out:
            raise UserError("report --out names one run's plot folder; a sweep / compare folder's figures are "
                            "drawn into the folder itself")
        from otafl_sdr.sweeps.folder_report import report_folder
        return report_folder(out, figure_preset.name)
    return _report_one(out, args.out, figure_preset.name)


def _report_one(out: Path, dest_arg, figure_preset: str | None = None) -> int:
    from otafl_sdr.results.files import format_table, plot_rounds, read_rounds
    from otafl_sdr.results.safe_files import load_json
    if not (out / "summary.json").exists():
        if (out / "config.toml").exists():
            print(f"{out}: no summary.json yet (running, or stopped before its summary)")
            return 0
        raise UserError(f"'{out}' holds no summary.json (not a finished results folder)")
    summary = load_json(out / "summary.json", "summary")
    print(format_table(summary))
    if (out / "rounds.jsonl").exists():
        rows = read_rounds(out / "rounds.jsonl")
        dest = Path(dest_arg) if dest_arg else out / "report"
        try:
            dest.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the plots' folder '{dest}' ({e.strerror or type(e).__name__}); "
                            f"choose a writable one with --out") from None
        written = plot_rounds(dest, rows, summary, figure_preset)
        print(f"plots: {', '.join(str(p) for p in written)}")
    return 0


def add_run_arguments(r) -> None:
    r.add_argument("--config", help="TOML config (see `otafl-sdr config`); default: the default experiment")
    r.add_argument("--out", help="results folder (default results/NAME-TIMESTAMP); never overwritten")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a dotted config key")
    r.add_argument("--air", choices=AIRS, help="shorthand for --set air.name=AIR")
    r.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint (a finished "
                   "run: says so and changes nothing, unless --extend)")
    r.add_argument("--extend", metavar="N", type=int, default=None,
                   help="with --resume: N more client rounds for a (finished) run, the privacy knob and budget "
                        "unchanged (the run stops at privacy.eps as any run does); a targeted run needs --eps")
    r.add_argument("--eps", metavar="E", type=float, default=None,
                   help="with --resume DIR --extend N: raise the run's privacy budget to E (above its target), "
                        "booked in its ledger as further composition; a targeted run's knob is solved again so "
                        "the whole run spends at most E")
    r.add_argument("--dry-run", action="store_true",
                   help="print the plan (privacy knob, planned eps per accountant, jammer power, DAC headroom on "
                        "uhd, estimated wall time) and exit without training")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
