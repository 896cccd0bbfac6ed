"""Issue 28, items 5 and 6: every reader of a results folder, a recording or a sweep (report, verify, replay,
run --resume, sweep, compare) answers a hostile file with exit 0, 1 or 2 and one line, never a traceback
or a hang; a full disk and a read-only folder are one line with nothing lost and the run resumable.

The property tests generate hostile files from a seeded generator (tests/cli/hostile_gen.py): truncated,
nested 10^5 deep, wrong types, NaN, huge numbers, a folder in place of the file, binary garbage, empty.

Where the answer is under test (exit status, stdout, stderr) the CLI's ``main`` is called in this process
(:func:`cli_in_process`); a command runs as an ``otafl-sdr`` process where the process is the point: a
read-only folder (capabilities dropped before exec), a full disk (a file-size limit on the process), and
in the fast property test each reader's first hostile file, answered by an otafl-sdr process (no traceback
from the interpreter itself, a hang fails it)."""
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_gen import variants, write_variant  # noqa: E402

pytestmark = [pytest.mark.net]          # CLI subprocesses

OTAFL = str(Path(sys.executable).with_name("otafl-sdr"))
RUN = ["--air", "sim", "--set", "run.rounds=2", "--set", "data.clients=3", "--set", "data.max_samples=300",
       "--set", "model.name=logreg", "--quiet"]


def cli(*args, timeout=90, preexec=None, env=None):
    """(exit status, stdout, stderr) of `otafl-sdr ARGS`; a hang fails the test (timeout)."""
    r = subprocess.run([OTAFL, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       preexec_fn=preexec, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout, r.stderr


def cli_in_process(*args, **_):
    """What :func:`cli` answers, from the CLI's ``main`` in this process (no interpreter start: the property
    test's hundred readers cost their own work only). An exception that escapes ``main`` is the traceback the
    program would print; argparse's exit is its status."""
    import contextlib
    import io
    import traceback
    from otafl_sdr.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
        except BaseException:                     # noqa: BLE001 - what the program would die of
            err.write(traceback.format_exc())
            rc = 1
    return rc, out.getvalue(), err.getvalue()


def assert_one_line(rc, out, err, allowed=(0, 1, 2)):
    """Exit 0/1/2, no traceback, at most one error line on stderr besides one-line warnings (verify's
    verdict is its one stdout line)."""
    assert rc in allowed, (rc, err[-2000:])
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    lines = [x for x in err.strip().splitlines() if not x.startswith("otafl-sdr: warning: ")]   # a warning: its own line
    assert len(lines) <= 1, err[-3000:]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "base"
    rc, _, err = cli_in_process("run", *RUN, "--set", "run.figures=false", "--out", out)   # nobody reads its figures
    assert rc == 0, err
    return out


def copy_of(base: Path, where: Path, name: str) -> Path:
    d = where / name
    shutil.copytree(base, d)
    (d / ".lock").unlink(missing_ok=True)
    return d


DEEP = "[" * 100_000 + "]" * 100_000


# ------------------------------------------------------------------------------------ the listed cases
def test_rounds_jsonl_a_folder_is_one_line_for_verify_and_resume(base, tmp_path):
    d = copy_of(base, tmp_path, "rdir")
    (d / "rounds.jsonl").unlink()
    (d / "rounds.jsonl").mkdir()
    rc, out, err = cli_in_process("verify", d)
    assert_one_line(rc, out, err, (1,))
    assert "FAILED" in out and "rounds.jsonl" in out
    rc, out, err = cli_in_process("run", "--resume", d, "--quiet")
    assert_one_line(rc, out, err, (2,))
    assert "rounds.jsonl" in err


@pytest.mark.parametrize("text", ['{"final_accuracy": 0.5, "eps', "[1, 2]", DEEP, "\x00\xff" * 10, ""],
                         ids=["truncated", "a-list", "deep", "binary", "empty"])   # (an id of DEEP's 200,000
# characters would reach every child process in PYTEST_CURRENT_TEST: "Argument list too long")
def test_a_garbled_summary_is_one_line_for_report_and_verify(base, tmp_path, text):
    d = copy_of(base, tmp_path, "summ")
    (d / "summary.json").write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    rc, out, err = cli_in_process("report", d)
    assert_one_line(rc, out, err, (2,))
    assert "summary.json" in err
    rc, out, err = cli_in_process("verify", d)
    assert_one_line(rc, out, err, (1,))
    assert "summary.json" in out


@pytest.mark.parametrize("name", ["rounds.jsonl", "privacy_ledger.jsonl"])
def test_deeply_nested_json_in_rows_or_ledger_is_one_line_for_report_verify_and_resume(base, tmp_path, name):
    d = copy_of(base, tmp_path, "deep")
    lines = (d / name).read_text().splitlines()
    lines.insert(1, DEEP)                      # not the last line: a corrupt line, not a torn tail
    (d / name).write_text("\n".join(lines) + "\n")
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    for args, allowed in ((("verify", d), (1,)), (("run", "--resume", d, "--quiet"), (2,)),
                          (("report", d, "--out", tmp_path / "plots"), (0, 2))):
        rc, out, err = cli_in_process(*args)
        assert_one_line(rc, out, err, allowed)
        if rc:
            assert name in out + err and "line 2" in out + err
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.is_file() and p.name != ".lock"} == \
        {k: v for k, v in before.items() if k != ".lock"}          # a refused resume changed nothing


def test_nested_arrays_in_config_toml_are_one_line(base, tmp_path):
    d = copy_of(base, tmp_path, "toml")
    (d / "config.toml").write_text("x = " + DEEP + "\n" + (base / "config.toml").read_text())
    for args in (("verify", d), ("run", "--resume", d, "--quiet"), ("run", "--config", d / "config.toml")):
        rc, out, err = cli_in_process(*args)
        assert_one_line(rc, out, err, (1, 2))
        assert "config.toml" in out + err and "nested" in out + err


def _root_bound_by_modes():
    """Root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH / CAP_FOWNER (dropped from the bounding set
    before exec): file modes then bind it like its own user, while it can still run the project's venv
    wherever the checkout lives (nobody cannot enter /root, where a clone often is)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):                                   # DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER
        if libc.prctl(24, cap, 0, 0, 0) != 0:               # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def test_a_read_only_folder_is_one_line_for_resume_report_and_sweep(base, tmp_path):
    """The folder's owner may not write (root runs the commands without its override of file modes)."""
    top = Path(tempfile.mkdtemp(prefix="otafl-ro-"))
    try:
        d = copy_of(base, top, "ro")
        spec = top / "spec.toml"
        spec.write_text('[sweep]\nname = "ro"\nseeds = [0]\nset = ["run.rounds=1", "model.name=logreg"]\n')
        cache = top / "mpl"
        cache.mkdir()
        for p in [top, cache, *d.rglob("*")]:
            p.chmod(0o777 if p == cache else 0o755 if p.is_dir() else 0o444)
        d.chmod(0o555)
        top.chmod(0o555)
        pre = _root_bound_by_modes if os.geteuid() == 0 else None
        env = {"MPLCONFIGDIR": str(cache), "HOME": str(cache)}
        rc, out, err = cli("run", "--resume", d, "--quiet", preexec=pre, env=env)
        assert_one_line(rc, out, err, (2,))
        assert "cannot lock results folder" in err and ".lock" in err
        rc, out, err = cli("report", d, preexec=pre, env=env)
        assert_one_line(rc, out, err, (2,))
        assert "report" in err and "--out" in err
        rc, out, err = cli("sweep", spec, "--out", top / "sweep", "--quiet", preexec=pre, env=env)
        assert_one_line(rc, out, err, (2,))
        assert "cannot create the sweep folder" in err
        rc, out, err = cli_in_process("verify", d)   # reading needs no writing (the ledger key is root's own)
        assert rc == 0 and "OK" in out, out + err
    finally:
        for p in [top, *top.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def _file_size_limit(limit: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # a write past the limit fails (EFBIG), as a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


@pytest.mark.parametrize("limit", [3_000, 60_000])
def test_a_full_disk_mid_run_is_one_line_nothing_lost_and_the_run_resumes(tmp_path, limit, figures_not_drawn):
    """(The run under the file-size limit is a process and draws as always; the in-process resume's figures are
    not drawn: nothing reads them.)"""
    out = tmp_path / "full"
    rc, so, err = cli("run", *RUN, "--out", out, preexec=_file_size_limit(limit))
    assert_one_line(rc, so, err, (1, 2))
    assert "checkpoint" in err and "resume" in err
    ledger = (out / "privacy_ledger.jsonl").read_text()
    rows = (out / "rounds.jsonl").read_text()
    assert ledger and rows                                     # what was written is kept
    rc, so, err = cli_in_process("run", "--resume", out, "--quiet")
    assert rc == 0, err
    assert (out / "privacy_ledger.jsonl").read_text().startswith(ledger)    # every booking kept
    rounds = [json.loads(x)["round"] for x in (out / "rounds.jsonl").read_text().splitlines()]
    assert rounds == list(range(1, len(rounds) + 1))     # a row after the last checkpoint is redone, not lost
    rc, so, err = cli_in_process("verify", out)
    assert rc == 0 and "OK" in so, so + err


def test_a_full_disk_while_drawing_plots_is_one_line_and_keeps_the_old_pictures(base, tmp_path):
    dest = tmp_path / "plots"
    rc, out, err = cli_in_process("report", base, "--out", dest)
    assert rc == 0
    old = {p.name: p.read_bytes() for p in dest.iterdir()}
    rc, out, err = cli("report", base, "--out", dest, preexec=_file_size_limit(20_000))
    assert_one_line(rc, out, err, (2,))
    assert "cannot write plot" in err and "File too large" in err
    assert {p.name: p.read_bytes() for p in dest.iterdir()} == old      # no half-written picture


def test_a_garbled_finished_cell_in_a_sweep_is_not_a_traceback(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(f'[sweep]\nname = "g"\nseeds = [0]\nout = "{tmp_path / "sw"}"\nset = ["run.rounds=1", '
                    f'"model.name=logreg", "data.clients=3", "data.max_samples=300", "run.torch_threads=1", '
                    f'"run.figures=false"]\n')
    rc, out, err = cli_in_process("sweep", spec, "--quiet", "--workers", "1")
    assert rc == 0, err
    cell = next(p for p in (tmp_path / "sw").iterdir() if p.is_dir())
    (cell / "rounds.jsonl").write_text('{"round": 1, "test_accuracy": "x"}\n{garbage\n' + DEEP + "\n[1, 2]\n")
    rc, out, err = cli_in_process("sweep", spec, "--quiet", "--workers", "1")
    assert_one_line(rc, out, err, (0,))
    assert (tmp_path / "sw" / "accuracy_rounds.png").is_file()


# ------------------------------------------------------------------------------------ replay
@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    from hostile_gen import make_recording
    return make_recording(tmp_path_factory.mktemp("rec"))


HOSTILE_VALUES = [None, "x", [], {}, -1, 0, 1e308, float("nan"), 10**30, True, [1, 2, 3], [[[[1]]]], "1e5",
                  -1e-300, 2**64, {"a": 1}]


def test_replay_refuses_every_hostile_metadata_value_with_a_user_error(recording, tmp_path):
    """Every otafl:, core: and [phy]/modem key of a real recording set to each hostile value (or deleted):
    replay returns or raises UserError, nothing else."""
    from otafl_sdr.errors import UserError
    from otafl_sdr.experiment.replay import replay
    base = json.loads(recording.read_text())
    g = base["global"]
    paths = ([("global", k) for k in g] + [("global", "otafl:phy", k) for k in g["otafl:phy"]]
             + [("global", "otafl:modem", k) for k in g["otafl:modem"]] + [("captures",), ("annotations",)])
    work = tmp_path / "r.sigmf-meta"
    shutil.copy(recording.with_suffix(".sigmf-data"), tmp_path / "r.sigmf-data")
    counts = {"tried": 0, "refused": 0, "accepted": 0}
    for path in paths:
        for v in HOSTILE_VALUES + ["<delete>"]:
            meta = json.loads(json.dumps(base))
            cur = meta
            for p in path[:-1]:
                cur = cur[p]
            if v == "<delete>":
                cur.pop(path[-1], None)
            else:
                cur[path[-1]] = v
            work.write_text(json.dumps(meta))
            counts["tried"] += 1
            try:
                replay(work)
                counts["accepted"] += 1
            except UserError as e:
                assert "\n" not in str(e)
                counts["refused"] += 1
    assert counts["tried"] > 400 and counts["refused"] > 200, counts
    for key in ("otafl:d", "otafl:n_symbols", "otafl:alpha_u", "otafl:round", "otafl:phy", "otafl:ref_amplitude"):
        meta = json.loads(json.dumps(base))
        meta["global"][key] = None                    # e.g. "otafl:d": null, once a TypeError
        work.write_text(json.dumps(meta))
        with pytest.raises(UserError):
            replay(work)


def test_replay_cli_on_hostile_metadata_is_one_line(recording, tmp_path):
    meta = json.loads(recording.read_text())
    shutil.copy(recording.with_suffix(".sigmf-data"), tmp_path / "r.sigmf-data")
    for key, v in (("otafl:d", None), ("otafl:phy", {"sps": 10**30}), ("otafl:n_symbols", 10**9)):
        m = json.loads(json.dumps(meta))
        m["global"][key] = v
        (tmp_path / "r.sigmf-meta").write_text(json.dumps(m))
        rc, out, err = cli_in_process("replay", tmp_path / "r.sigmf-meta")
        assert_one_line(rc, out, err, (2,))
        assert key.split(":")[1] in err
    (tmp_path / "r.sigmf-meta").write_text(DEEP)
    assert_one_line(*cli_in_process("replay", tmp_path / "r.sigmf-meta"), (2,))


# ------------------------------------------------------------------------------------ item 6: every reader
def _targets(base: Path, recording: Path, sweep_dir: Path | None):
    """(reader, file in the folder, command) triples; the command gets the mutated copy's folder."""
    t = [("report", f, lambda d: ("report", d, "--out", d / "plots")) for f in ("summary.json", "rounds.jsonl")]
    t += [("verify", f, lambda d: ("verify", d)) for f in
          ("rounds.jsonl", "summary.json", "privacy_ledger.jsonl", "config.toml", "checkpoint.pt")]
    t += [("resume", f, lambda d: ("run", "--resume", d, "--quiet")) for f in
          ("rounds.jsonl", "privacy_ledger.jsonl", "config.toml", "checkpoint.pt")]
    t += [("replay", f, lambda d: ("replay", d / "r.sigmf-meta")) for f in ("r.sigmf-meta", "r.sigmf-data")]
    t += [("sweep", "spec.toml", lambda d: ("sweep", d / "spec.toml", "--dry-run"))]
    t += [("compare", f, lambda d: ("compare", d / "spec.toml", "--report-only", "--out", d))
          for f in ("sweep.csv", "spec.toml")]
    return t


def _folder_for(reader: str, base: Path, recording: Path, where: Path) -> Path:
    d = where
    if reader in ("report", "verify", "resume"):
        shutil.copytree(base, d)
        (d / ".lock").unlink(missing_ok=True)
        return d
    d.mkdir()
    if reader == "replay":
        shutil.copy(recording, d / "r.sigmf-meta")
        shutil.copy(recording.with_suffix(".sigmf-data"), d / "r.sigmf-data")
    else:
        (d / "spec.toml").write_text('[sweep]\nname = "h"\nseeds = [0, 1]\nset = ["run.rounds=1"]\n'
                                     '[arms.a]\nset = ["power.jammer=true"]\n[arms.b]\nset = ["power.jammer=false"]\n'
                                     '[[claims]]\nmore = "a"\nless = "b"\nsource = "t"\n')
        (d / "sweep.csv").write_text("mechanism,seed,final_accuracy,eps_pld,status,arm,dir\n"
                                     "a,0,0.5,1.0,ran,a,a-s0\nb,0,0.4,1.0,ran,b,b-s0\n")
    return d


def _every_reader(base, recording, tmp_path, per_target: int, seed: int, in_process: bool = False,
                  processes_per_reader: int | None = None):
    """Each reader on hostile variants of each file it reads: as processes (two at a time, a hang fails the
    test), or ``in_process`` (one at a time, the CLI's main called here: the same answers without starting
    an interpreter per case); with ``processes_per_reader`` N, each reader's first N cases as processes and
    the rest in process."""
    rng = random.Random(seed)
    cases = []
    for reader, name, command in _targets(base, recording, None):
        kinds = variants(name)
        for kind in (rng.sample(kinds, per_target) if per_target < len(kinds) else kinds):
            cases.append((reader, name, kind, command))
    if processes_per_reader is None:
        as_process = [not in_process] * len(cases)
    else:
        seen: dict = {}
        as_process = []
        for reader, *_ in cases:
            seen[reader] = seen.get(reader, 0) + 1
            as_process.append(seen[reader] <= processes_per_reader)

    def one(i):
        reader, name, kind, command = cases[i]
        d = _folder_for(reader, base, recording, tmp_path / f"c{i}")
        write_variant(d / name, kind, random.Random(seed * 1000 + i))
        rc, out, err = (cli if as_process[i] else cli_in_process)(*command(d), timeout=120)
        shutil.rmtree(d, ignore_errors=True)
        return reader, name, kind, rc, out, err

    counts: dict = {}
    with ThreadPoolExecutor(max_workers=2) as pool:    # processes: two at a time (two cores)
        answers = list(pool.map(one, [i for i in range(len(cases)) if as_process[i]]))
    answers += map(one, [i for i in range(len(cases)) if not as_process[i]])    # in process: one at a time, here
    for reader, name, kind, rc, out, err in answers:
        try:
            assert_one_line(rc, out, err)
        except AssertionError as e:
            raise AssertionError(f"{reader} with a hostile {name} ({kind}): {e}") from None
        key = (reader, {0: "accepted", 1: "refused", 2: "refused"}[rc])
        counts[key] = counts.get(key, 0) + 1
    print("\nhostile files per reader:", dict(sorted(counts.items())))
    return counts


def test_every_reader_answers_generated_hostile_files_with_one_line(base, recording, tmp_path):
    """One generated hostile variant of each file each reader reads (16 cases): each reader's first case as an
    otafl-sdr process (what the interpreter itself prints, its exit status, a hang), the others in process."""
    counts = _every_reader(base, recording, tmp_path, per_target=1, seed=28, processes_per_reader=1)
    readers = {r for r, _ in counts}
    assert readers == {"report", "verify", "resume", "replay", "sweep", "compare"}
    assert sum(counts.values()) == 16


@pytest.mark.slow
def test_every_reader_answers_every_kind_of_hostile_file_with_one_line(base, recording, tmp_path):
    counts = _every_reader(base, recording, tmp_path, per_target=4, seed=6, in_process=True)
    assert sum(counts.values()) > 50
