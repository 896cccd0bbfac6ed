"""The README's Python snippet runs as written with pandas' FutureWarnings as errors (issue 36, item 5: a
notebook sees no warning from results/tidy.py), and does what it says: 6 client rounds of the default
experiment (Upcycled-FL: 12 rows) read back by ``otafl_sdr.load``. (tests/test_readme.py runs the README's
command block and leaves the snippet to this test.)"""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_readme_python_snippet_runs_under_error_future_warning(tmp_path):
    (snippet,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    check = ("\nprint('README-CHECK', len(res.rounds), sorted(set(r.rounds['round'])) == list(range(1, 13)))\n")
    r = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", snippet + check], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr[-3000:]
    assert "README-CHECK 12 True" in r.stdout, r.stdout[-3000:]
