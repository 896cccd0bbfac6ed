"""`otafl-sdr` entry point: run, config, list, account, report, plus commands provided by other rooms
(replay, node, keys, calibrate, sweep, compare, verify) when present.

Exit statuses: 0 done; 1 a failure (a file that cannot be read or written: full disk, read-only folder;
one line on stderr, nothing already written is lost; OTAFL_DEBUG=1 shows a traceback); 2 bad input (one
line on stderr); 3 a run stopped at its privacy budget; 4 a radio failed mid-run (checkpoint and ledger kept;
--resume once it is back); 130 interrupted (Ctrl-C; resume with --resume); 143 terminated (SIGTERM, as kill,
SLURM and systemd send it, to run, sweep, compare or audit: handled as Ctrl-C is, the summary written, resume
with --resume)."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import sys

from otafl_sdr.cli import run as run_cli
from otafl_sdr.errors import AirError, Terminated, UserError, signals_raise
from otafl_sdr.results.figure_presets import add_figure_argument

# commands provided by other rooms: module must define add_arguments(parser) and main(args) -> int
EXTERNAL_COMMANDS = {
    "replay": ("otafl_sdr.experiment.replay", "demodulate a SigMF recording of a round offline"),
    "node": ("otafl_sdr.cli.node", "start one testbed node process (server, client, jammer, receiver, channel)"),
    "keys": ("otafl_sdr.net.keys_cli", "make CURVE key pairs for the control plane"),
    "calibrate": ("otafl_sdr.cli.calibrate", "channel estimation, noise floor, power and timing calibration"),
    "sweep": ("otafl_sdr.sweeps.sweep", "a resumable grid of runs (keys x seeds) on local processes or Ray"),
    "compare": ("otafl_sdr.sweeps.compare_command", "privacy mechanisms x seeds at equal (eps, delta): table, plots, the papers' claims"),
    "verify": ("otafl_sdr.experiment.verify", "check a results folder offline: ledger hash chain, checkpoint, rows, eps"),
    "audit": ("otafl_sdr.audit.cli", "an empirical lower bound on epsilon, measured through the air with canaries"),
}


BUILTIN_COMMANDS = ("run", "config", "list", "account", "report")
EXPERIMENT_COMMANDS = ("run", "sweep", "compare", "audit")   # SIGTERM stops them as Ctrl-C does (exit 143)
EXIT_BUDGET, EXIT_RADIO, EXIT_INTERRUPTED = run_cli.EXIT_BUDGET, run_cli.EXIT_RADIO, run_cli.EXIT_INTERRUPTED
AIRS = run_cli.AIRS


class _Parser(argparse.ArgumentParser):
    def __init__(self, *a, **k):
        k.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*a, **k)

    def error(self, message):  # one line, exit 2 (argparse prints usage too; keep it to one line)
        self.exit(2, f"otafl-sdr: error: {message}{self._suggestion(message)}\n")

    def parse_known_args(self, args=None, namespace=None):
        """A sub-command's unknown option is refused by the sub-command's parser, which knows its options
        (and so can say which one was meant), not passed up as 'unrecognized arguments'."""
        ns, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "otafl-sdr":
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras

    def _suggestion(self, message: str) -> str:
        """' (did you mean ...?)' for a misspelt option or choice (difflib, errors.did_you_mean)."""
        import re

        from otafl_sdr.errors import did_you_mean
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        if unknown and unknown.group(1).startswith("-"):
            options = [o for a in self._actions for o in a.option_strings]
            return did_you_mean(unknown.group(1).split("=")[0], options)
        return ""


def _version() -> str:
    from otafl_sdr import __version__
    return __version__


def _cmd_config(args) -> int:
    from otafl_sdr.configure.explain import commented_toml, explain
    from otafl_sdr.configure.load import default_experiment, load_config
    if args.explain is not None:
        if args.config or args.set:
            raise UserError("config --explain describes the keys; drop --config/--set")
        from otafl_sdr.sweeps.spec_keys import explain_spec, is_spec_key
        if args.explain and is_spec_key(args.explain):
            sys.stdout.write(explain_spec(args.explain))
        else:
            sys.stdout.write(explain(args.explain or None))
            if not args.explain:
                sys.stdout.write(explain_spec())
        return 0
    cfg = load_config(args.config, args.set or []) if args.config else default_experiment(args.set or [])
    sys.stdout.write(commented_toml(cfg))
    return 0


def _cmd_list(args) -> int:
    from otafl_sdr.registry import ALL
    from otafl_sdr.configure.plugins import load_plugins
    load_plugins()
    for kind, reg in ALL.items():
        print(f"{kind} ({reg.config_key}):")
        for name in reg.names():
            h = reg.help(name)
            print(f"  {name:<22} {h}")
    return 0


def _account_closed_form(args, names: list[str]) -> int:
    """`account --sigma` for full participation by paper / rdp / pld: closed forms (gaussian_rounds.py),
    the same figures as the accountants (tests compare them with dp-accounting), the same output."""
    import math

    from otafl_sdr.gaussian_rounds import CLOSED_FORMS, epsilon
    if args.sigma is None:
        raise UserError("account needs --sigma S (per-coordinate noise std) or --target-eps E")
    if not (math.isfinite(args.sigma) and args.sigma > 0):
        raise UserError("--sigma must be a finite number > 0")
    z = args.sigma / (args.sensitivity if args.sensitivity is not None else 1.0)
    print(f"T={args.rounds} rounds, noise multiplier {z:.4g}, sampling {args.sampling:g}, delta={args.delta:g}")
    exact = epsilon("pld", z, args.rounds, args.delta)
    for n in names:
        v = epsilon(n, z, args.rounds, args.delta)
        note = f" (closed form, below the exact value {exact:.6g}: not a valid bound)" if n in CLOSED_FORMS and v < exact else ""
        print(f"  eps_{n:<8} {v:.6g}{note}")
    return 0


def _cmd_account(args) -> int:
    """Epsilon of T identical rounds of a Gaussian mechanism by each accountant (a privacy calculator), or
    with --target-eps the noise multiplier each accountant needs (as Opacus' get_noise_multiplier)."""
    import math

    from otafl_sdr import gaussian_rounds
    if args.rounds < 1:
        raise UserError("--rounds must be >= 1")
    if not (0 < args.delta < 1):
        raise UserError("--delta must be in (0, 1)")
    if not (0 < args.sampling <= 1):
        raise UserError("--sampling must be in (0, 1]")
    if args.sensitivity is not None and not (math.isfinite(args.sensitivity) and args.sensitivity > 0):
        raise UserError("--sensitivity must be a finite number > 0")
    names = [n.strip() for n in args.accountants.split(",") if n.strip()]
    if args.target_eps is None and args.sampling >= 1 and set(names) <= set(gaussian_rounds.NAMES):
        return _account_closed_form(args, names)       # no dp-accounting import: well under a second
    import otafl_sdr.privacy  # noqa: F401  (registers the accountants, without the torch rooms)
    from otafl_sdr.privacy.base import closed_form_names
    CLOSED_FORMS = closed_form_names()
    from otafl_sdr.privacy.calculator import epsilon_of_rounds, noise_for_target
    from otafl_sdr.registry import ACCOUNTANTS
    for n in names:
        ACCOUNTANTS.check(n, "--accountants")
    why = {"paper": "paper 000's closed form does not cover client sampling (--sampling < 1)"}
    sens = args.sensitivity if args.sensitivity is not None else 1.0
    if args.target_eps is not None:
        if args.sigma is not None:
            raise UserError("give --sigma (eps of a noise level) or --target-eps (noise for an eps), not both")
        if not (math.isfinite(args.target_eps) and args.target_eps > 0):
            raise UserError("--target-eps must be a finite number > 0")
        print(f"noise for eps <= {args.target_eps:g} after T={args.rounds} rounds, sampling {args.sampling:g}, "
              f"delta={args.delta:g} (sigma = noise multiplier x sensitivity {sens:g})")
        for n in names:
            z = noise_for_target(n, args.target_eps, args.rounds, args.delta, args.sampling)
            if z is None:
                print(f"  {n:<8} n/a ({why.get(n, 'this accountant does not cover the mechanism')})")
            else:
                print(f"  {n:<8} noise multiplier {z:.6g}  (sigma {z * sens:.6g})")
        return 0
    if args.sigma is None:
        raise UserError("account needs --sigma S (per-coordinate noise std) or --target-eps E")
    if not (math.isfinite(args.sigma) and args.sigma > 0):
        raise UserError("--sigma must be a finite number > 0")
    z = args.sigma / sens
    print(f"T={args.rounds} rounds, noise multiplier {z:.4g}, sampling {args.sampling:g}, delta={args.delta:g}")
    # a paper's closed form is not a bound where it falls below the exact curve of the same mechanism
    exact = (epsilon_of_rounds("pld", z, args.rounds, args.delta, args.sampling)
             if set(names) & set(CLOSED_FORMS) else None)
    for n in names:
        v = epsilon_of_rounds(n, z, args.rounds, args.delta, args.sampling)
        note = "" if v is not None else f" ({why.get(n, 'this accountant does not cover the mechanism')})"
        if n in CLOSED_FORMS and v is not None and exact is not None and v < exact:
            note = f" (closed form, below the exact value {exact:.6g}: not a valid bound)"
        print(f"  eps_{n:<8} {'n/a' if v is None else f'{v:.6g}'}{note}")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. ``command``: the sub-command being run; only its module is imported (the other
    rooms' commands get a help line but not their arguments), so `account` does not pay for GNU Radio,
    scipy or torch. None: every command's full arguments (for `--help` of each)."""
    p = _Parser(prog="otafl-sdr", description="DP over-the-air federated learning testbed. Exit statuses: 0 done, "
                "1 failure, 2 bad input, 3 stopped at the privacy budget, 4 a radio failed mid-run (resume with "
                "--resume), 130 interrupted, 143 terminated (SIGTERM).")
    p.add_argument("--version", action="version", version=f"otafl-sdr {_version()}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    r = sub.add_parser("run", help="run an experiment (--dry-run: print its plan only)")
    run_cli.add_run_arguments(r)
    r.set_defaults(func=run_cli.cmd_run)
    c = sub.add_parser("config", help="print the (default or given) config with every key and its meaning; "
                       "--explain [KEY]: type, unit, range, default, meaning, paper")
    c.add_argument("--config", help="a TOML config; default: the default experiment")
    c.add_argument("--set", action="append", metavar="KEY=VALUE")
    c.add_argument("--explain", nargs="?", const="", default=None, metavar="KEY",
                   help="explain KEY (a dotted key, or a section such as run), or every key")
    c.set_defaults(func=_cmd_config)
    ls = sub.add_parser("list", help="list every registered name a config can use")
    ls.set_defaults(func=_cmd_list)
    a = sub.add_parser("account", help="epsilon of T Gaussian rounds by every accountant, or the noise for a target")
    a.add_argument("--sigma", type=float, default=None, help="per-coordinate noise std")
    a.add_argument("--target-eps", type=float, default=None, help="print the noise multiplier that spends this eps")
    a.add_argument("--sensitivity", type=float, default=None, help="L2 sensitivity (default 1)")
    a.add_argument("--rounds", type=int, default=1)
    a.add_argument("--delta", type=float, default=1e-5)
    a.add_argument("--sampling", type=float, default=1.0, help="participation probability")
    a.add_argument("--accountants", default="paper,rdp,pld")
    a.set_defaults(func=_cmd_account)
    rep = sub.add_parser("report", help="print the final table of a results folder and redraw its plots; of a "
                         "sweep / compare folder: its comparison table and figures, then its cells")
    rep.add_argument("dir")
    rep.add_argument("--out", default=None, help="folder for the plots (default: DIR/report)")
    add_figure_argument(rep)
    rep.set_defaults(func=run_cli.cmd_report)
    for name, (module, help_) in EXTERNAL_COMMANDS.items():
        if command is not None and name != command:
            sub.add_parser(name, help=help_, add_help=False)
            continue
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        sp = sub.add_parser(name, help=help_)
        mod.add_arguments(sp)
        sp.set_defaults(func=mod.main)
    return p


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning as one line (otafl-sdr: warning: ...), not Python's file:line and source line."""
    return f"otafl-sdr: warning: {str(message).splitlines()[0] if str(message) else category.__name__}\n"


def main(argv: list[str] | None = None) -> int:
    """The CLI; returns the exit status. Run as the program (``argv`` None), a testbed node process (`otafl-sdr
    node ...`) ends here with os._exit once it has closed everything it holds: the interpreter's teardown of
    torch and GNU Radio costs about 1.4 s of CPU per process, some 20 s for a 10-client testbed on two cores
    after a stop (the supervisor wants every node gone within seconds of a SIGTERM). A run stopped by a radio
    failure (EXIT_RADIO) ends the same way: UHD's objects of a device that died mid-stream can abort in their
    C++ destructors (boost's mutex assertion, SIGABRT after the clear message: seen when a USRP lost power),
    and the checkpoint and ledger are already closed by then."""
    status = _main(sys.argv[1:] if argv is None else list(argv))
    if argv is None and (_command(sys.argv[1:]) == "node" or status == EXIT_RADIO):
        _end_process(status)
    return status


def _command(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _end_process(status: int) -> None:  # pragma: no cover - ends the process
    """Flush what is written (logs, the table on stdout) and leave without the interpreter's teardown."""
    import logging
    import os
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _main(argv: list[str]) -> int:
    command = _command(argv)
    parser = build_parser(command if command in EXTERNAL_COMMANDS or command in BUILTIN_COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    import warnings
    warnings.formatwarning = _one_line_warning
    try:
        with signals_raise() if args.command in EXPERIMENT_COMMANDS else contextlib.nullcontext():
            return int(args.func(args) or 0)
    except (UserError, AirError) as e:
        print(f"otafl-sdr: error: {e}", file=sys.stderr)
        return 2
    except Terminated as e:          # SIGTERM outside a run's rounds (a run in its rounds returns 143 itself)
        print(f"otafl-sdr: terminated ({e.signame})", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print("otafl-sdr: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:          # the reader went away (`otafl-sdr list | head`): stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:             # full disk, read-only folder, a folder where a file should be: one line
        where = f" '{e.filename}'" if e.filename else ""
        print(f"otafl-sdr: error: cannot use{where}: {e.strerror or e}; files already written are kept "
              f"(a run resumes with --resume once this is fixed)", file=sys.stderr)
        return 1
    except (RecursionError, MemoryError) as e:
        print(f"otafl-sdr: error: an input is nested too deeply or too large to process ({type(e).__name__})",
              file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - the last resort: one line, never a traceback (OTAFL_DEBUG=1 shows it)
        import os
        if os.environ.get("OTAFL_DEBUG"):
            raise
        first = (str(e).splitlines() or [""])[0][:300]
        print(f"otafl-sdr: error: unexpected {type(e).__name__}: {first} (set OTAFL_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
