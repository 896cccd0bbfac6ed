"""Multipath and the ledger (issue 26 item 1 x the privacy rule): every tap carries client data, so the
booked sensitivity is stretched by channel/multipath_rx.sensitivity_gain, an operator-norm bound of the
single-carrier receiver's symbol-level filter C_i / Cp. Checked against the sim air's own receiver model:
random and worst-case payload differences never move the noiseless aggregate by more than the bound, a
tone at the worst frequency comes close to it, and a run's ledger books the stretched sensitivity (its
eps rechecked with dp-accounting)."""
import json

import numpy as np
import pytest

from otafl_sdr.channel import multipath_rx
from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.config.schema import PhyConfig
from otafl_sdr.phy.packing import pack_reals, unpack_reals
from dp_reference import independent_pld_epsilon

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures


def _shift(mp, phy, seed, it, links, i, delta):
    """Noiseless aggregate change when link i's payload changes by delta (unit gain, every link sends)."""
    fir = mp.link_channels(seed, it, links, phy)
    x = np.zeros((links, (len(delta) + 1) // 2), complex)
    x[i] = pack_reals(delta[None, :])[0]
    y = multipath_rx.receive(x, np.arange(fir.shape[1]), fir, np.ones(links, bool), phy)
    return unpack_reals(y, len(delta))


def test_flat_channel_is_not_stretched():
    assert multipath_rx.sensitivity_gain(Multipath(), 1, 1, 4, PhyConfig()) == 1.0


@pytest.mark.parametrize("name,spread", [("exponential", 0.5), ("exponential", 2.0), ("tdl-a", 1.0), ("tdl-c", 4.0)])
def test_the_bound_holds_for_random_and_worst_payload_differences(name, spread):
    phy, mp, seed, links, d = PhyConfig(), Multipath(name, spread), 7, 4, 4096
    rng = np.random.default_rng(0)
    for it in (1, 2):
        gain = multipath_rx.sensitivity_gain(mp, seed, it, links, phy)
        assert gain >= 1.0
        for i in range(links):
            for _ in range(3):
                delta = rng.standard_normal(d)
                delta /= np.linalg.norm(delta)
                assert np.linalg.norm(_shift(mp, phy, seed, it, links, i, delta)) <= gain * (1 + 1e-9)
    # a tone at the worst link's worst frequency (circular in receive's FFT): the bound is nearly reached
    fir = mp.link_channels(seed, 1, links, phy)
    n = d // 2
    best = 0.0
    for i in range(links):
        for k in range(0, n, max(n // 256, 1)):
            tone = np.exp(2j * np.pi * k * np.arange(n) / n)
            x = np.zeros((links, n), complex)
            x[i] = tone / np.linalg.norm(tone)
            y = multipath_rx.receive(x, np.arange(fir.shape[1]), fir, np.ones(links, bool), phy)
            best = max(best, float(np.linalg.norm(y)))
    assert best <= multipath_rx.sensitivity_gain(mp, seed, 1, links, phy) * (1 + 1e-9)
    assert best >= 0.5          # the stretch is real: a multipath link is no weaker than half the flat one


@pytest.mark.experiment
def test_a_multipath_run_books_the_stretched_sensitivity(tmp_path):
    from otafl_sdr.cli.main import main
    out = tmp_path / "mp"
    rc = main(["run", "--set", "air.name=sim", "--set", "run.rounds=2", "--set", "data.dataset=digits",
               "--set", "channel.multipath=exponential", "--set", "channel.delay_spread_ns=2000",
               "--set", "run.progress=false", "--out", str(out)])
    assert rc == 0
    lines = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    data = [x for x in lines if x["uses_data"]]
    assert data and all(x["extra"]["multipath_gain"] > 1.0 for x in data)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eps_pld"] <= 1.0 + 1e-9                       # the target planned the stretch
    assert independent_pld_epsilon(data, 1e-5) == pytest.approx(summary["eps_pld"], rel=2e-3)
