"""Nothing rolled back (issue 35, item 1): the ledger is anchored outside its folder, beside its key
(privacy/ledger_anchor.py). The attacker has write access to the results folder and none to the key folder:
a rollback of 1, 2 and 5 entries rewritten consistently (tests/rollback_helpers.py), a raised extension.json,
a deleted anchor-less comeback are refused by `verify` (FAILED, exit 1) and by `run --resume` and
`run --dry-run --resume` (one line, exit 2), the folder byte-identical."""
import json
import shutil

import pytest

from ledger_helpers import SETS, digest
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import default_experiment
from otafl_sdr.experiment.orchestrator import Experiment
from rollback_helpers import roll_back

pytestmark = [pytest.mark.usefixtures("figures_not_drawn")]     # nothing here reads the runs' figures


@pytest.fixture(scope="session")
def finished(tmp_path_factory):
    """A finished keyed sim run (3 client rounds of Upcycled-FL: 6 ledger entries); tests copy it."""
    out = tmp_path_factory.mktemp("rollback") / "run"
    outcome = Experiment(default_experiment(SETS[:-2] + ["run.rounds=3"]), out).run()
    assert not outcome.stopped_reason and outcome.summary["rounds"] == 6
    return out


def _copy(finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    return out


def _refused_everywhere(out, capsys, words):
    before = digest(out)
    assert main(["verify", str(out)]) == 1
    said = capsys.readouterr().out.strip()
    assert "FAILED" in said and words in said and len(said.splitlines()) == 1, said
    for argv in (["run", "--resume", str(out), "--quiet"], ["run", "--dry-run", "--resume", str(out)]):
        assert main(argv) == 2, argv
        cap = capsys.readouterr()
        err = cap.err.strip()
        assert "cannot resume" in err and words in err and len(err.splitlines()) == 1, (argv, err)
        assert "Traceback" not in cap.out + cap.err
    assert digest(out) == before


def test_the_honest_folder_verifies_at_its_anchor(finished, capsys):
    assert main(["verify", str(finished)]) == 0
    assert "at its anchor" in capsys.readouterr().out


@pytest.mark.parametrize("entries", [1, 2, 5])
def test_a_consistent_rollback_is_refused(finished, tmp_path, capsys, entries):
    out = _copy(finished, tmp_path)
    roll_back(out, entries)
    _refused_everywhere(out, capsys, "rolled back")


def test_a_raised_extension_is_refused(finished, tmp_path, capsys):
    """extension.json decides how many rounds a resume runs: 2 unrequested client rounds are refused."""
    out = _copy(finished, tmp_path)
    (out / "extension.json").write_text(json.dumps({"client_rounds": 2}) + "\n")
    _refused_everywhere(out, capsys, "extension.json adds 2 client rounds but its anchor")


@pytest.mark.experiment
def test_an_extension_made_by_extend_passes(tmp_path, capsys):
    """The honest --extend anchors its count first: the extended folder verifies."""
    out = tmp_path / "run"
    Experiment(default_experiment(SETS[:-2] + ["run.rounds=2"]), out).run()
    assert main(["run", "--resume", str(out), "--extend", "1", "--eps", "1.15", "--quiet"]) == 0   # targeted: raised
    assert json.loads((out / "extension.json").read_text()) == {"client_rounds": 1}
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "at its anchor" in capsys.readouterr().out
