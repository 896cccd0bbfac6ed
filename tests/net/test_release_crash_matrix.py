"""Issue 28, item 1: every release booked exactly once, on the zmq testbed (node noise from OS entropy, so a
re-sent round is a new release). One results folder, the server SIGKILLed (``OTAFL_NET_DIE_AT``) once at
each gap of the round protocol, then resumed:

  server@row:1       round 1's ledger line, burst and row are written, its checkpoint is not
  server@released:2  round 2 went on the air (aggregate received), its row is not written
  server@recorded:3  round 3's ledger line is written, nothing was sent

After the last resume, the ledger holds one entry per aggregate the server received (counted in
server.log, which every run of the folder appends to), each received release id is a ledger entry's id,
and ``otafl-sdr verify`` agrees. Before the fix the ledger held 3 entries for 5 received aggregates (the
re-sent rounds 1 and 2 were re-recorded as no-ops)."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))           # the testbed tests' helpers
from test_net_testbed import _assert_no_orphans, _rows, _sets, run_cli  # noqa: E402
from dp_reference import independent_pld_epsilon  # noqa: E402
from node_procs import cli_in_process  # noqa: E402

pytestmark = [pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RECEIVED = "received the aggregate of release"        # net/zmq_rounds.py's line, one per release received


def _received(out: Path) -> tuple[int, list[str]]:
    """(aggregates the server received, the release ids it logged as received) over every run of ``out``."""
    text = (out / "testbed" / "server.log").read_text(errors="replace")
    n = sum(1 for ln in text.splitlines() if ": aggregate from receiver" in ln)
    ids = [ln.split(RECEIVED, 1)[1].split()[0] for ln in text.splitlines() if RECEIVED in ln]
    return n, ids


def test_every_release_is_booked_once_across_server_crashes(tmp_path):
    out = tmp_path / "crashes"
    args = ["--config", "sim_loopback/default.toml", "--air", "zmq", "--out", str(out)] + \
        _sets(["run.checkpoint_every=1", "privacy.targeting=paper", "run.figures=false"])   # no figure is read
    r = run_cli(args, out, env_extra={"OTAFL_NET_DIE_AT": "server@row:1"})
    assert r.returncode == 5, r.stderr[-3000:]
    for point in ("server@released:2", "server@recorded:3", None):
        r = run_cli(["--resume", str(out)], out, env_extra={"OTAFL_NET_DIE_AT": point} if point else None)
        assert r.returncode == (5 if point else 0), \
            (point, r.stderr[-3000:] + (out / "testbed" / "server.log").read_text()[-3000:])
    _assert_no_orphans(out)
    assert [x["round"] for x in _rows(out)] == [1, 2, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["stopped_reason"] and summary["lost_rounds"] == 0
    ledger = [json.loads(ln) for ln in (out / "privacy_ledger.jsonl").read_text().splitlines() if ln.strip()]
    n_received, ids = _received(out)
    assert len(ledger) == n_received, f"{len(ledger)} ledger entries for {n_received} aggregates received"
    # rounds 1 and 2 went out twice (before the crash and after the resume, fresh noise each time); round 3's
    # booking never went out, so the resume sent it under that booking
    assert [(x["round"], x["attempt"]) for x in ledger] == [(1, 0), (1, 1), (2, 0), (2, 1), (3, 0)]
    assert len(ids) == n_received and sorted(ids) == sorted(x["release"] for x in ledger)
    assert len(set(ids)) == len(ids)                                  # no release id carried twice
    assert summary["eps_pld"] == pytest.approx(independent_pld_epsilon(ledger, 1e-5), rel=1e-3)
    v = cli_in_process("verify", out)
    assert v.returncode == 0, v.stdout + v.stderr
    assert f"{len(ledger)} ledger entries" in v.stdout + v.stderr
