import os
import sys
import time
from pathlib import Path

import pytest
import torch

os.environ.setdefault("MPLBACKEND", "Agg")
# the runs' ledger keys (privacy/ledger_keys.py) go to a private folder of this test session, not ~/.local/share
if not os.environ.get("OTAFL_LEDGER_KEYS"):
    import tempfile
    os.environ["OTAFL_LEDGER_KEYS"] = os.path.join(tempfile.mkdtemp(prefix="otafl-test-"), "ledger-keys")
torch.set_num_threads(1)

import shared_runs  # noqa: E402  (tests/ is on sys.path: rootdir-relative conftest)


@pytest.fixture
def small_cfg():
    """A tiny, fast config (digits, few clients, few rounds) for end-to-end tests."""
    from otafl_sdr.configure.load import load_config
    return load_config(None, [
        "run.rounds=3", "run.progress=false", "data.dataset=digits", "data.clients=5",
        "model.hidden=16", "train.local_epochs=1", "train.batch_size=32", "run.torch_threads=1",
    ])

@pytest.fixture
def uhd_sim(tmp_path):
    """A fresh UHD simulator (simulated E320) for one test, gone before the next (tests/uhd_sim_helpers.py)."""
    from uhd_sim_helpers import fresh_simulator
    with fresh_simulator(tmp_path) as sim:
        yield sim


@pytest.fixture
def uhd_lab(request, tmp_path):
    """A fresh lab of simulated USRPs joined by one cable (otafl_sdr.radio.uhd_sim_lab), 3 radios unless
    parametrized indirectly with SimulatedLab's options, e.g. ``{"n": 2, "lead_samples": 20000}``."""
    from uhd_sim_helpers import fresh_lab
    with fresh_lab(tmp_path, **getattr(request, "param", {})) as lab:
        yield lab


# Property tests run with a fixed example sequence so CI is reproducible (a failure seen once is seen
# every time); HYPOTHESIS_PROFILE=explore turns the randomised search back on for local hunting.
from hypothesis import settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

# hypothesis's own files (its constants cache) go to the session's temporary folder, not .hypothesis/ here
set_hypothesis_home_dir(__import__("tempfile").mkdtemp(prefix="otafl-test-hypothesis-"))

# database=None: no example database (.hypothesis/) is written into the repository; derandomized runs
# replay the same examples without one.
settings.register_profile("ci", derandomize=True, deadline=None, database=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# The tiers (docs/testing.md): a test without a tier marker is a unit test (`make test-fast`); one that
# imports GNU Radio or runs a whole experiment must say so with its marker, or it fails here.
_OUT_OF_UNIT_TIER = ("gnuradio", "uhd_sim", "net", "experiment", "slow")
_experiments_run: list[str] = []


def _count_experiments() -> None:
    """Note every whole experiment this process runs: ``Experiment.run`` that returns (the CLI's `run`,
    otafl_sdr.run, audits, resumes) and a sweep's cells (run in spawned worker processes). The real methods
    still run; only a note is added."""
    from otafl_sdr.experiment import orchestrator
    from otafl_sdr.sweeps import engines
    run, run_local = orchestrator.Experiment.run, engines.run_local

    def note(out) -> None:
        out = Path(out).resolve()
        if shared_runs.ROOT is None or shared_runs.ROOT.resolve() not in out.parents:   # shared: the session's
            _experiments_run.append(str(out))

    def counted_run(self, *a, **kw):
        outcome = run(self, *a, **kw)
        if not outcome.already_complete:          # a resume of a finished run changes nothing: no experiment
            note(self.out)
        return outcome

    def counted_run_local(run_cell, todo, *a, **kw):
        for c in todo:
            note(c.out)
        return run_local(run_cell, todo, *a, **kw)

    orchestrator.Experiment.run = counted_run
    engines.run_local = counted_run_local


_count_experiments()


@pytest.fixture(scope="session", autouse=True)
def _shared_runs_root(tmp_path_factory):
    """Where tests/shared_runs.py keeps the session's shared results folders."""
    shared_runs.ROOT = tmp_path_factory.mktemp("shared-runs")
    yield
    shared_runs.ROOT = None


def pytest_configure(config):
    """pytest 9.2 with pytest-xdist 3.8 silently drops ``--dist loadgroup``'s groups (pytest-xdist #1386): the
    simulator tests below would run side by side. Refuse with one line (pyproject.toml's test extra pins
    pytest below 9.2)."""
    config.addinivalue_line("markers", "xdist_group(name): pytest-xdist's group (also known with -p no:xdist)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _own_session()
    version = tuple(int(p) for p in pytest.__version__.split(".")[:2] if p.isdigit())
    if getattr(config.option, "dist", "no") == "loadgroup" and version >= (9, 2):
        raise pytest.UsageError(f"pytest {pytest.__version__}: --dist loadgroup does not group tests with this "
                                "pytest-xdist (pytest-xdist #1386); `make setup` installs the pinned pytest")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """UHD's simulators bind fixed addresses (127.0.0.N): under pytest-xdist (`make test`) every test that
    starts one, or needs none running (the no-USRP paths), runs on one worker, one at a time
    (``--dist loadgroup``). A wrapper: the marks are added before xdist's worker reads them (its own
    pytest_collection_modifyitems, which writes the ``@uhd`` suffix of the node id the scheduler groups by),
    and checked after it: with pytest 9.2 that suffix silently stops taking effect (pytest-xdist #1386) and the
    simulator tests ran side by side, colliding on UHD's fixed ports; the session is refused rather than run so."""
    for item in items:
        uses_uhd = (item.get_closest_marker("uhd_sim") or "uhd" in item.nodeid.split("::")[0]
                    or {"uhd_sim", "uhd_lab"} & set(getattr(item, "fixturenames", ())))
        if uses_uhd and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group("uhd"))
    # the simulator group first: xdist's loadgroup scheduler hands out work units in collection order, so the
    # longest serial chain (about 24 min of the suite on one worker) starts with the session, not part-way;
    # then the flowgraph / experiment / node tests, the unit tier last: its thousand short tests even out the
    # two workers' ends (longest first), instead of a 100 s test starting on one worker at the end
    items.sort(key=lambda i: (not _in_uhd_group(i), _in_unit_tier(i)))   # stable: otherwise the order is kept
    result = yield
    if getattr(config.option, "loadgroup", False):          # set on xdist's workers under --dist loadgroup
        lost = [i.nodeid for i in items if i.get_closest_marker("xdist_group") and "@" not in i.nodeid]
        if lost:
            raise pytest.UsageError(f"--dist loadgroup lost the xdist_group of {len(lost)} tests ({lost[0]}): "
                                    f"pytest {pytest.__version__} with this pytest-xdist does not group them "
                                    "(pytest-xdist #1386); install the test extra's pins (make setup)")
    return result


def _in_unit_tier(item) -> bool:
    return not any(item.get_closest_marker(m) for m in _OUT_OF_UNIT_TIER)


def _in_uhd_group(item) -> bool:
    mark = item.get_closest_marker("xdist_group")
    return bool(mark) and (mark.args[:1] or (mark.kwargs.get("name"),))[0] == "uhd"


NON_RADIO_NICE = 19    # the other workers' tests (and what they start in their session) at the lowest weight


def _own_session() -> None:
    """An xdist worker leads its own session, so it is its own scheduling group: with the kernel's autogroup
    scheduling (sched_autogroup_enabled, on by default) CPU is shared between sessions first and a process's
    nice counts only inside its session, so the controller, the simulator group's worker and the others
    shared one weight, and an os.nice() between them did not reach the simulators (each its own session).
    The worker still dies with the controller (PR_SET_PDEATHSIG: it is no longer in the terminal's group)."""
    import ctypes
    import signal
    try:
        os.setsid()
    except OSError:                                  # already a session leader
        pass
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))      # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _lower_this_session(nice: int) -> None:
    """The calling process's autogroup (its session's scheduling group) and the process itself at ``nice``;
    the kernel takes an unprivileged autogroup write at most ten times a second (EAGAIN): retried briefly.
    Where there is no autogroup (a kernel without it, or disabled), os.nice alone orders the processes."""
    import errno
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            fd = os.open("/proc/self/autogroup", os.O_WRONLY)
        except OSError:
            break
        try:
            os.write(fd, str(int(nice)).encode())
            break
        except OSError as e:
            if e.errno != errno.EAGAIN:
                break
            time.sleep(0.11)
        finally:
            os.close(fd)
    current = os.nice(0)
    if current < nice:
        os.nice(nice - current)


@pytest.fixture(autouse=True)
def _radios_come_first(request):
    """Under pytest-xdist, a worker that runs a test outside the UHD simulator group lowers its own session
    (its own since _own_session) to nice NON_RADIO_NICE, for good (an unprivileged process cannot raise it
    again). The simulated lab is five UHD simulator processes (each in its own session) and the flowgraph
    driving them, with 2 s RPC and millisecond streaming deadlines; on CI's two cores, beside training
    workers at the same weight, they missed them ("rpc::timeout ... get_clock_source", a client's burst
    after the hub's idle wait). The scheduler stays work-conserving: the lowered workers get every cycle the
    radios leave. A lab host gives its radio processes priority the same way (firmware_notes/lab_layout.md,
    "Hosts: one radio per host, real-time priority"); the simulator group's worker, which takes that group
    first (the collection order above), keeps nice 0. What the lowered workers start in a new session of its
    own (start_new_session) is a scheduling group of its own again, at nice 0."""
    if os.environ.get("PYTEST_XDIST_WORKER") and not _in_uhd_group(request.node) and os.nice(0) < NON_RADIO_NICE:
        _lower_this_session(NON_RADIO_NICE)           # once: the worker's own nice says whether it was


@pytest.fixture(autouse=True)
def _unit_tier_stays_unit(request):
    """A test that first imports GNU Radio must carry the gnuradio (or uhd_sim / net) marker, and one that
    runs a whole experiment the experiment marker (or another tier's), so that `make test-fast` (which
    deselects them) stays free of flowgraphs and experiments."""
    from otafl_sdr.results.files import _LOCKS
    before, ran, locked = "gnuradio" in sys.modules, len(_experiments_run), set(_LOCKS)
    yield
    if set(_LOCKS) - locked:        # an Experiment built but neither run nor closed (Experiment.close)
        pytest.fail(f"{request.node.nodeid} leaves results folders locked: {sorted(set(_LOCKS) - locked)}")
    marked = {m for m in _OUT_OF_UNIT_TIER if request.node.get_closest_marker(m)}
    if not before and "gnuradio" in sys.modules and not marked & {"gnuradio", "uhd_sim", "net"}:
        pytest.fail(f"{request.node.nodeid} imports GNU Radio but is not marked gnuradio (pyproject.toml markers)")
    if len(_experiments_run) > ran and not marked:
        pytest.fail(f"{request.node.nodeid} runs a whole experiment ({_experiments_run[ran]}) but is not marked "
                    f"experiment (docs/testing.md)")


@pytest.fixture
def figures_not_drawn(monkeypatch):
    """For a test that runs experiments and never reads their figures: the orchestrator's end-of-run figures
    (results.files.plot_rounds: 4 figures x PNG, PDF, SVG, about 3.4 s of CPU per run here) are not drawn; the
    rows, ledger, checkpoint and summary are written as always. The figures themselves are checked by
    tests/run/test_run_plots.py and tests/run/test_run_end_to_end.py."""
    from otafl_sdr.results import files
    monkeypatch.setattr(files, "plot_rounds", lambda out, rows, summary=None: [])
