"""A restarted node rejoins the testbed's run (issue 25, item 1), at no 60 s wait and no round: a client declared
dead (no heartbeat, no ack) that registers again and finishes its set-up is taken back, never dead for good. On
the uhd testbed its radio was opened again (a new tuning epoch, net/uhd_port.py, after its reopen retries), so
the calibration is stale: the server recalibrates (channels and jammer) before the client sends anything
(server.recalibration_due; an attempt planned on the old calibration is refused unsent, its booking carrying the
retry).

A client that registers again *while the server waits for the round's acks* (its node was killed and started
again) is noticed at once by its registration (``reregistered``), not after the ack deadline
(``net.timeout_s``): nothing of the round is booked yet, so the round starts again (``restart_in_round``): once
the node is ready the server recalibrates in the round when a tuning epoch changed (``recalibrate``), sends the
calibration and ``round_start`` to every live client again and plans on their new acks. When every client of a
round is gone (one client: its node was killed) and ``net.dead_client_policy`` is 'drop', the server waits up
to ``startup_s`` for one to come back restarted and starts the round again the same way (``restarted_round``).

A node that dies or restarts *after* the round was booked (mid-exchange: the client was told to transmit) loses
that round: the release rule books what went out (rounds/accounting.py: the booking stays, a client told to
transmit may have sent; a burst whose protective noise was not delivered is charged), the exchange stops waiting
for the dead process's burst report at once (net/uhd_rounds.py) and no retry of the round's plan is made
(``Attempt.final``: the restarted process holds no decision for it). The orchestrator then runs one more client
round at the end of the run (``rerun_lost``), a new round, planned on the new calibration and booked as its own
release, so the run still completes ``run.rounds`` useful rounds; the lost round stays booked and its row shows
it lost. Where the budget cannot take that extra release (``privacy.enforce``: the ledger's eps after one more
round of the lost one's mechanism would pass ``privacy.eps``, e.g. under ``privacy.targeting = "target"``,
which plans the budget for ``run.rounds`` releases exactly), the round is not run again: the run says so in its
notes and finishes the rounds it planned (firmware_notes/second_week.md)."""
from __future__ import annotations

import dataclasses
import logging
import time

log = logging.getLogger("otafl.net")

MAX_RESTARTS = 3         # a round started again at most this often for nodes restarting in it


def rejoin(server, round_index: int, notes: list) -> list[str]:
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
    if round_index >= 0:
        notes.extend(f"round {round_index}: {n} rejoined (restarted after it was declared dead in round {since})"
                     for n, since in server.rejoin_notes)
        server.rejoin_notes = []
    return back


def reregistered(server, name: str) -> bool:
    """``name`` registered again since the round started: its old process (and whatever it was to answer) is gone."""
    p = server.hub.peers.get(name) if server.hub is not None else None
    return p is not None and name in server.round_regs and p.registrations != server.round_regs[name]


def restart_in_round(server, round_index: int, w, notes: list, live: list[str], wait: float):
    """After round ``round_index``'s acks: a client of ``live`` that registered again meanwhile, or a radio whose tuning
    epoch changed, starts the round again (nothing of it is booked yet): the restarted nodes awaited (up to
    ``wait`` s), recalibrated when a tuning changed, the round's ``round_start`` sent again. Returns what the
    round's local step returns then (or a stop), or None to go on with the acks in hand."""
    restarted = [n for n in live if reregistered(server, n)]
    stale = server.stale_tunings() if server.cfg.air.csi == "calibrated" else []
    if not (restarted or stale) or server.round_restarts.get(round_index, 0) >= MAX_RESTARTS:
        return None
    if restarted:
        log.warning("iteration %d: %s registered again while the round waited for its acks (restarted); the round "
                    "starts again", round_index, ", ".join(restarted))
        notes.append(f"round {round_index}: {', '.join(restarted)} restarted while the round waited for its acks; the round "
                     f"started again (nothing of it was booked)")
        end = time.time() + wait
        while time.time() < end and not all(server.hub.ready(n) for n in restarted):
            server.pump(0.2)
    return again(server, round_index, w, notes)


def again(server, round_index: int, w, notes: list):
    """Round ``round_index`` from its start: recalibrated first when a radio re-tuned (in session), then its local step."""
    server.round_restarts[round_index] = server.round_restarts.get(round_index, 0) + 1
    why, stop = server.recalibration_due()
    if stop:
        return stop
    if why:
        recalibrate(server, round_index, why, notes)
    return server.local_round(round_index, w)            # notes: the server's round notes, as ``notes`` is


def recalibrate(server, round_index: int, why: str, notes: list) -> None:
    """The in-session calibration's channel and jammer steps again, in the round (before its plan: nothing of it
    booked), as the orchestrator runs them between rounds; the round's row names the reason."""
    from otafl_sdr.calibration.session import recalibration_steps, run_calibration
    cfg, path = server.cfg, server.cal_path
    t0 = time.perf_counter()
    run_calibration(cfg, recalibration_steps(cfg), path, air="uhd", link=server.air,
                    echo=lambda m: log.info("[calibration] %s", m))
    server.calibrated(path)
    server.parts.use_calibration(path)
    server.round_recal = why
    notes.append(f"round {round_index}: recalibrated in the round, before its plan ({why})")
    log.warning("iteration %d: recalibrated in the round (%.1f s), before its plan: %s", round_index,
                time.perf_counter() - t0, why)


def restarted_round(server, round_index: int, w, missing: list[str], notes: list, wait: float):
    """No client answered round ``round_index`` (or none was alive at its start: the only ones died in an earlier
    round): wait for one of ``missing`` to restart (policy 'drop', up to ``wait`` s), then start the round
    again with it (``again``); None: none came back."""
    if server.cfg.net.dead_client_policy != "drop" or server.round_restarts.get(round_index, 0) >= MAX_RESTARTS:
        return None
    log.warning("iteration %d: no client answered or is alive; waiting up to %g s for %s to restart", round_index, wait, ", ".join(missing))
    end, back = time.time() + wait, []
    while time.time() < end and not back:
        server.pump(0.2)
        back = rejoin(server, round_index, notes)
    if not back:
        return None
    log.info("iteration %d: the round starts again with %s (restarted)", round_index, ", ".join(back))
    return again(server, round_index, w, notes)


def refused_unsent(server, round_index: int, senders: list[int]) -> str:
    """Why round ``round_index``'s attempt must not be sent (nothing of it goes on the air), or '': a sender restarted
    since the round's plan (its process holds no decision for it), or a radio re-tuned since the calibration the
    plan used (the round lost; recalibrated before the next one)."""
    gone = [n for n in (f"client-{i}" for i in senders) if reregistered(server, n)]
    stale = server.stale_tunings() if server.cfg.air.csi == "calibrated" else []
    if gone:
        why = f"not sent: {', '.join(gone)} restarted since the round's plan (its decision is gone)"
    elif stale:
        why = f"not sent: the calibration is stale ({', '.join(stale)} re-tuned); recalibrating before the next round"
    else:
        return ""
    log.warning("round %d: %s", round_index, why)
    server.restart_lost[round_index] = why
    return why


def lost_to_restart(server, round_index: int, senders: list[int], rec) -> bool:
    """Round ``round_index``'s attempt was lost because a sender died or restarted during it: no retry of this plan can
    be sent (the final attempt: its process and its decision are gone); the round is run again at the end."""
    gone = [n for n in (f"client-{i}" for i in senders) if not server.hub.alive(n) or reregistered(server, n)]
    if rec.ok or not gone:
        return False
    server.restart_lost[round_index] = f"{', '.join(gone)} died or restarted during the exchange ({rec.reason})"
    log.warning("round %d: lost: %s; not retried on this plan", round_index, server.restart_lost[round_index])
    return True


def rerun_lost(server, row: dict, ledger, notes: list) -> bool:
    """After round ``row['round']``'s row: True when it was lost to a node's restart (or death) and one more client
    round is to run at the end of the run (a new round, its own booking), else False. Not run again (a note
    says why) when the privacy budget (``privacy.enforce``) cannot take one more release of the lost round's
    mechanism, or when the run already ran ``run.rounds`` extra rounds."""
    round_index = int(row["round"])
    why = server.restart_lost.pop(round_index, None)
    if why is None or not row.get("lost"):
        return False
    from otafl_sdr.privacy.base import mech_from_dict
    records = ledger.records()
    booked = [r for r in records if r["round"] == round_index and not (r.get("extra") or {}).get("fault")]
    if server.reruns >= server.cfg.run.rounds:
        notes.append(f"round {round_index}: lost ({why}); not run again: {server.reruns} rounds already ran again")
        return False
    if ledger.cfg.enforce and booked:
        nxt = dataclasses.replace(mech_from_dict(booked[0]), round=max(r["round"] for r in records) + 1)
        if ledger.would_exceed(nxt):
            note = (f"round {round_index}: lost ({why}); not run again: one more release would take eps past privacy.eps = "
                    f"{ledger.cfg.eps:g} (the run finishes the rounds it planned, one of them lost)")
            notes.append(note)
            log.warning("%s", note)
            return False
    server.reruns += 1
    notes.append(f"round {round_index}: lost ({why}); one more client round runs at the end of the run (planned on the "
                 f"current calibration, booked as its own release)")
    log.warning("round %d lost to a restart: one more client round at the end of the run", round_index)
    return True


def round_fields(server) -> dict:
    """The row's ``recalibration`` when the round recalibrated in itself (``recalibrate``), once."""
    why, server.round_recal = server.round_recal, ""
    return {"recalibration": why} if why else {}
