import os
import sys

import pytest
import torch

os.environ.setdefault("MPLBACKEND", "Agg")
# the runs' ledger keys (privacy/ledger_keys.py) go to a private folder of this test session, not ~/.local/share
if not os.environ.get("OTAFL_LEDGER_KEYS"):
    import tempfile
    os.environ["OTAFL_LEDGER_KEYS"] = os.path.join(tempfile.mkdtemp(prefix="otafl-test-"), "ledger-keys")
torch.set_num_threads(1)


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

settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _gnuradio_only_under_its_marker(request):
    """A test that first imports GNU Radio must carry the gnuradio (or uhd_sim / net) marker, so that
    `make test-fast` (which deselects them) stays free of flowgraphs."""
    before = "gnuradio" in sys.modules
    yield
    if not before and "gnuradio" in sys.modules and not any(
            request.node.get_closest_marker(m) for m in ("gnuradio", "uhd_sim", "net")):
        pytest.fail(f"{request.node.nodeid} imports GNU Radio but is not marked gnuradio (pyproject.toml markers)")
