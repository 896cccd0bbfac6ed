"""A restarted client node rejoins the testbed's run (issue 25, item 1): a client declared dead (no heartbeat, no
ack) that registers again and finishes its set-up is taken back, never dead for good. On the uhd testbed its
radio was opened again (a new tuning epoch, net/uhd_port.py, after its reopen retries), so the calibration is
stale: the server recalibrates (channels and jammer) before the client sends anything (server.recalibration_due;
an attempt planned on the old calibration is refused unsent, its booking carrying the retry).

When every client of a round is gone (one client: its node was killed) and ``net.dead_client_policy`` is 'drop',
the server waits up to ``startup_s`` for one to come back restarted, sends it the calibration and the round's
``round_start`` again, and goes on with its ack, instead of stopping the run."""
from __future__ import annotations

import logging
import time

log = logging.getLogger("otafl.net")


def rejoin(server, it: int, notes: list) -> list[str]:
    """The dead clients that registered again since they were declared dead and are ready: back in the run
    (a note and a log line each); returns their names."""
    back = []
    for n in sorted(server.dead_clients):
        p = server.hub.peers.get(n)
        if p is not None and server.hub.ready(n) and p.registrations != server.dead_regs.get(n):
            back.append(n)
            since = server.dead_clients.pop(n)
            server.rejoin_notes.append((n, since))     # noted in the next round's notes (it < 0: between rounds)
            log.warning("%s rejoined the run (restarted after it was declared dead in round %d)", n, since)
    if it >= 0:
        notes.extend(f"round {it}: {n} rejoined (restarted after it was declared dead in round {since})"
                     for n, since in server.rejoin_notes)
        server.rejoin_notes = []
    return back


def restarted_round(server, it: int, w, missing: list[str], notes: list, wait: float) -> dict:
    """No client answered round ``it``: wait for one of ``missing`` to restart (policy 'drop', up to ``wait`` s),
    then run the round's local step on it; returns the acks (empty: none came back)."""
    cfg, hub, parts = server.cfg, server.hub, server.parts
    if cfg.net.dead_client_policy != "drop":
        return {}
    log.warning("iteration %d: no client answered; waiting up to %g s for %s to restart", it, wait, ", ".join(missing))
    end, back = time.time() + wait, []
    while time.time() < end and not back:
        server.pump(0.2)
        back = rejoin(server, it, notes)
    if not back:
        return {}
    deadline = time.time() + cfg.net.timeout_s
    if server.session_cal_text is not None:
        hub.broadcast(back, "calibration", {"text": server.session_cal_text})
    hub.broadcast(back, "round_start", {"round": it, "alpha_u": float(getattr(parts.policy, "alpha_u", 0.0)),
                                        "mu": float(parts.algorithm.local_mu), "deadline": deadline, "t_tx": 0.0,
                                        "diagnostic": server.diagnostic}, {"w": w.detach().cpu().numpy()})
    log.info("iteration %d: round_start again to %s (restarted)", it, ", ".join(back))
    acks = server._collect_acks(it, back, deadline)
    server.declare_dead([n for n in back if n not in acks], it, notes, "no ack after its restart")
    return acks
