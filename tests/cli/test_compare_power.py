"""`otafl-sdr compare` on hand-written finished folders (tests/cli/compare_folder_helpers.py; nothing is trained):
`--plan` prints the claims' power table before anything runs (one claim's seeds needed recomputed independently),
says the variance is unknown without cells, reads a pilot's; a page marks a claim between arms at unequal eps,
prints the Holm-adjusted interval (including 0 beside a tie) and the power table; windows are in whole client
rounds; a bad paper_effect is one line, exit 2."""
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from compare_folder_helpers import write_folder, write_spec
from otafl_sdr.cli.main import main
from otafl_sdr.sweeps.compare import add_last_k, options
from otafl_sdr.sweeps.sweep import load_spec

CLAIMS = """
[[claims]]
source = "paper 999 Fig. 1"
more = "a"
less = "b"
paper_effect = 0.02
paper_effect_source = "Fig. 1: 0.92 vs 0.90"

[[claims]]
source = "paper 999 Fig. 2"
more = "a"
less = "c"
"""

A = [0.812, 0.795, 0.830, 0.804, 0.821]
B = [0.801, 0.790, 0.815, 0.800, 0.806]         # a - b: [0.011, 0.005, 0.015, 0.004, 0.015]
C = [0.805, 0.789, 0.822, 0.797, 0.812]


def independent_seeds_needed(effect: float, sd: float, level: float, target: float = 0.8) -> int:
    """The smallest n >= 2 whose paired t-test at `level` has power >= target, the power computed from the
    noncentral t's definition by quadrature over the chi-square (no scipy.stats.nct), n counted up one by one."""
    for n in range(2, 10_000):
        df, nc = n - 1, effect * math.sqrt(n) / sd
        c = stats.t.ppf(1 - level / 2, df)
        f = lambda v: (stats.norm.sf(c * math.sqrt(v / df) - nc) + stats.norm.cdf(-c * math.sqrt(v / df) - nc)) \
            * stats.chi2.pdf(v, df)
        lo, hi = stats.chi2.ppf([1e-12, 1 - 1e-12], df)
        if integrate.quad(f, lo, hi, limit=400)[0] >= target:
            return n
    raise AssertionError("no n")


def _row(out: str, claim: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"| {claim}"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_plan_prints_the_power_table_from_the_folders_cells_before_running(tmp_path, capsys):
    spec = write_spec(tmp_path, range(5), CLAIMS)
    write_folder(tmp_path / "out", {"a": A, "b": B, "c": C})
    before = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert main(["compare", str(spec), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "m = 2 claim tests at 5 seeds" in out and "alpha / m = 0.05 / 2 = 0.025" in out
    assert f"the spec folder {tmp_path / 'out'} (5 seeds: 0, 1, 2, 3, 4)" in out
    sd = float(np.std(np.subtract(A, B), ddof=1))
    row = _row(out, "a > b in accuracy_last_k at privacy.eps=1.0")
    assert row[1] == "0.02 (Fig. 1: 0.92 vs 0.90)" and row[2] == "5" and float(row[3]) == pytest.approx(sd, rel=1e-2)
    assert int(row[6]) == independent_seeds_needed(0.02, sd, 0.05 / 2)
    assert _row(out, "a > c in accuracy_last_k at privacy.eps=1.0")[1] == "paper's effect not stated"
    # planned at --seeds 3: the detectable effect grows, the seeds needed do not change
    assert main(["compare", str(spec), "--plan", "--seeds", "3"]) == 0
    out3 = capsys.readouterr().out
    assert float(_row(out3, "a > b")[4]) > float(row[4]) and _row(out3, "a > b")[6] == row[6]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == before          # nothing run or written


def test_plan_without_cells_says_the_variance_is_unknown_and_what_to_run(tmp_path, capsys):
    spec = write_spec(tmp_path, range(5), CLAIMS)
    assert main(["compare", str(spec), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "Variance unknown" in out and f"otafl-sdr compare {spec} --seeds 3" in out and "--pilot PILOT" in out
    assert _row(out, "a > b")[1] == "0.02 (Fig. 1: 0.92 vs 0.90)" and _row(out, "a > b")[6] == "-"
    one_sd = re.search(r"1 sd: (\d+)", out).group(1)
    assert int(one_sd) == independent_seeds_needed(1.0, 1.0, 0.05 / 2)
    assert not (tmp_path / "out").exists()


def test_plan_reads_a_pilot_folder(tmp_path, capsys):
    spec = write_spec(tmp_path, range(10), CLAIMS)
    write_folder(tmp_path / "pilot", {"a": A[:3], "b": B[:3], "c": C[:3]})
    assert main(["compare", str(spec), "--plan", "--pilot", str(tmp_path / "pilot")]) == 0
    out = capsys.readouterr().out
    assert f"the pilot {tmp_path / 'pilot'} (3 seeds: 0, 1, 2), planned at 10 seeds" in out
    assert _row(out, "a > b")[2] == "10"
    sd = float(np.std(np.subtract(A[:3], B[:3]), ddof=1))
    assert int(_row(out, "a > b")[6]) == independent_seeds_needed(0.02, sd, 0.05 / 2)
    assert main(["compare", str(spec), "--plan", "--pilot", str(tmp_path / "nothing")]) == 2
    assert main(["compare", str(spec), "--pilot", str(tmp_path / "pilot")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no sweep.csv" in err[0] and "goes with --plan" in err[1]


TIE_CLAIMS = CLAIMS + """
[[claims]]
source = "paper 999 Fig. 3"
more = "b"
less = "d"

[[claims]]
source = "paper 999 Fig. 4"
more = "d"
less = "e"
"""


def test_a_page_marks_unequal_eps_prints_holm_intervals_and_the_power_table(tmp_path, capsys, monkeypatch):
    """c spent eps 0.5 against a target of 1 (a and b: 0.995, inside [0.99, 1]): a > c is "not at equal eps";
    b > d's unadjusted 95 % interval excludes 0 yet Holm keeps it a tie: its printed interval includes 0."""
    monkeypatch.chdir(tmp_path)
    text = write_spec(tmp_path, range(5), "").read_text() + """
[arms.d]
label = "arm d"
set = ["power.policy=h_min", "train.lr=0.3"]

[arms.e]
label = "arm e"
set = ["power.policy=h_min", "train.lr=0.4"]
""" + TIE_CLAIMS
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    d = [b - x for b, x in zip(B, [0.006, 0.001, 0.012, 0.004, 0.009])]     # b - d: p about 0.02, 4 claims
    e = [x - y for x, y in zip(d, [0.01, -0.02, 0.03, -0.01, 0.0])]
    write_folder(tmp_path / "out", {"a": A, "b": B, "c": C, "d": d, "e": e}, eps={"c": 0.5})
    assert main(["compare", str(spec), "--report-only", "--page", "docs/hand.md"]) == 0
    capsys.readouterr()
    page = (tmp_path / "docs" / "hand.md").read_text()
    claims = pd.read_csv(tmp_path / "out" / "claims.csv").set_index("claim")
    ac, bd = claims.loc["a > c in accuracy_last_k"], claims.loc["b > d in accuracy_last_k"]
    assert ac["verdict"].startswith("not at equal eps (") and not ac["equal_eps"]
    assert claims.loc["a > b in accuracy_last_k", "verdict"] == "held"
    assert "**Not at equal eps" in page and "| **not at equal eps (" in page
    assert "- claims between private arms not at equal eps (spent eps differ by more than the target's " \
           "tolerance): a > c in accuracy_last_k at privacy.eps=1.0" in page
    # the tie: its unadjusted interval excludes 0, the Holm-adjusted one printed beside it does not
    assert bd["verdict"] == "tie" and bd["ci95_low"] > 0
    assert bd["ci_low"] <= 0 <= bd["ci_high"] and bd["ci_level"] > 0.95
    row = next(ln for ln in page.splitlines() if "| **tie** | paper 999 Fig. 3 |" in ln)
    lo, hi = map(float, re.search(r"\[(\S+), (\S+)\] \(", row).groups())
    assert lo <= 0 <= hi
    # the power table is on the page beside the verdicts
    power = page.split("## Power: the seeds each claim needs")[1]
    assert "| a > b in accuracy_last_k at privacy.eps=1.0 | 0.02 (Fig. 1: 0.92 vs 0.90) | 5 |" in power
    assert power.count("paper's effect not stated") >= 3
    assert pd.read_csv(tmp_path / "out" / "power.csv")["seeds_needed"].notna().sum() == 1


def test_windows_are_whole_client_rounds(tmp_path):
    """Upcycled-FL's server-only iterations sit half a client round on; the window names client rounds."""
    spec = write_spec(tmp_path, [0], "", compare="[compare]\nlast_rounds = 10\n")
    table = write_folder(tmp_path / "out", {"a": [0.5]}, rounds=20)
    rows = []
    for cr in range(1, 21):
        rows += [{"client_round": cr, "test_accuracy": 0.5}, {"client_round": cr, "uses_clients": False,
                                                             "test_accuracy": 0.7}]
    (tmp_path / "out" / table["dir"][0] / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = load_spec(spec)
    got = add_last_k(s, table, options(s))
    assert got["window"][0] == "11-20" and got["evaluations"][0] == 20
    assert got["accuracy_last_k"][0] == pytest.approx(0.6)


@pytest.mark.parametrize("effect,words", [("-0.02", "finite number > 0"), ("nan", "finite number > 0"),
                                          ("2.0", "as a fraction"), ('"2 pp"', "finite number > 0")])
def test_a_bad_paper_effect_is_one_line_and_exit_2(tmp_path, capsys, effect, words):
    spec = write_spec(tmp_path, range(3), CLAIMS.replace("paper_effect = 0.02", f"paper_effect = {effect}"))
    assert main(["compare", str(spec), "--plan"]) == 2
    err = capsys.readouterr().err
    assert words in err and "paper 999 Fig. 1" in err and len(err.strip().splitlines()) == 1
    assert main(["compare", str(spec), "--quiet"]) == 2
    assert not (tmp_path / "out").exists()
