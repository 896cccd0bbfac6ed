"""Fault injection for the testbed's fault tests: a node SIGKILLs itself at a named point of the round
protocol, so "killed mid-round" happens at a known moment rather than by a racing timer.

``OTAFL_NET_DIE_AT="client-1@round_start:2,server@recorded:3"`` kills client-1 when it receives the
round_start of iteration 2, and the server right after the ledger recorded iteration 3 (before the
model is released). Points: round_start, transmit (clients), receive (receiver), channel_round
(channel), jam (jammer), recorded (the ledger line is written, nothing sent), released (the round went
on the air, its row not yet written), row (the row is written, its checkpoint not yet) (server). The
testbed supervisor does not pass the variable on to a node it restarts."""
from __future__ import annotations

import logging
import os
import signal

ENV = "OTAFL_NET_DIE_AT"
log = logging.getLogger("otafl.net")


def parse(spec: str) -> set[tuple[str, str, int]]:
    out = set()
    for item in filter(None, (s.strip() for s in spec.split(","))):
        try:
            who, rest = item.split("@", 1)
            point, rnd = rest.split(":", 1)
            out.add((who, point, int(rnd)))
        except ValueError:
            log.warning("ignoring malformed %s entry %r (want NAME@POINT:ROUND)", ENV, item)
    return out


class FaultPlan:
    def __init__(self, name: str, spec: str | None = None):
        self.name = name
        self.points = {(p, r) for who, p, r in parse(spec if spec is not None else os.environ.get(ENV, ""))
                       if who == name}

    def point(self, point: str, rnd: int) -> None:
        """SIGKILL this process if a fault is planned here."""
        if (point, int(rnd)) in self.points:
            log.warning("fault injection: %s dies (SIGKILL) at %s of iteration %d", self.name, point, rnd)
            for h in logging.getLogger().handlers:
                h.flush()
            os.kill(os.getpid(), signal.SIGKILL)
