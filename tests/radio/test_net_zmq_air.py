"""The zmq air's IQ plane on real GNU Radio ZeroMQ blocks (UNIX sockets in a private folder): it delivers the loopback air's
samples (bit for bit with the loopback defaults, to float32 rounding with offsets and phase noise), a
capture never hangs on a silent or dropped stream, and the aggregate error matches the theory."""
import shutil
import time

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.configure.load import load_config
from otafl_sdr.radio.loopback_air import LoopbackAir
from otafl_sdr.radio.zmq_air import ZmqAir
from otafl_sdr.radio.zmq_channel import Capture, ZmqLayout, ipc_endpoint, ipc_folder, push_client, release
from otafl_sdr.transmission import Mechanism, RoundPlan, aggregate_nmse, aggregate_nmse_theory
import pytest

pytestmark = [pytest.mark.gnuradio, pytest.mark.net]

K, D = 3, 2000


def _plan(alpha_cj=0.3, sigma_c2=0.01, silent=(), seed=1):
    g = np.random.default_rng(seed)
    payload = g.standard_normal((K, D))
    payload /= np.linalg.norm(payload, axis=1, keepdims=True)
    h = (g.standard_normal(K) + 1j * g.standard_normal(K)) / np.sqrt(2)
    alpha_u, p = 5.0, np.full(K, 1 / K)
    mode = ["silent" if i in silent else "update" for i in range(K)]
    alpha = np.where([m == "silent" for m in mode], 0, alpha_u * p / h)
    return RoundPlan(round=1, payload=payload, alpha=alpha, h=h, target_gain=p, alpha_u=alpha_u,
                     alpha_cj=alpha_cj, h_cj=0.7 + 0.2j, sigma_c2=sigma_c2, mode=mode,
                     mechanism=Mechanism(1, 0.1, 0.1), power_limit=np.full(K, 1e3))


def _both(cfg, plan, it=1, attempt=0):
    lb, zm = LoopbackAir(cfg), ZmqAir(cfg, timeout_s=60)
    zm.secret_noise = False     # the IQ plane with loopback's seeded noise (on the testbed: node entropy)
    try:
        r1 = lb.transmit(plan, seeding.rng(cfg.run.seed, "noise", it, attempt))
        r2 = zm.transmit(plan, seeding.rng(cfg.run.seed, "noise", it, attempt))
    finally:
        lb.close()
        zm.close()
    return r1, r2


def test_zmq_air_equals_loopback_bit_for_bit():
    cfg = load_config(None, [f"data.clients={K}"])
    plan = _plan(silent=(1,))
    r1, r2 = _both(cfg, plan)
    assert r1.ok and r2.ok
    assert np.array_equal(r1.aggregate, r2.aggregate)
    assert r2.channel_uses == r1.channel_uses


def test_zmq_air_with_offsets_and_phase_noise_matches_loopback():
    cfg = load_config(None, [f"data.clients={K}", "loopback.client_cfo_max=1e-4", "loopback.client_delay_max=3",
                             "loopback.rx_cfo=5e-5", "loopback.rx_delay=2", "loopback.rx_phase_noise=1e-4",
                             "loopback.residual_phase=0.01"])
    r1, r2 = _both(cfg, _plan())
    assert r1.ok and r2.ok
    # the rotators renormalise per work call, so float32 rounding depends on GNU Radio's chunking
    assert np.max(np.abs(r1.aggregate - r2.aggregate)) <= 1e-5 * np.max(np.abs(r1.aggregate))


def test_zmq_air_nmse_matches_theory():
    cfg = load_config(None, [f"data.clients={K}"])
    plan = _plan(alpha_cj=0.0, sigma_c2=0.02)
    air = ZmqAir(cfg, timeout_s=60)
    nm = [aggregate_nmse(air.transmit(plan, seeding.rng(9, "noise", k)).aggregate, plan.expected_aggregate())
          for k in range(4)]
    theory = aggregate_nmse_theory(plan)
    # 4 rounds x d = 2000 coordinates: the mean of the measured NMSE is within a few % of the theory
    assert abs(np.mean(nm) / theory - 1) < 0.08, (nm, theory)


def test_capture_gives_up_at_the_deadline_and_on_drop():
    cfg = load_config(None, [f"data.clients={K}"])
    L = ZmqLayout(cfg, K, 200)
    folder = ipc_folder()                          # IQ sockets: ipc in a private folder, as the airs use them
    eps = {n: ipc_endpoint(folder) for n in ("client-0", "client-1", "client-2")}
    cap = Capture(eps, L.n_samples)
    sym = L.client_symbols(1.0, np.ones(200) * 0.01, 0.1)
    pusher = push_client(L, 0, sym, 1.0, eps["client-0"])
    try:
        t0 = time.time()
        got = cap.run(time.time() + 6, dropped=lambda: {"client-1"} if time.time() - t0 > 0.5 else set())
        # client-0 delivered; client-1 was dropped; client-2 never sent: the deadline ends it
        assert got["client-0"] is not None and len(got["client-0"]) == L.n_samples
        assert got["client-1"] is None and got["client-2"] is None
        assert time.time() - t0 < 20
    finally:
        release(pusher)
    t0 = time.time()
    got = Capture({"x": ipc_endpoint(folder)}, 100).run(time.time() + 1.0)
    assert got["x"] is None and time.time() - t0 < 10
    shutil.rmtree(folder)
