"""The README's Python snippet runs as written with pandas' FutureWarnings as errors (issue 36, item 5: a
notebook sees no warning from results/tidy.py)."""
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
    r = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", snippet], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0 and "Warning" not in r.stderr, r.stderr[-3000:]
