"""The sweep / compare figures a paper can use (issue 27, item 3), read back from the SVG text they write
(``svg.fonttype = none`` keeps every label as text): accuracy bands clipped to [0, 1] even where two seeds'
t-interval spans -6..7, a panel per grid point, x in client rounds, the ε axis labelled with plain numbers
and a panel per δ where a spec mixes them (never two δ on one axis), 20 arms in 20 distinct colours on a figure that is not a strip,
and each figure as PNG, PDF and SVG."""
import json
import re

import matplotlib.image
import pandas as pd

from otafl_sdr.results.style import colours
from otafl_sdr.sweeps.plots import plot_sweep


def texts(svg_path) -> list[str]:
    return [t.strip().replace("\u2212", "-") for t in re.findall(r">([^<>]+)</text>", svg_path.read_text())]


def tick_labels(svg_path, axis: str) -> list[float]:
    """The numbers at the ``axis`` ('x' or 'y') ticks of every panel: matplotlib groups each tick as
    <g id="ytick_N"> holding its line and then its label's text."""
    out, pending = [], False
    for seg in svg_path.read_text().split('<g id="'):
        if seg.startswith(("xtick_", "ytick_")):
            pending = seg.startswith(f"{axis}tick_")
        m = re.search(r">([^<>]+)</text>", seg)
        if pending and m:
            pending = False
            try:
                out.append(float(m.group(1).strip().replace("\u2212", "-")))
            except ValueError:       # a shared axis' hidden labels: the next text is a title, not a tick
                pass
    return out


def write_cell(root, name, accs):
    """A cell folder: FedAvg-like rows (one client round each) with these test accuracies."""
    (root / name).mkdir(parents=True)
    rows = [{"round": r, "client_round": r, "uses_clients": True, "test_accuracy": a} for r, a in enumerate(accs, 1)]
    (root / name / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def two_seed_table(root, arms=("pc", "hmin"), points=((1.0, 1e-5), (4.0, 1e-5), (16.0, 1e-2))):
    """Two seeds that disagree as much as accuracies can (0.02 vs 0.98): the t-interval over two seeds is
    12.7 x their spread, far outside [0, 1]."""
    rows = []
    for a in arms:
        for eps, delta in points:
            for seed, acc in ((1, 0.02), (2, 0.98)):
                name = f"arm={a},eps={eps},seed={seed}"
                write_cell(root, name, [0.1, acc / 2, acc])
                rows.append({"dir": name, "mechanism": a, "seed": seed, "privacy.eps": eps, "privacy.delta": delta,
                             "delta": delta, "eps_pld": eps * 0.98, "final_accuracy": acc, "accuracy_last_k": acc})
    return pd.DataFrame(rows)


def test_bands_stay_in_0_1_panels_per_grid_point_and_deltas_marked(tmp_path):
    out = tmp_path / "cmp"
    table = two_seed_table(out)
    written = plot_sweep(out, table, {"pc": "power control", "hmin": "h_min"}, ["privacy.eps", "privacy.delta"])
    names = {p.stem for p in written}
    assert names == {"final_accuracy", "accuracy_last_k", "accuracy_rounds", "accuracy_vs_eps"}
    for stem in names:
        for fmt in ("png", "pdf", "svg"):
            assert (out / f"{stem}.{fmt}").stat().st_size > 1000, (stem, fmt)
    for stem in names:                                   # every accuracy axis: ticks within [0, 1] (bands clipped)
        accs = tick_labels(out / f"{stem}.svg", "x" if stem in ("final_accuracy", "accuracy_last_k") else "y")
        assert len(accs) >= 3 and min(accs) >= 0.0 and max(accs) <= 1.0, (stem, accs)
    assert tick_labels(out / "accuracy_rounds.svg", "x")[-1] >= 3          # x: client rounds 1..3
    rounds = texts(out / "accuracy_rounds.svg")
    assert sum(t.startswith("\u03b5 = ") for t in rounds) == 3    # one panel per (eps, delta) grid point
    assert "client round" in rounds and "power control" in rounds and "arm=pc" not in rounds
    eps = texts(out / "accuracy_vs_eps.svg")
    assert "power control" in eps and "\u03b4 = 1e-05" in eps and "\u03b4 = 0.01" in eps   # a panel per delta
    one_delta = tmp_path / "one_delta"                             # eps over a decade and more: a log axis
    plot_sweep(one_delta, two_seed_table(one_delta, points=((1.0, 1e-5), (4.0, 1e-5), (16.0, 1e-5))),
               {"pc": "power control", "hmin": "h_min"}, ["privacy.eps", "privacy.delta"])
    ticks = [t for t in texts(one_delta / "accuracy_vs_eps.svg") if re.fullmatch(r"\d+(\.\d+)?", t)]
    assert {"1", "2", "5", "10"} <= set(ticks)                     # log axis: plain numbers at 1, 2, 5 per decade


def test_twenty_arms_distinct_colours_and_no_strip(tmp_path):
    assert len({tuple(c) for c in colours(20)}) == 20 and len({tuple(c) for c in colours(25)}) == 25
    out = tmp_path / "many"
    arms = [f"C{i}" for i in range(20)]
    table = two_seed_table(out, arms=arms, points=((4.0, 1e-5),))
    labels = {a: f"mechanism number {i} with a long label" for i, a in enumerate(arms)}
    plot_sweep(out, table, labels, ["privacy.eps", "privacy.delta"])
    h, w = matplotlib.image.imread(out / "final_accuracy.png").shape[:2]
    assert w < 1600 and 0.4 < h / w < 1.3, (w, h)                  # a figure, not a 2860x440 strip nor a tower
    t = texts(out / "final_accuracy.svg")
    assert all(lab in t for lab in labels.values())                # every arm by its label, none cut
    assert "final test accuracy (mean, 95 % t-interval, n = 2 seeds)" in t
