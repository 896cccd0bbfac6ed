"""The server node: the orchestrator's round loop with the clients, jammer, receiver (and, for air zmq,
the channel emulator) as separate processes reached over the control plane.

One client iteration ``it`` (the other iterations, e.g. Upcycled-FL's server-only steps, run as in
process):

1. ``round_start`` (global model w, alpha_u, deadline) to every live client. Each trains on its own
   shard, clips, draws h from the seed, decides its own alpha_i, s_i (power policy, its own row) and
   answers ``ack`` (s_i, alpha_i, mode, ||u_i||, its local loss; in diagnostic mode also its clipped update).
2. Clients not heard by the deadline (or whose heartbeats stopped) are dead: ``net.dead_client_policy``
   'drop' goes on without them (named in the summary's notes and ``dead_clients``), 'abort' stops the
   run cleanly (checkpoint of the previous iteration kept).
3. The server forms the round's plan with the same policy (same seeded streams as in process), checks
   the clients' alpha_i against it, and RECORDS the mechanism in the privacy ledger (fsync'ed) before
   anything goes on the air.
4. ``channel_round`` / ``receive`` / ``jam`` / ``transmit``; the receiver returns the aggregate
   unpack(y)/alpha_u. A lost burst is retried ``air.retries`` times with fresh noise (each attempt
   that went on the air is a ledger entry of its own, attempt >= 1); a receiver or channel that died
   is waited for (``net.timeout_s``, the testbed supervisor restarts it) and the attempt is redone
   without using up a retry; if it does not come back the run stops cleanly.
5. Server step, metrics, ``round_end``, checkpoint: the results contract of the in-process run.

Diagnostic mode (clients send their clipped update, float32, so that ``aggregate_nmse`` and its theory can be computed exactly
as in process) is on when the control plane binds a loopback address without CURVE keys, i.e. when the
whole testbed is on this machine; across hosts the clients send only ||u_i|| and the two NMSE fields
are null."""
from __future__ import annotations

import logging
import signal
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from .. import seeding
from ..airs import Air
from ..config import Config, load_config
from ..errors import AirError, BudgetExceeded, UserError
from ..orchestrator import Experiment
from ..results import atomic_write_text, format_table
from ..transmission import Reception, aggregate_nmse, aggregate_nmse_theory
from .burst import make_modem
from .faults import FaultPlan
from .messages import Message
from .security import KeyStore, check_bind, node_names
from .transport import ServerHub
from .uhd_rounds import TestbedUhdAir

log = logging.getLogger("otafl.net")

INFRA_RETRIES = 3            # attempts redone because the receiver / channel / jammer died
STARTUP_S = 180.0
DEAD_MIN_S = 10.0


def startup_s(cfg: Config) -> float:
    """How long nodes may take to register and set up (importing torch and GNU Radio on a loaded
    machine takes a while), and to come back after a restart."""
    return max(cfg.net.timeout_s, STARTUP_S)


def dead_after(cfg: Config) -> float:
    """A node unheard for this long is dead (heartbeats every net.heartbeat_s; at least DEAD_MIN_S, so a
    node starved of CPU on a loaded host is not mistaken for a dead one)."""
    return max(5 * cfg.net.heartbeat_s, DEAD_MIN_S)


class TestbedAir(Air):
    """The server's handle on the testbed: start() waits for every node to register; close() tells them
    to shut down. Rounds go through :meth:`NetExperiment._net_iteration`, not ``transmit``."""

    name = "testbed"

    def __init__(self, exp: "NetExperiment"):
        super().__init__(exp.cfg)
        self.exp = exp

    def start(self) -> None:
        exp = self.exp
        wait = startup_s(exp.cfg)
        end = time.time() + wait
        while time.time() < end:
            exp._pump(0.2)
            if all(exp.hub.ready(n) for n in exp.roster):
                log.info("all %d nodes registered and ready", len(exp.roster))
                return
            gone = [n for n in exp.roster if n in exp.hub.peers and not exp.hub.alive(n)]
            if gone:                                     # registered, then died (e.g. its setup failed)
                break
        missing = [n for n in exp.roster if not exp.hub.ready(n)]
        raise AirError(f"testbed nodes not registered and ready (waited up to {wait:g} s): {', '.join(missing)}"
                       + (f" (node errors: {'; '.join(exp.node_errors[-3:])})" if exp.node_errors else ""))

    def transmit(self, plan, rng):  # pragma: no cover - the net rounds do not go through here
        raise AirError("the testbed carries rounds through the node protocol")

    def close(self) -> None:
        hub = self.exp.hub
        if hub is not None and hub.sock is not None:
            hub.broadcast(list(hub.peers), "shutdown", {"reason": "run finished"})
            time.sleep(0.2)


class UhdTestbedAir(TestbedUhdAir, TestbedAir):
    """The testbed's handle on a uhd run: nodes drive their own USRPs (net/uhd_rounds.py)."""

    name = "testbed-uhd"

    def __init__(self, exp: "NetExperiment"):
        TestbedAir.__init__(self, exp)
        self._uhd_init()


class NetExperiment(Experiment):
    """Experiment whose clients, jammer, receiver and channel are node processes."""

    def __init__(self, cfg: Config, out, resume: bool = False, progress: bool | None = None,
                 bind: str | None = None, port: int | None = None, keys_dir: str | None = None,
                 endpoint_file: str | None = None):
        super().__init__(cfg, out, resume=resume, progress=progress)
        self.bind = bind or cfg.net.bind
        self.port = cfg.net.port if port is None else port
        self.keys_dir = keys_dir if keys_dir is not None else cfg.net.keys_dir
        self.curve = check_bind(self.bind, self.keys_dir)
        self.endpoint_file = endpoint_file
        # data-dependent figures (norms, losses, the update itself) reach the server only when asked for
        self.diagnostic = bool(cfg.net.diagnostics)
        self.hub: ServerHub | None = None
        self.dead_clients: dict[str, int] = {}       # name -> iteration it was declared dead
        self.faults = FaultPlan("server")
        self.node_errors: list[str] = []

    # ------------------------------------------------------------------------------------------
    def _build(self):
        if self.cfg.air.name not in ("zmq", "uhd"):
            raise UserError(f"the testbed's server runs air 'zmq' or 'uhd' (one process per radio), not "
                            f"'{self.cfg.air.name}'; run that air in process with `otafl-sdr run`")
        self.testbed_air = None
        super()._build()
        cfg = self.cfg
        if not self.algorithm.testbed_ready:
            raise UserError(f"algorithm '{cfg.algorithm.name}' has its own local step, which the testbed's "
                            f"client nodes do not run; use air 'loopback' for it")
        if self.policy.needs_run_context:
            raise UserError(f"power policy '{cfg.power.policy}' needs the whole run's context; the testbed "
                            f"(air {cfg.air.name}) runs policies whose clients decide from their own data")
        self._open_hub()
        self.air = self.testbed_air

    def _open_hub(self) -> None:
        """The control plane and the testbed's air (once; a calibration in this session opens it first)."""
        if self.testbed_air is not None:
            return
        cfg = self.cfg
        if self.K != cfg.data.clients:
            raise UserError(f"the data partition made {self.K} clients but data.clients = {cfg.data.clients}; "
                            f"the testbed starts one node per configured client")
        self.modem = make_modem(cfg)
        self.roster = node_names(self.K, jammer=cfg.power.jammer)
        if cfg.air.name != "zmq":
            self.roster.remove("channel")
        from ..config import to_toml
        welcome = {"config": to_toml(cfg), "run_id": f"{cfg.run.name}:{cfg.run.seed}",
                   "heartbeat_s": cfg.net.heartbeat_s, "timeout_s": cfg.net.timeout_s}
        keys = KeyStore(self.keys_dir) if self.curve else None
        self.hub = ServerHub(self.bind, self.port, self.roster, welcome, keys, cfg.net.heartbeat_s,
                             dead_after(cfg))
        self.hub.air = cfg.air.name
        log.info("control plane at %s (CURVE %s, diagnostic payloads %s)", self.hub.endpoint,
                 "on" if self.curve else "off", "on" if self.diagnostic else "off")
        if self.endpoint_file:
            atomic_write_text(Path(self.endpoint_file), self.hub.endpoint + "\n")
        self.testbed_air = UhdTestbedAir(self) if cfg.air.name == "uhd" else TestbedAir(self)

    def _calibrate_in_session(self, steps: tuple) -> None:
        """calibration.session on the testbed: the nodes' own radios measure, through the control plane
        (net/uhd_rounds.py is the calibration link), right before round 1."""
        if self.cfg.air.name != "uhd":
            raise UserError("calibration.session needs air 'uhd'")
        first = self.testbed_air is None
        self._open_hub()
        self.air = self.testbed_air
        try:
            self.air.start()
        except BaseException:
            if first:
                self._abandon_start()
            raise
        super()._calibrate_in_session(steps)
        self._session_cal_text = Path(self._session_cal).read_text()   # sent to the clients before each round

    # ------------------------------------------------------------------------------------------
    def _pump(self, timeout: float) -> list[tuple[str, Message]]:
        """Poll the hub; log node errors; return the rest."""
        out = []
        for name, msg in self.hub.poll(timeout):
            if msg.type == "error":
                text = f"{name}: {msg['message'].splitlines()[-1] if msg['message'] else ''}"
                log.error("node error from %s", text)
                self.node_errors.append(text)
                continue
            if msg.type == "radio":                      # a uhd node's actual radio settings
                if isinstance(self.testbed_air, TestbedUhdAir):
                    self.testbed_air.note_radio(name, msg["settings"])
                continue
            out.append((name, msg))
        return out

    def _clients(self) -> list[str]:
        return [f"client-{i}" for i in range(self.K)]

    def _declare_dead(self, names, it: int, notes: list, why: str) -> None:
        for n in names:
            if n not in self.dead_clients:
                self.dead_clients[n] = it
                notes.append(f"round {it}: {n} dead ({why}); "
                             f"{'dropped' if self.cfg.net.dead_client_policy == 'drop' else 'run aborted'} "
                             f"(net.dead_client_policy = {self.cfg.net.dead_client_policy})")
                log.warning("iteration %d: %s dead (%s)", it, n, why)

    def _stop(self, reason: str) -> dict:
        log.error("stopping: %s", reason)
        return {"_stop": True, "_stop_reason": reason}

    # ------------------------------------------------------------------------------------------
    def _iteration(self, it: int, w, w_prev, tau, notes) -> dict:
        if not self.algorithm.uses_clients(it):
            self._pump(0)
            row = super()._iteration(it, w, w_prev, tau, notes)
            self.faults.point("released", it)
            return row
        return self._net_iteration(it, w, tau, notes)

    def _collect_acks(self, it: int, live: list[str], deadline: float) -> dict[str, Message]:
        acks: dict[str, Message] = {}
        waiting = set(live)
        while waiting and time.time() < deadline:
            for name, msg in self._pump(0.05):
                if msg.type == "ack" and msg["round"] == it and name in waiting:
                    acks[name] = msg
                    waiting.discard(name)
            waiting = {n for n in waiting if self.hub.alive(n)}
        return acks

    def _net_iteration(self, it: int, w, tau, notes) -> dict:
        cfg = self.cfg
        hub = self.hub
        K, d = self.K, self.dim
        row: dict = {"round": it, "client_round": self.algorithm.client_round(it)}
        names = self._clients()
        live = hub.live(n for n in names if n not in self.dead_clients)
        self._declare_dead([n for n in names if n not in self.dead_clients and n not in live], it, notes,
                           "no heartbeat")
        if self.dead_clients and cfg.net.dead_client_policy == "abort":
            return self._stop(f"client(s) {', '.join(sorted(self.dead_clients))} dead and "
                              f"net.dead_client_policy = 'abort'")
        if not live:
            return self._stop(f"no client node is alive ({', '.join(f'{n} dead since round {r}' for n, r in sorted(self.dead_clients.items()))}); "
                              f"checkpoint kept: restart the nodes (check their radios with `uhd_find_devices` on a uhd "
                              f"run) and resume with --resume")
        deadline = time.time() + cfg.net.timeout_s
        w_np = w.detach().cpu().numpy()
        if self._session_cal is not None:       # the clients plan on the server's calibration (a restarted
            hub.broadcast(live, "calibration", {"text": self._session_cal_text})               # one too)
        hub.broadcast(live, "round_start", {"round": it, "alpha_u": float(getattr(self.policy, "alpha_u", 0.0)),
                                            "mu": float(self.algorithm.local_mu), "deadline": deadline,
                                            "t_tx": 0.0, "diagnostic": self.diagnostic}, {"w": w_np})
        log.info("iteration %d: round_start to %d clients", it, len(live))
        acks = self._collect_acks(it, live, deadline)
        log.info("iteration %d: %d ack(s)", it, len(acks))
        missing = [n for n in live if n not in acks]
        self._declare_dead(missing, it, notes, "no ack by the deadline" if all(hub.alive(n) for n in missing)
                           else "heartbeats stopped")
        if missing and cfg.net.dead_client_policy == "abort":
            return self._stop(f"client(s) {', '.join(missing)} dead and net.dead_client_policy = 'abort'")
        if not acks:
            return self._stop(f"round {it}: no client answered")

        # -- the plan, as in process --------------------------------------------------------------
        acked = np.array([f"client-{i}" in acks for i in range(K)])
        finite = np.array([bool(acks[f"client-{i}"]["finite"]) if acked[i] else True for i in range(K)])
        payload = np.zeros((K, d))
        if self.diagnostic:
            for i in np.flatnonzero(acked & finite):
                upd = acks[f"client-{i}"].arrays.get("update")
                if upd is None or upd.shape != (d,):
                    raise AirError(f"client-{i} sent no update of {d} values in diagnostic mode")
                payload[i] = upd.astype(np.float64) / tau               # exactly the in-process payload
        bad = acked & ~finite
        if bad.any():
            notes.append(f"round {it}: clients {np.flatnonzero(bad).tolist()} held NaN/inf and did not transmit")
        h, h_cj = self._draw_channels(it)
        csi = None if self.csi is None else self.csi.estimates(it, h)
        plan = self.policy.plan(it, payload, h, h_cj, seeding.rng(cfg.run.seed, "policy", it), csi=csi)
        plan.extra.setdefault("csi", h if csi is None else csi)     # what the clients believed
        plan.extra["air_sigma_c2"] = cfg.channel.sigma_c2           # the emulated channel's true noise
        silent = ~acked | bad
        for i in np.flatnonzero(acked & ~bad):
            m = acks[f"client-{i}"]
            if m["mode"] == "silent":
                silent[i] = True
            if m["mode"] != plan.mode[i]:          # a client's private coin (e.g. CDPB-mixed): its decision
                plan.mode[i] = m["mode"]
                plan.alpha[i] = complex(m["alpha_re"], m["alpha_im"])
                continue
            self._check_decision(i, m, plan)
        if silent.any():
            plan.alpha = np.where(silent, 0, plan.alpha)
            plan.mode = ["silent" if s else m for m, s in zip(plan.mode, silent)]
        if self.csi is not None:                  # estimated CSI: the ledger's margin, the jammer as measured
            plan.mechanism = self._csi_safe(plan)
        if cfg.air.name == "uhd":                 # the radios can carry it, before accounting
            self.air.preflight_acks(plan, acks)
        try:
            self.ledger.check(plan.mechanism)
        except BudgetExceeded as e:
            return self._stop(str(e))
        eps = self.ledger.record(plan.mechanism)                    # BEFORE anything goes on the air
        self.faults.point("recorded", it)

        senders = [i for i in range(K) if not silent[i] and plan.alpha[i] != 0]
        rec, attempts, stop = self._carry(it, plan, senders, deadline, notes)
        if stop:
            return self._stop(stop)
        for i in rec.extra.get("missing", []):
            plan.alpha[i] = 0
            plan.mode[i] = "silent"
        eps = self.ledger.epsilons()
        expected = plan.expected_aggregate()
        if rec.ok:
            agg = torch.as_tensor(rec.aggregate * tau, dtype=w.dtype)
            w_new = self.algorithm.server_step(w, agg, it)
            nmse = aggregate_nmse(rec.aggregate, expected) if self.diagnostic else None
        else:
            w_new = w.clone()
            nmse = None
            notes.append(f"round {it}: lost after {attempts} attempt(s): {rec.reason}")
        client_loss = np.array([acks[f"client-{i}"]["train_loss"] if acked[i] and
                                acks[f"client-{i}"]["train_loss"] is not None else np.nan for i in range(K)])
        tr_idx = np.flatnonzero(acked & np.isfinite(client_loss))
        pw = self.data.p[tr_idx] / self.data.p[tr_idx].sum() if len(tr_idx) else np.zeros(0)
        local_loss = float(pw @ client_loss[tr_idx]) if len(tr_idx) else None
        clipped = np.array([bool(acks[f"client-{i}"]["clipped"]) if acked[i] else False for i in range(K)])
        row.update(self._metrics(w_new, train_loss=local_loss))
        row.update({
            "sensitivity": plan.mechanism.sensitivity, "sigma_eff": plan.mechanism.sigma_eff,
            "alpha_u": plan.alpha_u, "cj_active": bool(plan.alpha_cj > 0),
            "cj_power": float(plan.alpha_cj ** 2 * plan.dim), "aggregate_nmse": nmse,
            "aggregate_nmse_theory": aggregate_nmse_theory(plan) if self.diagnostic else None,
            "uses_clients": True, "lost": not rec.ok, "lost_reason": rec.reason if not rec.ok else "",
            "attempts": attempts, "faults": rec.faults, "channel_uses": rec.channel_uses, "air_s": rec.wall_s,
            "transmitting": int(sum(m != "silent" for m in plan.mode)),
            "clipped_fraction": float(np.mean(clipped)) if self.diagnostic else None,
            "max_power_ratio": float(np.max(plan.transmit_energy() / plan.power_limit))
            if plan.power_limit is not None and self.diagnostic else None,
            "dead_clients": sorted(self.dead_clients),
        })
        row.update(self._eps_fields(eps))
        row["_w"] = w_new
        self.hub.broadcast(self.hub.live(self.hub.peers), "round_end", {"round": it})
        self.faults.point("released", it)
        return row

    def _check_decision(self, i: int, ack: Message, plan) -> None:
        """The client's own alpha_i / s_i must be the plan's (same policy, same seeded streams)."""
        s_plan = plan.extra.get("s") if isinstance(plan.extra, dict) else None
        a_cl = complex(ack["alpha_re"], ack["alpha_im"])
        a_pl = complex(plan.alpha[i])
        ok = abs(a_cl - a_pl) <= 1e-9 * max(1.0, abs(a_pl))
        if s_plan is not None:
            ok = ok and abs(float(ack["s"]) - float(s_plan[i])) <= 1e-9 * max(1.0, abs(float(s_plan[i])))
        if not ok and (self.diagnostic or np.all(plan.payload == 0)):
            raise UserError(f"round {plan.round}: client-{i} decided alpha_i={a_cl:.6g} but the server's plan "
                            f"says {a_pl:.6g}: power policy '{self.cfg.power.policy}' is not decentralised "
                            f"(a client's factor depends on others' data), which the testbed cannot run")

    # ------------------------------------------------------------------------------------------
    def _infra(self, plan) -> list[str]:
        names = ["receiver"] + (["channel"] if self.cfg.air.name == "zmq" else [])
        if plan.alpha_cj > 0:
            if "jammer" not in self.roster:
                raise UserError("the plan needs the jammer but the testbed has none (power.jammer = false)")
            names.append("jammer")
        return names

    def _wait_for(self, names: list[str], timeout: float) -> bool:
        end = time.time() + timeout
        while True:
            if all(self.hub.ready(n) for n in names):
                return True
            if time.time() >= end:
                return False
            self._pump(0.1)

    def _carry(self, it: int, plan, senders: list[int], deadline: float, notes) -> tuple[Reception, int, str]:
        """Put the round on the air (with retries); returns (reception, attempts, stop reason or '')."""
        cfg = self.cfg
        infra = self._infra(plan)
        air_retries = cfg.air.retries
        infra_fail = 0
        attempt = 0
        rec = Reception(aggregate=None, ok=False, reason="not sent")
        while True:
            if not self._wait_for(infra, startup_s(cfg)):
                gone = [n for n in infra if not self.hub.alive(n)]
                return rec, attempt, (f"round {it}: {', '.join(gone)} gone and not back within "
                                      f"{startup_s(cfg):g} s; checkpoint kept, resume with --resume")
            if attempt > 0:          # a fresh-noise retransmission is a further release (as in process)
                mech = replace(plan.mechanism, extra={**plan.mechanism.extra, "attempt": attempt})
                if cfg.privacy.enforce and self.ledger.would_exceed(mech):
                    notes.append(f"round {it}: retry {attempt} skipped, it would exceed the privacy budget")
                    return rec, attempt, ""
                self.ledger.record(mech)
            rec, infra_died = self._attempt(it, attempt, plan, senders, infra, notes)
            self._record_iq(rec, plan, attempt)
            attempt += 1
            if rec.ok:
                return rec, attempt, ""
            if infra_died:
                infra_fail += 1
                notes.append(f"round {it}: attempt {attempt} failed ({rec.reason}); retried once it is back")
                if infra_fail > INFRA_RETRIES:
                    return rec, attempt, f"round {it}: {rec.reason} {infra_fail} times; stopped (checkpoint kept)"
                continue
            if attempt > air_retries:
                return rec, attempt, ""

    def _attempt(self, it: int, attempt: int, plan, senders: list[int], infra: list[str],
                 notes: list) -> tuple[Reception, bool]:
        """One attempt on the air: the zmq channel emulator's round (net/zmq_rounds.py) or the nodes' own
        USRPs (net/uhd_rounds.py). Returns (reception, whether a receiver / channel / jammer died)."""
        if self.cfg.air.name == "uhd":
            return self.air.attempt(it, attempt, plan, senders, infra, notes)
        from .zmq_rounds import zmq_attempt
        return zmq_attempt(self, it, attempt, plan, senders, infra, notes)

    # ------------------------------------------------------------------------------------------
    def _summary(self, rows, prior_wall, t_start, stopped, notes) -> dict:
        s = super()._summary(rows, prior_wall, t_start, stopped, notes)
        prior_dead = set()
        for r in rows:
            prior_dead.update(r.get("dead_clients") or [])
        s["dead_clients"] = sorted(prior_dead | set(self.dead_clients))
        s["node_errors"] = self.node_errors[-20:]
        if self.diagnostic:
            s["private"] = "not private (diagnostics): clients sent norms, losses and updates in the clear"
        s["control_plane"] = {"endpoint": self.hub.endpoint if self.hub else None, "curve": self.curve,
                              "diagnostic_payloads": self.diagnostic,
                              "dropped_messages": self.hub.dropped if self.hub else 0}
        return s

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()
            self.hub = None


def serve(args) -> int:
    """`otafl-sdr node server`: run (or resume) an experiment with the testbed's nodes."""
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
    if args.keys:
        cfg.net.keys_dir = args.keys

    def _term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _term)
    exp = NetExperiment(cfg, out, resume=resume, progress=not args.quiet, bind=args.bind, port=args.port,
                        keys_dir=args.keys, endpoint_file=args.endpoint_file)
    try:
        outcome = exp.run()
    finally:
        exp.close()
    print(format_table(outcome.summary))
    print(f"results: {outcome.out}")
    if outcome.stopped_reason:
        print(f"otafl-sdr: run stopped: {outcome.stopped_reason}")
        return 4 if outcome.stopped_reason.startswith("radio failure") else 3
    return 0
