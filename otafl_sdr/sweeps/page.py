"""`otafl-sdr compare SPEC --page docs/results/NAME.md`: one paper's results page, generated from a compare
folder and nothing else (no number on it is typed by hand).

The page holds: the spec's header comment (what is compared; the paper's size beside the one run), the commands
that run the cells and that regenerate the page from the run folders, what was run (arms, grid, seeds, fixed
settings, rounds), what it cost on this machine (the cells' wall times and the elapsed time from the run
folders' own files) and the size the same machine runs in 2 hours, where the paper's ordering holds, ties or
reverses (from claims.csv), the claims table and the mechanisms' table exactly as ``compare`` wrote them
(claims.md, compare.md), plausibility checks (accuracies in [0, 1], degenerate arms, reference arms, runs over
their eps target) and the figures, whose PNGs are copied beside the page (``NAME/*.png``).
"""
from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

from otafl_sdr.errors import UserError

FIGURES = (("accuracy_last_k", "the claims' metric per arm (mean and 95 % interval over seeds)"),
           ("accuracy_rounds", "test accuracy over client rounds (mean over seeds, 95 % band)"),
           ("accuracy_vs_eps", "accuracy against the eps spent"),
           ("final_accuracy", "the final round's accuracy"))
BUDGET_S = 7200.0
ORDER = (("held", "Holds"), ("tie", "Ties (no difference the seeds can resolve)"), ("reversed", "Reverses"),
         ("not testable", "Not testable"), ("not run", "Not run"))


def title_and_intro(notes: str, name: str) -> tuple[str, str]:
    """The page's title (the comment's first clause, e.g. "Paper 000, Figs. 2-5") and the comment as one
    paragraph, less its command lines."""
    text = [ln for ln in notes.splitlines() if ln and "otafl-sdr compare" not in ln]
    intro = " ".join(text)
    head = intro.split(":", 1)[0] if ":" in intro[:80] else ""
    return (f"{head}: {name}" if head else name), intro


def cost(out: Path, table) -> dict:
    """The cells' summed wall times (summary.json's wall_s) and the elapsed time, the first cell's config.toml
    to the last cell's summary.json (the run folders' own modification times)."""
    import pandas as pd
    starts, ends = [], []
    for d in table["dir"].astype(str):
        cfg, summ = out / d / "config.toml", out / d / "summary.json"
        if cfg.is_file() and summ.is_file():
            starts.append(cfg.stat().st_mtime)
            ends.append(summ.stat().st_mtime)
    wall = pd.to_numeric(table.get("wall_s"), errors="coerce")
    return {"cells": len(table), "done": int(table["final_accuracy"].notna().sum()),
            "wall_sum_s": float(wall.sum()) if wall is not None else float("nan"),
            "elapsed_s": (max(ends) - min(starts)) if starts else float("nan")}


def budget_line(c: dict, seeds: int, rounds: float) -> str:
    """What 2 hours of the same machine allows, scaled from the measured elapsed time (the cost of a compare is
    about linear in seeds and in rounds)."""
    e = c["elapsed_s"]
    if not (isinstance(e, float) and e > 0 and math.isfinite(e)):
        return "The run folders carry no timing; the 2-hour size cannot be estimated."
    f = BUDGET_S / e
    txt = (f"At the measured elapsed time, 2 hours of this machine run about {f:.1f}x this work: e.g. "
           f"{max(seeds, math.floor(seeds * f))} seeds at {rounds:g} client rounds, or {seeds} seeds at about "
           f"{math.floor(rounds * f):d} client rounds (cost grows about linearly in both; larger models or data "
           f"sets scale it by their cost per step).")
    return txt if f >= 1 else txt + " This run already took longer than 2 hours."


def verdict_lines(claims) -> list[str]:
    """Where the paper's ordering holds, ties or reverses: each claim at each grid point under its verdict."""
    out = []
    for key, head in ORDER:
        rows = claims[claims["verdict"].astype(str).str.startswith(key)]
        if not len(rows):
            continue
        out += [f"**{head}** ({len(rows)}):", ""]
        for _, r in rows.iterrows():
            at = f" at {r['at']}" if isinstance(r["at"], str) and r["at"] else ""
            p = "" if _nan(r["p_holm"]) else f", p Holm {r['p_holm']:.3g}"
            diff = "" if _nan(r["diff"]) else f": {r['more_mean']:.3g} vs {r['less_mean']:.3g} (difference {r['diff']:+.3g}{p})"
            out.append(f"- {r['source']}: {r['claim']}{at}{diff} [{r['verdict']}]")
        out.append("")
    return out or ["No claims in the spec.", ""]


def _nan(v) -> bool:
    try:
        return v is None or math.isnan(float(v))
    except (TypeError, ValueError):
        return True


def checks(summary, claims_md: str, compare_md: str, keys: list = ()) -> list[str]:
    """Plausibility: accuracies in [0, 1], degenerate arms, reference arms apart, runs over their target."""
    acc = [float(v) for c in ("accuracy", "final_accuracy") for v in summary[c] if not _nan(v)]
    bad = [v for v in acc if not 0.0 <= v <= 1.0]
    lines = [f"- accuracies in [0, 1]: {'yes' if not bad else 'NO: ' + ', '.join(f'{v:g}' for v in bad)} "
             f"({len(acc)} means)"]
    deg = [ln.strip() for ln in compare_md.splitlines() if ln.startswith("DEGENERATE")]
    lines.append("- degenerate arms (identical on every seed): " + ("none" if not deg else "; ".join(deg)))
    ref = summary[summary["reference"].astype(bool)]
    lines.append("- reference arms (no DP, reported apart, not held to the target): "
                 + (", ".join(sorted(set(ref["label"].astype(str)))) or "none"))
    over = summary[~summary["reference"].astype(bool)]
    over = over[over["over_target"].fillna(0).astype(float) > 0]
    lines.append("- private arms with runs over their eps target: " + ("none" if not len(over) else "; ".join(
        f"{r['label']}{_point(r, keys)} ({int(r['over_target'])}/{r['seeds']}, knob: {r['calibration']})"
        for _, r in over.iterrows())))
    failed = summary[summary["failed"].fillna("").astype(str) != ""]
    lines.append("- failed cells: " + ("none" if not len(failed) else "; ".join(
        f"{r['label']}: {r['failed']}" for _, r in failed.iterrows())))
    return lines


def _point(r, keys) -> str:
    return (" at " + ", ".join(f"{k}={r[k]:g}" if isinstance(r[k], float) else f"{k}={r[k]}" for k in keys)
            if keys else "")


def _body(md: str, notes: str = "") -> str:
    """A compare markdown file less its heading and the spec's comment (compare.md repeats it; the page has it
    once, above)."""
    lines = md.splitlines()
    text = "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines).strip()
    return text.replace(notes.strip() + "\n\n", "", 1).strip() if notes.strip() else text


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def write_page(spec, spec_path, page, table, notes: str = "", extra: str = "") -> Path:
    """The page at ``page`` (markdown) and its figures' PNGs in ``page``'s stem folder; returns the page.
    ``extra``: the command-line options the cells ran under (e.g. ``--seeds 3``), repeated in its commands."""
    import pandas as pd

    from otafl_sdr.results.files import atomic_write_text
    page = Path(page)
    if page.suffix != ".md":
        raise UserError(f"--page {page}: the page must be a markdown file (NAME.md)")
    out = spec.out
    try:
        summary = pd.read_csv(out / "compare.csv")
        claims = pd.read_csv(out / "claims.csv") if (out / "claims.csv").stat().st_size > 1 else None
        compare_md = (out / "compare.md").read_text(encoding="utf-8")
        claims_md = (out / "claims.md").read_text(encoding="utf-8")
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise UserError(f"--page: the compare report in '{out}' is unreadable ({type(e).__name__}); "
                        f"run `otafl-sdr compare {spec_path} --report-only` first") from None
    if claims is None or "verdict" not in claims:
        claims = pd.DataFrame(columns=["verdict", "source", "claim", "at", "more_mean", "less_mean", "diff", "p_holm"])
    figs_dir = page.parent / page.stem
    try:
        figs_dir.mkdir(parents=True, exist_ok=True)
        figs = []
        for name, caption in FIGURES:
            if (out / f"{name}.png").is_file():
                shutil.copyfile(out / f"{name}.png", figs_dir / f"{name}.png")
                figs.append((name, caption))
    except OSError as e:
        raise UserError(f"--page: cannot write '{figs_dir}' ({e.strerror or type(e).__name__})") from None
    title, intro = title_and_intro(notes, spec.name)
    keys = [k for g in spec.grid for k in g.split(",")]
    c = cost(out, table)
    seeds = len(spec.seeds)
    rounds = float(pd.to_numeric(summary["client_rounds"], errors="coerce").max())
    grid = "; ".join(f"`{k}` = {v}" for k, v in spec.grid.items()) or "none (one point)"
    arms = "; ".join(f"`{a}` ({spec.labels.get(a, a)}{', reference' if a in set(summary.loc[summary['reference'].astype(bool), 'mechanism']) else ''}): "
                     f"{', '.join(f'`{s}`' for s in over) or 'the base'}" for a, over in spec.arms.items())
    cmd = f".venv/bin/otafl-sdr compare {spec_path}{extra}"
    lines = [f"# {title}", "",
             f"<!-- generated by `{cmd} --report-only --page {_rel(page)}` from {_rel(out)}; do not edit by hand -->",
             "", intro, "",
             "## Commands", "", "Run the cells (resumable: cells already done are kept) and write this page:", "",
             f"    {cmd} --workers 1 --page {_rel(page)}", "",
             "Regenerate this page from the run folders (nothing is trained):", "",
             f"    {cmd} --report-only --page {_rel(page)}", "",
             "## What was run", "",
             f"- spec `{spec_path}`, base preset `{_rel(spec.base) if spec.base else 'the default experiment'}`, "
             f"run folders in `{_rel(out)}`",
             f"- arms: {arms}",
             f"- grid: {grid}",
             f"- seeds: {list(spec.seeds)}; settings of every cell: {', '.join(f'`{s}`' for s in spec.fixed) or 'none'}",
             *([f"- run with `{extra.strip()}` on top of the spec (the comment above describes the spec as "
                f"written; these lines and the tables below say what ran)"] if extra.strip() else []),
             f"- cells: {c['done']} of {c['cells']} finished; {rounds:g} client rounds per run (the most of any arm)",
             f"- cost on this machine ({os.cpu_count()} CPU cores, shared): the cells' wall times sum to "
             f"{c['wall_sum_s']:.0f} s; elapsed {c['elapsed_s']:.0f} s ({c['elapsed_s'] / 60:.1f} min) from the "
             f"first cell's start to the last cell's end",
             f"- {budget_line(c, seeds, rounds)}", "",
             "## Where the paper's ordering holds, ties or reverses", "", *verdict_lines(claims),
             "## Claims", "", _body(claims_md), "",
             "## Mechanisms", "", _body(compare_md, notes), "",
             "## Checks", "", *checks(summary, claims_md, compare_md, [k for k in keys if k in summary]), "",
             "## Figures", ""]
    for name, caption in figs:
        lines += [f"![{caption}]({page.stem}/{name}.png)", "", f"*{name}: {caption}.*", ""]
    if not figs:
        lines.append("No figures in the compare folder.")
    atomic_write_text(page, "\n".join(lines).rstrip() + "\n")
    return page
