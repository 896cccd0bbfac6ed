"""Paper 001 on the `loopback` air (issue 6, item 4): through the real GNU Radio flowgraph, idle clients
put nothing on the air, noisy clients send a full-power noise burst, and the aggregate carries exactly the
plan's noise budget (reliable clients' own noise, noisy clients' bursts, channel noise)."""
import math

import numpy as np
import pytest

from otafl_sdr.config.schema import Config
from otafl_sdr.phy.reference import reference_budget
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.radio.loopback_air import LoopbackAir
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.configure.plugins import load_plugins
from otafl_sdr.transmission import aggregate_nmse, aggregate_nmse_theory

pytestmark = [pytest.mark.gnuradio]

K, D = 6, 20_000
P = 10 ** 0.1 * D
H = np.array([1.5, 1.2j, -1.1, 0.3, 0.2 - 0.1j, 0.25j])      # three reliable at rho = 0.5 P, three not


def plan_for(name, rnd, rng):
    load_plugins()
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 100.0), power=np.full(K, P), dim=D, sigma_c2=1.0,
                      rounds=10, eps=1.0, delta=1e-5, unit="client")
    pol = POWER_POLICIES.get(name)(Config(), info, {"rho": 0.5 * P, "rounds": 10})
    u = rng.standard_normal((K, D)) * 0.2 + rng.standard_normal(D)
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return pol.plan(rnd, u, H, 1 + 0j, rng)


@pytest.mark.parametrize("name", ["cdpb_noisy", "cdpb_idle"])
def test_cdpb_rounds_on_the_loopback_air(name):
    rng = np.random.default_rng(4)
    ratios = []
    with LoopbackAir(Config(), probe=True) as air:
        for rnd in range(3):
            plan = plan_for(name, rnd, rng)
            mode = np.array(plan.mode)
            assert list(mode[:3]) == ["update"] * 3
            assert set(mode[3:]) == ({"noise"} if name == "cdpb_noisy" else {"silent"})
            rec = air.transmit(plan, rng)
            assert rec.ok, rec.reason
            energy = rec.extra["channel_input_energy"]              # (K + 1,), jammer last
            payload_energy = plan.transmit_energy()
            lay = air.modem.layout(D // 2)
            budget = reference_budget(plan.power_limit, lay.reference_energy, D // 2)
            for i in range(K):
                if mode[i] == "silent":
                    assert energy[i] == 0.0                          # idle: nothing on the air
                else:                          # the burst, plus at most its reference (float32 sums: 1e-3)
                    assert payload_energy[i] * (1 - 1e-3) < energy[i] < (payload_energy[i] + budget[i]) * (1 + 1e-3)
                if mode[i] == "noise":                               # full power, eq. (11): d s^2 = P
                    assert payload_energy[i] == pytest.approx(P, rel=6 * math.sqrt(2 / D))
            assert energy[K] == 0.0                                  # no jammer in CDPB
            ratios.append(aggregate_nmse(rec.aggregate, plan.expected_aggregate()) / aggregate_nmse_theory(plan))
    assert np.mean(ratios) == pytest.approx(1.0, rel=0.05), ratios
