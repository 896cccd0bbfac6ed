"""A finished compare folder written by hand (sweep.csv and each cell's rounds.jsonl / summary.json) from per-seed
values, so that `compare --report-only`, `--plan` and `--page` can be tested in the unit tier without training."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

SPEC_HEAD = """# Paper 999, Fig. 1: a hand-written compare folder (a test).
[sweep]
name = "hand"
seeds = {seeds}
out = "{out}"
set = ["run.rounds=4"]

[grid]
"privacy.eps" = [1.0]

[arms.a]
label = "arm a"
set = ["power.policy=cj_adaptive"]

[arms.b]
label = "arm b"
set = ["power.policy=h_min"]

[arms.c]
label = "arm c"
set = ["power.policy=h_min", "train.lr=0.2"]
"""


def write_spec(tmp_path: Path, seeds: list, claims: str, compare: str = "") -> Path:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_HEAD.format(seeds=list(seeds), out=tmp_path / "out") + compare + claims)
    return spec


def write_folder(out: Path, values: dict, eps: dict | None = None, rounds: int = 4) -> pd.DataFrame:
    """``values``: {arm: [metric per seed]} (seeds 0..n-1, grid privacy.eps = 1.0); ``eps``: {arm: PLD eps spent}
    (default 0.995 for every arm: inside the target's band [0.99, 1]). Every evaluation of a cell's rounds.jsonl
    holds its value, so accuracy_last_k equals it whatever the window."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for arm, vals in values.items():
        for seed, v in enumerate(vals):
            d = f"arm={arm},privacy.eps=1.0,seed={seed}"
            (out / d).mkdir()
            (out / d / "rounds.jsonl").write_text("".join(
                json.dumps({"round": r, "client_round": r, "test_accuracy": v}) + "\n" for r in range(1, rounds + 1)))
            e = (eps or {}).get(arm, 0.995)
            summ = {"final_accuracy": v, "eps_pld": e, "eps_target": 1.0, "wall_s": 1.0}
            (out / d / "summary.json").write_text(json.dumps(summ))
            (out / d / "config.toml").write_text("")
            rows.append({"arm": arm, "mechanism": arm, "privacy.eps": 1.0, "seed": seed, "status": "done",
                         "dir": d, "final_accuracy": v, "final_loss": 0.5, "eps_pld": e, "eps_target": 1.0,
                         "delta": 1e-5, "rounds": rounds, "client_rounds": rounds, "jammer_rounds": 0,
                         "capped_jammer_rounds": 0, "over_target": e > 1.0, "calibration": "target (pld)",
                         "wall_s": 1.0})
    table = pd.DataFrame.from_records(rows)
    table.to_csv(out / "sweep.csv", index=False)
    return table
