"""Fault injection for the testbed's fault tests: a node SIGKILLs itself at a named point of the round
protocol, so "killed mid-round" happens at a known moment rather than by a racing timer.

``OTAFL_NET_DIE_AT="client-1@round_start:2,server@recorded:3"`` kills client-1 when it receives the
round_start of iteration 2, and the server right after the ledger recorded iteration 3 (before the
model is released). Points: round_start, transmit, check (clients; check: a coherence-check round's
decision, its round number net/uhd_check_rounds.check_round(r): -1001 for the first), receive (receiver), channel_round
(channel), jam (jammer), jam_armed (uhd jammer: armed, its burst not yet sent), recorded (the ledger line
is written, nothing sent), released (the round went on the air, its row not yet written), row (the row is
written, its checkpoint not yet) (server). An entry ending in ``:late`` (``jammer@jam_armed:2:late``) makes the node late instead: it
sleeps until ``LATE_S`` past the time the point names (its burst's time). The testbed supervisor does not
pass the variable on to a node it restarts."""
from __future__ import annotations

import logging
import os
import signal
import time

ENV = "OTAFL_NET_DIE_AT"
LATE_S = 0.05
log = logging.getLogger("otafl.net")


def parse_actions(spec: str) -> set[tuple[str, str, int, str]]:
    """(name, point, round, 'die' | 'late') of each entry."""
    out = set()
    for item in filter(None, (s.strip() for s in spec.split(","))):
        try:
            who, rest = item.split("@", 1)
            point, round_index, *action = rest.split(":")
            act = action[0] if action else "die"
            if len(action) > 1 or act not in ("die", "late"):
                raise ValueError(act)
            out.add((who, point, int(round_index), act))
        except ValueError:
            log.warning("ignoring malformed %s entry %r (want NAME@POINT:ROUND[:late])", ENV, item)
    return out


def parse(spec: str) -> set[tuple[str, str, int]]:
    return {(who, p, r) for who, p, r, _ in parse_actions(spec)}


class FaultPlan:
    def __init__(self, name: str, spec: str | None = None):
        self.name = name
        spec = spec if spec is not None else os.environ.get(ENV, "")
        self.actions = {(p, r): a for who, p, r, a in parse_actions(spec) if who == name}
        self.points = set(self.actions)

    def point(self, point: str, round_index: int, until: float | None = None) -> bool:
        """SIGKILL this process if a fault is planned here; with ``:late``, sleep until ``LATE_S`` past
        ``until`` (UTC seconds, e.g. the burst's time) instead and return True (the caller then acts as
        its radio does with a late command, also on UHD's simulator, which keeps no device time)."""
        act = self.actions.get((point, int(round_index)))
        if act == "late" and until is not None:
            log.warning("fault injection: %s is late at %s of iteration %d", self.name, point, round_index)
            time.sleep(max(float(until) + LATE_S - time.time(), 0.0))
            return True
        if act is not None:
            log.warning("fault injection: %s dies (SIGKILL) at %s of iteration %d", self.name, point, round_index)
            for h in logging.getLogger().handlers:
                h.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return False
