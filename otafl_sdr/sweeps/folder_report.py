"""`otafl-sdr report` on a sweep or compare folder: the folder's own answer, from its files: a compare folder's
mechanisms table and claims (compare.md / claims.md, redrawn), a sweep folder's table by grid point, the
figures drawn once into the folder, then its cells (done / failed / over target). Nothing is run, and nothing
is written into the cells (their own reports are `otafl-sdr report CELL`)."""
from __future__ import annotations

from pathlib import Path

from otafl_sdr.errors import UserError


def report_folder(out: Path, figure_preset: str | None = None) -> int:
    """The folder's answer, its figures drawn at ``figure_preset`` (results/figure_presets.py)."""
    from otafl_sdr.results.figure_presets import preset
    from otafl_sdr.sweeps.folder_state import cells_table, read_table
    from otafl_sdr.sweeps.sweep_folder import lock_sweep, release_sweep
    out = Path(out)
    if not (out / "sweep.csv").is_file():
        raise UserError(f"report: '{out}' is a sweep folder without its table sweep.csv yet (run the sweep first)")
    spec = _saved_spec(out)
    spec.figure = preset(figure_preset).name
    taken = lock_sweep(out)                    # one writer: not while a sweep / compare writes this folder
    try:
        table = read_table(out)
        if spec.arms:
            from otafl_sdr.sweeps.compare import write_report
            md, cl = write_report(spec, table)
            print(md)
            print(cl)
        else:
            from otafl_sdr.sweeps.plots import plot_sweep
            print(sweep_summary(table))
            plot_sweep(out, table, figure_preset=spec.figure, title=spec.title)
    finally:
        if taken:
            release_sweep(out)
    print(cells_table(table, out))
    return 0


def _saved_spec(out: Path):
    """The spec the folder was run with (its sweep.toml), its cells in ``out`` wherever the folder now is."""
    from otafl_sdr.sweeps.sweep import load_spec
    if not (out / "sweep.toml").is_file():
        raise UserError(f"report: '{out}' holds no sweep.toml (the spec it was run with); run the sweep again")
    try:
        return load_spec(out / "sweep.toml", str(out))
    except UserError as e:
        raise UserError(f"report: the folder's saved spec cannot be read: {e}") from None


def sweep_summary(table) -> str:
    """One line per grid point (sweep.csv's ``arm``): seeds done, final accuracy (mean +- 95 % half-width over
    seeds), the tight eps spent (PLD, mean)."""
    import pandas as pd

    from otafl_sdr.sweeps.plots import ci95_half
    acc = pd.to_numeric(table["final_accuracy"], errors="coerce")
    eps = pd.to_numeric(table["eps_pld"], errors="coerce") if "eps_pld" in table else pd.Series(float("nan"), table.index)
    rows = []
    for point, g in table.groupby(table["arm"].astype(str), sort=False):
        a, e = acc[g.index].dropna(), eps[g.index].dropna()
        rows.append((point, f"{len(a)}/{len(g)}",
                     f"{a.mean():.3g} +- {ci95_half(a.to_numpy()):.2g}" if len(a) else "-",
                     f"{e.mean():.4g}" if len(e) else "-"))
    head = ("grid point", "seeds", "final accuracy (95% CI)", "eps PLD")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [head, *rows])
