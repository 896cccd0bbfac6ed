"""Issue 24, items 1-2: a non-finite or out-of-range sample never changes the mechanism.

The reproduction: one NaN pixel in a FEMNIST JSON is refused at load in one line. Injected after loading
(or an inf / 1e300 / 1e30 sample), one round through the real round pipeline on air=sim moves the noiseless
aggregate by at most the sensitivity the ledger books (privacy_ledger.jsonl) between the neighbouring data
sets D and D' (that one sample changed, same seed), for each mechanism; no client is silenced, and the
rows and notes are the same on both sides. Before the fix this ratio was 19-25x (issue 24)."""
import copy
import json

import numpy as np
import pytest
import torch

from otafl_sdr.errors import UserError
from otafl_sdr.learning.trainer import LocalTrainer
from otafl_sdr.experiment.orchestrator import Experiment
from otafl_sdr.configure.load import load_config

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

BASE = ["data.dataset=digits", "data.clients=4", "model.hidden=8", "run.progress=false", "run.rounds=2",
        "air.name=sim", "privacy.enforce=false", "train.local_epochs=1", "train.momentum=0.5",
        "privacy.targeting=paper", "privacy.unit=sample", "train.sample_clip=0.5", "train.batch_size=512"]
MECHANISMS = {
    "cj_adaptive": ["power.policy=cj_adaptive", "algorithm.name=fedprox"],
    "h_min": ["power.policy=h_min", "algorithm.name=fedavg"],
    "cdpb_idle": ["power.policy=cdpb_idle", "power.options={gamma_bar = 0.5, eps_bar = 1e5, rounds = 2}",
                  "power.jammer=false", "algorithm.name=fedavg"],
    "lapa": ["power.policy=lapa", 'power.options={weights = "fedavg"}', "algorithm.name=fedavg"],
    "noisy_fedavg": ["power.policy=cj_adaptive", "power.jammer=false", "algorithm.name=noisy_fedavg",
                     "algorithm.options={sigma = 0.01, clip = 1.0}", "train.tau=100.0"],
}
VALUES = {"NaN": float("nan"), "inf": float("inf"), "1e300": 1e300, "1e30": 1e30}


def _one_round(tmp_path, overrides, poison=None):
    """Round 1 through the experiment's own pipeline (air sim); ``poison`` = (client, value): that client's
    first sample gets ``value`` in one feature after loading (loaders refuse NaN/inf). Returns (the plan as
    released, the reception, the row, notes, the ledger's booked sensitivity of round 1)."""
    exp = Experiment(load_config(None, BASE + overrides), tmp_path)
    exp.build()
    if poison is not None:
        data = _poisoned(exp.data, *poison)
        exp.parts.trainer = LocalTrainer(exp.cfg, data, copy.deepcopy(exp.trainer.model))
    exp.start_transport()
    seen = []
    exp.pipeline.record_iq = lambda rec, plan, attempt: seen.append((plan, rec))
    notes: list = []
    try:
        w = exp.trainer.get_flat()
        out = exp.run_round(1, w, w, notes)
    finally:
        exp.close()
    entries = [json.loads(line) for line in (tmp_path / "privacy_ledger.jsonl").read_text().splitlines()]
    booked = [e for e in entries if e.get("round") == 1 and "sensitivity" in e]
    assert out.row is not None and seen and booked
    return seen[-1][0], seen[-1][1], out.row, notes, float(booked[0]["sensitivity"])


def _poisoned(data, i, value):
    d = copy.deepcopy(data)
    d.client_x[i][0][5] = torch.as_tensor(value, dtype=torch.float64).to(torch.float32)   # 1e300: inf in float32
    return d


def test_femnist_json_with_a_nan_pixel_is_refused_at_load_in_one_line(tmp_path):
    users = {f"w{u}": {"x": [[0.5] * 784 for _ in range(6)], "y": [36 + k for k in range(6)]} for u in range(2)}
    users["w1"]["x"][3][100] = float("nan")
    folder = tmp_path / "femnist"
    folder.mkdir()
    text = json.dumps({"users": list(users), "num_samples": [6, 6], "user_data": users})
    assert "NaN" in text                                      # what json writes, and LEAF's readers accept
    (folder / "all_data_0.json").write_text(text)
    cfg = load_config(None, ["data.dataset=femnist", f"data.path={folder}", "data.clients=2",
                             "data.partition=natural", "air.name=sim", "run.rounds=1", "run.progress=false"])
    from otafl_sdr.learning.federated_data import load_federated
    with pytest.raises(UserError) as e:
        load_federated(cfg)
    msg = str(e.value)
    assert "\n" not in msg and "all_data_0.json" in msg and "sample 9" in msg and "'w1'" in msg


def test_other_loaders_refuse_non_finite_features_naming_the_sample():
    from otafl_sdr.learning import datasets
    cfg = load_config(None, ["data.dataset=digits"])
    raw = datasets.load_raw(cfg, np.random.default_rng(0))
    x = raw.x.copy()
    x[17, 3] = np.inf
    with pytest.raises(UserError, match=r"sample 17 has a feature that is NaN, inf"):
        datasets.check_finite(x, "data set 'digits'")
    datasets.check_finite(raw.x * 1e20, "finite but large")     # finite values are accepted (clipping bounds them)


@pytest.mark.parametrize("mech", sorted(MECHANISMS))
def test_a_non_finite_sample_moves_the_aggregate_within_the_booked_sensitivity(tmp_path, mech):
    plan_d, rec_d, row_d, notes_d, sens = _one_round(tmp_path / "D", MECHANISMS[mech])
    assert sens > 0
    worst = 0.0
    for name, value in VALUES.items():
        for i in (0, 2):
            plan_n, rec_n, row_n, notes_n, sens_n = _one_round(tmp_path / f"{name}-{i}", MECHANISMS[mech], (i, value))
            assert sens_n == sens                              # the same mechanism on both sides
            assert np.all(np.isfinite(plan_n.payload)) and rec_n.ok and np.all(np.isfinite(rec_n.aggregate))
            assert list(plan_n.mode) == list(plan_d.mode) and row_n["transmitting"] == row_d["transmitting"]
            assert not any("NaN" in n or "inf" in n for n in notes_n) and notes_n == notes_d
            moved = float(np.linalg.norm(plan_d.expected_aggregate() - plan_n.expected_aggregate()))
            assert moved <= sens * (1 + 1e-6) + 1e-12, f"{mech}, client {i}, {name}: {moved} > {sens}"
            worst = max(worst, moved / sens)
    print(f"{mech}: worst aggregate shift / booked sensitivity = {worst:.3f}")


def test_trainer_clips_a_non_finite_per_sample_gradient_to_zero_every_path(tmp_path):
    """primal / dual MLP, per-sample clip on and off, the plain reference loop: a NaN / inf sample gives
    exactly the update of the same data with that sample's gradient zero, never NaN, within tau."""
    cfg = load_config(None, BASE + ["train.batch_size=8"])
    exp = Experiment(cfg, tmp_path / "t")
    exp.build()
    exp.close()                  # its built parts stay; the folder's lock is released
    data = exp.data
    w = exp.trainer.get_flat()
    for clip in (0.0, 0.5):
        for value in (float("nan"), float("inf"), -float("inf")):
            d2 = _poisoned(data, 1, value)
            for mode in ("primal", "dual"):
                tr = LocalTrainer(cfg, d2, copy.deepcopy(exp.trainer.model), mode=mode)
                res = tr.train_round(w, 1, sample_clip=clip)
                assert torch.isfinite(res.updates).all()
                assert float(torch.linalg.vector_norm(res.updates, dim=1).max()) <= cfg.train.tau * (1 + 1e-6)
                assert np.isfinite(res.train_loss)
                if mode == "primal":
                    ref = tr.train_round_reference(w, 1, sample_clip=clip)
                    torch.testing.assert_close(res.updates, ref.updates, rtol=1e-4, atol=1e-6)
            # only client 1's update depends on the poisoned sample
            base = LocalTrainer(cfg, data, copy.deepcopy(exp.trainer.model), mode="dual").train_round(w, 1, sample_clip=clip)
            assert torch.equal(res.updates[[0, 2, 3]], base.updates[[0, 2, 3]])
            assert not torch.equal(res.updates[1], base.updates[1])


OTAFD = ["run.progress=false", "run.torch_threads=1", "data.dataset=digits", "data.clients=5",
         "data.partition=dominant_class", "model.name=logreg", "train.local_epochs=1", "train.lr=0.1",
         "algorithm.name=otafd", "algorithm.options={gamma=2.0, targets='simplex'}", "power.policy=otafd_prop1",
         "power.max_snr_db=20", "privacy.accountant=rdp", "run.rounds=2", "air.name=sim", "privacy.unit=sample"]


def test_otafd_a_non_finite_sample_never_reaches_the_release(tmp_path):
    """Paper 003 (OTA-FD): before, a NaN sample made the device's soft labels NaN and the release NaN. Now
    its payload stays in the simplex, the release is finite and the targets move within the recorded
    mechanism (sqrt(sum_k (||r^k - r'^k|| / s_k)^2) <= mu), also after a round of training on the sample."""
    from otafl_sdr.learning.otafd import DeviceModels
    exp = Experiment(load_config(None, OTAFD), tmp_path / "o")
    exp.build()
    exp.close()                  # its built parts stay; the folder's lock is released
    w = exp.trainer.get_flat()
    q = exp.trainer.payload(w)
    h, h_cj = exp.draw_channels(1)
    from otafl_sdr import seeding
    plan = exp.policy.plan(1, q.reshape(exp.K, -1), h, h_cj, seeding.rng(0, "p", 1))
    s, mu = np.asarray(plan.extra["target_noise_std"]), float(plan.extra["mu"])
    weights = exp.policy.w
    r = (weights[:, :, None] * q).sum(axis=0)
    for value in (float("nan"), float("inf")):
        for i in range(exp.K):
            d = _poisoned(exp.data, i, value)
            dm = DeviceModels(exp.cfg, d, copy.deepcopy(exp.trainer.model), gamma=2.0)
            for w2 in (dm.get_flat(), dm.train_round(dm.get_flat(), None, 0, epochs=1)[0]):
                assert torch.isfinite(w2).all()
                q2 = dm.payload(w2)
                assert np.all(np.isfinite(q2)) and np.allclose(q2.sum(-1)[exp.trainer.counts > 0], 1.0)
            q2 = dm.payload(dm.get_flat())
            moved = float(np.sqrt(np.sum((np.linalg.norm(r - (weights[:, :, None] * q2).sum(axis=0), axis=1) / s) ** 2)))
            assert moved <= mu * (1 + 1e-9), (i, moved, mu)
    # one round through the pipeline with the NaN sample: the release is finite, every device sends
    exp2 = Experiment(load_config(None, OTAFD), tmp_path / "p")
    exp2.build()
    exp2.parts.trainer = DeviceModels(exp2.cfg, _poisoned(exp2.data, 1, float("nan")),
                                      copy.deepcopy(exp2.trainer.model), gamma=2.0)
    exp2.start_transport()
    seen = []
    exp2.pipeline.record_iq = lambda rec, plan, attempt: seen.append((plan, rec))
    try:
        w = exp2.trainer.get_flat()
        out = exp2.run_round(1, w, w, [])
    finally:
        exp2.close()
    plan2, rec2 = seen[-1]
    assert rec2.ok and np.all(np.isfinite(rec2.aggregate)) and "silent" not in list(plan2.mode)
    assert out.row is not None and np.isfinite(out.row["test_accuracy"])


def test_the_ack_carries_no_bit_from_the_data():
    """zmq / uhd testbed: the client's ack holds its planned decision and, outside diagnostics, nothing
    computed from its data (no finite / reason flags, no fits_dac)."""
    from otafl_sdr.net.messages import SCHEMA
    fields, arrays = SCHEMA["ack"]
    assert not {"finite", "reason", "fits_dac"} & set(fields)
    assert set(fields) == {"round", "s", "alpha_re", "alpha_im", "mode", "norm", "train_loss", "clipped"}


def test_a_burst_over_the_dac_is_clipped_at_the_planned_level_not_refused():
    """uhd: the client's burst is projected onto {|x_n| <= full scale} (non-expansive: sensitivity kept),
    identical where it fits."""
    from otafl_sdr.radio.uhd_round_signal import clip_to_dac
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(500) + 1j * rng.standard_normal(500)) * 0.3
    assert clip_to_dac(a * 0.1) is not None and np.array_equal(clip_to_dac(a * 0.1), a * 0.1)
    for _ in range(20):
        x, y = a * rng.uniform(1, 5), a * rng.uniform(1, 5) + 0.5 * rng.standard_normal(500)
        px, py = clip_to_dac(x), clip_to_dac(y)
        assert np.max(np.abs(px)) <= 1.0 + 1e-12 and np.linalg.norm(px - py) <= np.linalg.norm(x - y) + 1e-12
