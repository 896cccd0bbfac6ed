"""On the zmq air the protective noise cannot be rebuilt by the server: it holds the config and the run
seed, reconstructs the round's noise the only way the seed allows (the seeded draws every node used to
make, and the policy's seeded generator for the clients' own noise), and subtracting that reconstruction
leaves at least the ledger's sigma_eff (within 2 %). Real GNU Radio ZeroMQ blocks (the pieces the
testbed's node processes run); d = 20,000 so that a noise std is measured to +-0.5 %."""
import numpy as np
import pytest

from otafl_sdr import seeding
from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.configure.load import load_config
from otafl_sdr.noise_source import protective_rng
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.radio.zmq_air import ZmqAir
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.configure.plugins import load_plugins

pytestmark = [pytest.mark.gnuradio, pytest.mark.net]

K, D = 4, 20000
P = 10 ** 0.1 * D


def _setup(policy, options):
    load_plugins()
    cfg = load_config(None, ["air.name=zmq", "run.seed=7", f"data.clients={K}", "power.jammer_multiple=1"])
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 100.0), power=np.full(K, P), dim=D, sigma_c2=1.0,
                      rounds=10, eps=1.0, delta=1e-5, unit="client")
    pol = POWER_POLICIES.get(policy)(cfg, info, options)
    g = np.random.default_rng(3)
    u = g.normal(size=(K, D))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    h = BlockFading("rayleigh")(g, K)
    return cfg, pol, u, h


def _plan(pol, u, h, rng):
    plan = pol.plan(1, u, h, 0.9 + 0.3j, rng)
    plan.extra["air_sigma_c2"] = 1.0
    return plan


@pytest.mark.parametrize("policy,options", [("cj_adaptive", {}), ("cdpb_noisy", {"rho": 0.4 * P, "rounds": 10})])
def test_server_cannot_rebuild_the_noise_from_the_seed(policy, options):
    cfg, pol, u, h = _setup(policy, options)
    # what the nodes send: the policy's noise (clients) and the air's (jammer, channel) from OS entropy
    plan = _plan(pol, u, h, protective_rng(cfg, "policy", 1))
    rec = ZmqAir(cfg).transmit(plan, protective_rng(cfg, "noise", 1, 0))
    sigma = plan.mechanism.sigma_eff
    noise = rec.aggregate - plan.expected_aggregate()
    assert np.std(noise) >= 0.98 * sigma
    if policy == "cj_adaptive":
        assert plan.alpha_cj > 0 and np.std(noise) == pytest.approx(sigma, rel=0.02)
    # the server's best reconstruction: the same round from the seed it holds
    server = ZmqAir(cfg)
    server.secret_noise = False
    srv_plan = _plan(pol, u, h, seeding.rng(cfg.run.seed, "policy", 1))
    recon = server.transmit(srv_plan, seeding.rng(cfg.run.seed, "noise", 1, 0)).aggregate - plan.expected_aggregate()
    assert np.std(noise - recon) >= 0.98 * sigma
    # control: had the nodes drawn from the seed, the reconstruction would remove the noise entirely
    again = ZmqAir(cfg)
    again.secret_noise = False
    seeded = again.transmit(_plan(pol, u, h, seeding.rng(cfg.run.seed, "policy", 1)),
                            seeding.rng(cfg.run.seed, "noise", 1, 0)).aggregate - plan.expected_aggregate()
    assert np.std(seeded - recon) < 0.01 * sigma
