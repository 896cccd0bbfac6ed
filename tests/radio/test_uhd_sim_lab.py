"""A lab of simulated USRPs joined by one cable (otafl_sdr.radio.uhd_sim_lab): three UHD simulators on
127.0.0.1 .. 127.0.0.3, two transmitters each driven by its own OS process through gr-uhd's ``usrp_sink``
(tests/uhd_sim_lab_tx.py), the receiver (the hub, 127.0.0.1) captured here with gr-uhd's ``usrp_source``.
Real simulators, real libuhd and CHDR streaming; the other simulators' transmit streams reach the hub's
receive stream through a UNIX socket (otafl_sdr.radio.uhd_sim_loopback). Nothing is mocked or skipped."""
from __future__ import annotations

import gc
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from otafl_sdr.radio.uhd_device import find_usrps, is_simulator
from otafl_sdr.radio.uhd_sim_device import NOISE_RMS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from uhd_sim_lab_tx import BURST_SAMPLES, PRIMER_SAMPLES, RATE, lab_burst  # noqa: E402

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.net, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TX = ROOT / "tests" / "uhd_sim_lab_tx.py"
LEAD = 20000            # zeros the hub's capture starts with: they arrive at once, so the test knows it is armed
IDLE_S = 2.0            # how long the hub waits on a silent stream (the lab's default 6 s): every round ends with
                        # one such wait after its bursts; a transmitter answers its line within milliseconds
N_CAP = LEAD + BURST_SAMPLES + 6000


class Receiver:
    """The hub's RX channel 0 in a flowgraph of this process; one NUM_SAMPS_AND_DONE stream command per capture."""

    def __init__(self, args: str):
        from gnuradio import blocks, gr, uhd

        from otafl_sdr.radio.uhd_thread_slack import device_threads_slack
        self.uhd = uhd
        self.tb = gr.top_block("lab_rx")
        with device_threads_slack(True):         # a simulated device: its control thread polls less often
            self.src = uhd.usrp_source(uhd.device_addr_t(args), uhd.stream_args(cpu_format="fc32", channels=[0]),
                                       False)
        self.src.set_samp_rate(RATE)
        self.sink = blocks.vector_sink_c()
        self.tb.connect(self.src, self.sink)
        self.tb.start()

    def capture(self, n: int, when_armed=lambda: None, timeout_s: float = 20.0) -> np.ndarray:
        """Arm a capture of ``n`` samples; once its first (lead) samples arrive, the round is open on the hub:
        ``when_armed()`` then starts the transmitters. Returns the ``n`` samples."""
        uhd = self.uhd
        self.sink.reset()
        cmd = uhd.stream_cmd_t(uhd.stream_mode_t.STREAM_MODE_NUM_SAMPS_AND_DONE)
        cmd.num_samps = int(n)
        cmd.stream_now = True
        self.src.issue_stream_cmd(cmd)
        deadline = time.monotonic() + timeout_s
        while not len(self.sink.data()) and time.monotonic() < deadline:
            time.sleep(0.002)
        assert len(self.sink.data()), "the hub's capture delivered nothing"
        when_armed()
        while len(self.sink.data()) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        x = np.asarray(self.sink.data(), dtype=np.complex64)
        assert len(x) >= n, f"capture: {len(x)} of {n} samples"
        return x[:n]

    def close(self) -> None:
        """Stop and release the device (before the lab stops: a claim left open times out in UHD's task loop)."""
        self.tb.stop()
        self.tb.wait()
        self.tb = self.src = self.sink = None
        gc.collect()


class Transmitter:
    """tests/uhd_sim_lab_tx.py in its own process: one device, one known burst (its seed) per ``send``."""

    def __init__(self, args: str, seed: int):
        self.seed = seed
        self.proc = subprocess.Popen([sys.executable, str(TX), args, str(seed)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                     env=dict(os.environ, UHD_LOG_CONSOLE_LEVEL="fatal"))
        self.lines: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=lambda: [self.lines.put(ln.strip()) for ln in self.proc.stdout],
                                       daemon=True)
        self.reader.start()

    def expect(self, word: str, timeout_s: float = 60.0) -> None:
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            line = None
        if line != word:
            self.proc.kill()
            raise AssertionError(f"transmitter {self.seed}: {line!r} instead of {word!r}: {self.proc.stderr.read()}")

    def send(self, amplitude) -> None:
        self.proc.stdin.write(f"{amplitude}\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Stop the process (its stdin closed: it exits) and close its pipes once its output is read."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(10)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            pipe.close()


def _delay(x: np.ndarray, b: np.ndarray) -> int:
    """Where burst ``b`` starts in ``x`` (the peak of their cross-correlation, by FFT)."""
    n = len(x) + len(b)
    c = np.fft.ifft(np.fft.fft(x, n) * np.conj(np.fft.fft(b, n)))[:len(x) - len(b) + 1]
    return int(np.argmax(np.abs(c)))


def _fit(x: np.ndarray, bursts: list[np.ndarray], delay: int):
    """Least-squares complex amplitude of each burst at ``delay``, and the residual."""
    a = np.zeros((len(x), len(bursts)), np.complex128)
    for k, b in enumerate(bursts):
        a[delay:delay + len(b), k] = b
    coef = np.linalg.lstsq(a, x.astype(np.complex128), rcond=None)[0]
    return coef, x - a @ coef


def _rms(z: np.ndarray) -> float:
    """Noise rms per real coordinate."""
    return float(np.sqrt(np.mean(np.abs(z) ** 2) / 2))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One lab of three simulators (tests/uhd_sim_helpers.fresh_lab, as the uhd_lab fixture) for this module's
    tests: they are rounds on the same streams, so one start (a lab, a receiver and two transmitter processes)
    serves both."""
    from uhd_sim_helpers import fresh_lab
    with fresh_lab(tmp_path_factory.mktemp("uhd-sim-lab"), n=3, lead_samples=LEAD, idle_s=IDLE_S) as lab:
        yield lab


@pytest.fixture(scope="module")
def radios(lab):
    """The lab's receiver (hub) and its two transmitters, each transmitter primed (UhdAir._prime) inside a
    round of its own: the hub's cable listens from its first capture on (a warm-up capture within the lead
    zeros), a transmitter opened after that is known to the hub from its stream's start, and a capture
    waits for every known stream, so both primers land in the priming round, not in a measured one. Made
    once for the module: each test's rounds follow the rounds before them on the same streams."""
    uhd_lab = lab
    found = [find_usrps(a) for a in uhd_lab.device_args]
    assert [[d["serial"] for d in f] for f in found] == [["FA4EDE7"], ["FA4EDE8"], ["FA4EDE9"]]
    assert all(is_simulator(f[0]) for f in found)
    rx = Receiver(uhd_lab.receiver_args)
    txs = []
    try:
        rx.capture(1000)                              # within the lead: the hub's cable listens from now on
        txs = [Transmitter(a, seed) for seed, a in enumerate(uhd_lab.device_args[1:], start=1)]
        for t in txs:
            t.expect("open")
        x = _round(rx, txs, ["prime", "prime"], n=LEAD + PRIMER_SAMPLES)
        assert _rms(x) == pytest.approx(NOISE_RMS, rel=0.1)     # zeros: the primers add nothing
        yield rx, txs
    finally:
        for t in txs:
            t.close()
        rx.close()


def _round(rx: Receiver, txs: list[Transmitter], amplitudes: list, n: int = N_CAP) -> np.ndarray:
    """One capture in which each transmitter with a non-zero amplitude sends its burst (or ``"prime"``)."""
    def go():
        for t, a in zip(txs, amplitudes):
            if a:
                t.send(a)
    x = rx.capture(n, go)
    for t, a in zip(txs, amplitudes):
        if a:
            t.expect("sent")
    return x


def test_bursts_of_two_devices_driven_by_two_processes_superpose_in_the_hubs_capture(radios):
    rx, txs = radios
    t0 = time.monotonic()
    x = _round(rx, txs, [0.5, 0.25])
    round_s = time.monotonic() - t0
    bursts = [lab_burst(t.seed) for t in txs]
    delays = [_delay(x, b) for b in bursts]
    assert delays[0] == delays[1], delays                       # sample-aligned, as with one tx_time
    assert LEAD <= delays[0] <= LEAD + 4, delays                # the simulator's few samples of stream offset
    coef, resid = _fit(x, bursts, delays[0])
    assert abs(coef[0]) == pytest.approx(0.5, rel=0.03) and abs(np.angle(coef[0])) < 0.03
    assert abs(coef[1]) == pytest.approx(0.25, rel=0.03) and abs(np.angle(coef[1])) < 0.03
    assert _rms(resid) == pytest.approx(NOISE_RMS, rel=0.1)     # the hub's receiver noise, nothing else
    assert _rms(x[:LEAD - 10]) == pytest.approx(NOISE_RMS, rel=0.1)
    assert np.max(np.abs(resid)) < 7 * NOISE_RMS
    print(f"lab round: {round_s:.2f} s, |a| = {abs(coef[0]):.4f}, {abs(coef[1]):.4f}, noise {_rms(resid):.5f}")


def test_each_capture_is_a_new_round_that_starts_clean(radios):
    """Round after round on the same streams: each capture holds only what was sent in its own round, from
    the start of the round (no samples of the round before, no stream's position carried over)."""
    rx, txs = radios
    bursts = [lab_burst(t.seed) for t in txs]
    for amplitudes in ([0.5, 0.25], [0.3, 0.0], [0.0, 0.4], [0.2, 0.6]):
        x = _round(rx, txs, amplitudes)
        sent = [k for k, a in enumerate(amplitudes) if a]
        delays = {_delay(x, bursts[k]) for k in sent}
        assert len(delays) == 1, (amplitudes, delays)
        (delay,) = delays
        assert LEAD <= delay <= LEAD + 4, (amplitudes, delay)
        coef, resid = _fit(x, bursts, delay)
        for k, a in enumerate(amplitudes):
            assert abs(coef[k]) == pytest.approx(a, abs=0.03 * max(a, 0.1)), (amplitudes, coef)
        assert _rms(resid) == pytest.approx(NOISE_RMS, rel=0.1), amplitudes
        assert np.max(np.abs(resid)) < 7 * NOISE_RMS, amplitudes  # nothing left over anywhere in the capture


def test_a_transmitter_whose_stream_starts_late_is_waited_for(radios):
    """A loaded host (CI) started one simulator's stream more than the hub's wait on a silent stream (IDLE_S)
    after the round opened, and the hub handed the capture over without it: that client's whole burst lost
    (radio/uhd_sim_loopback.START_S: a known forwarded stream is waited for that long to start)."""
    from otafl_sdr.radio.uhd_sim_loopback import START_S
    rx, txs = radios
    late_s = IDLE_S + 0.3
    assert late_s < START_S - 0.5

    def go():
        txs[0].send(0.5)
        time.sleep(late_s)                     # the second simulator's stream starts past IDLE_S
        txs[1].send(0.25)
    x = rx.capture(N_CAP, go)
    for t in txs:
        t.expect("sent")
    bursts = [lab_burst(t.seed) for t in txs]
    delay = _delay(x, bursts[0])
    assert _delay(x, bursts[1]) == delay                       # still sample-aligned: both from the round's start
    coef, resid = _fit(x, bursts, delay)
    assert abs(coef[0]) == pytest.approx(0.5, rel=0.03) and abs(coef[1]) == pytest.approx(0.25, rel=0.03), coef
    assert _rms(resid) == pytest.approx(NOISE_RMS, rel=0.1)


def test_a_burst_that_reaches_the_hub_before_its_capture_opened_lands_in_that_capture(radios):
    """The host arms the capture, then sends the round's bursts; but the hub's control thread may take the
    stream command in after another simulator's forwarded packets of those bursts arrived (a loaded host, the
    first client the host sends to: CI and full runs lost client 0's pilot or sounding this way). Here the
    first transmitter's burst reaches the hub while no capture is armed at all: it is held for the next
    capture and lands there from the round's start, aligned with the burst sent after arming (with the cable
    adding it into the finished round before, it is absent: coefficient 0)."""
    rx, txs = radios
    time.sleep(0.3)                            # the last capture over on the hub (its stream worker closed)
    txs[0].send(0.5)
    txs[0].expect("sent")
    time.sleep(0.5)                            # forwarded: at the hub before the capture below is armed
    x = rx.capture(N_CAP, lambda: txs[1].send(0.25))
    txs[1].expect("sent")
    bursts = [lab_burst(t.seed) for t in txs]
    delay = _delay(x, bursts[1])
    assert LEAD <= delay <= LEAD + 4, delay
    coef, resid = _fit(x, bursts, delay)
    assert abs(coef[0]) == pytest.approx(0.5, rel=0.03) and abs(coef[1]) == pytest.approx(0.25, rel=0.03), coef
    assert _delay(x, bursts[0]) == delay                       # both from the round's start
    assert _rms(resid) == pytest.approx(NOISE_RMS, rel=0.1)
