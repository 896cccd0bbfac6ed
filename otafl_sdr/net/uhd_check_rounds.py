"""The coherence check's rounds on the uhd testbed (issue 34, item 4; experiment/coherence_gate.py): known,
public payloads sent by the client nodes' own radios before round 1, as the in-process air sends them.

In a testbed round each client plans its own factor from its own data (net/client.py); a check round has no
client data, so the server plans it (the check's planner: workload/round_plan.plan_round on
experiment/coherence_rounds.known_payload) and tells each client its share in ``check_decision``: the
round's factor alpha_i and mode, the row of the plan's payload it is to send ((d,) float64: the known
payload, with whatever the policy added to it, all drawn by the server), and on OFDM its alpha_ik
(net/uhd_ofdm_round.alpha_sc_of on the server's plan). Then the round is an ordinary attempt
(net/uhd_rounds.TestbedUhdAir.attempt): the handshake, the timed bursts with each client's calibrated
pre-compensation, the receiver's capture, each client's sounding read by the server (``air.coherence =
"measure"``: the testbed measures, it does not track).

A check round's number is ``check_round(r)`` = -(CHECK_ROUND_BASE + r) (r = 1, 2, ...): never a run's
round (>= 1) nor a calibration exchange (-1), so a ``check_decision`` cannot replace a client's decision of
a real round, and nothing of a check round reaches the ledger (no release id; the server logs no
"received the capture of release" line for it). A client keeps a check round's decision until its next
``round_start``.

Shapes: payload rows (d,) float64, d = the model's size; alpha_sc (U,) complex128, U = the used subcarriers."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

CHECK_ROUND_BASE = 1000


def check_round(r: int) -> int:
    """The protocol's round number of check round ``r`` (module doc)."""
    return -(CHECK_ROUND_BASE + int(r))


def is_check_round(round_index: int) -> bool:
    return int(round_index) <= -(CHECK_ROUND_BASE + 1)


class TestbedCheckAir:
    """The air interface experiment/coherence_rounds.known_rounds drives (``preflight``, ``transmit``,
    ``round_fields``) over the testbed's nodes; ``air``: the server's TestbedUhdAir, under the check's
    config (``rounds_under``)."""

    def __init__(self, air, before_round: int = 1):
        self.air = air
        self.before_round = int(before_round)        # the run's round the check comes before
        self.attempts: dict[int, int] = {}

    def gone_clients(self, K: int) -> np.ndarray:
        """(K,) bool: the clients a check round leaves silent (experiment/coherence_rounds.known_rounds). Under
        ``net.dead_client_policy = "drop"`` a client node gone since the calibration or during the check (no
        heartbeat, or already counted dead) is declared dead here, noted in the first round's notes, and the check measures the
        others, as the run's rounds go on without it; under "abort" none is left out: its check rounds are
        lost and the check stops the run, the lost attempts naming it. Liveness only, never data."""
        exp = self.air.exp
        names = [f"client-{i}" for i in range(int(K))]
        if exp.cfg.net.dead_client_policy != "drop":
            return np.zeros(int(K), dtype=bool)
        exp.declare_dead([n for n in names if n not in exp.dead_clients and not exp.hub.alive(n)], self.before_round,
                         exp.round_notes, "gone at the coherence check")
        gone = np.array([n in exp.dead_clients for n in names], dtype=bool)
        return gone if not gone.all() else np.zeros(int(K), dtype=bool)  # none left: the rounds are lost, the check fails

    def preflight(self, plan) -> None:
        """The radios can carry the check's plan (its power plan: a PA's compression refused, UserError)."""
        self.air.preflight_acks(plan, {})           # sets the plan's tx_scale / tx_amp (radio/uhd_power.py)

    def transmit(self, plan, rng=None):
        """One attempt of check round ``plan.round`` on the nodes' radios (``rng`` unused: the nodes' and the
        lab's noise is their own). Returns the Reception."""
        from otafl_sdr.phy.reference_design import sending
        r = check_round(plan.round)
        attempt = self.attempts[r] = self.attempts.get(r, 0) + 1
        senders = [int(i) for i in np.flatnonzero(sending(plan))]
        self._decide(plan, r, senders)            # every attempt: a client node restarted since holds none
        notes: list[str] = []
        rec, _ = self.air.attempt(r, attempt, plan, senders, ["receiver"], notes)
        return rec

    def _decide(self, plan, r: int, senders: list[int]) -> None:
        """Each sender's share of the check's plan (``check_decision``, module doc); messages to one node
        keep their order, so it holds the decision before its ``transmit_at``."""
        exp = self.air.exp
        alpha_sc = None
        if isinstance(plan.extra, dict) and "ofdm" in plan.extra:      # every client's alpha_ik, planned once
            from otafl_sdr.net.uhd_ofdm_round import alpha_sc_of
            alpha_sc = alpha_sc_of(exp.cfg, plan, exp.parts.csi, np.asarray(plan.extra.get("csi", plan.h), np.complex128))
        for i in senders:
            a = complex(plan.alpha[i])
            arrays = {"payload": np.ascontiguousarray(plan.payload[i], dtype=np.float64)}
            if alpha_sc is not None:
                arrays["alpha_sc"] = alpha_sc[i]
            exp.hub.send(f"client-{i}", "check_decision", {"round": r, "mode": str(plan.mode[i]),
                                                           "alpha_re": a.real, "alpha_im": a.imag}, arrays)

    def round_fields(self) -> dict:
        """The round's link health (each client's sounding in ``clients``), as the in-process air's row."""
        health = self.air.health
        return {"link_health": dict(health) if health else None}


@contextmanager
def rounds_under(air, cfg, before_round: int = 1):
    """The testbed server's air under the check's config for a while (experiment/coherence_gate.py): the
    server's config swapped, the per-client loop and the power plan started again before and after; yields
    the :class:`TestbedCheckAir` the check's rounds go through."""
    exp = air.exp
    run_cfg, exp.cfg = exp.cfg, cfg

    def fresh():
        air.coherence, air.coherence_alarms, air._power, air.health = None, [], None, None
    fresh()
    try:
        yield TestbedCheckAir(air, before_round)
    finally:
        exp.cfg = run_cfg
        fresh()


def client_decision(msg, dim: int | None) -> dict:
    """A client's check round decision from the server's ``check_decision`` (UserError, one line, for one
    that is not a check round's or whose payload is not (d,) finite)."""
    from otafl_sdr.errors import UserError
    r = int(msg["round"])
    if not is_check_round(r):
        raise UserError(f"'check_decision' for round {r}, which is no check round (<= {check_round(1)})")
    payload = np.asarray(msg.arrays["payload"], np.float64)
    if payload.ndim != 1 or (dim is not None and payload.shape != (dim,)) or not np.isfinite(payload).all():
        raise UserError(f"'check_decision': the payload must be {dim or 'd'} finite values, not shape "
                        f"{payload.shape}")
    mode = str(msg["mode"])
    dec = {"alpha": complex(msg["alpha_re"], msg["alpha_im"]), "payload": payload, "mode": mode}
    if "alpha_sc" in msg.arrays:
        dec["alpha_sc"] = np.asarray(msg.arrays["alpha_sc"], np.complex128).ravel()
    return dec


__all__ = ["CHECK_ROUND_BASE", "TestbedCheckAir", "check_round", "client_decision", "is_check_round",
           "rounds_under"]
