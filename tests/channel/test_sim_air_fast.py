"""The `sim` air's fast transmit (channel/sim_air.py: the payload viewed as complex, one noise draw added in
place, the aggregate a float64 view) gives the aggregate of the plain formula of paper 000 eq. (10)/(16),

    agg = unpack( sum_i h_i alpha_i pack(u_i) + sqrt(sigma_c2 + |h_cj alpha_cj|^2) (a + j b) ) / alpha_u,
    a = standard_normal(n), b = standard_normal(n) (drawn in that order),

flat: bit for bit against that formula written with the same numpy operations (pack_reals, the gemv, the
two draws, unpack_reals), and to 1e-12 against a per-client loop (another summation order, so not bitwise);
multipath: to 1e-12 against channel/multipath_rx.receive on gains x pack(u) (the air sums the links in the
time domain, one matmul, where receive sums their spectra: the same linear map, another rounding); even and
odd d, silent clients. Pure."""
import numpy as np
import pytest

from otafl_sdr.channel import multipath_rx
from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.config.schema import Config
from otafl_sdr.phy.packing import pack_reals, unpack_reals
from otafl_sdr.transmission import Mechanism, RoundPlan


def make_plan(K: int, d: int, silent=(), seed: int = 3) -> RoundPlan:
    r = np.random.default_rng(seed)
    alpha = r.standard_normal(K) + 1j * r.standard_normal(K)
    mode = ["update"] * K
    for i in silent:
        mode[i] = "silent"
    if K > 2:
        alpha[2] = 0                                  # planned off by the policy (alpha 0), not silent
    return RoundPlan(round=4, payload=r.standard_normal((K, d)), alpha=alpha,
                     h=(r.standard_normal(K) + 1j * r.standard_normal(K)) / np.sqrt(2), target_gain=np.ones(K),
                     alpha_u=2.5, alpha_cj=0.7, h_cj=0.3 - 0.4j, sigma_c2=0.2, mode=mode,
                     mechanism=Mechanism(4, 1.0, 1.0), extra={"air_sigma_c2": 0.3})


def plain(cfg, plan: RoundPlan, seed: int) -> np.ndarray:
    """The formula as the air computed it before (pack_reals copy, separate I and Q draws, unpack_reals)."""
    rng = np.random.default_rng(seed)
    d, n = plan.dim, (plan.dim + 1) // 2
    active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    gains = plan.h[active] * plan.alpha[active]
    mp = Multipath.from_config(cfg)
    if mp.enabled:
        fir = mp.link_channels(cfg.run.seed, plan.round, plan.clients, cfg.phy)[active]
        x = gains[:, None] * pack_reals(plan.payload[active])
        senders = multipath_rx.reference_senders(plan, active, cfg.phy)[active]
        y = multipath_rx.receive(x, np.arange(fir.shape[1]), fir, senders, cfg.phy)
    else:
        y = gains @ pack_reals(plan.payload[active])
    noise_var = plan.extra["air_sigma_c2"] + (abs(plan.h_cj) * plan.alpha_cj) ** 2
    y = y + np.sqrt(noise_var) * (rng.standard_normal(n) + 1j * rng.standard_normal(n))
    return unpack_reals(y, d) / plan.alpha_u


def config(multipath: str = "flat", spread_ns: float = 0.0) -> Config:
    cfg = Config()
    cfg.channel.multipath, cfg.channel.delay_spread_ns = multipath, spread_ns
    return cfg


@pytest.mark.parametrize("d", [155_830, 2001, 2])
@pytest.mark.parametrize("silent", [(), (0, 5)])
def test_flat_fast_air_is_bitwise_the_plain_formula(d, silent):
    K = 50 if d > 10_000 else 7
    cfg = config()
    plan = make_plan(K, d, silent)
    before = plan.payload.copy()
    rec = SimAir(cfg).transmit(plan, np.random.default_rng(11))
    ref = plain(cfg, plan, 11)
    assert rec.aggregate.shape == (d,) and rec.aggregate.dtype == np.float64
    assert np.array_equal(rec.aggregate, ref)                       # bit for bit (== on every float)
    assert np.array_equal(plan.payload, before)                     # the view never writes the payload
    assert rec.channel_uses == (d + 1) // 2


def test_flat_fast_air_equals_the_per_client_sum():
    """Against sum_i h_i alpha_i s_i summed client by client (another order: equal to 1e-12, not bitwise)."""
    cfg = config()
    plan = make_plan(50, 155_830, silent=(7,))
    rec = SimAir(cfg).transmit(plan, np.random.default_rng(5))
    n = plan.dim // 2
    y = np.zeros(n, complex)
    for i in range(plan.clients):
        if plan.mode[i] != "silent":
            u = plan.payload[i]
            y += plan.h[i] * plan.alpha[i] * (u[0::2] + 1j * u[1::2])
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    std = np.sqrt(0.3 + abs(plan.h_cj * plan.alpha_cj) ** 2)
    ref = np.empty(plan.dim)
    ref[0::2], ref[1::2] = (y.real + std * a) / plan.alpha_u, (y.imag + std * b) / plan.alpha_u
    assert np.max(np.abs(rec.aggregate - ref)) <= 1e-12 * np.max(np.abs(ref))


@pytest.mark.parametrize("name", ["tdl-c", "exponential"])
@pytest.mark.parametrize("silent", [(), (1,)])
def test_multipath_fast_air_is_the_per_link_spectra_formula(name, silent):
    cfg = config(name, 300.0)                                       # 300 ns RMS delay spread
    cfg.uhd.rate = 10e6                                             # 3 samples RMS at 10 MS/s
    plan = make_plan(6, 20_000, silent)
    rec = SimAir(cfg).transmit(plan, np.random.default_rng(2))
    assert Multipath.from_config(cfg).enabled
    ref = plain(cfg, plan, 2)
    assert np.max(np.abs(rec.aggregate - ref)) <= 1e-12 * np.max(np.abs(ref))
    assert not np.allclose(rec.aggregate, plain(config(), plan, 2), atol=1e-3)      # multipath did act


def test_no_sender_is_noise_only():
    cfg = config()
    plan = make_plan(3, 10, silent=(0, 1, 2))
    rec = SimAir(cfg).transmit(plan, np.random.default_rng(9))
    assert np.array_equal(rec.aggregate, plain_noise_only(plan, 9))


def plain_noise_only(plan, seed):
    rng = np.random.default_rng(seed)
    n = (plan.dim + 1) // 2
    std = np.sqrt(plan.extra["air_sigma_c2"] + (abs(plan.h_cj) * plan.alpha_cj) ** 2)
    return unpack_reals(np.zeros(n, complex) + std * (rng.standard_normal(n) + 1j * rng.standard_normal(n)),
                        plan.dim) / plan.alpha_u
