"""Control-plane overhead of the zmq testbed per round, against the in-process loopback air (issue 4):
K=50 clients, d=155,862 (paper 000's MLP on 28x28 inputs). Prints, does not assert.

    .venv/bin/python benchmarks/bench_control_plane.py [--clients 50] [--dim 155862] [--rounds 5]
                                                       [--workers 2] [--no-experiment] [--no-iq]

1. Control plane: the real ServerHub (ROUTER) and 50 + 2 real NodeLinks (DEALER) spread over worker
   processes exchange one round's messages at their real sizes: round_start with w (d float32) to every
   client, 50 acks (with the clipped update, d float32, in diagnostic mode; without it across hosts), channel_round,
   receive, transmit (with the 50 reference gains), 50 tx_done, channel_done, the aggregate (d
   float64) and round_end; the server also assembles the (K, d) payload matrix it hands to the policy.
   No training, no PHY: what the distributed testbed adds to a round.
2. In process, the same round's reference: the loopback air's transmit of a paper-000 plan (PHY
   only), and a whole in-process round of the experiment (50 clients on mnist5k, d=155,862, local
   training + loopback air + evaluation), both measured in this run.
3. The IQ plane: the in-process `zmq` air (every burst through GNU Radio ZeroMQ sockets into the
   channel emulation and out to the receiver) against the loopback air on the same plans.

The ratios printed are control plane / whole in-process round (the issue's aim: <= 10%) and control
plane / loopback PHY."""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# only the control plane at the top: each spawned node worker imports this module again, and the config,
# power and experiment modules bring torch (about 3 s of CPU per worker); they are imported where used
from otafl_sdr.net.transport import NodeLink, ServerHub  # noqa: E402

WELCOME = {"config": "", "run_id": "bench", "heartbeat_s": 1.0, "timeout_s": 120.0}


# ------------------------------------------------------------------------------------------------
def _worker(endpoint: str, names: list[str], dim: int, stop: mp.Event) -> None:
    """Node side: answer every request at its real size, as the client/receiver/channel nodes do."""
    links = {n: NodeLink(endpoint, n, None) for n in names}
    for n, link in links.items():
        role = "client" if n.startswith("client-") else n
        link.register(role, "tcp://127.0.0.1:1" if role != "receiver" else None, "zmq", timeout=120)
        link.send("ready")
    update = np.random.default_rng(0).standard_normal(dim).astype(np.float32)
    agg = np.random.default_rng(1).standard_normal(dim)
    while not stop.is_set():
        for n, link in links.items():
            for msg in link.recv(0.0005):
                t = msg.type
                if t == "round_start":
                    w = np.array(msg.arrays["w"])                       # the node's own copy
                    fields = {"round": msg["round"], "s": 1.0, "alpha_re": 0.1, "alpha_im": 0.2, "mode": "update",
                              "norm": 1.0, "train_loss": float(w[0]), "clipped": False}
                    link.send("ack", fields, {"update": update} if msg["diagnostic"] else {})
                elif t == "transmit":
                    link.send("tx_done", {"round": msg["round"], "attempt": msg["attempt"], "ok": True, "reason": "",
                                          "samples": 1})
                elif t == "channel_round":
                    link.send("channel_done", {"round": msg["round"], "attempt": msg["attempt"],
                                               "received": sorted(msg["sources"]), "missing": [], "ok": True,
                                               "reason": ""})
                elif t == "receive":
                    link.send("aggregate", {"round": msg["round"], "attempt": msg["attempt"], "release": msg["release"],
                                            "ok": True,
                                            "reason": "", "faults": {}, "channel_uses": 1}, {"aggregate": agg})
    for link in links.values():
        link.close()


def _poll(hub, procs, deadline: float):
    """The hub's messages; a dead worker or a round past its deadline ends the benchmark with an error
    (never a hang)."""
    dead = [p for p in procs if not p.is_alive()]
    if dead:
        raise RuntimeError(f"a bench node worker died (exit code {dead[0].exitcode}); see its traceback above")
    if time.time() > deadline:
        raise RuntimeError("a round took longer than 300 s: the bench nodes stopped answering")
    return hub.poll(1.0)


def control_plane(K: int, dim: int, rounds: int, workers: int, diagnostic: bool) -> list[float]:
    clients = [f"client-{i}" for i in range(K)]
    roster = clients + ["receiver", "channel"]
    hub = ServerHub("127.0.0.1", 0, roster, WELCOME, None, heartbeat_s=1.0, dead_after=60.0)
    stop = mp.Event()
    groups = [clients[k::workers] for k in range(workers)] + [["receiver", "channel"]]
    procs = [mp.Process(target=_worker, args=(hub.endpoint, g, dim, stop), daemon=True) for g in groups]
    for p in procs:
        p.start()
    try:
        end = time.time() + 300
        while not all(hub.ready(n) for n in roster):
            _poll(hub, procs, end)
        w = np.random.default_rng(2).standard_normal(dim).astype(np.float32)
        times = []
        for it in range(1, rounds + 2):
            t0 = time.perf_counter()
            deadline = time.time() + 300
            hub.broadcast(clients, "round_start", {"round": it, "alpha_u": 1.0, "mu": 0.0, "deadline": 1e12,
                                                   "t_tx": 0.0, "diagnostic": diagnostic}, {"w": w})
            acks = {}
            while len(acks) < K:
                for n, m in _poll(hub, procs, deadline):
                    if m.type == "ack":
                        acks[n] = m
            payload = np.zeros((K, dim))
            if diagnostic:
                for n, m in acks.items():
                    payload[int(n.split("-")[1])] = m.arrays["update"].astype(np.float64) / 1.0
            gains = {n: [0.1, 0.2] for n in clients}
            hub.send("channel", "channel_round", {"round": it, "attempt": 0, "release": f"r{it}", "sources": {n: "tcp://x:1" for n in clients},
                                                  "jammer": None, "dim": dim, "sigma_c2": 1.0, "deadline": 1e12})
            hub.send("receiver", "receive", {"round": it, "attempt": 0, "release": f"r{it}", "endpoint": "tcp://x:1", "alpha_u": 1.0,
                                             "dim": dim, "ref_re": 1.0, "ref_im": 0.0, "deadline": 1e12, "t_rx": 0.0})
            hub.broadcast(clients, "transmit", {"round": it, "attempt": 0, "release": f"r{it}", "t_tx": 0.0, "ref_gains": gains})
            done, chan, agg = set(), None, None
            while len(done) < K or chan is None or agg is None:
                for n, m in _poll(hub, procs, deadline):
                    if m.type == "tx_done":
                        done.add(n)
                    elif m.type == "channel_done":
                        chan = m
                    elif m.type == "aggregate":
                        agg = np.array(m.arrays["aggregate"])
            hub.broadcast(roster, "round_end", {"round": it})
            if it > 1:                       # the first round warms the connections up
                times.append(time.perf_counter() - t0)
        return times
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        hub.close()


# ------------------------------------------------------------------------------------------------
def plans(cfg, K, d, rounds, seed=0):
    from otafl_sdr.power.base import SystemInfo
    from otafl_sdr.power.cj_adaptive import CJAdaptivePolicy
    rng = np.random.default_rng(seed)
    info = SystemInfo(p=np.full(K, 1 / K), sizes=np.full(K, 80), power=np.full(K, 10 ** 0.1 * d),
                      dim=d, sigma_c2=1.0, rounds=15, eps=1.0, delta=1e-5)
    pol = CJAdaptivePolicy(cfg, info)
    out = []
    for m in range(rounds):
        u = rng.standard_normal((K, d)) * 0.3 + rng.standard_normal(d)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        h = (rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2)
        out.append(pol.plan(m, u, h, complex(rng.standard_normal(), rng.standard_normal()) / np.sqrt(2), rng))
    return out


def air_times(air, ps) -> list[float]:
    rng = np.random.default_rng(1)
    out = []
    for p in ps:
        t = time.perf_counter()
        rec = air.transmit(p, rng)
        out.append(time.perf_counter() - t)
        if not rec.ok:
            print(f"  ({air.name}: a round was lost: {rec.reason})")
    air.close()
    return out[1:] if len(out) > 1 else out          # the first round builds flowgraphs


def experiment_round(K: int) -> tuple[float, float, int]:
    """Seconds of one in-process round (training + loopback air + evaluation), of its air part, and d."""
    import tempfile
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.experiment.orchestrator import Experiment
    cfg = load_config(ROOT / "sim_loopback/default.toml",
                      [f"data.clients={K}", "air.name=loopback", "run.progress=false", "algorithm.name=fedavg"])
    with tempfile.TemporaryDirectory() as d:
        exp = Experiment(cfg, Path(d) / "r", progress=False)
        exp.build()
        exp.start_transport()
        w = exp.trainer.get_flat()
        times, air = [], []
        for it in (1, 2):
            t = time.perf_counter()
            row = exp.run_round(it, w, w.clone(), []).row
            times.append(time.perf_counter() - t)
            air.append(row.get("air_s") or 0.0)
        exp.air.close()
        return times[-1], air[-1], exp.dim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--dim", type=int, default=155862)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2,
                    help="processes hosting the client links (on lab hosts every client has its own)")
    ap.add_argument("--no-experiment", action="store_true", help="skip the whole in-process round")
    ap.add_argument("--no-iq", action="store_true", help="skip the IQ-plane (zmq air) comparison")
    ap.add_argument("--quick", action="store_true",
                    help="smoke size, a few seconds: `make test` runs every benchmark so (its figures mean nothing)")
    a = ap.parse_args()
    if a.quick:
        a.clients = 4; a.dim = 2000; a.rounds = 2; a.workers = 1
    K, d = a.clients, a.dim
    print(f"K = {K} clients, d = {d}, {a.rounds} rounds each (after one warm-up round)")

    cp = {diag: control_plane(K, d, a.rounds, a.workers, diag) for diag in (True, False)}
    for diag, t in cp.items():
        print(f"control plane per round, diagnostic payloads {'on ' if diag else 'off'}: "
              f"{np.mean(t):.3f} s (min {np.min(t):.3f}, max {np.max(t):.3f})")

    from otafl_sdr.configure.load import load_config
    from otafl_sdr.radio.loopback_air import LoopbackAir
    cfg = load_config(None, [f"data.clients={K}"])
    ps = plans(cfg, K, d, 3)
    t_phy = float(np.mean(air_times(LoopbackAir(cfg), ps)))
    print(f"in-process loopback air (PHY only): {t_phy:.3f} s/round")
    t_round = None
    if not a.no_experiment:
        t_round, t_air, dim = experiment_round(K)
        print(f"in-process round of the experiment (mnist5k, {K} clients, d = {dim}, loopback): {t_round:.3f} s "
              f"(of which air {t_air:.3f} s)")
    if not a.no_iq:
        from otafl_sdr.radio.zmq_air import ZmqAir
        t_zmq = float(np.mean(air_times(ZmqAir(cfg, timeout_s=300), ps)))
        print(f"IQ plane: in-process zmq air {t_zmq:.3f} s/round vs loopback {t_phy:.3f} s/round "
              f"({t_zmq / t_phy:.2f}x)")
    for diag, t in cp.items():
        tag = "diagnostic on " if diag else "diagnostic off"
        line = f"overhead ({tag}): control plane / loopback PHY = {np.mean(t) / t_phy:.1%}"
        if t_round:
            line += f"; control plane / whole in-process round = {np.mean(t) / t_round:.1%} (aim <= 10%)"
        print(line)


if __name__ == "__main__":
    mp.set_start_method("spawn")
    main()
