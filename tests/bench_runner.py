"""Runs benchmark scripts one after another in this one process, each as `python SCRIPT --quick` would run it
(run as ``__main__`` with its own ``sys.argv``, its folder first on ``sys.path``, OTAFL_BENCH_OUT its own
folder), and records each one's exit status, stdout and stderr (file descriptors 1 and 2, so what C code
prints is caught too) as one JSON line per script in RESULTS. tests/test_benchmarks_smoke.py uses it: one
interpreter start (torch, GNU Radio) for all of them instead of one per script.

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


def main() -> None:
    results, out_dir, scripts = Path(sys.argv[1]), Path(sys.argv[2]), [Path(s) for s in sys.argv[3:]]
    for script in scripts:
        row = run_one(script, out_dir / script.stem)
        with results.open("a") as f:                     # one line per script as it ends: a crash loses no earlier one
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
