"""A refused extension changes no byte (issue 37, item 6), also for an UNTARGETED run (privacy.targeting =
"paper") that stopped at its budget: `--extend N` without `--eps` used to write extension.json, summary.json
and the figures, then stop at once with exit 3. Now the next client round is planned as the dry run plans it
and checked against the ledger first (otafl_sdr/experiment/extension.py): refused in one line, exit 2, the
folder and its anchor unchanged; `--extend N --eps E` then raises the budget and runs, and `verify` passes."""
import hashlib
import json

import pytest

from ledger_helpers import digest
from otafl_sdr.cli.main import main
from otafl_sdr.configure.load import load_config
from otafl_sdr.privacy import ledger_keys

pytestmark = [pytest.mark.experiment]

SMALL = ["run.progress=false", "data.dataset=digits", "data.clients=3", "model.hidden=8", "air.name=sim",
         "algorithm.name=fedavg", "train.local_epochs=1", "privacy.targeting=paper", "privacy.eps=0.3",
         "run.rounds=3"]


def _anchor_bytes(out):
    cfg = load_config(out / "config.toml")
    return hashlib.sha256(ledger_keys.anchor(ledger_keys.read_run_id(out), cfg).path.read_bytes()).hexdigest()


def _run(argv, capsys):
    code = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return code, cap.err.strip()


def test_an_untargeted_run_at_its_budget_refuses_an_extension_and_changes_no_byte(tmp_path, capsys,
                                                                                  figures_not_drawn):
    out = tmp_path / "run"
    sets = [a for s in SMALL for a in ("--set", s)]
    assert _run(["run", *sets, "--out", str(out), "--quiet"], capsys)[0] == 0
    # the paper rule's knob spends about 0.2 of 0.3 in 3 rounds: 40 more stop at the budget on the way
    code, err = _run(["run", "--resume", str(out), "--extend", "40", "--quiet"], capsys)
    assert code == 3 and "would raise eps" in err, err
    stopped_at = json.loads((out / "summary.json").read_text())["client_rounds"]
    assert 3 < stopped_at < 43

    before, anchor, names = digest(out), _anchor_bytes(out), sorted(p.name for p in out.iterdir())
    code, err = _run(["run", "--resume", str(out), "--extend", "3", "--quiet"], capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "budget is spent" in err and "nothing was changed" in err and "--eps" in err, err
    assert digest(out) == before and _anchor_bytes(out) == anchor
    assert sorted(p.name for p in out.iterdir()) == names                # no lock file left, nothing added

    # the way the refusal names: a raised budget runs further rounds, booked on the same keyed ledger
    code, err = _run(["run", "--resume", str(out), "--extend", "3", "--eps", "0.35", "--quiet"], capsys)
    assert code in (0, 3), err
    assert json.loads((out / "summary.json").read_text())["client_rounds"] > stopped_at
    assert main(["verify", str(out)]) == 0
