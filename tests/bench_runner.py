"""Runs benchmark scripts one after another in this one process, each as `python SCRIPT --quick` would run it
(run as ``__main__`` with its own ``sys.argv``, its folder first on ``sys.path``, OTAFL_BENCH_OUT its own
folder), and records each one's exit status, stdout and stderr (file descriptors 1 and 2, so what C code
prints is caught too) as one JSON line per script in RESULTS. tests/test_benchmarks_smoke.py uses it: one
interpreter start (torch, GNU Radio) for all of them instead of one per script.

The experiments the benchmarks run (the audit's false-alarm runs, the paper round's timed run) draw no
figures here (`figures_not_drawn`): a smoke run's figures mean nothing and nobody reads them (3 runs' figures
and 3 audit plots were about 40 % of the smoke's CPU); the runs' figures are checked by
tests/run/test_run_plots.py and tests/run/test_run_end_to_end.py, the audit's by tests/privacy/test_audit.py.
A benchmark's own figure (``wrote ...png``) is drawn as always.

    python tests/bench_runner.py RESULTS.jsonl OUT_DIR SCRIPT...
"""
import json
import os
import runpy
import sys
import tempfile
import traceback
from pathlib import Path


def run_one(script: Path, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    os.environ["OTAFL_BENCH_OUT"] = str(out)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), "--quick"]
    sys.path.insert(0, str(script.parent))
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        sys.stdout.flush()
        sys.stderr.flush()
        old_out, old_err = os.dup(1), os.dup(2)
        os.dup2(so.fileno(), 1)
        os.dup2(se.fileno(), 2)
        rc = 0
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:                          # sys.exit(...) as the interpreter answers it
            if e.code is None:
                rc = 0
            elif isinstance(e.code, int):
                rc = e.code
            else:
                print(e.code, file=sys.stderr)
                rc = 1
        except BaseException:                            # noqa: BLE001 - what the script would die of
            traceback.print_exc()
            rc = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(old_out, 1)
            os.dup2(old_err, 2)
            os.close(old_out)
            os.close(old_err)
            sys.argv, sys.path[:] = saved_argv, saved_path
        so.seek(0)
        se.seek(0)
        return {"script": script.name, "rc": rc, "stdout": so.read().decode("utf-8", "replace"),
                "stderr": se.read().decode("utf-8", "replace")}


def figures_not_drawn() -> None:
    """The orchestrator's end-of-run figures and the audit's plot are not drawn in this process (module doc);
    rows, ledgers, summaries and audit.json are written as always (tests/conftest.figures_not_drawn's cut)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # the repository's package, as the scripts take it
    from otafl_sdr.audit import plot as audit_plot
    from otafl_sdr.results import files
    files.plot_rounds = lambda out, rows, summary=None, figure_preset=None: []
    audit_plot.plot_audit = lambda path, audit, samples, figure_preset=None: None


def main() -> None:
    results, out_dir, scripts = Path(sys.argv[1]), Path(sys.argv[2]), [Path(s) for s in sys.argv[3:]]
    figures_not_drawn()
    for script in scripts:
        row = run_one(script, out_dir / script.stem)
        with results.open("a") as f:                     # one line per script as it ends: a crash loses no earlier one
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
