"""`otafl-sdr run --dry-run`: the run's plan, printed before anything is trained, sent or booked.

The run is built as the orchestrator builds it (workload/build.build_run), its privacy knob solved by the same
driver (workload/targeting.solve_privacy_target), then every iteration is planned and booked as the run plans
and books it (workload/round_plan.plan_round, on a copy of the power policy, the run's seeded channels and plan
stream and a zero payload: the mechanism depends on public, planned quantities only) in a ledger kept in memory:
the planned epsilon of every accountant, the jammer's power, the DAC headroom on uhd. The wall time is
estimated from one timed local round (its result is thrown away: nothing leaves this process). Policies
that plan from feedback (LAPA's PID) are planned from their initial state: their rounds may differ."""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import numpy as np

from otafl_sdr.config.schema import Config
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.workload.build import build_run
from otafl_sdr.workload.round_plan import plan_round, seeded_plan_rng, server_only_booking, zero_round

# seconds an air adds to each round with clients beyond the training (rough, this testbed's 2-core machine:
# `make run`, 30 loopback rounds with clients in 17.7 s of which 7.5 s training; zmq rounds 0.3-0.5 s;
# uhd from its simulator lab, real radios differ)
AIR_OVERHEAD_S = {"sim": 0.0, "loopback": 0.3, "zmq_inproc": 0.3, "zmq": 0.5, "uhd": 3.0}


@dataclass
class Plan:
    """What ``plan_run`` found; ``lines()`` prints it."""

    calibration: dict
    client_rounds: int
    iterations: int
    data_iterations: int
    eps: dict                                    # accountant -> planned eps (None: does not cover it)
    mechanisms: list = field(default_factory=list)     # the booked Mechanism of every data-using iteration
    jammer_db: list = field(default_factory=list)      # P_cj / (d sigma_c2) in dB per data-using iteration
    dac: dict = field(default_factory=dict)            # uhd: headroom to the DAC's full scale, dB
    wall_s: float = 0.0
    local_s: float = 0.0
    cfg: Config | None = None

    def lines(self) -> list[str]:
        cfg = self.cfg
        pr = cfg.privacy
        two = self.iterations != self.client_rounds
        out = [f"dry run of '{cfg.run.name}' on air {cfg.air.name}: {cfg.algorithm.name} + {cfg.power.policy}, "
               f"{cfg.data.clients} clients, {self.client_rounds} client rounds"
               + (f" = {self.iterations} iterations ({self.data_iterations} with clients, "
                  f"{self.iterations - self.data_iterations} server-only)" if two else "")]
        cal = dict(self.calibration)
        how = cal.pop("calibration", "")
        out.append(f"privacy knob: {how}")
        for k, v in cal.items():
            out.append(f"  {k:<26} {_fmt(v)}")
        out.append(f"planned eps at delta {pr.delta:g} (target {pr.eps:g}, enforced by {pr.accountant}):")
        for name, v in self.eps.items():
            mark = "  <- enforcing" if name == pr.accountant else ""
            over = "  OVER the target: the run would stop" if (v is not None and pr.enforce and
                                                               name == pr.accountant and v > pr.eps * (1 + 1e-9)) else ""
            out.append(f"  eps_{name:<10} {_fmt(v)}{mark}{over}")
        if self.mechanisms:
            m = self.mechanisms[0]
            out.append(f"first data round: sensitivity {m.sensitivity:.6g}, sigma_eff {m.sigma_eff:.6g}, "
                       f"noise multiplier {m.noise_multiplier:.6g}")
        if cfg.power.jammer and self.jammer_db:
            on = [x for x in self.jammer_db if x is not None and math.isfinite(x)]
            if on:
                out.append(f"jammer power P_cj/(d sigma_c2): {min(on):.2f} .. {max(on):.2f} dB (median "
                           f"{float(np.median(on)):.2f} dB) in {len(on)} of {len(self.jammer_db)} data rounds; "
                           f"cap power.jammer_max_snr_db {cfg.power.jammer_max_snr_db:g} dB")
            else:
                out.append("jammer power: off in every planned round")
        if self.dac:
            units = "the calibration's units" if cfg.air.csi == "calibrated" else "units of channel.sigma_c2 (air.csi = perfect)"
            out.append(f"uhd DAC headroom to the fc32 full scale 1.0 (symbol peaks before pulse shaping, {units}): "
                       f"clients {_db(self.dac['client'], 'a round planned past it is scaled: tx_scale')}, jammer at its "
                       f"4.5-sigma peak {_db(self.dac['jammer'], 'the uhd air refuses the round')}")
        air = AIR_OVERHEAD_S.get(cfg.air.name, 2.0)
        out.append(f"estimated wall time: {_dur(self.wall_s)} ({self.data_iterations} local rounds x "
                   f"{self.local_s:.2f} s timed here" + (f", + ~{air:g} s each on {cfg.air.name}" if air else "")
                   + "; evaluation and checkpoints not included)")
        out.append("nothing was trained, sent or booked (dry run)")
        return out


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _db(v, below: str = "") -> str:
    if v is None:
        return "n/a"
    return f"{v:+.1f} dB" + (f" (below 0: {below})" if v < 0 else "")


def _dur(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"


def plan_run(cfg: Config, time_local: bool = True, client_rounds: int | None = None) -> Plan:
    """The run's plan (see the module docstring); ``cfg`` validated. Raises what the run would raise before
    round 1 (an unreachable target, a jammer the DAC cannot carry is reported, not raised). ``client_rounds``:
    the rounds to plan when they are more than run.rounds (`--resume DIR --extend N`: the knob stays the one
    solved for run.rounds, as the extended run keeps it)."""
    parts = build_run(cfg)
    air = cfg.air.name
    from otafl_sdr.workload.targeting import solve_privacy_target
    calibration = solve_privacy_target(parts)                   # as the run books before its radios open
    alg = parts.algorithm
    total = max(cfg.run.rounds, client_rounds or 0)
    n_it = alg.iterations(total)
    round_indices = [round_index for round_index in range(1, n_it + 1) if alg.uses_clients(round_index)]
    local_s = 0.0
    if time_local and round_indices:
        w = parts.workload.initial_model(parts)
        t0 = time.perf_counter()
        parts.workload.local(parts, round_indices[0], w)
        local_s = time.perf_counter() - t0
    ledger = PrivacyLedger(cfg.privacy, None)
    policy = copy.deepcopy(parts.policy)
    mechs, jam_db, client_peak, jam_peak = [], [], 0.0, 0.0
    unit = parts.noise_unit()
    for round_index in range(1, n_it + 1):
        if not alg.uses_clients(round_index):
            ledger.record(server_only_booking(round_index))
            continue
        planned = plan_round(parts, round_index, zero_round(parts), seeded_plan_rng(cfg, round_index), policy=policy)
        plan, m = planned.plan, planned.booked()
        ledger.record(m)
        mechs.append(m)
        p_cj = float(plan.alpha_cj) ** 2 * plan.dim
        jam_db.append(10 * math.log10(p_cj / (plan.dim * unit)) if p_cj > 0 else None)
        # |alpha_i s(u_i)| per symbol <= |alpha_i| ||u_i / tau|| <= |alpha_i| (two reals per symbol, the clip)
        client_peak = max(client_peak, float(np.max(np.abs(plan.alpha))) if plan.clients else 0.0)
        jam_peak = max(jam_peak, 4.5 * float(plan.alpha_cj) * math.sqrt(2.0))
    eps = {}
    for name, v in ledger.epsilons().items():
        eps[name] = v
    dac = {}
    if air == "uhd":
        dac = {"client": -20 * math.log10(client_peak) if client_peak > 0 else None,
               "jammer": -20 * math.log10(jam_peak) if jam_peak > 0 else None}
    wall = len(round_indices) * (local_s + AIR_OVERHEAD_S.get(air, 2.0))
    return Plan(calibration=calibration, client_rounds=total, iterations=n_it, data_iterations=len(round_indices),
                eps=eps, mechanisms=mechs, jammer_db=jam_db, dac=dac, wall_s=wall, local_s=local_s, cfg=cfg)


def dry_run_text(cfg: Config, client_rounds: int | None = None) -> str:
    """The plan as `otafl-sdr run --dry-run` prints it (a testbed's nodes plan the same rounds from the same
    config; an in-session calibration is measured at the start of the run, so its plan uses the file's or
    perfect CSI here, and says so)."""
    text = "\n".join(plan_run(cfg, client_rounds=client_rounds).lines())
    if client_rounds and client_rounds > cfg.run.rounds:
        text += (f"\nnote: {client_rounds} client rounds planned ({client_rounds - cfg.run.rounds} beyond run.rounds, "
                 f"the knob kept as solved for run.rounds; the budget stops the run where eps would pass it)")
    if cfg.calibration.session:
        text += "\nnote: calibration.session measures the channels when the run starts; this plan cannot include them"
    return text
