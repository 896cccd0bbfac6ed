"""sim_loopback/fdp_tables.py runs tiny (digits, 1-2 rounds): Table 6 in the paper's layout and Table 7's
adjacent-data-set sensitivity, whose coupling (same seeds => same model) is checked directly."""
import csv
import importlib.util
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures

ROOT = Path(__file__).resolve().parents[2]
torch.set_num_threads(1)


def _script():
    spec = importlib.util.spec_from_file_location("fdp_tables", ROOT / "sim_loopback" / "fdp_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.experiment
def test_table6_tiny(tmp_path, capsys):
    mod = _script()
    rc = mod.main(["table6", "--tiny", "--out", str(tmp_path), "--ms", "4", "--ks", "2", "--sigmas", "1,0.001",
                   "--tk", "2", "--seeds", "1", "--set", "data.dataset=digits"])
    assert rc == 0
    md = (tmp_path / "table6.md").read_text()
    assert "| Data / model | sigma | m=4 K=2 |" in md
    lines = md.splitlines()
    assert any(line.startswith("| digits mlp | 1 | - |") for line in lines)       # sigma = 1 diverges
    ok = [line for line in lines if line.startswith("|  | 0.001 | ") and "±" in line]
    assert len(ok) == 1
    rows = list(csv.DictReader((tmp_path / "table6.csv").read_text().splitlines()))
    assert len(rows) == 2 and {r["sigma"] for r in rows} == {"1.0", "0.001"}
    small = next(r for r in rows if r["sigma"] == "0.001")
    big = next(r for r in rows if r["sigma"] == "1.0")
    assert float(small["eps_fdp"]) > float(big["eps_fdp"]) > 0                        # less noise, more eps
    assert float(small["eps_fdp"]) <= float(small["eps_fdp_feasible"]) * (1 + 1e-9)
    assert "results:" in capsys.readouterr().out


@pytest.mark.experiment
def test_table7_tiny_and_its_coupling(tmp_path):
    mod = _script()
    rc = mod.main(["table7", "--tiny", "--out", str(tmp_path), "--rounds", "1", "--clients", "4", "--alphas", "1",
                   "--set", "data.dataset=digits"])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "table7.csv").read_text().splitlines()))
    assert [r["method"] for r in rows] == ["Noisy-FedAvg", "Noisy-FedProx alpha=1"]
    for r in rows:
        assert 0 < float(r["sensitivity"]) < 1.0 and 0 <= float(r["accuracy"]) <= 1
    assert "| Method | Accuracy | Sensitivity | eps_fdp | eps_fdp_feasible |" in (tmp_path / "table7.md").read_text()
    # the same data set with the same seeds gives the same model: the measured distance is the data's doing
    cfg = mod._config("noisy_fedavg_mnist5k.toml", ["data.dataset=digits"], {"sigma": 0.01, "clip": 10.0,
                      "local_steps": 5}, mod.TINY + ["run.rounds=1", "data.clients=4"])
    w = [torch.load(mod.Experiment(cfg, tmp_path / f"same{i}", progress=False).run().out / "checkpoint.pt",
                    weights_only=True)["w"] for i in range(2)]
    assert torch.equal(w[0], w[1])


def test_bad_arguments_exit_2(tmp_path, capsys):
    mod = _script()
    assert mod.main(["table6", "--out", str(tmp_path), "--ks", "0"]) == 2
    assert "positive integers" in capsys.readouterr().err
