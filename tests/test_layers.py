"""The house's rules, checked: import-linter's contracts (pyproject.toml: one-way layers, the pure rooms
never reach GNU Radio / UHD / ZeroMQ), no import circle in otafl_sdr (grimp, function-level imports
included), and no module importing another module's private (_name) names."""
import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for m in sorted(adj):
        if m not in index:
            strong(m)
    return out


def test_no_import_circle():
    graph = grimp.build_graph("otafl_sdr", cache_dir=None)
    assert len(graph.modules) > 100
    assert _cycles(graph) == []


def test_a_circle_would_be_found():
    class Fake:                                       # the detector itself, on a known circle a -> b -> a
        modules = {"a", "b", "c"}

        @staticmethod
        def find_modules_directly_imported_by(m):
            return {"a": {"b"}, "b": {"a", "c"}, "c": set()}[m]
    assert _cycles(Fake()) == [["a", "b"]]


def test_no_module_imports_another_modules_private_names():
    bad = []
    for path in sorted((ROOT / "otafl_sdr").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                bad += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert bad == []


def test_the_package_root_holds_packages_and_a_few_shared_modules():
    """The root keeps the public API, errors, the registry and a few shared types (at most 12 modules);
    everything else lives in a package, and the layer contract names every child (exhaustive)."""
    root_modules = sorted(p.name for p in (ROOT / "otafl_sdr").glob("*.py"))
    assert len(root_modules) <= 12, root_modules
    import tomllib
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")
    assert layers.get("exhaustive") is True
