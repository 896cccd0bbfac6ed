"""The paper presets on the papers' own data sets and models (sim_loopback/presets/paper00N_*): each full
preset and its reduced `_cpu` twin name the paper's data set and model, differ only in size, validate with
their data in data.path, and the reduced one runs a round on tiny files of the real format."""
import json
import tomllib
from pathlib import Path

import pytest

from data_fixtures import make_cifar10, make_cifar100, make_leaf, make_mnist
from otafl_sdr.experiment.orchestrator import run_experiment
from otafl_sdr.configure.load import load_config

PRESETS = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets"
# full preset stem -> (data set, model, fixture maker)
PAPER_DATA = {
    "paper000_femnist_fedavg_cj_eps1": ("femnist", "mlp", lambda p: make_leaf(p, writers=20, per_writer=40)),
    "paper001_cdpb_cifar100": ("cifar100", "resnet18", make_cifar100),
    "paper002_noisy_fedavg_mnist_lenet5": ("mnist", "lenet5", make_mnist),
    "paper002_noisy_fedavg_cifar10_resnet18": ("cifar10", "resnet18", make_cifar10),
    "paper003_otafd_mnist_cnn": ("mnist", "cnn2fc", make_mnist),
    "paper003_otafd_cifar10_resnet18": ("cifar10", "resnet18", make_cifar10),
    "paper004_lapa_mnist_cnn": ("mnist", "cnn2fc_norm", make_mnist),
    "paper004_lapa_fmnist_cnn": ("fashion_mnist", "cnn2fc_norm", make_mnist),
}
SIZE_KEYS = {("run", "name"), ("run", "rounds"), ("data", "clients"), ("data", "max_samples"),
             ("train", "batch_size"), ("train", "tau"), ("train", "local_epochs"), ("algorithm", "options")}
SLOW = {"paper002_noisy_fedavg_cifar10_resnet18", "paper003_otafd_cifar10_resnet18"}

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures


def leaves(d, prefix=()):
    for k, v in d.items():
        if isinstance(v, dict) and k != "options":
            yield from leaves(v, prefix + (k,))
        else:
            yield prefix + (k,), v


def test_every_paper_preset_on_a_file_data_set_is_listed_with_its_twin():
    on_files = {p.stem for p in PRESETS.glob("paper00*.toml")
                if tomllib.loads(p.read_text()).get("data", {}).get("dataset") in
                ("femnist", "mnist", "fashion_mnist", "cifar10", "cifar100")}
    assert on_files == set(PAPER_DATA) | {s + "_cpu" for s in PAPER_DATA}


@pytest.mark.parametrize("stem", sorted(PAPER_DATA))
def test_full_and_reduced_presets_name_the_papers_data_and_differ_only_in_size(tmp_path, stem):
    dataset, model, maker = PAPER_DATA[stem]
    root = maker(tmp_path / "data")
    full = load_config(PRESETS / f"{stem}.toml", [f"data.path={root}"])
    cpu = load_config(PRESETS / f"{stem}_cpu.toml", [f"data.path={root}"])
    assert full.data.dataset == cpu.data.dataset == dataset and full.model.name == model
    a, b = (dict(leaves(tomllib.loads((PRESETS / f"{s}.toml").read_text()))) for s in (stem, stem + "_cpu"))
    differ = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    if stem.startswith("paper001"):                # the paper names no model: LeNet-5 where ResNet-18 is too slow
        differ -= {("model", "name")}
        assert cpu.model.name == "lenet5"
    assert differ <= SIZE_KEYS, differ
    assert cpu.data.max_samples > 0 and (full.data.max_samples == 0 or full.data.max_samples > cpu.data.max_samples)


@pytest.mark.experiment
@pytest.mark.parametrize("stem", [pytest.param(s, marks=pytest.mark.slow) if s in SLOW else s
                                  for s in sorted(PAPER_DATA)])
def test_the_reduced_preset_runs_a_round_on_files_of_the_real_format(tmp_path, stem):
    dataset, model, maker = PAPER_DATA[stem]
    root = maker(tmp_path / "data")
    fewer = ["data.clients=3", "data.max_samples=40"] if stem in SLOW else []    # ResNet-18: a few images do
    cfg = load_config(PRESETS / f"{stem}_cpu.toml", [f"data.path={root}", "run.rounds=1", "run.progress=false",
                                                     "air.name=sim"] + fewer)
    outcome = run_experiment(cfg, tmp_path / "r")
    rows = [json.loads(x) for x in (tmp_path / "r" / "rounds.jsonl").read_text().splitlines()]
    assert rows and not outcome.summary["stopped_reason"]
    assert any(r.get("test_accuracy") is not None for r in rows)
