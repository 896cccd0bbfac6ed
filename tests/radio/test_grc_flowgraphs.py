"""The flowgraphs/*.grc files: they load and compile with GNU Radio Companion's `grcc` (3.10), the
generated Python is headless, the client burst carries the UHD timed-burst tags, and the loopback one
runs without hardware and produces the superposition it describes."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pmt
import pytest
import yaml
from gnuradio import blocks, gr

pytestmark = [pytest.mark.gnuradio, pytest.mark.net]

ROOT = Path(__file__).resolve().parents[2]
FLOWGRAPHS = ROOT / "flowgraphs"
NAMES = ["ota_client_tx", "ota_jammer", "ota_receiver", "ota_loopback"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    grcc = shutil.which("grcc")
    assert grcc, "grcc (GNU Radio Companion compiler) is required"
    out = tmp_path_factory.mktemp("grc")
    env = dict(os.environ)
    if (FLOWGRAPHS / "blocks").is_dir():                 # custom block YAML, if any
        env["GRC_BLOCKS_PATH"] = str(FLOWGRAPHS / "blocks")
    files = [str(FLOWGRAPHS / f"{n}.grc") for n in NAMES]
    r = subprocess.run([grcc, "-o", str(out), *files], cwd=out, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _grc(name):
    return yaml.safe_load((FLOWGRAPHS / f"{name}.grc").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_grc_compiles_to_headless_python(compiled, name):
    py = compiled / f"{name}.py"
    assert py.is_file()
    src = py.read_text()
    compile(src, str(py), "exec")                       # valid Python
    for gui in ("qtgui", "PyQt5", "sip"):
        assert gui not in src, f"{name} uses GUI module {gui}"
    assert _grc(name)["options"]["parameters"]["generate_options"] == "no_gui"


def test_uhd_flowgraphs_take_the_device_address_as_a_parameter(compiled):
    for name in ("ota_client_tx", "ota_jammer", "ota_receiver"):
        src = (compiled / f"{name}.py").read_text()
        assert '"--dev-args"' in src and "uhd.usrp_" in src
        assert "set_time_next_pps" in src                   # radios share device time (PPS)
    assert "set_start_time" in (compiled / "ota_receiver.py").read_text()   # timed receive
    assert "set_start_time" in (compiled / "ota_jammer.py").read_text()     # timed jammer burst


def test_client_tx_burst_carries_uhd_timed_burst_tags():
    """Evaluate the .grc's own burst / burst_tags expressions and pass them through real blocks."""
    blocks_ = {b["name"]: b for b in _grc("ota_client_tx")["blocks"]}
    ns = {"numpy": np, "pmt": pmt, "gr": gr}
    ns["burst_file"] = ""
    ns["t_start"] = 1234.25
    ns["burst"] = eval(blocks_["burst"]["parameters"]["value"], ns)
    tags = eval(blocks_["burst_tags"]["parameters"]["value"], ns)
    src = blocks.vector_source_c(ns["burst"], False, 1, tags)
    mul = blocks.multiply_const_cc(0.5 - 0.25j)
    sink = blocks.vector_sink_c()
    tb = gr.top_block()
    tb.connect(src, mul, sink)
    tb.run()
    n = len(ns["burst"])
    np.testing.assert_allclose(np.array(sink.data()), ns["burst"] * (0.5 - 0.25j), rtol=1e-6)
    got = sorted((t.offset, pmt.symbol_to_string(t.key)) for t in sink.tags())
    assert got == [(0, "tx_sob"), (0, "tx_time"), (n - 1, "tx_eob")]
    tt = [t.value for t in sink.tags() if pmt.symbol_to_string(t.key) == "tx_time"][0]
    assert pmt.to_uint64(pmt.tuple_ref(tt, 0)) == 1234 and pmt.to_double(pmt.tuple_ref(tt, 1)) == 0.25


def _expected_loopback(n, seed):
    """The superposition ota_loopback.grc describes, from its own variable expressions."""
    b = {blk["name"]: blk["parameters"] for blk in _grc("ota_loopback")["blocks"]}
    ns = {"numpy": np, "n_samples": n, "seed": seed}
    y = None
    for i in range(3):
        x = eval(b[f"x{i}"]["value"], ns).astype(np.complex128)
        g, cfo, d = (eval(b[k]["value"], ns) for k in (f"g{i}", f"cfo{i}", f"d{i}"))
        xi = g * x * np.exp(2j * np.pi * cfo * np.arange(n))         # gain, then the client's rotator
        xi = np.concatenate([np.zeros(d, complex), xi])              # then its delay
        y = xi if y is None else y[:min(len(y), len(xi))] + xi[:min(len(y), len(xi))]
    return y


def _run_loopback(compiled, tmp_path, n, noise, rx_cfo, seed=3):
    out = tmp_path / f"lb_{noise}.cf32"
    r = subprocess.run([sys.executable, str(compiled / "ota_loopback.py"), "-n", str(n), "-s", str(seed),
                        "--noise-amp", str(noise), "--rx-cfo", str(rx_cfo), "-o", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return np.fromfile(out, dtype=np.complex64).astype(np.complex128)


def test_loopback_flowgraph_runs_headless_and_superposes_the_clients(compiled, tmp_path):
    n, rx_cfo = 5000, 1e-4
    y = _run_loopback(compiled, tmp_path, n, 0.0, rx_cfo)
    ref = _expected_loopback(n, 3)
    ref = ref * np.exp(2j * np.pi * rx_cfo * np.arange(len(ref)))      # the receiver's own offset
    assert len(y) == len(ref) == n                                     # the shortest branch ends the sum
    assert np.max(np.abs(y - ref)) < 1e-3 * np.max(np.abs(ref))


def test_loopback_flowgraph_adds_awgn_of_the_set_power(compiled, tmp_path):
    n, sigma = 20000, 0.3
    y = _run_loopback(compiled, tmp_path, n, sigma, 0.0)
    ref = _expected_loopback(n, 3)
    z = y - ref
    assert abs(np.mean(np.abs(z) ** 2) / sigma ** 2 - 1) < 0.05       # 20000 samples: std error ~0.7 %
    assert abs(np.mean(z)) < 5 * sigma / np.sqrt(n)
