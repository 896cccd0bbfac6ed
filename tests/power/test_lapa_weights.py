"""Paper 004 reliable aggregation (eqs. 20-22), SINR / SER selection, and the iid_noniid_mix partition."""
import numpy as np
import pytest

from otafl_sdr.config.schema import Config
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import ConfigError
from otafl_sdr.learning.federated_data import load_federated
from otafl_sdr.learning.partition_mix import PRESETS, iid_noniid_mix
from otafl_sdr.power import reliable_aggregation as ra
from otafl_sdr.power.base import SystemInfo
from otafl_sdr.power.lapa import LapaPolicy


def test_wasserstein_of_label_pmfs():
    counts = np.array([[10, 0, 0], [0, 10, 0], [5, 5, 5], [0, 0, 10]])
    W = ra.wasserstein_to_global(counts)
    # global PMF (15, 15, 15)/45 = uniform on {0, 1, 2}: W(delta_0) = E|X| = 1, W(delta_1) = 2/3, W(uniform) = 0
    assert W == pytest.approx([1.0, 2 / 3, 0.0, 1.0])


def test_reliable_weights_eq21_and_selection_eq22():
    sizes = np.array([100.0, 100.0, 300.0, 50.0])
    W = np.array([0.5, 1.0, 1.0, 2.0])
    G = ra.reliable_weights(sizes, W)
    expect = sizes * np.exp(1 / W)
    assert G == pytest.approx(expect / expect.sum())            # eq. (21)
    assert G.sum() == pytest.approx(1.0)
    assert ra.reliable_weights(sizes, np.full(4, 0.7)) == pytest.approx(sizes / sizes.sum())  # equal W = FedAvg
    sel = np.array([True, False, True, True])
    Gs = ra.reliable_weights(sizes, W, sel)
    assert Gs[1] == 0 and Gs.sum() == pytest.approx(1.0)      # eq. (22), renormalised over the selected
    assert Gs[[0, 2, 3]] == pytest.approx(expect[[0, 2, 3]] / expect[[0, 2, 3]].sum())
    # W = 0 is floored, not a crash; temperature softens
    assert np.isfinite(ra.reliable_weights(sizes, np.array([0.0, 1, 1, 1]))).all()
    soft = ra.reliable_weights(sizes, W, temperature=10.0)
    assert np.std(soft / (sizes / sizes.sum())) < np.std(G / (sizes / sizes.sum()))


def test_ser_sinr_round_trip_and_selection():
    for ser in (1e-1, 1e-2, 1e-3):
        g = ra.ser_to_sinr(ser)
        assert ra.qpsk_ser(g) == pytest.approx(ser, rel=1e-9)
    assert ra.ser_to_sinr(1e-3) > ra.ser_to_sinr(1e-2) > ra.ser_to_sinr(1e-1)
    gamma = np.array([0.5, 3.0, 8.0, 20.0])
    assert ra.select_devices(gamma, ra.ser_to_sinr(1e-1)).tolist() == [False, True, True, True]
    assert ra.select_devices(gamma, 1e9).tolist() == [False, False, False, True]   # keep the best


def test_sinr_ota_and_sic():
    h = np.array([1.0, 0.5, 2.0])
    P = np.array([10.0, 10.0, 10.0])
    g = ra.sinr_ota(h, P, dim=10, sigma_c2=0.5)
    assert g == pytest.approx(np.abs(h) ** 2 * 10 / (10 * 0.5))
    s = ra.sinr_sic(h, P, dim=10, sigma_c2=0.5)
    rx = np.abs(h) ** 2                       # P/d = 1
    # strongest (device 2) decoded first, interfered by 0 and 1; the weakest sees only noise (eq. 6)
    assert s[2] == pytest.approx(rx[2] / (rx[0] + rx[1] + 0.5))
    assert s[0] == pytest.approx(rx[0] / (rx[1] + 0.5))
    assert s[1] == pytest.approx(rx[1] / 0.5)


def test_policy_weights_selection_follow_the_channel():
    K, d = 8, 100
    sizes = np.full(K, 50.0)
    info = SystemInfo(p=sizes / sizes.sum(), sizes=sizes, power=np.full(K, 10 * d), dim=d, sigma_c2=1.0,
                      rounds=5, eps=5.0, delta=1e-5)
    counts = np.zeros((K, 10))
    counts[:2] = 5                                  # two IID devices
    for k in range(2, K):
        counts[k, [k, (k + 1) % 10]] = 25
    # label_noise = 0: the counts declared public (the paper's premise), so eq. (21)'s direction shows
    pol = LapaPolicy(Config(), info, {"budget": "none", "ser_threshold": 0.1, "label_noise": 0},
                     context={"label_counts": counts})
    h = np.array([1.0, 0.2, 1.0, 1.0, 0.1, 1.0, 1.0, 1.0], complex)   # SNR 10 |h|^2: 0.4 and 0.1 fail 2.67
    plan = pol.plan(1, np.zeros((K, d)), h, 0j, np.random.default_rng(0))
    assert plan.mode[1] == "silent" and plan.mode[4] == "silent" and plan.alpha[1] == 0
    G = plan.target_gain
    assert G.sum() == pytest.approx(1.0) and G[1] == 0 and G[4] == 0
    assert G[0] > 2 * G[2]                           # the IID device weighs more (e^{1/W})


@pytest.mark.parametrize("label,n_iid", sorted(PRESETS.items()))
def test_iid_noniid_mix_presets_on_digits(label, n_iid):
    cfg = load_config(None, ["data.dataset=digits", "data.partition=iid_noniid_mix", "data.clients=15",
                             f"data.iid_devices={n_iid}", "data.classes_per_client=2"])
    data = load_federated(cfg)
    counts = np.stack([np.bincount(y.numpy(), minlength=10) for y in data.client_y])
    total = counts.sum(axis=0)
    assert counts.sum() == len(np.concatenate([y.numpy() for y in data.client_y]))
    glob = total / total.sum()
    W = ra.wasserstein_to_global(counts)
    for k in range(15):
        pmf = counts[k] / counts[k].sum()
        if k < n_iid:
            assert np.count_nonzero(counts[k]) == 10 and np.abs(pmf - glob).max() < 0.06
        else:
            assert np.count_nonzero(counts[k]) <= 2
    if 0 < n_iid < 15:
        assert W[:n_iid].max() < W[n_iid:].min()


def test_iid_noniid_mix_assigns_each_sample_once_and_checks_keys():
    cfg = load_config(None, ["data.clients=6", "data.iid_devices=2", "data.classes_per_client=1",
                             "data.partition=iid_noniid_mix"])
    y = np.repeat(np.arange(10), 30)
    parts = iid_noniid_mix(y, None, 10, cfg, np.random.default_rng(0))
    allidx = np.sort(np.concatenate(parts))
    assert np.array_equal(allidx, np.arange(len(y)))
    # classes no non-IID device holds (4 non-IID x 1 class < 10) go to the IID devices
    assert {int(c) for c in np.unique(y[np.concatenate(parts[:2])])} == set(range(10))
    with pytest.raises(ConfigError, match="data.iid_devices"):
        load_config(None, ["data.clients=6", "data.iid_devices=7"])
    cfg = load_config(None, ["data.clients=6", "data.iid_devices=0", "data.classes_per_client=1",
                             "data.partition=iid_noniid_mix"])
    with pytest.raises(ConfigError, match="data.classes_per_client"):
        iid_noniid_mix(y, None, 10, cfg, np.random.default_rng(0))
