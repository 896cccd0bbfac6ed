"""Figures a journal accepts (issue 37, item 5), drawn from small synthetic folders (no run): each preset's
figures are exactly its column's width with every text >= 7 pt at that size (and the check fails on a 5 pt
font or a 6.3 in figure), arms whose values coincide keep distinct (colour, marker, line style), Upcycled-FL is
drawn at whole client rounds, the interval's method and n are written on the figure, ε is a symbol with δ in
its label, `otafl_sdr.plot` returns a Figure, an unknown preset is refused in one line, and the audit figure's
legend states the CLI's confidence."""
import json
import math
import re

import matplotlib.text
import pandas as pd
import pytest
from matplotlib.figure import Figure

import otafl_sdr
from otafl_sdr.cli.main import main
from otafl_sdr.errors import UserError
from otafl_sdr.results.figure_presets import PRESETS, preset
from otafl_sdr.results.run_plots import KINDS as RUN_KINDS, run_figure
from otafl_sdr.sweeps.plots import sweep_figures

JOURNAL = {"ieee-single": 3.5, "ieee-double": 7.16}
ARMS = {"cdpb_n": "CDPB-n", "cdpb_i": "CDPB-i", "cdpb_mixed": "CDPB-mixed", "hmin": "h_min"}


def journal_problems(fig, width: float, min_pt: float = 7.0) -> list[str]:
    """What keeps ``fig`` from a column ``width`` inches wide: its size, and every visible text under
    ``min_pt`` points at that size (drawn first, so tick labels exist)."""
    fig.draw_without_rendering()
    problems = []
    w = fig.get_size_inches()[0]
    if not math.isclose(w, width, abs_tol=1e-6):
        problems.append(f"{w:g} in wide, not {width:g}")
    for t in fig.findobj(matplotlib.text.Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < min_pt:
            problems.append(f"{t.get_text()!r} at {t.get_fontsize():g} pt")
    return problems


def upcycled_rows(client_rounds=6, acc=lambda r: 0.1 * r):
    """Upcycled-FL: odd iterations use the clients, even ones are server-only (client_round of the one before)."""
    rows = []
    for it in range(1, 2 * client_rounds + 1):
        data = it % 2 == 1
        rows.append({"round": it, "client_round": (it + 1) // 2, "uses_clients": data,
                     "test_accuracy": min(1.0, acc(it / 2)), "train_loss": 2.0 / it,
                     "aggregate_nmse": 1.0 / it if data else None, "aggregate_nmse_theory": 0.9 / it if data else None,
                     "eps_pld": 0.3 * math.ceil(it / 2), "eps_rdp": 0.4 * math.ceil(it / 2)})
    return rows


def compare_folder(root, arms=ARMS, eps=(1.0, 4.0, 16.0), deltas=(1e-5,), seeds=(1, 2, 3)):
    """A compare folder as `compare` leaves it (sweep.toml, sweep.csv, one cell folder per run): every CDPB arm
    gives the same accuracies (they coincide), h_min less; Upcycled-FL-like rows (server-only steps)."""
    root.mkdir(parents=True, exist_ok=True)
    recs = []
    for arm in arms:
        for e in eps:
            for d in deltas:
                for s in seeds:
                    name = f"arm={arm},eps={e},delta={d},seed={s}"
                    cell = root / name
                    cell.mkdir()
                    level = 0.6 if arm == "hmin" else 0.8
                    rows = upcycled_rows(acc=lambda r, s=s, e=e, level=level: level * (1 - 0.5 ** r) - 0.01 * s / e)
                    (cell / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
                    (cell / "config.toml").write_text("")
                    (cell / "summary.json").write_text("{}")
                    recs.append({"mechanism": arm, "privacy.eps": e, "privacy.delta": d, "seed": s,
                                 "final_accuracy": rows[-1]["test_accuracy"], "eps_pld": 0.97 * e, "delta": d,
                                 "status": "done", "arm": arm, "dir": name})
    pd.DataFrame(recs).to_csv(root / "sweep.csv", index=False)
    arms_toml = "".join(f'[arms.{a}]\nlabel = "{lab}"\nset = []\n\n' for a, lab in arms.items())
    (root / "sweep.toml").write_text(
        f'[sweep]\nname = "paper001-cdpb"\ntitle = "CDPB against h_min"\nseeds = {list(seeds)}\n\n'
        f'[grid]\n"privacy.eps" = {list(eps)}\n"privacy.delta" = {list(deltas)}\n\n{arms_toml}')
    return root


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return compare_folder(tmp_path_factory.mktemp("figures") / "cmp")


def figures_of(folder, name):
    """Every figure of the compare folder and of one run (Upcycled-FL rows) at preset ``name``."""
    loaded = otafl_sdr.load(folder)
    figs = {k: otafl_sdr.plot(loaded, kind=k, figure=name)
            for k in ("accuracy_rounds", "final_accuracy", "accuracy_last_k", "accuracy_vs_eps")}
    rows = upcycled_rows()
    figs |= {f"run {k}": run_figure(k, rows, {"eps_target": 2.0, "delta": 1e-5}, name) for k in RUN_KINDS}
    return figs


def test_the_check_fails_on_a_5_pt_font_and_on_a_figure_wider_than_the_column():
    wide = Figure(figsize=(6.3, 2.5))
    wide.subplots().plot([1, 2], [1, 2])
    assert any("6.3 in wide" in p for p in journal_problems(wide, 3.5))
    small = Figure(figsize=(3.5, 2.5))
    ax = small.subplots()
    ax.plot([1, 2], [1, 2])
    ax.set_xlabel("client round", fontsize=5)
    assert journal_problems(small, 3.5) == ["'client round' at 5 pt"]
    ok = Figure(figsize=(3.5, 2.5))
    ax = ok.subplots()
    ax.tick_params(labelsize=7)
    ax.plot([1, 2], [1, 2])
    assert journal_problems(ok, 3.5) == []


@pytest.mark.parametrize("name", sorted(JOURNAL))
def test_each_preset_is_its_column_wide_with_every_text_at_7_pt_or_more(folder, name, tmp_path):
    figs = figures_of(folder, name)
    assert set(figs) == {"accuracy_rounds", "final_accuracy", "accuracy_last_k", "accuracy_vs_eps",
                         *(f"run {k}" for k in RUN_KINDS)}
    for kind, fig in figs.items():
        assert isinstance(fig, Figure)
        assert journal_problems(fig, JOURNAL[name]) == [], kind
        assert not fig.texts or not fig._suptitle, kind               # a journal figure: the caption titles it
    # the saved PDF is the column's width too (no tight bounding box growing it, no legend outside it)
    from otafl_sdr.results.style import save_figure
    save_figure(preset(name), figs["accuracy_rounds"], tmp_path / "accuracy_rounds.png")
    box = re.search(rb"/MediaBox \[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", (tmp_path / "accuracy_rounds.pdf").read_bytes())
    assert box and math.isclose(float(box.group(1)), JOURNAL[name] * 72, abs_tol=0.5), box


def test_the_screen_preset_keeps_fonts_at_7_pt_and_a_title():
    rows = upcycled_rows()
    fig = run_figure("accuracy", rows, {"algorithm": "upcycled_fl", "power_policy": "h_min", "air": "sim",
                                         "eps_target": 2.0}, "screen")
    assert journal_problems(fig, PRESETS["screen"].width) == []
    assert fig._suptitle is not None and "\u03b5 = 2" in fig._suptitle.get_text()


def test_arms_whose_values_coincide_stay_apart_by_colour_marker_and_line_style(folder):
    fig = otafl_sdr.plot(otafl_sdr.load(folder), kind="accuracy_rounds", figure="ieee-single")
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines() if ln.get_label() in ARMS.values()}
    assert set(lines) == set(ARMS.values())                          # named by the spec's labels, not the keys
    cdpb = [lines[lab] for lab in ("CDPB-n", "CDPB-i", "CDPB-mixed")]
    assert all(list(ln.get_ydata()) == list(cdpb[0].get_ydata()) for ln in cdpb)    # they coincide
    styles = [(ln.get_marker(), str(ln.get_linestyle()), tuple(ln.get_color())) for ln in lines.values()]
    for part in range(3):                                            # each part of the style distinct
        assert len({s[part] for s in styles}) == len(styles), [s[part] for s in styles]
    marks = [ln.get_markevery() for ln in cdpb]
    assert len(set(marks)) == len(marks)                             # markers staggered: none hides another


def test_upcycled_fl_is_drawn_at_whole_client_rounds(folder):
    figs = [otafl_sdr.plot(otafl_sdr.load(folder), kind="accuracy_rounds", figure="ieee-double"),
            run_figure("accuracy", upcycled_rows(), {}, "ieee-single"),
            run_figure("nmse", upcycled_rows(), {}, "ieee-single")]
    for fig in figs:
        fig.draw_without_rendering()
        for ax in fig.axes:
            xs = [x for ln in ax.get_lines() if not ln.get_label().startswith("_") for x in ln.get_xdata()]
            assert xs and all(float(x).is_integer() for x in xs), xs
            lo, hi = ax.get_xlim()
            ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
            assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
    # the value at client round k is the model after the round's server-only step (the last row of round k)
    rows = upcycled_rows()
    line = run_figure("accuracy", rows, {}, "ieee-single").axes[0].get_lines()[0]
    assert list(line.get_ydata()) == [rows[i]["test_accuracy"] for i in range(1, len(rows), 2)]


def test_the_interval_method_and_n_eps_as_a_symbol_and_a_panel_per_delta(tmp_path):
    out = compare_folder(tmp_path / "two_deltas", eps=(1.0, 4.0), deltas=(1e-5, 1e-2), seeds=(1, 2, 3))
    loaded = otafl_sdr.load(out)
    rounds = otafl_sdr.plot(loaded, kind="accuracy_rounds", figure="ieee-double")
    legend = rounds.legends[0] if rounds.legends else rounds.axes[0].get_legend()
    assert "95 % t-interval, n = 3 seeds" in legend.get_title().get_text()
    vs = otafl_sdr.plot(loaded, kind="accuracy_vs_eps", figure="ieee-double")
    titles = sorted(ax.get_title() for ax in vs.axes)
    assert len(titles) == 2 and all(t.startswith("\u03b4 = ") for t in titles)    # never two deltas on one axis
    assert "\u03b5 spent (PLD" in vs._supxlabel.get_text()
    for ax in vs.axes:                       # two eps points: markers, no line through them, a linear axis
        assert ax.get_xscale() == "linear"
        assert all(ln.get_linestyle() == "None" for ln in ax.get_lines() if ln.get_label() in ARMS.values())
    # error bars of the arms at one eps are dodged: no two arms' points share an x
    for ax in vs.axes:
        xs = [round(float(x), 9) for ln in ax.get_lines() if ln.get_label() in ARMS.values() for x in ln.get_xdata()]
        assert len(xs) == len(set(xs)), xs


def test_plot_returns_a_figure_of_a_run_folder_and_refuses_what_it_cannot_draw(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text("")
    (run / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in upcycled_rows()))
    (run / "summary.json").write_text(json.dumps({"eps_target": 2.0, "delta": 1e-5}))
    fig = otafl_sdr.plot(otafl_sdr.load(run), kind="epsilon", figure="ieee-single")
    assert isinstance(fig, Figure) and "\u03b4 = 1e-05" in fig.axes[0].get_ylabel()
    assert isinstance(otafl_sdr.plot(run), Figure)                  # a path, the default kind
    with pytest.raises(UserError, match="known: screen, ieee-single, ieee-double"):
        otafl_sdr.plot(run, figure="ieee-triple")
    with pytest.raises(UserError, match="known: accuracy, loss, epsilon, nmse"):
        otafl_sdr.plot(run, kind="accuracy_rounds")


@pytest.mark.parametrize("command", [["report", "{run}"], ["compare", "{spec}", "--report-only"],
                                     ["sweep", "{spec}", "--dry-run"]])
def test_an_unknown_preset_is_refused_in_one_line(command, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text("")
    (run / "summary.json").write_text("{}")
    spec = compare_folder(tmp_path / "cmp", arms={"a": "A"}, eps=(1.0,), seeds=(1,)) / "sweep.toml"
    argv = [a.format(run=run, spec=spec) for a in command] + ["--figure", "ieee-tripple"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["otafl-sdr: error: --figure 'ieee-tripple' is not a figure preset (did you mean 'ieee-single'?); "
                   "known: screen, ieee-single, ieee-double"]
    assert not (run / "report").exists()                            # nothing drawn


def test_the_audit_legend_states_the_clis_confidence():
    import numpy as np

    from otafl_sdr.audit.plot import audit_figure
    stats = {"mu_lower": 0.4, "mu_hat": 0.6, "confidence": 0.975}
    audit = {"eps_lower_statistic": "canary", "air": "sim", "mu_booked": 0.8, "eps_printed": 2.0, "eps_lower": 0.9,
             "confidence": 0.95, "bounds": 2, "statistics": {"canary": stats}}
    rng = np.random.default_rng(0)
    fig = audit_figure(audit, {"canary": (rng.normal(1, 1, 50), rng.normal(0, 1, 50))}, "ieee-single")
    legend = fig.axes[1].get_legend()
    texts = [t.get_text() for t in legend.get_texts()]
    assert any("measured, 95 % lower bound" in t for t in texts) and not any("97.5 % lower" in t for t in texts)
    assert legend.get_title().get_text() == "each of 2 bounds at 97.5 % (Bonferroni)"
    assert journal_problems(fig, 3.5) == []
