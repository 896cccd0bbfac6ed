"""How a round reaches the clients and the air: the one interface the round pipeline (rounds/pipeline.py)
drives. ``rounds.in_process.AirTransport`` trains every client in this process and carries the round over
an Air (sim, loopback, in-process zmq, uhd); ``net.server.TestbedTransport`` sends the round to client,
jammer, receiver (and channel) node processes. The pipeline never asks which one it holds.

Two roles, each a typing.Protocol: ``ClientSide`` (the clients' computation and the run's lifecycle) and
``AirCarrier`` (the planned round on the air); ``Transport`` is both. Nothing is threaded through the calls
to collect notes: a transport returns them (``Attempt.notes``, ``take_notes``) and the pipeline puts them in
the round's outcome."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from otafl_sdr.transmission import Reception


@dataclass
class Attempt:
    """One attempt on the air: what came back, whether a receiver / channel / jammer died during it (the
    attempt is redone once it is back), or why the run must stop."""

    reception: Reception
    infrastructure_died: bool = False
    stop: str = ""
    unsent: bool = False      # provably nothing went on the air (no client was told): its booking carries the retry
    final: bool = False       # no retry of this plan can be sent (a sender's process died / restarted): the round is lost
    notes: list[str] = field(default_factory=list)     # what the transport noted during the attempt


@runtime_checkable
class ClientSide(Protocol):
    """The run's clients and lifecycle: who computes a round's payloads, how the run starts and ends.

    evaluation_visible: whether the experimenter's evaluation-side figures (NMSE, clipping, power ratios)
    are known to the server (in process: yes; on the testbed only with net.diagnostics). Explicit
    subclasses inherit the defaults below (a transport that trains in process and has nothing to wait for)."""

    evaluation_visible: bool = True

    def bind(self, parts) -> None:
        """The built run (workload.parts.RunParts), before round 1."""
        self.parts = parts

    def calibration_link(self, parts=None):
        """The calibration link of an in-session calibration (calibration.session), opened on demand
        (``parts``: the run as built so far, before its CSI)."""
        raise NotImplementedError

    def calibrated(self, path) -> None:
        """An in-session calibration was written to ``path``: pre-compensate with it."""

    def start(self) -> None:
        """Open radios / wait for nodes; raise AirError with a clear message on failure."""

    def close(self) -> None:
        """Release everything; safe to call twice."""

    def describe(self) -> dict:
        return {}

    def local_round(self, round_index: int, w):
        """The clients' local computation of iteration ``round_index``: a workload.LocalRound, or a str (stop)."""
        raise NotImplementedError

    def settle_plan(self, plan, local) -> None:
        """Adopt the clients' own decisions into the server's plan (the testbed's acks); default none."""

    def server_only(self, round_index: int) -> None:
        """A server-only iteration is about to run (no client data)."""

    def round_done(self, round_index: int, uses_clients: bool) -> None:
        """The round's row is complete (the model it protects is released)."""

    def row_written(self, round_index: int) -> None:
        """The round's row is in rounds.jsonl, its checkpoint not yet written (a fault-injection point on
        the testbed: a crash here makes the resume re-run a round that was released)."""

    def take_notes(self) -> list[str]:
        """What the transport noted since it was last asked (the testbed: clients declared dead, rejoined,
        recalibrated in the round), for the round's outcome; default none."""
        return []

    def summary_fields(self, rows: list) -> dict:
        return {}


@runtime_checkable
class AirCarrier(Protocol):
    """How a planned round goes on the air: the plan's random stream, the radios' checks, the attempts."""

    def delivered_jammer_gain(self) -> float | None:
        """The jammer's delivered power gain the air measured (privacy/delivered_jammer.py); None if not."""
        return None

    def plan_rng(self, round_index: int) -> np.random.Generator:
        raise NotImplementedError

    def preflight(self, plan, local) -> dict:
        """Check the radios can carry the plan before it is accounted; what the row records of it."""
        return {}

    def recorded(self, round_index: int) -> None:
        """The round's mechanism is in the ledger (a fault-injection point on the testbed)."""

    def ready(self, plan, round_index: int) -> str:
        """Wait for what the next attempt needs; a reason to stop, or ''."""
        return ""

    def attempt(self, plan, round_index: int, attempt: int) -> Attempt:
        """Carry attempt ``attempt`` of round ``round_index``; ``plan.extra["release"]`` is the release id its
        ledger line booked (rounds/accounting.release), for the nodes to log; ``Attempt.notes``: what the
        transport noted during it."""
        raise NotImplementedError

    def row_fields(self) -> dict:
        return {}


class Transport(ClientSide, AirCarrier, Protocol):
    """Both roles: what the round pipeline (rounds/pipeline.py) and the orchestrator drive. Implementations
    subclass it explicitly (rounds/in_process.AirTransport, net/server.TestbedTransport) and inherit the
    defaults; a wrapper (audit/transport.AuditTransport) satisfies it structurally."""
