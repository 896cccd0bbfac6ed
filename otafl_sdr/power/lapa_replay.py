"""Paper 004's recorded plan inputs (policies ``lapa`` and ``ddpg``), put back into a fresh copy of the
policy before each round is planned again (workload/rederive.py calls LapaPolicy.restore_recorded_inputs). Everything else the booking uses is
re-derived from the config: the selection and the reliable weights G (eqs. 20-22, from the label counts
released on the run's seeded stream), the public budget split, the switch round T_th (eq. 23), alpha_u
and the channel noise on the run's seeded channels, the label release folded into round 1's sensitivity.
What the config cannot give is what the base station learnt from released aggregates, which the ledger
does not hold:
  - ``extra["e"]``, the PID error e^[t-1] of eq. (11) that sets the round budget b_t (eq. 12): taken as
    recorded, refused unless finite, >= 0 and, with ``error = "denoised"``, at most (K_p + K_s) 2C (each
    change is capped at 2C);
  - ``ddpg``: ``extra["ddpg_train"]["action"]``, the deployed action a of the DDPG actor (eqs. 29-31),
    recorded with the round it was trained for (levels in [0, 1] below channel inversion); the powers,
    alpha_u and noise follow from it on each round's channel (DDPGPolicy.amplitudes). Training is not
    re-run (seconds to minutes of torch) and the action is not secret: it sets public powers."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.errors import UserError


def _number(v, where: str, what: str, lo: float = 0.0, hi: float = math.inf) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise UserError(f"{where}: the recorded {what} {v!r} is not a finite number in [{lo:g}, {hi:g}] "
                        f"(the ledger was rewritten)")
    return float(v)


def restore_lapa(policy, recs: list, where: str) -> bool:
    """Set the PID error ``recs`` (the round's entries, first booking first) record on ``policy``; False when
    the round used no data (an exhausted pool: nothing recorded, nothing read)."""
    extra = recs[0].get("extra") if isinstance(recs[0].get("extra"), dict) else {}
    if not recs[0].get("uses_data", True):
        return False
    o = policy.options
    if "e" not in extra:
        raise UserError(f"{where}: the entry does not record the PID error 'e' its round was planned with "
                        f"(the ledger was rewritten)")
    cap = (o.kp + o.ks) * 2 * policy.C if o.error == "denoised" else math.inf
    policy.e_last = _number(extra["e"], where, "PID error e", 0.0, cap)
    return True


def restore_ddpg(policy, recs: list, where: str) -> None:
    """LAPA's inputs, then replace the policy's training by the action the first entry records (used only
    where the policy trains)."""
    if not restore_lapa(policy, recs, where):
        return
    extra = recs[0].get("extra") if isinstance(recs[0].get("extra"), dict) else {}
    trained = extra.get("ddpg_train")
    from otafl_sdr.power.ddpg_agent import TrainResult

    def optimise(h_known):
        if not isinstance(trained, dict) or not isinstance(trained.get("action"), list):
            raise UserError(f"{where}: the DDPG training round does not record its deployed action "
                            f"(extra.ddpg_train.action), so its powers cannot be re-derived (the ledger was rewritten)")
        action = np.asarray([_number(a, where, "DDPG action level", 0.0, 1.0) for a in trained["action"]])
        frac = trained.get("power_fraction")
        if len(action) != policy.info.clients or not isinstance(frac, list) or len(frac) != len(action):
            raise UserError(f"{where}: the recorded DDPG action and power fractions do not hold one level for "
                            f"each of the {policy.info.clients} clients (the ledger was rewritten)")
        policy.agent = policy.agent or "replayed"
        policy.action = action
        policy.frac = np.asarray([_number(f, where, "DDPG power fraction", 0.0, 1.0) for f in frac])
        policy.trained_rounds.append(policy.t + 1)
        return TrainResult(powers=np.sqrt(policy.frac * np.asarray(policy.info.power, float)),
                           objective=_number(trained.get("objective"), where, "DDPG objective"),
                           T_th=_number(trained.get("T_th"), where, "DDPG switch round"), episode_rewards=[],
                           initial_reward=_number(trained.get("initial_reward"), where, "DDPG reward", -math.inf),
                           action=action)
    policy.optimise = optimise
