"""What a sweep / compare folder holds: its sweep table read back and written (whether it is finished for a spec is
sweep.is_finished), and the short table of its cells (done / failed / over target) that `sweep` and `compare` end with."""
from __future__ import annotations

from pathlib import Path


def read_table(out: Path):
    """sweep.csv as a DataFrame (one row per cell), or a one-line UserError saying why it is not one."""
    import pandas as pd

    from otafl_sdr.errors import UserError
    csv = Path(out) / "sweep.csv"
    try:
        table = pd.read_csv(csv)
    except (ValueError, OSError, UnicodeDecodeError, pd.errors.ParserError) as e:
        raise UserError(f"'{csv}' is not a sweep table ({type(e).__name__}); run the sweep again to rewrite "
                        f"it") from None
    missing = {"arm", "dir", "status", "final_accuracy"} - set(table.columns)
    if missing:
        raise UserError(f"'{csv}' lacks the column(s) {', '.join(sorted(missing))}; it is not a sweep table")
    return table


def write_table_files(out: Path, table) -> None:
    """sweep.csv and sweep.parquet (each written whole, atomically); a parquet that cannot be written is one
    UserError, sweep.csv and the cells kept."""
    from otafl_sdr.errors import UserError
    from otafl_sdr.results.files import atomic_write_text
    out = Path(out)
    atomic_write_text(out / "sweep.csv", table.to_csv(index=False))
    tmp = out / "sweep.parquet.tmp"
    try:
        table.to_parquet(tmp, index=False)
        tmp.replace(out / "sweep.parquet")
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write '{out / 'sweep.parquet'}' ({e.strerror or type(e).__name__}); sweep.csv "
                        f"and the cells are kept") from None



def cells_table(table, out) -> str:
    """The cells by mechanism (or all of them): how many, done, failed (or not run), over the eps target;
    then the folder."""
    import pandas as pd
    status = table["status"].astype(str)
    failed = status.str.startswith(("failed", "not run"))
    over = table["over_target"].eq(True) if "over_target" in table else pd.Series(False, table.index)
    groups = table["mechanism"].astype(str) if "mechanism" in table else pd.Series("all", table.index)
    rows = [(name, len(g), int((~failed[g.index]).sum()), int(failed[g.index].sum()), int(over[g.index].sum()))
            for name, g in table.groupby(groups, sort=False)]
    width = max([len("cells")] + [len(r[0]) for r in rows])
    lines = [f"{'cells':<{width}}  {'of':>4}  {'done':>4}  {'failed':>6}  {'over target':>11}"]
    lines += [f"{n:<{width}}  {k:>4}  {d:>4}  {f:>6}  {o:>11}" for n, k, d, f, o in rows]
    return "\n".join(lines + [f"folder: {out}"])
