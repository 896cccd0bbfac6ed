"""`otafl-sdr compare SPEC --plan [--pilot FOLDER]`: the claims' power table before anything runs
(``power_analysis``): per claim test at each grid point the paper's effect, the effect the spec's seeds can
detect and the seeds the paper's effect needs, at Holm's first step over the m claim tests the spec makes.
The per-seed paired variance comes from a pilot folder's finished cells, else from the spec's own folder's;
without either, the table says the variance is unknown and what to run."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.sweeps.compare import add_last_k, claim_tests, judge, options, power_rows, reference_arms
from otafl_sdr.sweeps.folder_state import read_table
from otafl_sdr.sweeps.power_analysis import MAX_SEEDS, power_markdown, power_row, seeds_needed
from otafl_sdr.sweeps.sweep import SweepSpec


def planned_points(spec: SweepSpec) -> list[dict]:
    """The spec's grid points (each once; [{}] without a grid)."""
    pts = []
    for cell in spec.cells():
        pt = {k: v for k, v in cell.values.items() if k != "arm"}
        if pt not in pts:
            pts.append(pt)
    return pts or [{}]


def plan(spec: SweepSpec, spec_path: str, pilot: str | None) -> str:
    """`compare --plan`: the power table before anything runs. The variance comes from a pilot folder's cells
    (``pilot``), else from the spec's own folder where it holds finished cells; else it is unknown, and the
    table gives the paper's effects, Holm's level and what to run. Planned at the spec's seeds (after
    --seeds), Holm over the m claim tests the spec makes (every claim at every grid point it covers). A cell
    whose config is refused (a key the algorithm constrains, say) is named first, as `sweep --dry-run` does."""
    from otafl_sdr.sweeps.sweep import validate_cells
    validate_cells(spec, spec.cells())
    opts = options(spec)
    n = len(spec.seeds)
    m = len(claim_tests(spec, planned_points(spec)))
    folder = Path(pilot) if pilot else spec.out
    lines = [f"compare --plan {spec_path}: {len(spec.claims)} claims, m = {m} claim tests at {n} seeds; "
             f"alpha {opts['alpha']:g}, Holm's first step alpha / m = {opts['alpha'] / max(m, 1):.3g}, "
             f"power {opts['power']:g}. Nothing is run."]
    if not (folder / "sweep.csv").is_file():
        if pilot:
            raise UserError(f"--pilot {pilot}: no sweep.csv there (a compare folder of this spec's arms)")
        run = f"otafl-sdr compare {spec_path} --seeds 3"
        lines += [f"Variance unknown: no cells in {folder}. Run a pilot (`{run}`, or with `--out PILOT`, then "
                  f"`--plan --pilot PILOT`) and plan again; the seeds needed follow from the per-seed paired "
                  f"standard deviation it measures.", ""]
        tests = [{"claim": text, "at": pt, "source": c.get("source", ""), "paper_effect": c.get("paper_effect"),
                  "paper_effect_source": c.get("paper_effect_source"), "test": None, "why": "variance unknown"}
                 for c, _, _, pt, text in claim_tests(spec, planned_points(spec))]
        rows = [power_row(t, n, m, opts["alpha"], opts["power"]) for t in tests]
        level = opts["alpha"] / max(m, 1)
        scale = "; ".join(f"{d:g} sd: {seeds_needed(d, 1.0, level, opts['power']) or f'> {MAX_SEEDS}'}"
                          for d in (0.25, 0.5, 1.0, 2.0))
        return "\n".join(lines + power_markdown(rows, opts["alpha"], m, opts["power"], "unknown (no pilot)") + [
            "", f"Seeds needed at alpha / m = {level:.3g} and power {opts['power']:g} for an effect of so many paired "
                f"standard deviations (what a pilot's sd turns into seeds): {scale}."])
    try:
        table = read_table(folder)
    except UserError as e:
        raise UserError(f"--plan: {e}") from None
    if "mechanism" not in table or not set(spec.arms) & set(table["mechanism"].astype(str)):
        raise UserError(f"--plan: '{folder}' holds no cells of this spec's arms ({', '.join(spec.arms)})")
    src = dataclasses.replace(spec, out=folder)
    table = add_last_k(src, table, opts)
    claims = judge(src, table, opts["alpha"], reference_arms(src, table, opts))
    seeds = sorted(set(table.loc[table["final_accuracy"].notna(), "seed"].dropna()),
                   key=lambda s: (type(s).__name__, s)) if "seed" in table else []
    variance = (f"the per-seed paired differences of {'the pilot' if pilot else 'the spec folder'} {folder} "
                f"({len(seeds)} seeds: {', '.join(map(str, seeds))}), planned at {n} seeds")
    rows = power_rows(claims, opts, n_plan=n, m=m)
    return "\n".join(lines + [""] + power_markdown(rows, opts["alpha"], m, opts["power"], variance))
