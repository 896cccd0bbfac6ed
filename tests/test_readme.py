"""README.md as a newcomer reads it: at most 150 lines, every link to a file that exists, and every command
it shows run as written, in the README's order, in a scratch folder (so `results/...` never lands in the
repository). Long commands run with fewer rounds: REDUCED names each one and what changes; a REDUCED entry
that no longer matches a README line fails the test. `make run` / `make test` are CI's two commands
(`.ci/run` runs both), not this test's (`make test` would run this test again)."""
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
    f"{CLI} compare sim_loopback/compare/cross_paper.toml --workers 2":
        f"{CLI} compare sim_loopback/compare/cross_paper.toml --workers 2 --seeds 1 --set run.rounds=2",
}
# the README's commands that do not exit 0, and the line their stderr must hold
NOT_ZERO = {
    # the default experiment is planned to its target: an extension stops at the budget before its first round
    f"{CLI} run --resume results/try1 --extend 10": (3, "would raise eps"),
}


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


@pytest.mark.gnuradio
@pytest.mark.slow
def test_every_readme_command_runs_as_written(tmp_path):
    """The README's command block and its Python snippet, in order, in one scratch folder (each command
    builds on the ones before it: try1 is resumed, reported and verified, rec's IQ replayed)."""
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
    assert tomllib.loads((tmp_path / "my.toml").read_text())["run"]["rounds"] == 30
    # the Python snippet, as written (6 rounds on the sim air, a temporary folder)
    (snippet,) = _blocks(text, "python")
    namespace: dict = {}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(snippet, str(README), "exec"), namespace)
    finally:
        os.chdir(cwd)
    assert len(namespace["res"].rounds) == 12 and set(namespace["r"].rounds["round"]) == set(range(1, 13))
