"""`otafl-sdr run --air zmq`: the whole testbed on this machine, one process per radio.

The supervisor (this module, in the `otafl-sdr run` process) prepares the results folder, starts the
server node (``python -m otafl_sdr.cli.main node server``), waits for its control endpoint, then starts K
client nodes, the receiver, the channel emulator and (when ``power.jammer``) the jammer. Every child
lives in one process group and gets SIGTERM if the supervisor itself dies (PR_SET_PDEATHSIG), so none
outlives the run. Node logs go to ``DIR/testbed/NAME.log``, the pids to ``DIR/testbed/pids.json``.

While the run goes on: a receiver, channel or jammer that dies is restarted (``RESTARTS`` times; the
server waits for it and redoes the round's attempt); a dead client is not restarted (the server's
``net.dead_client_policy`` decides). When the server exits the run is over: the others are told to
stop (SIGTERM), and whatever is left after ``GRACE_S`` is killed with the group. Ctrl-C / SIGTERM to
the supervisor is passed to the server first (it stops after writing its summary; the checkpoint of the
last finished round is kept), then the same teardown. Exit status: the server's (0 done, 3 stopped,
2 error), 130 after Ctrl-C, 143 after SIGTERM, 5 when the server died (resume with ``otafl-sdr run --resume DIR``), 1 when
the run stopped because its IQ plane was attacked (net/iq_guard.py).

IQ never touches a TCP port here: every IQ socket is a UNIX socket (``ipc://``) with an unguessable name in
a private folder made for the run (mode 0700, random name under $TMPDIR, removed at the end); every hop
between two node processes is a CURVE relay with the run's ephemeral keys (a key-less process, even of
the same uid, gets nothing: net/iq_relay.py), and every burst is tagged per link with those keys; only
the control plane listens on TCP, behind CURVE. With ``net.insecure`` there are no keys: the blocks then
talk directly over the folder, which keeps out other uids only."""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from otafl_sdr.config.schema import Config, to_toml
from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.results.files import atomic_write_text, prepare_out_dir, read_rounds
from otafl_sdr.results.run_folder import write_new_config
from otafl_sdr.net.faults import ENV as FAULT_ENV
from otafl_sdr.net.security import check_bind, make_keys, node_names

GRACE_S = 5.0
RESTARTS = 3
ENDPOINT_TIMEOUT_S = 120.0
EXIT_SERVER_DIED = 5
INFRA = ("receiver", "channel", "jammer")
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class Testbed:
    """The node processes of one run."""

    def __init__(self, cfg: Config, out: Path, quiet: bool = True):
        self.cfg = cfg
        self.out = Path(out)
        self.dir = self.out / "testbed"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.quiet = quiet
        self.procs: dict[str, subprocess.Popen] = {}
        self.restarts: dict[str, int] = {}
        self.exited: dict[str, subprocess.Popen] = {}
        self.pgid: int | None = None
        self.endpoint: str | None = None
        self.history: list[dict] = []
        self.iq_dir: str | None = None                 # the run's private IQ folder (0700)
        self.iq_endpoints: dict[str, str] = {}         # node -> its ipc endpoint, kept across restarts

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, argv: list[str], faults: bool = True) -> subprocess.Popen:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if not faults:
            env.pop(FAULT_ENV, None)
        log = open(self.dir / f"{name}.log", "ab")
        cmd = [sys.executable, "-m", "otafl_sdr.cli.main", "node"] + argv
        group = 0 if self.pgid is None else self.pgid
        try:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 process_group=group, preexec_fn=_die_with_parent)
        except PermissionError:              # the group is gone (every member exited): start a new one
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 process_group=0, preexec_fn=_die_with_parent)
        finally:
            log.close()
        if self.pgid is None:
            self.pgid = p.pid
        self.procs[name] = p
        self.history.append({"name": name, "pid": p.pid, "started": time.time()})
        self._write_pids()
        return p

    def _write_pids(self) -> None:
        atomic_write_text(self.dir / "pids.json", json.dumps(
            {"pgid": self.pgid, "supervisor": os.getpid(), "processes": self.history}, indent=1) + "\n")

    def keys_dir(self) -> str:
        """The CURVE keys of this run: net.keys_dir, or ephemeral keys made for this run in
        DIR/testbed/keys (so that no other local process can register as a node); none with
        net.insecure = true."""
        if self.cfg.net.keys_dir or self.cfg.net.insecure:
            return self.cfg.net.keys_dir
        d = self.dir / "keys"
        make_keys(d, node_names(self.cfg.data.clients, jammer=self.cfg.power.jammer), overwrite=True)
        return str(d)

    def start_server(self, resume: bool, stop_requested=lambda: 0) -> None:
        ep_file = self.dir / "endpoint"
        if ep_file.exists():
            ep_file.unlink()
        argv = ["server", "--resume", str(self.out), "--endpoint-file", str(ep_file)]
        self.keys = self.keys_dir()
        if self.keys:
            argv += ["--keys", self.keys]
        if self.quiet:
            argv.append("--quiet")
        self._spawn("server", argv)
        end = time.time() + ENDPOINT_TIMEOUT_S
        while time.time() < end:
            if ep_file.exists():
                self.endpoint = ep_file.read_text().strip()
                return
            if stop_requested():                     # told to stop before the server listened
                return
            if self.procs["server"].poll() is not None:
                raise UserError(node_error(self.dir / "server.log") or
                                f"the server node exited ({self.procs['server'].returncode}) before listening; "
                                f"see {self.dir / 'server.log'}")
            time.sleep(0.05)
        raise UserError(f"the server node did not listen within {ENDPOINT_TIMEOUT_S:g} s; see {self.dir / 'server.log'}")

    def _node_argv(self, name: str) -> list[str]:
        role = "client" if name.startswith("client-") else name
        argv = [role, "--server", self.endpoint, "--air", "zmq"]
        if role == "client":
            argv += ["--id", name.split("-")[1]]
        if self.keys:
            argv += ["--keys", self.keys]
        from otafl_sdr.radio.zmq_channel import ipc_endpoint, ipc_folder
        if self.iq_dir is None:
            self.iq_dir = ipc_folder()
        argv += ["--iq-dir", self.iq_dir]
        if role != "receiver":
            ep = self.iq_endpoints.setdefault(name, ipc_endpoint(self.iq_dir))
            argv += ["--iq-endpoint", ep]
        return argv

    def start_nodes(self) -> None:
        for name in node_names(self.cfg.data.clients, jammer=self.cfg.power.jammer):
            self._spawn(name, self._node_argv(name))

    def watch(self, stop_requested) -> int:
        """Until the server exits; restarts dead infrastructure nodes. Returns the server's status, or 128 +
        the signal the supervisor got (``stop_requested()``: 0, or that signal)."""
        server = self.procs["server"]
        bar = _Progress(self.out, self.cfg, enabled=not self.quiet)
        try:
            while True:
                rc = server.poll()
                if rc is not None:
                    return rc
                if stop_requested():
                    return self._interrupt(stop_requested())
                for name, p in list(self.procs.items()):
                    if name == "server" or p.poll() is None:
                        continue
                    if name in INFRA and p.returncode != 0 and self.restarts.get(name, 0) < RESTARTS:
                        self.restarts[name] = self.restarts.get(name, 0) + 1
                        print(f"otafl-sdr: testbed: {name} exited ({p.returncode}); restarting it "
                              f"({self.restarts[name]}/{RESTARTS})", file=sys.stderr)
                        self._spawn(name, self._node_argv(name), faults=False)
                    elif name in self.procs:
                        self.procs.pop(name)
                        self.exited[name] = p
                        if p.returncode != 0:
                            print(f"otafl-sdr: testbed: {name} exited ({p.returncode})", file=sys.stderr)
                bar.update()
                time.sleep(0.1)
        finally:
            bar.close()

    def _interrupt(self, signum: int) -> int:
        """Pass the supervisor's signal to the server (SIGINT: interrupted, SIGTERM: terminated: it abandons the
        round in flight, what it booked stays booked, writes its summary, tells the nodes to shut down and
        exits), wait for it, then 128 + signum. A server that does not stop in time is killed (the run stays
        resumable from its last checkpoint)."""
        server = self.procs["server"]
        if server.poll() is None:
            server.send_signal(signum)
            try:
                server.wait(timeout=max(30.0, self.cfg.net.timeout_s))
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        return 0 if server.returncode == 0 else 128 + signum     # 0: it finished the run before it could stop

    def teardown(self) -> None:
        """SIGTERM every node, wait GRACE_S, SIGKILL what is left (the whole group), reap all."""
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.time() + GRACE_S
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.0, end - time.time()))
            except subprocess.TimeoutExpired:
                pass
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        if self.iq_dir is not None:
            import shutil
            shutil.rmtree(self.iq_dir, ignore_errors=True)
            self.iq_dir = None


class _Progress:
    """A progress bar fed from DIR/rounds.jsonl (the server writes it)."""

    def __init__(self, out: Path, cfg: Config, enabled: bool):
        self.path = Path(out) / "rounds.jsonl"
        self.bar = None
        self.n = 0
        if enabled:
            from tqdm import tqdm
            from otafl_sdr.registry import ALGORITHMS
            total = ALGORITHMS.get(cfg.algorithm.name)(cfg).iterations(cfg.run.rounds)
            self.bar = tqdm(total=total, desc=f"{cfg.run.name} [zmq testbed]", unit="round", dynamic_ncols=True)

    def update(self) -> None:
        if self.bar is None or not self.path.exists():
            return
        rows = read_rounds(self.path)
        if len(rows) != self.n:
            self.bar.update(len(rows) - self.n)
            self.n = len(rows)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def node_error(log: Path) -> str:
    """A node's own one-line error (the last 'otafl-sdr: error: ...' line of its log), or ''."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        if "otafl-sdr: error:" in line:
            return line.split("otafl-sdr: error:", 1)[1].strip() + f" (server node; log: {log})"
    return ""


def _stopped_reason(out: Path) -> str:
    """The summary's stopped reason (one line), or a pointer to the server's log."""
    try:
        reason = json.loads((out / "summary.json").read_text()).get("stopped_reason")
    except (OSError, ValueError, AttributeError):
        reason = None
    return str(reason).splitlines()[0] if reason else f"see {out / 'testbed' / 'server.log'}"


def _new_ledger_key(out: Path, cfg: Config) -> None:
    """A new run's ledger key and anchor (privacy/ledger_keys.py), made here because the server node
    starts with --resume on the folder the supervisor prepared; a failure leaves nothing of the run."""
    import shutil
    from otafl_sdr.privacy import ledger_keys
    from otafl_sdr.privacy.ledger import config_genesis
    try:
        ledger_keys.create(out, cfg, config_genesis(cfg))
    except UserError:
        shutil.rmtree(out, ignore_errors=True)
        raise


def _remove_if_nothing_ran(out: Path, cfg: Config) -> None:
    """A failed start removes the folder it created (and the run's ledger key): only when no round was
    recorded or written."""
    import shutil
    from otafl_sdr.privacy import ledger_keys
    if (out / "privacy_ledger.jsonl").exists() or ((out / "rounds.jsonl").exists() and
                                                   (out / "rounds.jsonl").stat().st_size):
        return
    try:
        rid = ledger_keys.read_run_id(out)
    except UserError:
        rid = None
    shutil.rmtree(out, ignore_errors=True)
    if rid is not None:
        ledger_keys.forget(rid, cfg)


def run_testbed(cfg: Config, out, progress: bool = False, resume: bool = False) -> int:
    """Run (or resume) ``cfg`` on the zmq testbed; returns the exit status for the CLI."""
    from otafl_sdr.results.files import format_table
    from otafl_sdr.airs import air_capabilities
    if not air_capabilities(cfg.air.name).testbed:
        raise ConfigError("air.name", f"the testbed runs air 'zmq', got '{cfg.air.name}'")
    check_bind(cfg.net.bind, cfg.net.keys_dir)
    out = Path(out)
    if resume:
        prepare_out_dir(out, resume=True)
    else:
        prepare_out_dir(out, resume=False)
        write_new_config(out, to_toml(cfg))    # what Experiment writes for a new run (a failure leaves nothing)
        _new_ledger_key(out, cfg)              # the server resumes this folder: it finds the run's key there
    tb = Testbed(cfg, out, quiet=not progress)
    stop = {"signal": 0}

    def _on_signal(signum, frame):
        stop["signal"] = stop["signal"] or signum        # the first one: SIGINT (Ctrl-C) or SIGTERM
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    rc = 2
    try:
        tb.start_server(resume, lambda: stop["signal"])
        if not stop["signal"]:
            tb.start_nodes()
        rc = tb.watch(lambda: stop["signal"])
    except UserError:
        tb.teardown()
        if not resume:
            _remove_if_nothing_ran(out, cfg)
        raise
    finally:
        tb.teardown()
        for s, h in old.items():
            signal.signal(s, h)
    summary_path = out / "summary.json"
    if summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text())
            print(format_table(summary))
            if isinstance(summary, dict) and summary.get("ledger_head"):     # for the operator to write down
                print(f"ledger head: {summary['ledger_head']} (otafl-sdr verify {out} --head HEX checks it)")
        except json.JSONDecodeError:
            pass
    print(f"results: {out}")
    signum = (stop["signal"] if rc else 0) or (rc - 128 if rc in (128 + signal.SIGINT, 128 + signal.SIGTERM) else 0)
    if signum:                            # the supervisor's signal, or one sent to the server alone
        rc = 128 + signum
        what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
        print(f"otafl-sdr: {what}; the testbed is down. Resume with: otafl-sdr run --resume {out}", file=sys.stderr)
    elif rc == 1:                         # the server stopped the run: its IQ plane was attacked
        print(f"otafl-sdr: run stopped: {_stopped_reason(out)}", file=sys.stderr)
    elif rc not in (0, 2, 3):
        print(f"otafl-sdr: the server node died (status {rc}); see {tb.dir / 'server.log'}. "
              f"Resume with: otafl-sdr run --resume {out}", file=sys.stderr)
        rc = EXIT_SERVER_DIED
    elif rc == 3:
        print("otafl-sdr: run stopped (see the summary's stopped reason)", file=sys.stderr)
    elif rc == 2:
        msg = node_error(tb.dir / "server.log") or f"the server node failed; see {tb.dir / 'server.log'}"
        if not resume:
            _remove_if_nothing_ran(out, cfg)
        print(f"otafl-sdr: error: {msg}", file=sys.stderr)
    return rc
