"""CDPB's ledger books the noise actually sent: per round, its sigma_eff is at most the realised protective
noise, both as the parameter of the noise the round's plan sent and as measured in the sim air's aggregate
(Rayleigh rounds, the three CDPB policies, the issue's audit scenario where the expectation over fading
over-stated the noise in 25 of 27 rounds)."""
import math

import numpy as np
import pytest

from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.configure.load import load_config
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.configure.plugins import load_plugins

K, D = 12, 20000
P = 10 ** 0.1 * D


@pytest.mark.parametrize("name", ["cdpb_noisy", "cdpb_idle", "cdpb_mixed"])
def test_ledger_sigma_is_at_most_the_realised_noise_every_round(name):
    load_plugins()
    cfg = load_config(None, ["air.name=sim"])
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 100.0), power=np.full(K, P), dim=D, sigma_c2=1.0,
                      rounds=30, eps=1.0, delta=1e-5, unit="client")
    pol = POWER_POLICIES.get(name)(cfg, info, {"rho": 0.4 * P, "rounds": 30})
    air = SimAir(cfg)
    fading = BlockFading("rayleigh")
    below_expected = 0
    for rnd in range(1, 28):
        g = np.random.default_rng(rnd)
        u = g.normal(size=(K, D))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        h = fading(g, K)
        plan = pol.plan(rnd, u, h, 1 + 0j, np.random.default_rng(100 + rnd))
        mech = plan.mechanism
        # the realised parameter: channel noise plus every noise share actually sent this round
        sent = sum(abs(plan.h[k] * plan.alpha[k]) ** 2 * (np.var(plan.payload[k]) if plan.mode[k] == "noise"
                   else plan.row_noise_var[k]) for k in range(K) if plan.mode[k] != "silent")
        realised = math.sqrt(info.sigma_c2 + sent) / plan.alpha_u
        assert mech.sigma_eff <= realised * (1 + 1e-3), f"round {rnd}: ledger {mech.sigma_eff} > realised {realised}"
        # and as measured in the aggregate the sim air returns (d = 20,000: +-1 % statistical spread)
        rec = air.transmit(plan, np.random.default_rng(200 + rnd))
        measured = float(np.std(rec.aggregate - plan.expected_aggregate()))
        assert mech.sigma_eff <= measured * 1.03, f"round {rnd}: ledger {mech.sigma_eff} > measured {measured}"
        assert mech.sampling_prob == 1.0
        below_expected += realised < mech.extra["sigma_expected"]
    if name != "cdpb_idle":
        assert below_expected > 0     # the expectation over fading would have over-stated some rounds
