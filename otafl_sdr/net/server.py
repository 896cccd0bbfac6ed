"""The testbed's transport: the round pipeline (rounds/pipeline.py) with the clients, jammer, receiver
(and, for air zmq, the channel emulator) as separate processes reached over the control plane.

What this transport does in one client iteration ``round_index`` (server-only iterations run as in process):

1. ``local_round``: ``round_start`` (global model w, alpha_u, deadline) to every live client. Each trains
   on its own shard, clips, draws h from the seed, decides its own alpha_i, s_i (power policy, its own
   row) and answers ``ack`` (s_i, alpha_i, mode; in diagnostic mode also its loss and clipped update).
   Clients not heard by the deadline (or whose heartbeats stopped) are dead: ``net.dead_client_policy``
   'drop' goes on without them (named in the summary's notes and ``dead_clients``), 'abort' stops the
   run cleanly (checkpoint of the previous iteration kept).
2. ``settle_plan``: the server's plan (same policy, same seeded streams) adopts each client's own
   decision where it took a private coin, and checks the others against it.
3. The pipeline records the mechanism BEFORE anything goes on the air; ``attempt`` then runs one
   exchange with the nodes (net/zmq_rounds.py: the channel emulator; net/uhd_rounds.py: the nodes' own
   USRPs). A receiver, channel or jammer that died is waited for (``ready``: net.timeout_s, the testbed
   supervisor restarts it) and the attempt redone; each attempt that went on the air is booked.
4. ``round_done``: ``round_end`` to every node.

Diagnostic mode (clients send their clipped update, float32, so that ``aggregate_nmse`` and its theory can
be computed exactly as in process) is ``net.diagnostics``; otherwise those fields are null.

Calibration epochs and link health (air uhd, issue 25, items 1-2): the calibration in use belongs to the
tuning epochs its radios reported when it was taken (net/uhd_port.py). A node that restarts, re-tunes or
resets its radio reports a new epoch: an attempt planned on the old calibration is not sent (lost, its
booking kept: conservative) and :meth:`TestbedTransport.recalibration_due` asks the orchestrator to
recalibrate (channels and jammer) before the next round. Each demodulated round's link health
(calibration/link_health.py) goes to its row as ``link_health``; a figure beyond its ``air.drift_*`` limit
asks for a recalibration too (``air.on_drift``: or stops the run). Both are logged here and noted in the
round's row (``recalibration``, orchestrator)."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from otafl_sdr.airs import Air, air_capabilities
from otafl_sdr.config.schema import Config, to_toml
from otafl_sdr.errors import AirError, UserError
from otafl_sdr.phy import Modem
from otafl_sdr.transmission import Reception
from otafl_sdr.transport import Attempt, Transport
from otafl_sdr.workload.workloads import LocalRound
from otafl_sdr.workload.round_plan import seeded_plan_rng
from otafl_sdr.net.faults import FaultPlan
from otafl_sdr.net.iq_guard import IqGuard
from otafl_sdr.net.link_watch import judge_health
from otafl_sdr.net.rejoin import (lost_to_restart, refused_unsent, rejoin, reregistered, rerun_lost, restart_in_round,
                     restarted_round, round_fields)
from otafl_sdr.net.messages import Message
from otafl_sdr.net.security import KeyStore, check_bind, node_names
from otafl_sdr.net.transport import ServerHub
from otafl_sdr.net.uhd_rounds import TestbedUhdAir

log = logging.getLogger("otafl.net")

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
    """The server's handle on the nodes: start() waits for every node to register; close() tells them
    to shut down. ``server``: the TestbedTransport."""

    name = "testbed"
    # the channel emulator is a node of this testbed (air zmq); a uhd testbed's radios are the channel
    channel_node = True

    def __init__(self, server: "TestbedTransport"):
        super().__init__(server.cfg)
        self.exp = server

    def start(self) -> None:
        server = self.exp
        wait = startup_s(server.cfg)
        end = time.time() + wait
        while time.time() < end:
            server.pump(0.2)
            if all(server.hub.ready(n) for n in server.roster):
                log.info("all %d nodes registered and ready", len(server.roster))
                return
            gone = [n for n in server.roster if n in server.hub.peers and not server.hub.alive(n)]
            if gone:                                     # registered, then died (e.g. its setup failed)
                break
        missing = [n for n in server.roster if not server.hub.ready(n)]
        raise AirError(f"testbed nodes not registered and ready (waited up to {wait:g} s): {', '.join(missing)}"
                       + (f" (node errors: {'; '.join(server.node_errors[-3:])})" if server.node_errors else ""))

    def attempt(self, round_index: int, attempt: int, plan, senders: list[int], infra: list[str], notes: list):
        """One exchange through the zmq channel emulator (net/zmq_rounds.py)."""
        from otafl_sdr.net.zmq_rounds import zmq_attempt
        return zmq_attempt(self.exp, round_index, attempt, plan, senders, infra, notes)

    def preflight_acks(self, plan, acks: dict) -> None:
        """Nothing to check before accounting: the channel emulator carries any plan."""

    def transmit(self, plan, rng):  # pragma: no cover - the testbed's rounds go through ``attempt``
        raise AirError("the testbed carries rounds through the node protocol")

    def close(self) -> None:
        hub = self.exp.hub
        if hub is not None and hub.sock is not None:
            hub.broadcast(list(hub.peers), "shutdown", {"reason": "run finished"})
            time.sleep(0.2)


class UhdTestbedAir(TestbedUhdAir, TestbedAir):
    """The testbed's handle on a uhd run: nodes drive their own USRPs (net/uhd_rounds.py)."""

    name = "testbed-uhd"
    channel_node = False

    def __init__(self, server: "TestbedTransport"):
        TestbedAir.__init__(self, server)
        self._uhd_init()


TESTBED_AIRS = {"zmq": TestbedAir, "uhd": UhdTestbedAir}


class TestbedTransport(Transport):
    """``TestbedTransport(cfg, bind, port, keys_dir, endpoint_file)``: the rounds of an Experiment carried
    by the testbed's node processes."""

    def __init__(self, cfg: Config, bind: str | None = None, port: int | None = None,
                 keys_dir: str | None = None, endpoint_file: str | None = None):
        if cfg.air.name not in TESTBED_AIRS:
            raise UserError(f"the testbed's server runs air {' or '.join(repr(a) for a in TESTBED_AIRS)} (one "
                            f"process per radio), not '{cfg.air.name}'; run that air in process with `otafl-sdr run`")
        self.cfg = cfg
        self.bind_address = bind or cfg.net.bind
        self.port = cfg.net.port if port is None else port
        self.keys_dir = keys_dir if keys_dir is not None else cfg.net.keys_dir
        self.curve = check_bind(self.bind_address, self.keys_dir)
        self.endpoint_file = endpoint_file
        # data-dependent figures (norms, losses, the update itself) reach the server only when asked for
        self.diagnostic = bool(cfg.net.diagnostics)
        self.evaluation_visible = self.diagnostic
        self.hub: ServerHub | None = None
        self.air = None
        self.parts = None
        self.dead_clients: dict[str, int] = {}       # name -> iteration it was declared dead
        self.faults = FaultPlan("server")
        self.node_errors: list[str] = []
        self.session_cal_text: str | None = None
        self.acks: dict[str, Message] = {}
        self.control_plane = {"endpoint": None, "dropped_messages": 0}
        self.iq_guard = IqGuard(cfg.net.max_attacked_rounds)    # attacked IQ links: named, counted, bounded
        self.cal_epochs: dict | None = None          # node -> tuning epoch the calibration in use was taken under
        self.drift_seen = ""                         # link health beyond air.drift_* (asks for a recalibration)
        self.clock_refusals: dict[int, int] = {}     # round -> attempts the uhd clock check refused
        self.dead_regs, self.round_regs, self.rejoin_notes = {}, {}, []   # net/rejoin.py (registrations; notes due)
        self.round_notes: list[str] = []             # noted during the clients' round, until take_notes
        self.round_restarts, self.restart_lost, self.reruns, self.round_recal, self.cal_path = {}, {}, 0, "", None

    # -- set-up ----------------------------------------------------------------------------------
    K = property(lambda self: self.parts.K)
    dim = property(lambda self: self.parts.dim)

    def bind(self, parts) -> None:
        cfg = self.cfg
        self.parts = parts
        if not parts.algorithm.testbed_ready:
            raise UserError(f"algorithm '{cfg.algorithm.name}' has its own local step, which the testbed's "
                            f"client nodes do not run; use air 'loopback' for it")
        if parts.policy.needs_run_context:
            raise UserError(f"power policy '{cfg.power.policy}' needs the whole run's context; the testbed "
                            f"(air {cfg.air.name}) runs policies whose clients decide from their own data")
        self._open_hub()

    def _open_hub(self) -> None:
        """The control plane and the testbed's air (once; a calibration in this session opens it first)."""
        if self.air is not None:
            return
        cfg = self.cfg
        if self.parts.K != cfg.data.clients:
            raise UserError(f"the data partition made {self.parts.K} clients but data.clients = {cfg.data.clients}; "
                            f"the testbed starts one node per configured client")
        self.modem = Modem(cfg.phy)
        air_class = TESTBED_AIRS[cfg.air.name]
        self.roster = node_names(self.parts.K, jammer=cfg.power.jammer)
        if not air_class.channel_node:
            self.roster.remove("channel")
        welcome = {"config": to_toml(cfg), "run_id": f"{cfg.run.name}:{cfg.run.seed}",
                   "heartbeat_s": cfg.net.heartbeat_s, "timeout_s": cfg.net.timeout_s}
        keys = KeyStore(self.keys_dir) if self.curve else None
        self.hub = ServerHub(self.bind_address, self.port, self.roster, welcome, keys, cfg.net.heartbeat_s,
                             dead_after(cfg))
        self.hub.air = cfg.air.name
        log.info("control plane at %s (CURVE %s, diagnostic payloads %s)", self.hub.endpoint,
                 "on" if self.curve else "off", "on" if self.diagnostic else "off")
        if self.endpoint_file:
            from otafl_sdr.results.files import atomic_write_text
            atomic_write_text(Path(self.endpoint_file), self.hub.endpoint + "\n")
        self.air = air_class(self)

    def calibration_link(self, parts=None):
        """calibration.session on the testbed: the nodes' own radios measure through the control plane
        (net/uhd_rounds.py is the calibration link), right before round 1."""
        if not air_capabilities(self.cfg.air.name).in_session_calibration:
            raise UserError(f"calibration.session needs an air that calibrates in session (uhd), not "
                            f"'{self.cfg.air.name}'")
        if self.air is None:
            self.parts = parts
            self._open_hub()
            self.air.start()
        return self.air

    def calibrated(self, path) -> None:
        self.air.use_calibration(path)
        self.cal_path, self.session_cal_text = Path(path), Path(path).read_text()   # sent to the clients each round
        self.cal_epochs = self._epochs()                   # the radios' tunings this calibration belongs to
        self.drift_seen = ""
        if self.cal_epochs is not None:
            log.info("calibrated under tuning epochs %s", ", ".join(f"{n} {e}" for n, e in sorted(self.cal_epochs.items())))

    # -- calibration epochs and link health (air uhd) ---------------------------------------------
    def _epochs(self) -> dict | None:
        return self.air.epochs() if isinstance(self.air, TestbedUhdAir) else None

    def stale_tunings(self) -> list[str]:
        """The radios whose tuning epoch changed since the calibration in use was taken: 'receiver (a -> b)'."""
        if self.cal_epochs is None:
            return []
        now = self._epochs() or {}
        return [f"{n} ({self.cal_epochs[n] or '?'} -> {now.get(n) or '?'})" for n in sorted(self.cal_epochs)
                if now.get(n, self.cal_epochs[n]) != self.cal_epochs[n]]

    def recalibration_due(self) -> tuple[str, str]:
        """(why a recalibration is due, or ''; why the run must stop instead, or '') before the next round: a
        radio re-tuned since the calibration (always recalibrated in session; with a calibration file the run
        stops: re-run `otafl-sdr calibrate`), or the link health drifted (``air.on_drift``)."""
        if not isinstance(self.air, TestbedUhdAir) or self.cfg.air.csi != "calibrated":
            return "", ""
        rejoin(self, -1, [])                               # a restarted dead client: its new epoch counts now
        stale = self.stale_tunings()
        why = f"tuning epoch changed: {', '.join(stale)}" if stale else ""
        if not why and self.drift_seen and self.cfg.air.on_drift != "ignore":
            why = f"link drift: {self.drift_seen}"
            if self.cfg.air.on_drift == "stop":
                return "", self._stop(f"{why} (air.on_drift = 'stop'); checkpoint kept: recalibrate and resume")
        if not why:
            return "", ""
        if self.session_cal_text is None:
            return "", self._stop(f"{why}; the calibration in {self.cfg.calibration.file or 'use'} is stale: run "
                                  f"`otafl-sdr calibrate all` again and resume (or use calibration.session = true)")
        end = time.time() + startup_s(self.cfg)            # every radio of the calibration back and ready
        while not all(self.hub.ready(n) for n in self.roster if n not in self.dead_clients):
            if time.time() >= end:
                return "", self._stop(f"{why}, but not every node was back within {startup_s(self.cfg):g} s to "
                                      f"recalibrate; checkpoint kept, resume with --resume")
            self.pump(0.1)
        log.warning("recalibrating before the next round: %s", why)
        return why, ""

    def start(self) -> None:
        if not getattr(self, "_started", False):
            self.air.start()
            self._started = True
            if self.cal_epochs is None:                    # a calibration file: the tunings the run starts with
                self.cal_epochs = self._epochs()

    def close(self) -> None:
        if self.air is not None:
            self.air.close()
        if self.hub is not None:
            self.control_plane = {"endpoint": self.hub.endpoint, "dropped_messages": self.hub.dropped}
            self.hub.close()
            self.hub = None

    def describe(self) -> dict:
        return self.air.describe() if self.air is not None else {}

    def delivered_jammer_gain(self) -> float | None:
        return self.air.delivered_jammer_gain() if self.air is not None else None

    rerun_lost = rerun_lost                      # a round lost to a node's restart runs again (net/rejoin.py)

    def plan_rng(self, round_index: int):
        return seeded_plan_rng(self.cfg, round_index)      # the clients plan on the same stream

    # -- the node protocol -------------------------------------------------------------------------
    def pump(self, timeout: float) -> list[tuple[str, Message]]:
        """Poll the hub; log node errors; return the rest."""
        out = []
        for name, msg in self.hub.poll(timeout):
            if msg.type == "error":
                text = f"{name}: {msg['message'].splitlines()[-1] if msg['message'] else ''}"
                log.error("node error from %s", text)
                self.node_errors.append(text)
                continue
            if msg.type == "radio":                      # a uhd node's actual radio settings
                if isinstance(self.air, TestbedUhdAir):
                    self.air.note_radio(name, msg["settings"])
                continue
            out.append((name, msg))
        return out

    def clients(self) -> list[str]:
        return [f"client-{i}" for i in range(self.parts.K)]

    def declare_dead(self, names, round_index: int, notes: list, why: str) -> None:
        for n in names:
            if n not in self.dead_clients:
                p = self.hub.peers.get(n) if self.hub is not None else None    # registered again mid-round: rejoins
                self.dead_regs[n] = self.round_regs.get(n, p.registrations if p is not None else 0)
                self.dead_clients[n] = round_index
                notes.append(f"round {round_index}: {n} dead ({why}); "
                             f"{'dropped' if self.cfg.net.dead_client_policy == 'drop' else 'run aborted'} "
                             f"(net.dead_client_policy = {self.cfg.net.dead_client_policy})")
                log.warning("iteration %d: %s dead (%s)", round_index, n, why)

    @staticmethod
    def _stop(reason: str) -> str:
        log.error("stopping: %s", reason)
        return reason

    def server_only(self, round_index: int) -> None:
        self.pump(0)

    def _collect_acks(self, round_index: int, live: list[str], deadline: float) -> dict[str, Message]:
        acks: dict[str, Message] = {}
        waiting = set(live)
        while waiting and time.time() < deadline:
            for name, msg in self.pump(0.05):
                if msg.type == "ack" and msg["round"] == round_index and name in waiting:
                    acks[name] = msg
                    waiting.discard(name)
            waiting = {n for n in waiting if self.hub.alive(n) and not reregistered(self, n)}   # restarted: no ack
        return acks

    def take_notes(self) -> list[str]:
        notes, self.round_notes = self.round_notes, []
        return notes

    def local_round(self, round_index: int, w):
        cfg, hub, parts = self.cfg, self.hub, self.parts
        notes = self.round_notes                 # deaths, rejoins, restarts: the round's outcome (take_notes)
        K, d, tau = parts.K, parts.dim, cfg.train.tau
        names = self.clients()
        rejoin(self, round_index, notes)
        live = hub.live(n for n in names if n not in self.dead_clients)
        self.round_regs = {n: hub.peers[n].registrations for n in live}
        self.declare_dead([n for n in names if n not in self.dead_clients and n not in live], round_index, notes, "no heartbeat")
        if self.dead_clients and cfg.net.dead_client_policy == "abort":
            return self._stop(f"client(s) {', '.join(sorted(self.dead_clients))} dead and "
                              f"net.dead_client_policy = 'abort'")
        back = restarted_round(self, round_index, w, sorted(self.dead_clients), notes, cfg.net.timeout_s) if not live else None
        if back is not None:                   # the only client(s) died in an earlier round: one restarted
            return back
        if not live:
            return self._stop(f"no client node is alive ({', '.join(f'{n} dead since round {r}' for n, r in sorted(self.dead_clients.items()))}); "
                              f"checkpoint kept: restart the nodes (check their radios with `uhd_find_devices` on a uhd "
                              f"run) and resume with --resume")
        deadline = time.time() + cfg.net.timeout_s
        if isinstance(self.air, TestbedUhdAir):
            self.air.health = None                       # this round's link health, once demodulated
        if self.session_cal_text is not None:    # the clients plan on the server's calibration (a restarted
            hub.broadcast(live, "calibration", {"text": self.session_cal_text})                # one too)
        hub.broadcast(live, "round_start", {"round": round_index, "alpha_u": float(getattr(parts.policy, "alpha_u", 0.0)),
                                            "mu": float(parts.algorithm.local_mu), "deadline": deadline,
                                            "t_tx": 0.0, "diagnostic": self.diagnostic},
                      {"w": w.detach().cpu().numpy()})
        log.info("iteration %d: round_start to %d clients", round_index, len(live))
        acks = self._collect_acks(round_index, live, deadline)
        log.info("iteration %d: %d ack(s)", round_index, len(acks))
        again = restart_in_round(self, round_index, w, notes, live, startup_s(cfg))   # a node restarted: the round again
        if again is not None:                                                  # (net/rejoin.py)
            return again
        missing = [n for n in live if n not in acks]
        self.declare_dead(missing, round_index, notes, "no ack by the deadline" if all(hub.alive(n) for n in missing)
                          else "heartbeats stopped")
        again = restarted_round(self, round_index, w, missing, notes, startup_s(cfg)) if not acks and missing else None
        if again is not None:                    # the only client(s) died and one restarted: the round again
            return again
        if missing and cfg.net.dead_client_policy == "abort":
            return self._stop(f"client(s) {', '.join(missing)} dead and net.dead_client_policy = 'abort'")
        if not acks:
            return self._stop(f"round {round_index}: no client answered")
        self.acks = acks
        acked = np.array([f"client-{i}" in acks for i in range(K)])
        payload = np.zeros((K, d))
        if self.diagnostic:
            for i in np.flatnonzero(acked):
                upd = acks[f"client-{i}"].arrays.get("update")
                if upd is None or upd.shape != (d,):
                    raise AirError(f"client-{i} sent no update of {d} values in diagnostic mode")
                payload[i] = upd.astype(np.float64) / tau               # exactly the in-process payload
        loss = np.array([acks[f"client-{i}"]["train_loss"] if acked[i] and
                         acks[f"client-{i}"]["train_loss"] is not None else np.nan for i in range(K)])
        trained = np.flatnonzero(acked & np.isfinite(loss))
        p = np.asarray(parts.data.p)
        local_loss = float((p[trained] / p[trained].sum()) @ loss[trained]) if len(trained) else None
        clipped = np.array([bool(acks[f"client-{i}"]["clipped"]) if acked[i] else False for i in range(K)])
        return LocalRound(payload=payload, w=w, absent=~acked, train_loss=local_loss, clipped=clipped)

    def settle_plan(self, plan, local) -> None:
        """A client's private coin (e.g. CDPB-mixed) is its decision; the others must match the plan."""
        for i in np.flatnonzero(~local.absent):
            m = self.acks[f"client-{i}"]
            if m["mode"] != plan.mode[i]:
                plan.mode[i] = m["mode"]
                plan.alpha[i] = 0 if m["mode"] == "silent" else complex(m["alpha_re"], m["alpha_im"])
                continue
            self._check_decision(i, m, plan)

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

    def preflight(self, plan, local) -> dict:
        # the radios can carry it, before accounting; the uhd air's planned power goes into the row
        return self.air.preflight_acks(plan, self.acks) or {}

    def recorded(self, round_index: int) -> None:
        self.faults.point("recorded", round_index)

    def _infrastructure(self, plan) -> list[str]:
        names = ["receiver"] + (["channel"] if self.air.channel_node else [])
        if plan.alpha_cj > 0:
            if "jammer" not in self.roster:
                raise UserError("the plan needs the jammer but the testbed has none (power.jammer = false)")
            names.append("jammer")
        return names

    def ready(self, plan, round_index: int) -> str:
        infra = self._infrastructure(plan)
        end = time.time() + startup_s(self.cfg)
        while not all(self.hub.ready(n) for n in infra):
            if time.time() >= end:
                gone = [n for n in infra if not self.hub.alive(n)]
                return (f"round {round_index}: {', '.join(gone)} gone and not back within {startup_s(self.cfg):g} s; "
                        f"checkpoint kept, resume with --resume")
            self.pump(0.1)
        return ""

    def attempt(self, plan, round_index: int, attempt: int) -> Attempt:
        notes: list[str] = []                     # deaths and IQ attacks during the attempt: Attempt.notes
        senders = [i for i in range(self.parts.K) if plan.mode[i] != "silent" and plan.alpha[i] != 0]
        why = refused_unsent(self, round_index, senders)   # a radio re-tuned / a sender restarted since the plan (net/rejoin)
        if why:                                   # not sent: its booking stays (withdrawn), no retry on this plan
            return Attempt(Reception(None, ok=False, reason=why), unsent=True, final=True)
        rec, died = self.air.attempt(round_index, attempt, plan, senders, self._infrastructure(plan), notes)
        if isinstance(self.air, TestbedUhdAir) and rec.ok and self.cfg.air.csi == "calibrated":
            judge_health(self, round_index, attempt)       # net/link_watch.py
        uhd = isinstance(self.air, TestbedUhdAir)    # its handshake proves unsent; a clock refused every attempt
        refused = self.air.refused if uhd else ""    # of the round stops the run (net/uhd_clock.py)
        self.clock_refusals[round_index] = self.clock_refusals.get(round_index, 0) + bool(refused)
        refused = refused if self.clock_refusals[round_index] > self.cfg.air.retries else ""
        stop = refused or self.iq_guard.judge(round_index, attempt, rec, notes)
        return Attempt(rec, infrastructure_died=died, unsent=uhd and self.air.unsent,
                       final=lost_to_restart(self, round_index, senders, rec), stop=stop, notes=notes)

    def round_done(self, round_index: int, uses_clients: bool) -> None:
        if uses_clients:
            self.hub.broadcast(self.hub.live(self.hub.peers), "round_end", {"round": round_index})
        self.faults.point("released", round_index)

    def row_written(self, round_index: int) -> None:
        self.faults.point("row", round_index)

    def row_fields(self) -> dict:
        out = {"dead_clients": sorted(self.dead_clients)}
        if isinstance(self.air, TestbedUhdAir):         # reference statistics only: no client data
            out["link_health"] = dict(self.air.health) if self.air.health else None
        return {**out, **round_fields(self)}         # a recalibration in the round (net/rejoin.py)

    def summary_fields(self, rows: list) -> dict:
        prior_dead = set()
        for r in rows:
            prior_dead.update(r.get("dead_clients") or [])
        s = {"dead_clients": sorted(prior_dead | set(self.dead_clients)), "node_errors": self.node_errors[-20:]}
        if self.diagnostic:
            s["private"] = "not private (diagnostics): clients sent norms, losses and updates in the clear"
        plane = self.control_plane if self.hub is None else {"endpoint": self.hub.endpoint,
                                                             "dropped_messages": self.hub.dropped}
        if self.iq_guard.rounds:
            s["iq_attacked_rounds"] = sorted(self.iq_guard.rounds)
        s["control_plane"] = {"endpoint": plane["endpoint"], "curve": self.curve,
                              "diagnostic_payloads": self.diagnostic, "dropped_messages": plane["dropped_messages"]}
        return s
