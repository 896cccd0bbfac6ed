"""README.md as a newcomer reads it: at most 150 lines, every link to a file that exists, and every command
it shows run as written, in the README's order, in a scratch folder (so `results/...` never lands in the
repository). Long commands run with fewer rounds (the smoke sweep also on fewer samples): REDUCED names each
one and what changes; a REDUCED entry that no longer matches a README line fails the test. `make run` /
`make test` are CI's two commands (`.ci/run` runs both), not this test's (`make test` would run this test
again)."""
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import tomllib

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
CLI = ".venv/bin/otafl-sdr"

# a README command -> the same command with fewer rounds (the README's own text is the key, comment excluded)
REDUCED = {
    f"{CLI} run --config sim_loopback/default.toml --out results/try1":
        f"{CLI} run --config sim_loopback/default.toml --out results/try1 --set run.rounds=2",
    f"{CLI} run --config my.toml --set run.rounds=40 --set privacy.eps=0.5 --air loopback":
        f"{CLI} run --config my.toml --set run.rounds=2 --set privacy.eps=0.5 --air loopback",
    f"{CLI} run --resume results/try1 --extend 10 --eps 2":
        f"{CLI} run --resume results/try1 --extend 2 --eps 2",
    f"{CLI} sweep sim_loopback/sweeps/smoke.toml --workers 2":
        f"{CLI} sweep sim_loopback/sweeps/smoke.toml --workers 2 --seeds 1 --set run.rounds=2 "
        "--set data.max_samples=1000",                  # (each cell the default experiment on 1,000 samples)
    f"{CLI} compare sim_loopback/compare/cross_paper.toml --workers 2":
        f"{CLI} compare sim_loopback/compare/cross_paper.toml --workers 2 --seeds 1 --set run.rounds=2",
}
# the README's commands that do not exit 0, and the line their stderr must hold
NOT_ZERO: dict = {}      # (the default experiment is planned to its target: `--extend` takes `--eps`, raising it)


def _blocks(text: str, language: str) -> list[str]:
    """The text of the fenced code blocks whose fence names `language` ("" for none)."""
    blocks, current, lang = [], None, ""
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                if lang == language:
                    blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    assert current is None, "a code block is not closed"
    return blocks


def readme_commands(text: str) -> list[str]:
    """Every line of the README's plain code blocks, its trailing `  # comment` removed, continuations joined."""
    commands = []
    for block in _blocks(text, ""):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s{2,}#\s", line)[0].strip()
            if line:
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def test_the_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    broken = [t for t in re.findall(r"\]\(([^)#\s]+)[^)]*\)", text)
              if not t.startswith(("http://", "https://")) and not (ROOT / t).exists()]
    assert not broken, broken


# the pages issue 33 moved the README's text into, checked with it
MOVED_PAGES = ["privacy.md", "lab.md", "channels.md", "security.md", "results_folder.md", "compare.md"]


def test_the_python_names_and_repository_paths_the_pages_cite_exist():
    """`otafl_sdr.NAME(...)` is a callable of the package; a cited path with a folder in it (`sim_loopback/...`,
    `otafl_sdr/...`, `channel/multipath.py` inside the package) is a file or folder of the repository."""
    import otafl_sdr
    for page in [README] + [ROOT / "docs" / name for name in MOVED_PAGES]:
        text = page.read_text()
        for dotted in re.findall(r"\botafl_sdr((?:\.\w+)+)\(", text):
            obj = otafl_sdr
            for part in dotted.strip(".").split("."):
                obj = getattr(obj, part, None)
            assert callable(obj) and not isinstance(obj, type(otafl_sdr)), f"{page.name}: otafl_sdr{dotted}"
        for path in re.findall(r"`([\w.-]+/[\w./-]*)`", text):
            if path.startswith(("results/", "DIR/", "PAGE/", "link/", "server_step/")):
                continue                                      # what a run writes (files, TensorBoard tags)
            assert _cited_path_exists(path), f"{page.name}: {path}"


def _cited_path_exists(path: str) -> bool:
    """A file or folder of the repository (or of the package, or of docs/), or `module/path.function`."""
    bases = (ROOT, ROOT / "otafl_sdr", ROOT / "docs")
    if any((base / path).exists() for base in bases):
        return True
    stem, _, attr = path.rpartition(".")
    files = [base / f"{stem}.py" for base in bases if (base / f"{stem}.py").is_file()]
    return bool(files) and re.search(rf"^(def |class )?{re.escape(attr)}\b", files[0].read_text(), re.M) is not None


def test_the_readme_shows_both_make_commands_and_ci_runs_them():
    commands = readme_commands(README.read_text())
    make = [c for c in commands if c.startswith("make ")]
    assert make == ["make run", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M) and re.search(r"^make run OUT=", ci, re.M)
    assert all(c.startswith(f"{CLI} ") for c in commands if c not in make), commands


def test_every_reduction_names_a_readme_command():
    commands = readme_commands(README.read_text())
    assert set(REDUCED) <= set(commands) and set(NOT_ZERO) <= set(commands)


@pytest.mark.experiment
@pytest.mark.gnuradio
@pytest.mark.net
@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path):
    """The README's command block, in order, in one scratch folder (each command builds on the ones before it:
    try1 is resumed, reported and verified, rec's IQ replayed). Its Python snippet is run as written, as a
    process with FutureWarnings as errors, by tests/run/test_readme_snippet.py, which checks its rounds too."""
    text = README.read_text()
    (tmp_path / "sim_loopback").symlink_to(ROOT / "sim_loopback")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    cli = f"{shlex.quote(sys.executable)} -m otafl_sdr.cli.main"
    ran, head = [], None
    for command in readme_commands(text):
        if command.startswith("make "):
            continue
        shell = REDUCED.get(command, command)
        if " --head HEX" in shell:
            assert head, "no run printed its ledger head before `verify --head`"
            shell = shell.replace(" --head HEX", f" --head {head}")
        r = subprocess.run(shell.replace(CLI, cli, 1), shell=True, cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=1200)
        status, must = NOT_ZERO.get(command, (0, ""))
        assert r.returncode == status and must in r.stderr and "Traceback" not in r.stderr, \
            f"{shell}\nexit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
        printed = re.findall(r"^ledger head: ([0-9a-f]{64}) .*verify results/try1 ", r.stdout, re.M)
        head = printed[-1] if printed else head
        ran.append(command)
        if command.startswith(f"{CLI} verify"):
            assert ": OK:" in r.stdout, r.stdout
    assert len(ran) == len(readme_commands(text)) - 2
    assert (tmp_path / "results" / "try1" / "report" / "epsilon.png").is_file()
    # docs/results_folder.md's table of rounds.jsonl names every key of try1's rows (loopback)
    rows = [json.loads(line) for line in (tmp_path / "results" / "try1" / "rounds.jsonl").read_text().splitlines()]
    documented = set(re.findall(r"`(\w+)`", "".join(re.findall(r"^\| (`.*?) \|", (DOCS / "results_folder.md")
                                                                 .read_text(), re.M))))
    assert {k for row in rows for k in row} <= documented, {k for row in rows for k in row} - documented
    assert tomllib.loads((tmp_path / "my.toml").read_text())["run"]["rounds"] == 30


# ---- the docs pages' commands ----------------------------------------------------------------------------
DOCS = ROOT / "docs"

# The commands the README showed before issue 33 moved them into docs pages, and the test that runs each
# (against UHD's simulator, as node processes, or a whole audit): that test file and what it must still hold.
MOVED_FROM_THE_README = {
    f"{CLI} run --air loopback --set phy.waveform=ofdm --set phy.ofdm_cp=24 --set channel.multipath=tdl-a "
    "--set channel.delay_spread_ns=2000 --set run.rounds=3 --out results/ofdm":
        ("channels.md", "tests/run/test_ofdm_run.py",
         ["phy.ofdm_cp=24", "channel.multipath=tdl-a", "channel.delay_spread_ns=2000", '"loopback"']),
    ".venv/bin/python -m otafl_sdr.radio.uhd_simulator &":
        ("lab.md", "tests/uhd_sim_helpers.py", ["UhdSimulator("]),        # the class the module's main starts
    f"{CLI} run --config sim_loopback/presets/uhd_sim.toml --out results/uhd-sim":
        ("lab.md", "tests/radio/test_uhd_sim_preset_nmse.py", ['"uhd_sim.toml"', '["run", "--quiet", "--config", str(PRESET)']),
    f"{CLI} calibrate all --air uhd --config sim_loopback/presets/uhd_sim.toml --out results/uhd-sim-cal.json":
        ("lab.md", "tests/radio/test_uhd_power_run.py", ['"calibrate", "all"', '"--air", "uhd"', '"uhd_sim.toml"']),
    ".venv/bin/python -m otafl_sdr.radio.uhd_simulator --radios 3 &":
        ("lab.md", "tests/uhd_sim_helpers.py", ["SimulatedLab(n,"]),        # --radios N: the module's lab
    f"{CLI} node server --config sim_loopback/presets/uhd_sim_nodes.toml --out results/uhd-nodes --port 7700 &":
        ("lab.md", "tests/net/test_net_uhd_nodes.py", ['"server"', "uhd_sim_nodes.toml"]),
    f"{CLI} node receiver --server tcp://127.0.0.1:7700 --air uhd &":
        ("lab.md", "tests/net/test_net_uhd_nodes.py", ['"receiver"']),
    f"{CLI} node jammer --server tcp://127.0.0.1:7700 --air uhd &":
        ("lab.md", "tests/net/test_net_uhd_nodes.py", ['"jammer"']),
    f"{CLI} node client --server tcp://127.0.0.1:7700 --id 0 --air uhd":
        ("lab.md", "tests/net/test_net_uhd_nodes.py", ['"client"']),
    f"{CLI} audit --out results/audit": ("privacy.md", "tests/cli/test_audit_cli.py", ['main(["audit"']),
}


def doc_commands() -> list[tuple[str, str]]:
    """(page, command) for every `.venv/bin/...` line of the docs pages' plain code blocks."""
    return [(page.name, c) for page in sorted(DOCS.glob("*.md")) for c in readme_commands(page.read_text())
            if c.startswith(".venv/bin/")]


@pytest.mark.parametrize("page,command", doc_commands())
def test_a_docs_command_parses_and_names_files_that_exist(page, command):
    """Not run here (UHD's simulator, node processes, long runs): parsed by the CLI's own parser, its module
    found, and every repository file it names present."""
    from otafl_sdr.cli.main import build_parser
    argv = shlex.split(command.removesuffix("&"))
    program, args = argv[0], argv[1:]
    if program == CLI:
        build_parser(args[0]).parse_args(args)          # an unknown flag or value: SystemExit(2)
    elif program == ".venv/bin/python":
        if args[0] == "-m":
            assert importlib.util.find_spec(args[1]) is not None, command
        else:
            assert (ROOT / args[0]).is_file(), command
    else:
        assert (ROOT / program).is_file(), command          # another tool of the environment
    named = [a for a in args if a.startswith(("sim_loopback/", "benchmarks/", "calibration/"))]
    assert all((ROOT / a).exists() for a in named), named


def test_the_commands_moved_out_of_the_readme_are_on_their_pages_and_still_run_by_their_tests():
    on_pages = set(doc_commands())
    for command, (page, test_file, must) in MOVED_FROM_THE_README.items():
        assert (page, command) in on_pages, (page, command)
        text = (ROOT / test_file).read_text()
        assert all(m in text for m in must), (test_file, [m for m in must if m not in text])
