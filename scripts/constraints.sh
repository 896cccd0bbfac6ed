#!/bin/bash
# Print pip constraints that pin the packages GNU Radio's Python bindings were built against
# (Debian's numpy), so that pip never replaces them inside the --system-site-packages venv.
/usr/bin/python3 - <<'PY'
import importlib.metadata as md
for name in ("numpy",):
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        pass
PY
echo "torch==2.13.0"
