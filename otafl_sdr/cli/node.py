"""`otafl-sdr node ROLE ...`: start one testbed node process.

    otafl-sdr node server   --config F [--set K=V] --out DIR | --resume DIR   [--bind ADDR] [--port P] [--keys DIR]
    otafl-sdr node client   --server tcp://HOST:PORT --id N [--air zmq|uhd] [--keys DIR] [--iq-dir DIR]
                            [--iq-endpoint ipc://PATH | tcp://ADDR:PORT (a CURVE relay, with --keys)]
    otafl-sdr node jammer   --server tcp://HOST:PORT        (same options)
    otafl-sdr node receiver --server tcp://HOST:PORT
    (--air uhd: the node drives its own USRP, the config's uhd.tx_args[N] / jammer_args / rx_args, or
     --device-args ADDR as this host sees it)
    otafl-sdr node channel  --server tcp://HOST:PORT        (air zmq only: the channel emulator)

Nodes take the run's config from the server when they register, so only the server reads a config
file. ``--keys DIR`` holds this host's CURVE secret (private/NAME.key_secret) and the server's public key;
the server's DIR holds every node's public key (see ``otafl-sdr keys``)."""
from __future__ import annotations

import logging
import os
import sys

from otafl_sdr.errors import UserError, signals_raise

ROLES = ("server", "client", "jammer", "receiver", "channel")


def add_arguments(p) -> None:
    p.add_argument("role", choices=ROLES, help="which node to run")
    p.add_argument("--server", help="the server's control endpoint tcp://HOST:PORT (nodes)")
    p.add_argument("--air", choices=("zmq", "uhd"), default="zmq",
                   help="zmq: IQ over GNU Radio ZeroMQ blocks to the channel emulator; uhd: a USRP")
    p.add_argument("--id", type=int, help="client index 0..K-1 (client nodes)")
    p.add_argument("--keys", help="CURVE key folder (required when the server binds a non-loopback address)")
    p.add_argument("--iq-endpoint", help="where this node's IQ can be read (air zmq): ipc://PATH inside "
                                         "--iq-dir, or tcp://ADDR:PORT for a node on another host (a CURVE relay; "
                                         "needs --keys); default: an unguessable ipc socket in --iq-dir")
    p.add_argument("--iq-dir", help="air zmq: the private (0700) folder of this node's IQ sockets "
                                    "(default: a fresh one, removed at exit)")
    p.add_argument("--device-args", help="air uhd: this node's USRP address (default: the run config's "
                                         "uhd.tx_args[N], uhd.jammer_args or uhd.rx_args)")
    p.add_argument("--register-timeout", type=float, default=180.0,
                   help="seconds to wait for the server's welcome before giving up")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    g = p.add_argument_group("server role")
    g.add_argument("--config", help="TOML config (server)")
    g.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key (server)")
    g.add_argument("--out", help="results folder (server)")
    g.add_argument("--resume", metavar="DIR", help="continue the run in DIR (server)")
    g.add_argument("--bind", help="control-plane bind address (default net.bind)")
    g.add_argument("--port", type=int, help="control-plane port (default net.port; 0 = free port)")
    g.add_argument("--endpoint-file", help="write the bound endpoint here once listening (server)")
    g.add_argument("--quiet", action="store_true", help="no progress bar (server)")


def _logging(level: str, name: str) -> None:
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr,
                        format=f"%(asctime)s {name} %(levelname)s %(message)s")


def main(args) -> int:
    if args.role == "server":
        _logging(args.log_level, "server")
        return serve(args)
    if not args.server:
        raise UserError(f"node {args.role} needs --server tcp://HOST:PORT")
    from otafl_sdr.net.security import host_of, is_loopback
    host = host_of(args.server)
    if args.role == "client":
        if args.id is None or args.id < 0:
            raise UserError("node client needs --id N (0-based client index)")
        name = f"client-{args.id}"
    else:
        if args.id is not None:
            raise UserError(f"--id is for client nodes, not {args.role}")
        name = args.role
    if not is_loopback(host) and not args.keys:
        raise UserError(f"the server {args.server} is not on loopback: CURVE keys are required (--keys DIR)")
    _logging(args.log_level, name)
    if args.role == "client":
        from otafl_sdr.net.client import ClientNode as cls
    elif args.role == "jammer":
        from otafl_sdr.net.jammer import JammerNode as cls
    elif args.role == "receiver":
        from otafl_sdr.net.receiver import ReceiverNode as cls
    else:
        if args.air != "zmq":
            raise UserError("the channel emulator node exists only for --air zmq")
        from otafl_sdr.net.channel import ChannelNode as cls
    if args.device_args and (args.air != "uhd" or args.role not in ("client", "jammer", "receiver")):
        raise UserError("--device-args is for client, jammer and receiver nodes with --air uhd")
    kwargs = {"client_id": args.id} if args.role == "client" else {}
    if args.device_args:
        kwargs["device_args"] = args.device_args
    iq, iq_dir = args.iq_endpoint, args.iq_dir
    if args.air == "zmq":                # GNU Radio's blocks see only ipc sockets in a 0700 folder (net/iq_relay.py)
        from otafl_sdr.net.iq_relay import check_endpoint, check_private
        if iq is not None:
            check_endpoint(iq, bool(args.keys))
            if iq.startswith("ipc://"):          # its folder must be private too
                iq_dir = iq_dir or os.path.dirname(iq[6:])
                if os.path.dirname(iq[6:]) != iq_dir.rstrip("/"):
                    raise UserError(f"--iq-endpoint {iq} must lie inside --iq-dir {iq_dir}")
        if iq_dir is not None:
            check_private(iq_dir)
        elif args.role in ("client", "jammer", "channel"):
            from otafl_sdr.radio.zmq_channel import ipc_folder
            iq_dir = ipc_folder(f"otafl-iq-{args.role}-")
        if iq is None and args.role in ("client", "jammer", "channel"):
            from otafl_sdr.radio.zmq_channel import ipc_endpoint
            iq = ipc_endpoint(iq_dir)
    elif iq is not None or iq_dir is not None:
        raise UserError("--iq-endpoint and --iq-dir are for --air zmq")
    made_dir = iq_dir is not None and args.iq_dir is None and not (args.iq_endpoint or "").startswith("ipc://")
    try:
        return cls(name=name, server=args.server, air=args.air, keys_dir=args.keys, iq_endpoint=iq,
                   iq_dir=iq_dir, register_timeout=args.register_timeout, **kwargs).run()
    finally:
        if made_dir:
            import shutil
            shutil.rmtree(iq_dir, ignore_errors=True)


def serve(args) -> int:
    """`otafl-sdr node server`: run (or resume) an experiment whose rounds the testbed's nodes carry
    (net/server.py's TestbedTransport under the one round pipeline)."""
    import signal
    from pathlib import Path

    from otafl_sdr.configure.load import load_config
    if args.resume:
        if args.config or args.set:
            raise UserError("--resume takes the config saved in the results folder; drop --config/--set")
        out = Path(args.resume)
        if not (out / "config.toml").is_file():
            raise UserError(f"cannot resume: '{out}' holds no config.toml (not a results folder)")
        cfg = load_config(out / "config.toml")
        resume = True
    else:
        if not args.config or not args.out:
            raise UserError("node server needs --config FILE and --out DIR (or --resume DIR)")
        cfg = load_config(args.config, list(args.set or []))
        out, resume = Path(args.out), False
    # --keys goes to the transport, never into cfg: the config is the ledger's genesis and the checkpoint's
    # hash, and must stay the one in config.toml (the testbed's ephemeral keys would break `verify`)

    # the supervisor forwards what it got: SIGINT (Ctrl-C) stops the run as interrupted, SIGTERM as terminated
    # (errors.Terminated: the summary without plots, at once); either is raised once, whatever the
    # disposition this process inherited (a background job ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with signals_raise():
        return _serve(args, cfg, out, resume)


def _serve(args, cfg, out, resume: bool) -> int:
    from otafl_sdr.results.files import format_table
    from otafl_sdr.experiment.orchestrator import Experiment
    from otafl_sdr.net.server import TestbedTransport
    transport = TestbedTransport(cfg, bind=args.bind, port=args.port, keys_dir=args.keys,
                                 endpoint_file=args.endpoint_file)
    exp = Experiment(cfg, out, resume=resume, progress=not args.quiet, transport=transport)
    def anchor():                        # found once the run has its key (a new run makes it in build)
        from otafl_sdr.privacy import ledger_keys
        rid = ledger_keys.read_run_id(out)
        found = ledger_keys.anchor(rid, cfg) if rid is not None else None
        return found if found is not None and found.exists() else None
    transport.iq_guard.persist(out, anchor)   # attacked IQ rounds: journaled, counted across --resume, anchored
    try:
        outcome = exp.run()
    finally:
        transport.close()
    print(format_table(outcome.summary))
    print(f"results: {outcome.out}")
    if outcome.stopped_reason:
        print(f"otafl-sdr: run stopped: {outcome.stopped_reason}")
        if outcome.stopped_by_signal:
            return 128 + outcome.stopped_by_signal      # 130 interrupted, 143 terminated (the supervisor's own)
        from otafl_sdr.net.iq_guard import ATTACKED
        if outcome.stopped_reason.startswith(ATTACKED):
            return 1                     # a failure: someone reads or writes the IQ plane (net/iq_guard.py)
        return 4 if outcome.stopped_reason.startswith("radio failure") else 3
    return 0
