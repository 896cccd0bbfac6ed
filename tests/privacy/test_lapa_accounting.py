"""Paper 004's own accounting (``lapa_sum``: budgets summed over rounds) beside the ledger's RDP / PLD for the
same rounds, through a real orchestrator run."""
import json

import numpy as np
import pytest

from otafl_sdr.configure.load import load_config
from otafl_sdr.experiment.orchestrator import make_experiment
from otafl_sdr.privacy.lapa_budget import LapaSumAccountant
from otafl_sdr.privacy.rdp import RdpAccountant
from otafl_sdr.transmission import Mechanism

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures


def mech(r, eps_k, delta_r=1e-6, sens=0.01, sigma=0.1):
    return Mechanism(round=r, sensitivity=sens, sigma_eff=sigma, extra={"eps_k": list(eps_k), "delta_round": delta_r})


def test_sums_per_device_worst_device_and_delta():
    acc = LapaSumAccountant(1e-5)
    acc.step(mech(1, [0.1, 0.3, 0.2]))
    acc.step(Mechanism(round=2, sensitivity=0.0, sigma_eff=0.0, uses_data=False))     # costs nothing
    acc.step(mech(3, [0.5, 0.1, 0.2]))
    assert acc.device_totals() == pytest.approx([0.6, 0.4, 0.4])
    assert acc.epsilon() == pytest.approx(0.6)
    assert acc.system_total() == pytest.approx(1.4)
    assert acc.delta_spent == pytest.approx(2e-6)
    assert acc.epsilon(1e-6) is None                  # the sum is no guarantee below the delta spent
    assert acc.classic_bound_valid
    clone = LapaSumAccountant(1e-5)
    clone.load_state_dict(acc.state_dict())
    assert clone.epsilon() == acc.epsilon() and clone.system_total() == acc.system_total()
    assert acc.peek(mech(4, [0.0, 0.9, 0.0])) == pytest.approx(1.3) and acc.epsilon() == pytest.approx(0.6)
    acc.step(Mechanism(round=5, sensitivity=0.01, sigma_eff=0.1))                    # not a LAPA round
    assert acc.epsilon() is None
    big = LapaSumAccountant(1e-5)
    big.step(mech(1, [1.5]))
    assert not big.classic_bound_valid


def test_the_papers_sum_is_far_above_rdp_for_the_same_noise():
    """Per round the classic bound gives eps_k; RDP composition of the aggregate's Gaussian mechanism with
    the noise that bound implies (z = c/eps) costs far less over many rounds."""
    from otafl_sdr.power.lapa_maths import gauss_c
    T, delta = 30, 1e-5
    c = gauss_c(delta / T)
    lapa, rdp = LapaSumAccountant(delta), RdpAccountant(delta)
    for t in range(1, T + 1):
        m = Mechanism(round=t, sensitivity=1.0, sigma_eff=c / 0.5, extra={"eps_k": [0.5], "delta_round": delta / T})
        lapa.step(m)
        rdp.step(m)
    assert lapa.epsilon() == pytest.approx(15.0)
    assert rdp.epsilon() < lapa.epsilon() / 3


@pytest.mark.experiment
def test_lapa_run_reports_lapa_sum_beside_rdp_and_pld(tmp_path):
    cfg = load_config(None, [
        "run.rounds=4", "run.progress=false", "run.torch_threads=1", "data.dataset=digits", "data.clients=6",
        "data.partition=iid_noniid_mix", "data.iid_devices=2", "data.classes_per_client=2", "model.hidden=16",
        "train.local_epochs=1", "power.policy=lapa", "power.max_snr_db=0", "privacy.eps=5",
        "privacy.accountant=rdp", "privacy.enforce=false", "privacy.targeting=paper",
        'privacy.report=["lapa_sum", "rdp", "pld"]'])
    ex = make_experiment(cfg, tmp_path / "run", progress=False)
    out = ex.run()
    s = out.summary
    assert s["rounds"] == 4
    assert s["eps_lapa_sum"] is not None and s["eps_rdp"] is not None and s["eps_pld"] is not None
    assert s["eps_lapa_sum"] > s["eps_rdp"]
    lines = [json.loads(x) for x in (tmp_path / "run" / "privacy_ledger.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    totals = np.sum([ln["extra"]["eps_k"] for ln in lines], axis=0)
    assert s["eps_lapa_sum"] == pytest.approx(float(np.max(totals)))
    # the policy saw the clients' label counts (attach): IID devices weigh more
    G = ex.policy.log[-1]["G"]
    assert G[:2].min() > G[2:].max()
