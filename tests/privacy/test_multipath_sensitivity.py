"""Single-carrier multipath and the booked sensitivity (issue 26 item 3, the `sim` air end to end): one
client's payload changed within its bound (the client removed; a unit tone at its link's worst frequency,
the adversary's best choice for a linear receiver) moves the sim air's aggregate by at most the sensitivity
the ledger books (workload/booking.ledger_mechanism with the round's channel/multipath_rx.sensitivity_gain),
over many rounds of seeded TDL-C taps at 1-8 samples RMS delay spread, while the plan's unstretched
sensitivity is exceeded by 2-4x (the stretch is needed). The sim air's noise is drawn from the same seeded
stream for both payloads, so the difference of two receptions is the noiseless shift exactly.

Measured (the same construction, 5 rounds per spread, K = 8, d = 2048, every 16th tone bin of every client):
max shift / booked = 0.988 / 0.921 / 0.995 / 0.988 at 1 / 2 / 4 / 8 samples; against the unstretched
sensitivity 2.60 / 2.16 / 2.93 / 3.92; removing a client 0.49-0.66 of booked.

Not covered here (see the issue's note): the loopback air's real modem estimates timing, phase and CFO from
a preamble and pilots that the payload's ISI reaches under multipath, so its aggregate is not linear in one
client's data; there a unit spike next to the closing pilot moved the aggregate by up to 2.26x the booked
sensitivity (TDL-C, 8 samples), 1.50x at 1 sample, against 1.000 on the flat channel."""
import numpy as np
import pytest

from otafl_sdr.channel import multipath_rx
from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.channel.sim_air import SimAir
from otafl_sdr.phy.packing import unpack_reals
from otafl_sdr.phy.pulse_shaping import rrc_taps, symbol_response
from otafl_sdr.transmission import RoundPlan
from otafl_sdr.workload.booking import ledger_mechanism

from loopback_helpers import make_cfg, make_plan

K, D, ROUNDS = 8, 2048, 6
N = D // 2


def worst_tones(mp, cfg, r, senders, top):
    """(client, bin) of the largest |C_i(f) / Cp(f)| at the receiver model's lock, on the N-point grid."""
    fir = mp.link_channels(cfg.run.seed, r, K, cfg.phy)
    delays = np.arange(fir.shape[1])
    t0, _ = multipath_rx.lock(delays, fir, senders, cfg.phy)
    c, R = multipath_rx.symbol_channels(delays, fir, t0, cfg.phy)
    prx = rrc_taps(cfg.phy.sps, cfg.phy.rolloff, cfg.phy.rrc_span)
    cp = symbol_response(prx, prx, cfg.phy.sps)
    Lp = (len(cp) - 1) // 2
    C = np.fft.fft(np.roll(np.pad(c, ((0, 0), (0, N - c.shape[1]))), -R, axis=1), axis=1)
    Cp = np.fft.fft(np.roll(np.pad(cp, (0, N - len(cp))), -Lp))
    order = np.argsort(np.abs(C / Cp).ravel())[::-1][:top]
    return [divmod(int(j), N) for j in order]


def _with_payload(plan, payload):
    return RoundPlan(**{**plan.__dict__, "payload": payload})


@pytest.mark.parametrize("spread", [1, 2, 4, 8])
def test_one_clients_change_stays_within_the_booked_multipath_sensitivity(spread):
    cfg = make_cfg()
    cfg.channel.multipath, cfg.channel.delay_spread_ns = "tdl-c", spread * 1e9 / cfg.uhd.rate
    mp = Multipath.from_config(cfg)
    air, rng = SimAir(cfg), np.random.default_rng(3)
    booked_ratio, unstretched_ratio = [], []
    for r in range(1, ROUNDS + 1):
        plan = make_plan(cfg, K, D, rng, rnd=r)
        senders = multipath_rx.reference_senders(plan, np.ones(K, bool), cfg.phy)
        plan.extra["multipath_gain"] = multipath_rx.sensitivity_gain(mp, cfg.run.seed, r, K, cfg.phy, senders)
        booked = ledger_mechanism(plan, None, "sim", None)                  # as rounds/pipeline.py books it
        assert booked.sensitivity == plan.mechanism.sensitivity * plan.extra["multipath_gain"]
        y0 = air.transmit(plan, np.random.default_rng(r)).aggregate.copy()
        changes = []
        for i in range(K):                                                  # remove client i (||change|| <= 1)
            p = plan.payload.copy()
            p[i] = 0.0
            changes.append(p)
        for i, k in worst_tones(mp, cfg, r, senders, top=16):               # a unit tone on link i
            p = plan.payload.copy()
            p[i] += unpack_reals(np.exp(2j * np.pi * k * np.arange(N) / N) / np.sqrt(N), D)
            changes.append(p)
        for p in changes:
            shift = np.linalg.norm(air.transmit(_with_payload(plan, p), np.random.default_rng(r)).aggregate - y0)
            booked_ratio.append(shift / booked.sensitivity)
            unstretched_ratio.append(shift / plan.mechanism.sensitivity)
    assert max(booked_ratio) <= 1.0 + 1e-9
    assert max(booked_ratio) > 0.85                                         # the booking is not loose
    assert max(unstretched_ratio) > 1.5                                     # without the stretch: exceeded


def test_flat_channel_books_the_plan_unchanged():
    """The default (flat) channel: no stretch, the ledger's mechanism is the plan's object itself."""
    cfg = make_cfg()
    plan = make_plan(cfg, K, 64, np.random.default_rng(1), rnd=1)
    assert not Multipath.from_config(cfg).enabled
    assert ledger_mechanism(plan, None, "sim", None) is plan.mechanism
