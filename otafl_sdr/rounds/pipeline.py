"""One round, for every air and every workload (docs/architecture.md, "One round, as the data flows"):

  local  the clients' computation (transport: in process, or the testbed's acks); no client is silenced
         by its data (a payload still holding NaN/inf is sent as zeros at the planned power)
  plan   workload/round_plan.plan_round (the one place a round is planned): channels (seeded), CSI, the
         power policy's plan; the clients' own decisions (testbed); the workload's finishing step
         (paper 002's client noise)
  account the ledger's restatement (CSI margin,
         calibrated / measured jammer noise: workload/booking.ledger_mechanism), the radios' preflight, the
         budget check
  record + release  the mechanism is recorded (fsync'ed) BEFORE anything is sent; every further attempt
         is a further release, booked before it is sent (accounting.release)
  step   the workload's server step on what was received, the policy's feedback, metrics, the row."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from otafl_sdr.airs import air_capabilities
from otafl_sdr.errors import AirError, BudgetExceeded
from otafl_sdr.workload.round_plan import PlannedRound, plan_round, server_only_booking
from otafl_sdr.rounds.accounting import release

# figures in rounds.jsonl computed by the experimenter from unprotected data (all clients' training data,
# the noiseless aggregate, clipping flags): for evaluation only, never released by the mechanism nor sent
# by the testbed's clients (outside net.diagnostics)
EVALUATION_FIELDS = ("train_loss", "local_train_loss", "aggregate_nmse", "aggregate_nmse_theory",
                     "aggregate_scale", "aggregate_residual_nmse", "aggregate_nmse_planned",
                     "aggregate_nmse_planned_theory", "clipped_fraction", "max_power_ratio")
HIDDEN_WITHOUT_DIAGNOSTICS = ("aggregate_nmse", "aggregate_nmse_theory", "aggregate_scale", "aggregate_residual_nmse",
                              "aggregate_nmse_planned", "aggregate_nmse_planned_theory", "clipped_fraction",
                              "max_power_ratio")


@dataclass
class RoundOutcome:
    """A finished round (its row and the new model) or a stop before anything was released; ``notes``: what
    happened in it (the transport's: deaths, rejoins, attacks; the release's: retries, charges; a loss)."""

    row: dict | None = None
    w: torch.Tensor | None = None
    stop: str = ""
    notes: list[str] = field(default_factory=list)


def max_power_ratio(plan) -> float | None:
    """max_i E||x_i||^2 / P_i (an evaluation figure; einsum: one pass, no (K, d) temporary)."""
    if plan.power_limit is None:
        return None
    energy = np.abs(plan.alpha) ** 2 * np.einsum("ij,ij->i", plan.payload, plan.payload)
    return float(np.max(energy / plan.power_limit))


def jammer_fields(rec) -> dict:
    """The jammer's delivered noise the air measured in this round (radio/jammer_slots.py) against what the
    ledger booked (privacy/jammer_shortfall.py), in the ledger's units (a share of sigma_eff^2): delivered,
    its s.e., booked, delivered / booked and its s.e., and the lower bound the round was charged at (None
    when not charged); an OFDM round's over its subcarriers (privacy/ofdm_jammer_shortfall.figures: delivered /
    booked the means, the ratio its profile's scale c) with ``jammer_profile`` ('scale': the calibrated
    profile held, or 'per subcarrier') and ``jammer_profile_p`` (the shape test's P-value). {} when the air
    measured none (no jammer, another air)."""
    m = rec.extra.get("jammer_slots") if isinstance(rec.extra, dict) else None
    if not m or "booked" not in m:
        return {}
    return {"jammer_delivered": m["delivered"], "jammer_delivered_std": m["delivered_std"],
            "jammer_booked": m["booked"], "jammer_delivered_ratio": m["ratio"],
            "jammer_delivered_ratio_std": m["ratio_std"], "jammer_charged_bound": m["bound"] if m["charged"] else None,
            "jammer_charged_sigma_eff": m.get("charged_sigma_eff"),
            **({"jammer_profile": m["mode"], "jammer_profile_p": m["shape_p"]} if "mode" in m else {})}


def eps_fields(eps: dict) -> dict:
    return {f"eps_{k}": v for k, v in eps.items()}


class RoundPipeline:
    """``RoundPipeline(parts, ledger, transport, record_iq).run(it, w, w_prev, evaluate)`` -> RoundOutcome."""

    def __init__(self, parts, ledger, transport, record_iq=lambda rec, plan, attempt: None):
        self.parts, self.ledger, self.transport, self.record_iq = parts, ledger, transport, record_iq

    def run(self, round_index: int, w, w_prev, evaluate: bool) -> RoundOutcome:
        parts = self.parts
        workload = parts.workload
        if not parts.algorithm.uses_clients(round_index):
            return self._server_only(round_index, w, w_prev, evaluate)
        local = self.transport.local_round(round_index, w)
        notes = self.transport.take_notes()                        # the clients' side: deaths, rejoins
        if isinstance(local, str):
            return RoundOutcome(stop=local, notes=notes)
        planned = self._plan(round_index, local)
        plan = planned.plan
        plan.mechanism = planned.booked(self.transport.delivered_jammer_gain())
        mapping = self.transport.preflight(plan, local)                 # the radios can carry it
        try:
            self.ledger.check(plan.mechanism)
        except BudgetExceeded as e:
            return RoundOutcome(stop=str(e), notes=notes)
        try:
            out = self._release(plan, round_index)
        except AirError as e:
            e.notes = [*notes, *e.notes, *self.transport.take_notes()]
            raise
        notes += out.notes
        if out.stop:
            return RoundOutcome(stop=out.stop, notes=notes + self.transport.take_notes())
        rec = out.reception
        for i in rec.extra.get("missing", []):                      # senders the air never heard
            plan.alpha[i] = 0
            plan.mode[i] = "silent"
        parts.policy.observe(round_index, rec.aggregate if rec.ok else None)   # feedback (LAPA's PID, eq. 10 of paper 004)
        step = workload.step(parts, round_index, local, plan, rec)
        if not rec.ok:
            notes.append(f"round {round_index}: lost after {out.attempts} attempt(s): {rec.reason}")
        row = {"round": round_index, "client_round": parts.algorithm.client_round(round_index)}
        row.update(workload.metrics(parts, step.w, step.train_loss, evaluate))
        row.update({
            "sensitivity": plan.mechanism.sensitivity, "sigma_eff": plan.mechanism.sigma_eff,
            "alpha_u": plan.alpha_u, "cj_active": bool(plan.alpha_cj > 0),
            "cj_power": float(plan.alpha_cj ** 2 * plan.dim), "cj_capped": bool(plan.extra.get("cj_capped", False)),
            "uses_clients": True, "lost": not rec.ok, "lost_reason": rec.reason if not rec.ok else "",
            "attempts": out.attempts, "faults": rec.faults, "channel_uses": rec.channel_uses, "air_s": rec.wall_s,
            **out.timing_counts(),                  # late / underflows / overflows over every attempt (issue 34)
            "transmitting": int(sum(m != "silent" for m in plan.mode)),   # planned modes and absent clients only
            "max_power_ratio": max_power_ratio(plan),
        })
        row.update(step.fields)
        row.update(jammer_fields(rec))
        if not self.transport.evaluation_visible:
            row.update({k: None for k in HIDDEN_WITHOUT_DIAGNOSTICS})
        row.update(self.transport.row_fields())
        row.update(mapping)
        row.update(eps_fields(self.ledger.epsilons()))
        self.transport.round_done(round_index, True)
        return RoundOutcome(row=row, w=step.w, notes=notes + self.transport.take_notes())

    def _server_only(self, round_index: int, w, w_prev, evaluate: bool) -> RoundOutcome:
        """A server-only step (Upcycled-FL's even iteration): no client data, no privacy cost (Lemma 1)."""
        parts = self.parts
        self.transport.server_only(round_index)
        eps = self.ledger.record(server_only_booking(round_index))
        w_new = parts.workload.server_only_step(parts, round_index, w, w_prev)
        row = {"round": round_index, "client_round": parts.algorithm.client_round(round_index)}
        row.update(parts.workload.metrics(parts, w_new, None, evaluate))
        row.update({"sensitivity": 0.0, "sigma_eff": 0.0, "alpha_u": None, "cj_active": False, "cj_power": 0.0,
                    "aggregate_nmse": None, "aggregate_nmse_theory": None, "uses_clients": False, "lost": False})
        row.update(eps_fields(eps))
        self.transport.round_done(round_index, False)
        return RoundOutcome(row=row, w=w_new)

    def _plan(self, round_index: int, local) -> PlannedRound:
        """The round planned (workload/round_plan.plan_round: the power policy's plan on the round's seeded
        channels, finished by the workload); the clients' own decisions (testbed) are adopted.

        A client is never silenced because of its data: whether it transmits, and at what power, is the
        plan's (public / planned quantities); only clients that did not answer (absent, dead) are silent.
        The trainer's clipping makes every payload finite; if one were still NaN/inf (defence in depth) its
        row is replaced by zeros (inside the clip ball) and the client transmits at its planned power,
        with no note: the mechanism and the results are the same whatever the data."""
        payload = local.payload
        bad = ~np.isfinite(payload).all(axis=1)
        if bad.any():
            local.payload = np.where(bad[:, None], 0.0, payload)

        def adopt(plan) -> None:
            self.transport.settle_plan(plan, local)
            silent = np.asarray(local.absent, dtype=bool)             # dead / no ack: not data-dependent
            if silent.any():
                plan.alpha = np.where(silent, 0, plan.alpha)
                plan.mode = ["silent" if s else m for m, s in zip(plan.mode, silent)]

        return plan_round(self.parts, round_index, local, self.transport.plan_rng(round_index), adopt=adopt)

    def _release(self, plan, round_index: int):
        cfg = self.parts.cfg

        def send(attempt: int):
            sent = self.transport.attempt(plan, round_index, attempt)
            self.record_iq(sent.reception, plan, attempt)
            return sent

        return release(self.ledger, plan, round_index, cfg.air.retries, cfg.privacy.enforce, send,
                       on_recorded=lambda: self.transport.recorded(round_index),
                       ready=lambda: self.transport.ready(plan, round_index),
                       secret_noise=air_capabilities(cfg.air.name).secret_noise)
