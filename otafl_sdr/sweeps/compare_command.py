"""The `otafl-sdr compare SPEC` command: its arguments, the checks of the spec before any cell runs, the cells
(as a sweep: resumable, local processes or Ray, one writer per folder), the report and the results page; and
`compare --plan` (sweeps/compare_plan.py). What the report holds and how the claims are tested:
sweeps/compare.py."""
from __future__ import annotations

import sys
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.results.figure_presets import DEFAULT as DEFAULT_PRESET, preset
from otafl_sdr.sweeps.cell_overrides import add_override_arguments, apply_overrides, grid_keys
from otafl_sdr.sweeps.compare import DEFAULT_METRIC, options, spec_notes, write_report
from otafl_sdr.sweeps.power_analysis import check_paper_effect
from otafl_sdr.sweeps.sweep import RESULT_FIELDS, SweepSpec, add_engine_arguments, check_workers, failed_cells, load_spec, run_sweep
from otafl_sdr.sweeps.sweep_folder import lock_sweep, release_sweep
from otafl_sdr.sweeps.page_data import has_data


def add_arguments(p) -> None:
    p.add_argument("spec", help="comparison spec: a sweep spec with [arms.NAME] mechanisms and [[claims]]")
    add_engine_arguments(p)
    add_override_arguments(p)
    p.add_argument("--report-only", action="store_true", help="redraw the report from the cells already run")
    p.add_argument("--plan", action="store_true",
                   help="print the claims' power table (the paper's effects, the detectable effect at the seeds, "
                        "the seeds needed) and run nothing; the variance from the folder's cells or --pilot's")
    p.add_argument("--pilot", default=None, metavar="FOLDER",
                   help="with --plan: a finished compare folder of the same arms whose cells give the variance")
    p.add_argument("--page", default=None, metavar="PAGE.md",
                   help="also write a results page (markdown, its figures' PNGs in a folder beside it; "
                        "otafl_sdr/sweeps/page.py), e.g. docs/results/paper000_jammer.md")


def main(args) -> int:
    check_workers(args.workers)
    spec = load_spec(args.spec, args.out)
    spec.figure = preset(args.figure).name            # an unknown preset: refused before anything runs
    if not spec.arms:
        raise UserError(f"compare spec '{args.spec}' has no [arms.NAME] tables (the mechanisms to compare)")
    keys = set(grid_keys(spec))
    for c in spec.claims:
        sides = ("arm",) if "arm" in c else ("more", "less")
        for side in sides:
            if c.get(side) not in spec.arms:
                raise UserError(f"compare spec '{args.spec}': claim {side} = {c.get(side)!r} is not an arm; "
                                f"arms: {', '.join(spec.arms)}")
        check_paper_effect(c, f"compare spec '{args.spec}': claim {c.get('source', '')!r}")
        points = [c.get("more_at"), c.get("less_at")] if "arm" in c else [c.get("where", {})]
        if not all(isinstance(pt, dict) and set(pt) <= keys for pt in points):
            raise UserError(f"compare spec '{args.spec}': claim {c.get('source', '')!r}: "
                            f"{'more_at and less_at' if 'arm' in c else 'where'} must be tables of grid keys "
                            f"({', '.join(sorted(keys)) or 'none'})")
        if c.get("metric", DEFAULT_METRIC) not in (DEFAULT_METRIC, *RESULT_FIELDS):
            raise UserError(f"compare spec '{args.spec}': claim {c.get('source', '')!r}: metric "
                            f"{c.get('metric')!r} is not one of {DEFAULT_METRIC}, {', '.join(RESULT_FIELDS)}")
    options(spec, f"compare spec '{args.spec}'")
    if args.pilot and not args.plan:
        raise UserError("--pilot goes with --plan (a pilot folder's cells give the plan's variance)")
    if args.plan:
        if args.report_only or args.page:
            raise UserError("--plan runs and writes nothing; give it without --report-only and --page")
        apply_overrides(spec, args.seeds, args.set)
        from otafl_sdr.sweeps.compare_plan import plan
        print(plan(spec, args.spec, args.pilot))
        return 0
    if args.page:
        from otafl_sdr.sweeps.page import check_page
        check_page(args.page)              # before any cell runs: a page never clobbers (sweeps/page.py)
    apply_overrides(spec, args.seeds, args.set)
    taken = lock_sweep(spec.out)           # one writer per compare folder: cells, report and page under it
    try:
        return _compare_locked(spec, args)
    finally:
        if taken:
            release_sweep(spec.out)


def _compare_locked(spec: SweepSpec, args) -> int:
    if args.page and (has_data(args.page) or not args.report_only):
        return _page_from_data(spec, args)
    if args.report_only:
        from otafl_sdr.sweeps.folder_state import read_table
        csv = spec.out / "sweep.csv"
        if not csv.is_file():
            raise UserError(f"--report-only: no {csv} (run the comparison first)")
        try:
            table = read_table(spec.out)
        except UserError as e:
            raise UserError(f"--report-only: {e}") from None
    else:
        table = run_sweep(spec, engine=args.engine, workers=args.workers, address=args.address,
                          progress=not args.quiet, command="compare")
    md, cl = write_report(spec, table, spec_notes(args.spec))
    if args.page:
        from otafl_sdr.sweeps.page import write_page
        page = write_page(spec, args.spec, args.page, table, spec_notes(args.spec), _extra(spec, args))
        print(f"results page: {page}")
    return _finish(spec, args, table, md, cl)


def _extra(spec: SweepSpec, args) -> str:
    """The command-line options the cells ran under, as the page repeats them in its commands."""
    return (f" --seeds {args.seeds}" if args.seeds is not None else "") + "".join(
        f" --set {s}" for s in args.set) + (f" --out {args.out}" if args.out else "") + (
        f" --figure {spec.figure}" if spec.figure != DEFAULT_PRESET else "")


def _page_from_data(spec: SweepSpec, args) -> int:
    """A page made from its compact cell data (sweeps/page_data.py): a run skips the cells the data holds and
    exports each cell it finishes; --report-only reads the data alone (the run folder need not exist)."""
    from otafl_sdr.sweeps import page_data
    from otafl_sdr.sweeps.page import write_page
    root = page_data.cells_folder(args.page)
    have = page_data.read_page_cells(spec, args.page)             # every cell checked before anything runs
    total = len(spec.cells())
    if not args.report_only:
        exported = page_data.export_finished(spec, args.page, have)
        if exported:                       # done in the run folder: run_sweep skips them there
            print(f"compare {spec.name}: {len(exported)} finished cells of the run folder exported to {root}")
        print(f"compare {spec.name}: {len(have)} of {total} cells already in the page's data ({root}): skipped; "
              f"{total - len(have) - len(exported)} to run")
        known = dict.fromkeys([*have, *exported])
        run = run_sweep(spec, engine=args.engine, workers=args.workers, address=args.address,
                        progress=not args.quiet, command="compare", skip=page_data.skipped_rows(have),
                        on_done=page_data.exporter(spec, args.page, known))
        page_data.export_finished(spec, args.page, known)     # a cell whose export failed as it finished
        have = page_data.read_page_cells(spec, args.page)
        page_data.record_refused(spec, args.page, run, have)  # why a cell was refused: the page keeps saying it
        failed = failed_cells(run)
    print(page_data.describe(have, root))
    table = page_data.page_table(spec, have, page_data.read_refused(spec, args.page))
    staged = page_data.staged_rows(have)
    try:
        md, cl = write_report(spec, table, spec_notes(args.spec), cells=Path(staged.name))
    finally:
        staged.cleanup()
    page = write_page(spec, args.spec, args.page, table, spec_notes(args.spec), _extra(spec, args),
                      page_data.timing(have))
    print(f"results page: {page} (from {root})")
    if args.report_only:
        missing = failed_cells(table)
        if len(missing):
            refused = int(missing["status"].astype(str).str.startswith(page_data.REFUSALS).sum())
            print(f"compare {spec.name}: {len(missing)} of {total} cells are not in the page's data"
                  + (f" ({refused} refused by their set-up, the reason on the page)" if refused else "")
                  + "; run the page's command without --report-only to run them", file=sys.stderr)
        return _finish(spec, args, table, md, cl)
    return _finish(spec, args, run, md, cl, failed)


def _finish(spec: SweepSpec, args, table, md: str, cl: str, failed=None) -> int:
    """Print the report and the cells; exit 1 where a cell failed or did not run."""
    print(md)
    print(cl)
    from otafl_sdr.sweeps.folder_state import cells_table
    print(cells_table(table, spec.out))
    print(f"compare {spec.name}: {spec.out / 'compare.md'}, {spec.out / 'claims.md'}, plots in {spec.out}")
    failed = failed_cells(table) if failed is None else failed
    for _, r in failed.iterrows():
        print(f"otafl-sdr: cell {r['dir']}: {r['status']}", file=sys.stderr)
    return 1 if len(failed) else 0
