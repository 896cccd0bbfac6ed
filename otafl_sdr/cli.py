"""`otafl-sdr` entry point: run, config, list, account, report, plus commands provided by other rooms
(replay, node, keys, calibrate) when present. Bad input: one line on stderr, exit status 2."""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from .errors import AirError, UserError

# commands provided by other rooms: module must define add_arguments(parser) and main(args) -> int
EXTERNAL_COMMANDS = {
    "replay": ("otafl_sdr.replay", "demodulate a SigMF recording of a round offline"),
    "node": ("otafl_sdr.net.node_cli", "start one testbed node process (server, client, jammer, receiver, channel)"),
    "keys": ("otafl_sdr.net.keys_cli", "make CURVE key pairs for the control plane"),
    "calibrate": ("otafl_sdr.calibration_cli", "channel estimation, noise floor, power and timing calibration"),
    "sweep": ("otafl_sdr.sweep", "a resumable grid of runs (keys x seeds) on local processes or Ray"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage too; keep it to one line)
        self.exit(2, f"otafl-sdr: error: {message}\n")


def _cmd_run(args) -> int:
    from .config import load_config
    from .orchestrator import make_experiment, resume_experiment
    from .results import format_table

    if args.resume:
        if args.config or args.set:
            raise UserError("--resume takes the config saved in the results folder; drop --config/--set")
        saved = Path(args.resume) / "config.toml"
        if saved.is_file() and load_config(saved).air.name == "zmq":
            from .net.testbed import run_testbed   # a testbed run resumes as a testbed
            return run_testbed(load_config(saved), args.resume, progress=not args.quiet, resume=True)
        exp = resume_experiment(args.resume, progress=not args.quiet)
    else:
        if not args.config:
            raise UserError("run needs --config FILE (or --resume DIR); `otafl-sdr config` prints the defaults")
        sets = list(args.set or [])
        if args.air:
            sets.append(f"air.name={args.air}")
        cfg = load_config(args.config, sets)
        out = args.out or f"results/{cfg.run.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        if cfg.air.name == "zmq":
            from .net.testbed import run_testbed   # separate processes, one per radio
            return run_testbed(cfg, out, progress=not args.quiet)
        exp = make_experiment(cfg, out, progress=not args.quiet)
    outcome = exp.run()
    print(format_table(outcome.summary))
    print(f"results: {outcome.out}")
    if outcome.stopped_reason:
        print(f"otafl-sdr: run stopped: {outcome.stopped_reason}", file=sys.stderr)
        return 3
    return 0


def _cmd_config(args) -> int:
    from .config import load_config, to_toml
    cfg = load_config(args.config, args.set or [])
    sys.stdout.write(to_toml(cfg))
    return 0


def _cmd_list(args) -> int:
    from .registry import ALL, load_plugins
    load_plugins()
    for kind, reg in ALL.items():
        print(f"{kind} ({reg.config_key}):")
        for name in reg.names():
            h = reg.help(name)
            print(f"  {name:<22} {h}")
    return 0


def _cmd_account(args) -> int:
    """Epsilon of T rounds of a Gaussian mechanism, by every accountant (a privacy calculator)."""
    from .config import PrivacyConfig
    from .privacy.ledger import PrivacyLedger
    from .transmission import Mechanism
    if args.sigma <= 0 or args.sensitivity <= 0:
        raise UserError("--sigma and --sensitivity must be > 0")
    if args.rounds < 1:
        raise UserError("--rounds must be >= 1")
    if not 0 < args.delta < 1:
        raise UserError("--delta must be in (0, 1)")
    if not 0 < args.sampling <= 1:
        raise UserError("--sampling must be in (0, 1]")
    pc = PrivacyConfig(eps=float("inf"), delta=args.delta, accountant="rdp",
                       report=args.accountants.split(","), enforce=False)
    from .registry import ACCOUNTANTS, load_plugins
    load_plugins()
    for name in pc.report:
        ACCOUNTANTS.check(name, "--accountants")
    ledger = PrivacyLedger(pc, None)
    for t in range(1, args.rounds + 1):
        eps = ledger.record(Mechanism(round=t, sensitivity=args.sensitivity, sigma_eff=args.sigma,
                                      sampling_prob=args.sampling))
    print(f"T={args.rounds} rounds, noise multiplier {args.sigma / args.sensitivity:.4g}, "
          f"sampling {args.sampling:g}, delta={args.delta:g}")
    for k, v in eps.items():
        print(f"  eps_{k:<8} {'n/a' if v is None else f'{v:.6g}'}")
    return 0


def _cmd_report(args) -> int:
    from .results import format_table, plot_rounds, read_rounds
    out = Path(args.dir)
    if not (out / "summary.json").is_file():
        raise UserError(f"'{out}' holds no summary.json (not a finished results folder)")
    try:
        summary = json.loads((out / "summary.json").read_text())
    except json.JSONDecodeError:
        raise UserError(f"'{out / 'summary.json'}' is corrupt") from None
    print(format_table(summary))
    if (out / "rounds.jsonl").exists():
        plot_rounds(out, read_rounds(out / "rounds.jsonl"))
        print(f"plots: {out}/accuracy.png loss.png epsilon.png")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="otafl-sdr", description="DP over-the-air federated learning testbed")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    r = sub.add_parser("run", help="run an experiment")
    r.add_argument("--config", help="TOML config (see `otafl-sdr config`)")
    r.add_argument("--out", help="results folder (default results/NAME-TIMESTAMP); never overwritten")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a dotted config key")
    r.add_argument("--air", choices=None, help="shorthand for --set air.name=AIR")
    r.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=_cmd_run)
    c = sub.add_parser("config", help="print the (default or given) config with every key")
    c.add_argument("--config")
    c.add_argument("--set", action="append", metavar="KEY=VALUE")
    c.set_defaults(func=_cmd_config)
    ls = sub.add_parser("list", help="list every registered name a config can use")
    ls.set_defaults(func=_cmd_list)
    a = sub.add_parser("account", help="epsilon of T Gaussian rounds by every accountant")
    a.add_argument("--sigma", type=float, required=True, help="per-coordinate noise std")
    a.add_argument("--sensitivity", type=float, default=1.0)
    a.add_argument("--rounds", type=int, default=1)
    a.add_argument("--delta", type=float, default=1e-5)
    a.add_argument("--sampling", type=float, default=1.0, help="participation probability")
    a.add_argument("--accountants", default="paper,rdp,pld")
    a.set_defaults(func=_cmd_account)
    rep = sub.add_parser("report", help="print the final table of a results folder and redraw its plots")
    rep.add_argument("dir")
    rep.set_defaults(func=_cmd_report)
    for name, (module, help_) in EXTERNAL_COMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        sp = sub.add_parser(name, help=help_)
        mod.add_arguments(sp)
        sp.set_defaults(func=mod.main)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UserError, AirError) as e:
        print(f"otafl-sdr: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("otafl-sdr: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
