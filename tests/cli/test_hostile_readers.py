"""Issue 28, item 6, in process: every kind of hostile file (tests/cli/hostile_gen.py) given to each reader
function behind report / verify / resume / sweep / compare raises UserError (one line) or reads; never
RecursionError, TypeError, OSError or any other exception. Fast: no run, no subprocess."""
import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_gen import variants, write_variant  # noqa: E402

from otafl_sdr.config.schema import Config, to_toml  # noqa: E402
from otafl_sdr.errors import UserError  # noqa: E402
from otafl_sdr.privacy.ledger import read_chain  # noqa: E402
from otafl_sdr.results.files import read_rounds  # noqa: E402
from otafl_sdr.configure.load import load_config  # noqa: E402
from otafl_sdr.results.safe_files import load_json  # noqa: E402
from otafl_sdr.sweeps.sweep import cell_status, load_spec  # noqa: E402
from otafl_sdr.sweeps.plots import read_accuracy_curve, read_summary  # noqa: E402

ROWS = "".join(json.dumps({"round": i, "test_accuracy": 0.1 * i, "eps_pld": 0.2 * i, "uses_clients": True}) + "\n"
               for i in range(1, 5))
SUMMARY = json.dumps({"final_accuracy": 0.5, "eps_pld": 1.0, "rounds": 4, "air": "sim", "stopped_reason": ""})
LEDGER = "".join(json.dumps({"round": i, "attempt": 0, "sensitivity": 1.0, "sigma_eff": 2.0, "eps": {"rdp": 0.1},
                             "prev": "0" * 64, "hash": "f" * 64}) + "\n" for i in range(1, 4))
SPEC = '[sweep]\nname = "h"\nseeds = [0, 1]\nset = ["run.rounds=1"]\n[grid]\n"train.lr" = [0.1, 0.2]\n'

READERS = {
    "rounds.jsonl": (ROWS, [read_rounds, read_accuracy_curve]),
    "summary.json": (SUMMARY, [lambda p: load_json(p, "summary"), read_summary,
                               lambda p: cell_status(p.parent)]),
    "privacy_ledger.jsonl": (LEDGER, [lambda p: read_chain(p) if p.exists() else None]),   # as verify and resume
    "config.toml": (to_toml(Config()), [lambda p: load_config(p)]),
    "spec.toml": (SPEC, [load_spec]),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_every_hostile_variant_is_read_or_refused_with_one_line(tmp_path, name):
    genuine, readers = READERS[name]
    counts = {"tried": 0, "refused": 0, "read": 0}
    for seed in range(3):
        for kind in variants(name):
            d = tmp_path / f"{kind}-{seed}"
            d.mkdir()
            (d / name).write_text(genuine)
            write_variant(d / name, kind, random.Random(seed))
            for reader in readers:
                counts["tried"] += 1
                try:
                    reader(d / name)
                    counts["read"] += 1
                except UserError as e:
                    assert str(e) and "\n" not in str(e) and len(str(e)) < 600, (kind, str(e)[:300])
                    counts["refused"] += 1
    print(f"\n{name}: {counts}")
    assert counts["refused"] > 0 and counts["tried"] == counts["read"] + counts["refused"]
