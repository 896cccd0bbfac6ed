"""The paper-003 comparison script (otafd vs FedAvg at equal (eps, delta)) end to end at a tiny size: one
comparison (its three arms, one worker) made once for the module, read by the table's test and run again on
its own folder by the resumable-sweep test (which leaves the folder as it found it)."""
import contextlib
import csv
import io
import math
import sys
from pathlib import Path
import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "sim_loopback"))

import otafd_compare  # noqa: E402

TINY = ["data.dataset=digits", "data.clients=5", "model.name=logreg", "run.rounds=2", "train.local_epochs=1"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(folder, command line, exit status, stdout) of the tiny comparison, run once."""
    out = tmp_path_factory.mktemp("otafd-compare") / "cmp"
    args = ["--out", str(out), "--snr-db", "20", "--workers", "1", "--quiet"] + sum((["--set", s] for s in TINY), [])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = otafd_compare.main(args)
    return out, args, rc, printed.getvalue()


def test_compare_tiny(tiny):
    out, _, rc, printed = tiny
    assert rc == 0
    rows = {r["arm"]: r for r in csv.DictReader((out / "otafd_compare.csv").read_text().splitlines())}
    assert list(rows) == ["otafd", "fedavg", "local"]
    o, f, loc = rows["otafd"], rows["fedavg"], rows["local"]
    assert int(float(o["payload_reals"])) == 100 and int(float(f["payload_reals"])) == 650   # C^2 vs logreg's d
    assert float(o["uses_sim"]) == 50 and float(f["uses_sim"]) == 325
    assert float(o["uses_phy"]) < float(f["uses_phy"])                   # the PHY burst is shorter too
    for r in (o, f):                                                     # equal (eps, delta): both at the budget
        assert float(r["delta"]) == 1e-5
        assert 0.9 < float(r["eps_enforced"]) <= 1.0
        assert float(r["eps_pld"]) < float(r["eps_enforced"])
        assert int(float(r["rounds"])) == 2 and not r["stopped"]
    assert loc["uses_phy"] == "" and loc["eps_enforced"] == ""          # the local reference needs no air
    for r in rows.values():
        assert 0.0 < float(r["accuracy"]) <= 1.0 and math.isfinite(float(r["accuracy_min"]))
    md = (out / "otafd_compare.md").read_text()
    assert md.count("\n|") >= 4 and "FedAvg uses" in md
    assert "otafd_compare.csv" in printed


def test_compare_is_a_resumable_sweep(tiny):
    """The runs are sweep cells: a second invocation (on the module's comparison) runs nothing (the finished
    cells are skipped, their folders untouched, the same table), and a cell whose folder is gone is the only
    one run again."""
    import pandas as pd
    out, args, rc, _ = tiny
    assert rc == 0
    cells = pd.read_csv(out / "sweep.csv")
    assert sorted(cells["dir"]) == ["fedavg-snr20-seed0", "local-snr20-seed0", "otafd-snr20-seed0"]
    assert set(cells["status"]) == {"ran"}
    table = (out / "otafd_compare.csv").read_text()
    before = {d: (out / d / "summary.json").read_bytes() for d in cells["dir"]}
    assert otafd_compare.main(args) == 0
    assert set(pd.read_csv(out / "sweep.csv")["status"]) == {"done (skipped)"}
    assert {d: (out / d / "summary.json").read_bytes() for d in cells["dir"]} == before
    assert (out / "otafd_compare.csv").read_text() == table
    assert otafd_compare.main(args + ["--set", "train.lr=0.5"]) == 2      # other settings: not mixed in
    import shutil
    shutil.rmtree(out / "local-snr20-seed0")
    assert otafd_compare.main(args) == 0
    status = dict(pd.read_csv(out / "sweep.csv")[["dir", "status"]].values)
    assert status == {"otafd-snr20-seed0": "done (skipped)", "fedavg-snr20-seed0": "done (skipped)",
                      "local-snr20-seed0": "ran"}
    assert (out / "otafd_compare.csv").read_text() == table           # the same seeds give the same table
