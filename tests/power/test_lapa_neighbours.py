"""Issue 24 item 3: LAPA (paper 004) books a (sensitivity, sigma) pair that holds for a data set D and its
neighbour D' (one sample of one client replaced, label and features), and the printed eps is the ledger's.

Coupling (what adaptive composition conditions on): both runs see the same released values, i.e. the same
released label counts and the same released aggregates; everything the policy derives from them is then the
same for D and D', and only the mean sum_k G_k u_k moves."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.config.schema import Config
from otafl_sdr.power import reliable_aggregation as ra
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.lapa import LapaPolicy
from otafl_sdr.power.lapa_public import label_sensitivity

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dp_reference import independent_pld_epsilon  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
K, D, N_CLASSES, C = 6, 400, 10, 1.0


def _clients(rng):
    """Per-sample clipped 'gradients' (norm <= C) and labels: 2 IID clients, 4 holding two classes each."""
    sizes = [60, 80, 50, 70, 90, 40]
    xs, ys = [], []
    for k, n in enumerate(sizes):
        y = rng.integers(0, N_CLASSES, n) if k < 2 else rng.choice([2 * k - 4, 2 * k - 3], n)
        g = rng.standard_normal((n, D)) + 0.3 * y[:, None]
        g /= np.maximum(1.0, np.linalg.norm(g, axis=1, keepdims=True) / C)
        xs.append(g)
        ys.append(y)
    return xs, ys


def _counts(ys):
    return np.stack([np.bincount(y, minlength=N_CLASSES) for y in ys]).astype(float)


def _info(sizes):
    sizes = np.asarray(sizes, float)
    return SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, 2.0 * D), dim=D, sigma_c2=1.0,
                      rounds=6, eps=2.0, delta=1e-5, unit="sample_paper")


@pytest.mark.parametrize("budget,filtered", [("lapa", False), ("arb", False), ("lapa", True)])
def test_booked_pair_covers_both_neighbours(budget, filtered):
    rng = np.random.default_rng(1)
    xs, ys = _clients(rng)
    xs2, ys2 = [x.copy() for x in xs], [y.copy() for y in ys]
    k = 2                                                  # one sample of client 2: new label, new features
    ys2[k][0] = 7
    f = rng.standard_normal(D)
    xs2[k][0] = -C * f / np.linalg.norm(f)
    sizes = [len(y) for y in ys]
    info = _info(sizes)
    cD, cD2 = _counts(ys), _counts(ys2)
    assert np.linalg.norm(cD - cD2) <= label_sensitivity("sample_paper", sizes) + 1e-12
    opts = {"budget": budget, "eps_total": 6.0, "window": 3}
    pD = LapaPolicy(Config(), info, opts, context={"label_counts": cD})
    pD2 = LapaPolicy(Config(), info, opts, context={"label_counts": cD2})
    if filtered:                                           # privacy.targeting = "target": the Gaussian filter
        for p in (pD, pD2):
            p.mu2_target, p.rounds_target = 6 / 3.0 ** 2, 6
    pD.release_labels(np.random.default_rng(5))
    pD2.W, pD2.label_mu2 = pD.W.copy(), pD.label_mu2       # the same released counts (coupled noise)
    pD2.mu2_spent = pD.mu2_spent
    # the weights from the raw counts WOULD differ between neighbours: that is why they are released
    assert not np.allclose(ra.reliable_weights(np.asarray(sizes, float), ra.wasserstein_to_global(cD)),
                           ra.reliable_weights(np.asarray(sizes, float), ra.wasserstein_to_global(cD2)), rtol=1e-6)
    uD = np.stack([x.mean(axis=0) for x in xs])
    uD2 = np.stack([x.mean(axis=0) for x in xs2])
    h = np.ones(K, complex)
    split_differs = False
    for t in range(1, 7):
        drift = 0.05 * t * np.ones(D) / np.sqrt(D)        # the 'training' moves both the same way
        planD = pD.plan(t, uD + drift, h, 0j, np.random.default_rng(100 + t))
        planD2 = pD2.plan(t, uD2 + drift, h, 0j, np.random.default_rng(100 + t))
        mD, mD2 = planD.mechanism, planD2.mechanism
        assert np.array_equal(planD.target_gain, planD2.target_gain)
        assert mD.sigma_eff == mD2.sigma_eff and mD.sensitivity == mD2.sensitivity
        shift = np.linalg.norm(planD.extra["clean_aggregate"] - planD2.extra["clean_aggregate"])
        assert 0 < shift <= mD.sensitivity and shift <= mD2.sensitivity
        for pol in (pD, pD2):                              # the booked sigma is in both releases
            assert pol.log[-1]["sigma_eff"] <= np.sqrt(pol.log[-1]["var_realised"]) * (1 + 1e-15)
            assert pol.log[-1]["var_realised"] <= pol.log[-1]["sigma_eff"] ** 2 * (1 + 1e-9)
        if filtered:
            assert pD.mu2_spent == pD2.mu2_spent
        if t == 1:
            assert mD.extra["label_release"]["mu"] == pytest.approx(0.1)
            s0 = mD.extra["label_release"]["aggregate_sensitivity"]
            assert (mD.sensitivity / mD.sigma_eff) ** 2 == pytest.approx((s0 / mD.sigma_eff) ** 2 + 0.01)
        else:
            assert "label_release" not in mD.extra
        split_differs |= not np.allclose(planD.extra["sigma_k"], planD2.extra["sigma_k"])
        # the same released aggregate reaches both (the coupling): D's release
        z = np.random.default_rng(200 + t).standard_normal(D)
        released = planD.target_gain @ planD.payload + z * np.sqrt(info.sigma_c2) / planD.alpha_u
        pD.observe(t, released)
        pD2.observe(t, released)
    if filtered:                      # the filter spent its total (the label release included) and no more
        assert pD.mu2_spent == pytest.approx(pD.mu2_target, rel=1e-6)
    if budget == "lapa":
        assert split_differs       # the personalised split follows the unreleased angles: only the split


@pytest.mark.experiment      # a whole run through the CLI's process (the conftest cannot count a subprocess's run)
def test_printed_eps_is_the_ledgers(tmp_path):
    out = tmp_path / "run"
    r = subprocess.run([str(ROOT / ".venv/bin/otafl-sdr"), "run", "--config",
                        str(ROOT / "sim_loopback/presets/lapa_mix_3iid.toml"), "--set", "air.name=sim",
                        "--set", "run.rounds=3", "--set", "run.progress=false", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    recs = [x for x in rows if "sensitivity" in x]
    assert len(recs) == 3 and "label_release" in recs[0]["extra"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(recs, 1e-5), rel=2e-3)


def test_angle_weights_are_refused_with_dp_noise():
    """weights = 'angle' forms G from angles of updates nobody released: no DP claim may rest on it."""
    from otafl_sdr.errors import ConfigError
    info = _info([50] * K)
    with pytest.raises(ConfigError, match="angle"):
        LapaPolicy(Config(), info, {"weights": "angle", "budget": "lapa"})
    LapaPolicy(Config(), info, {"weights": "angle", "budget": "none"})    # Benchmark 2, no DP noise


def test_a_resumed_run_never_releases_the_labels_twice():
    """The released counts' W travels in the checkpoint: a resumed policy reuses it, books nothing again."""
    rng = np.random.default_rng(2)
    _, ys = _clients(rng)
    info = _info([len(y) for y in ys])
    pol = LapaPolicy(Config(), info, {"eps_total": 6.0}, context={"label_counts": _counts(ys)})
    first = pol.plan(1, np.zeros((K, D)), np.ones(K, complex), 0j, np.random.default_rng(3))
    assert "label_release" in first.mechanism.extra
    back = LapaPolicy(Config(), info, {"eps_total": 6.0}, context={"label_counts": _counts(ys)})
    back.load_state_dict(pol.state_dict())
    back.release_labels(np.random.default_rng(99))
    assert np.array_equal(back.W, pol.W)
    nxt = back.plan(2, np.zeros((K, D)), np.ones(K, complex), 0j, np.random.default_rng(4))
    assert "label_release" not in nxt.mechanism.extra and np.array_equal(nxt.target_gain, first.target_gain)
