"""Issue 25's Done-when on UHD's simulator: docs/lab.md's preset's aggregate NMSE / theory within 1.00 +- 0.05
(loopback: 1.00 +- 0.01). The preset's logistic regression has d = 650, where one round scatters by about
5.5 %; with the preset's MLP instead (d = 14,710 on digits: 1.2 % a round) four rounds resolve 5 % at more
than 5 standard errors, so a miss is a bias of the lab path (the simulator's stream offset and spurious
carrier offset, radio/uhd_sim_daemon.py, were one), not chance. Real libuhd, gr-uhd and the simulator."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from otafl_sdr.cli.main import main as cli_main

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow, pytest.mark.usefixtures("figures_not_drawn")]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_sim.toml"


def test_the_readme_presets_nmse_is_its_theory_within_5_percent(uhd_sim, tmp_path):
    out = tmp_path / "run"
    rc = cli_main(["run", "--quiet", "--config", str(PRESET), "--out", str(out), "--set", "run.rounds=4",
                   "--set", "model.name=mlp"])
    assert rc == 0
    rows = [json.loads(ln) for ln in (out / "rounds.jsonl").read_text().splitlines() if ln.strip()]
    d = json.loads((out / "summary.json").read_text())["model_dim"]
    ratios = [r["aggregate_nmse"] / r["aggregate_nmse_theory"] for r in rows if r.get("aggregate_nmse")]
    assert len(ratios) == 4
    # one round's NMSE / theory: (||n||^2 + 2 <e, n>) / E||n||^2, std sqrt(2/d + 4/(d theory))
    se = math.sqrt(sum(2 / d + 4 / (d * r["aggregate_nmse_theory"]) for r in rows)) / len(rows)
    mean = sum(ratios) / len(ratios)
    print(f"d = {d}: NMSE / theory {[round(x, 4) for x in ratios]}, mean {mean:.4f} +- {se:.4f}")
    assert 0.05 >= 5 * se                     # the test can tell a 5 % bias from chance
    assert abs(mean - 1.0) <= 0.05
    # the in-process uhd air writes each round's link health (issue 34 item 2) with the offset's precision;
    # the simulator's cable has no offset: every reading is within 4 standard errors of 0
    health = [r["link_health"] for r in rows]
    assert all(h and h["cfo_std"] > 0 for h in health), health
    assert all(abs(h["cfo"]) < 4 * h["cfo_std"] for h in health), health
    assert all(abs(h["gain_db"]) < 0.5 and abs(h["timing_offset"]) <= 1 for h in health), health
    print("link health cfo +- std:", [f"{h['cfo']:.2g} +- {h['cfo_std']:.2g}" for h in health])
