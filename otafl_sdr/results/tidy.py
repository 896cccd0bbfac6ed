"""Results folders as pandas DataFrames (the notebook API: ``otafl_sdr.load``, ``otafl_sdr.sweep``,
``otafl_sdr.compare``). Read-only: every file goes through the bounded readers (safe_files, results).

``load(DIR)`` of a run's folder: ``rounds`` (rounds.jsonl, one row per iteration), ``ledger``
(privacy_ledger.jsonl, one row per release; each accountant's epsilon as ``eps_NAME``) and ``summary``
(summary.json, one row), and ``table`` (that row with the run's folder as ``dir``, as sweep.csv has one row
per cell). Of a sweep / compare folder: the same three over every cell, each row carrying the
cell's folder (``dir``), its arm and grid keys and seed (from sweep.csv), plus ``table`` (sweep.csv).
``long_rounds(rounds)``: the tidy long format, one row per (cell, iteration, metric)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.results.folders import cells, is_run, is_sweep

METRICS = ("test_accuracy", "test_loss", "train_loss", "local_train_loss", "aggregate_nmse", "sigma_eff",
           "sensitivity", "eps_pld", "eps_rdp", "eps_paper")


@dataclass
class Loaded:
    """rounds, ledger, summary (and for a sweep: table) as DataFrames; unpacks as (rounds, ledger, summary)."""

    rounds: object
    ledger: object
    summary: object
    out: Path
    table: object = None
    cells: list = field(default_factory=list)

    def __iter__(self):
        return iter((self.rounds, self.ledger, self.summary))


def _ledger_records(path: Path) -> list[dict]:
    from otafl_sdr.results.safe_files import loads, read_text
    out = []
    lines = read_text(path, "privacy ledger").splitlines() if path.is_file() else []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = loads(line, f"'{path}' line {i + 1}")
        except UserError:
            if all(not x.strip() for x in lines[i + 1:]):
                break                                    # a torn last line (an interrupted write) is not counted
            raise
        if not isinstance(rec, dict):
            raise UserError(f"'{path}' line {i + 1} is not a JSON object")
        eps = rec.pop("eps", None)
        if isinstance(eps, dict):
            rec.update({f"eps_{k}": v for k, v in eps.items()})
        out.append(rec)
    return out


def load_run(out: Path) -> Loaded:
    import pandas as pd

    from otafl_sdr.results.files import read_rounds
    from otafl_sdr.results.safe_files import load_json
    out = Path(out)
    rounds = read_rounds(out / "rounds.jsonl") if (out / "rounds.jsonl").is_file() else []
    summ = load_json(out / "summary.json", "summary") if (out / "summary.json").is_file() else {}
    if not isinstance(summ, dict):
        raise UserError(f"'{out / 'summary.json'}' is not a JSON object")
    summary = pd.DataFrame.from_records([{k: v for k, v in summ.items() if not isinstance(v, (list, dict))}]) \
        if summ else pd.DataFrame()
    return Loaded(rounds=pd.DataFrame.from_records(rounds), ledger=pd.DataFrame.from_records(
        _ledger_records(out / "privacy_ledger.jsonl")), summary=summary, out=out, table=_run_table(summary, out))


def _run_table(summary, out: Path):
    """A run's one-row table, as sweep.csv has one row per cell: its figures (the summary's) and its folder."""
    return summary.assign(dir=str(out)) if len(summary) else summary.copy()


def load_sweep(out: Path) -> Loaded:
    import pandas as pd
    out = Path(out)
    table = pd.read_csv(out / "sweep.csv") if (out / "sweep.csv").is_file() else pd.DataFrame()
    keys = {}
    if "dir" in table.columns:
        for rec in table.to_dict("records"):
            keys[str(rec["dir"])] = {k: v for k, v in rec.items() if k in _cell_columns(table)}
    parts: dict[str, list] = {"rounds": [], "ledger": [], "summary": []}
    found = cells(out)
    for cell in found:
        one = load_run(cell)
        label = str(cell.relative_to(out))
        for name in parts:
            df = getattr(one, name)
            if len(df):
                df = df.copy()
                for k, v in reversed(list({"dir": label, **keys.get(label, {})}.items())):
                    if k not in df.columns:
                        df.insert(0, k, v)
                parts[name].append(df)
    frames = {n: _concat(v) for n, v in parts.items()}
    return Loaded(**frames, out=out, table=table, cells=found)


def _concat(frames: list):
    """The cells' frames one under the other. A column all empty in one cell (a summary's None where another
    cell has a number) does not decide the column's type: each frame's all-empty columns are left out before
    pandas joins them (as its deprecation of the other behaviour asks) and come back as empty cells."""
    import pandas as pd
    if not frames:
        return pd.DataFrame()
    columns = list(dict.fromkeys(c for f in frames for c in f.columns))
    kept = [f.dropna(axis=1, how="all") for f in frames]
    return pd.concat(kept, ignore_index=True).reindex(columns=columns)


def _cell_columns(table) -> list[str]:
    """sweep.csv's columns that name a cell (arm / mechanism, grid keys, seed), not its results."""
    cols = list(table.columns)
    last = cols.index("seed") if "seed" in cols else -1
    return [c for c in cols[:last + 1]] + [c for c in ("arm",) if c in cols]


def load(path) -> Loaded:
    """A run's results folder or a sweep / compare folder as DataFrames (see the module docstring)."""
    if not isinstance(path, (str, Path)):
        raise UserError(f"load takes a folder path (str or Path), got {type(path).__name__}")
    path = Path(path)
    if is_run(path):
        return load_run(path)
    if is_sweep(path):
        return load_sweep(path)
    raise UserError(f"'{path}' is neither a results folder (config.toml) nor a sweep / compare folder (sweep.toml)")


def long_rounds(rounds, metrics=METRICS):
    """The rounds DataFrame in tidy long format: the id columns (dir, arm, grid keys, seed, round,
    client_round) and one row per metric: ``metric``, ``value`` (rows without a value left out)."""
    if rounds is None or not len(rounds):
        import pandas as pd
        return pd.DataFrame(columns=["round", "metric", "value"])
    value_cols = [m for m in metrics if m in rounds.columns]
    id_cols = [c for c in rounds.columns if c not in value_cols and c in _id_columns(rounds)]
    out = rounds.melt(id_vars=id_cols, value_vars=value_cols, var_name="metric", value_name="value")
    return out.dropna(subset=["value"]).reset_index(drop=True)


def _id_columns(rounds) -> list[str]:
    cols = list(rounds.columns)
    head = cols[:cols.index("round")] if "round" in cols else []      # what load_sweep put in front
    return head + [c for c in ("round", "client_round", "uses_clients") if c in cols]
