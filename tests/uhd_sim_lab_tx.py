"""One transmitter of tests/radio/test_uhd_sim_lab.py, in its own OS process (a testbed node with its own USRP):
opens ``usrp_sink`` on the device address in argv[1] and prints ``open``; then for each line on stdin sends
one burst (no tx_time: the simulator has no device time) and prints ``sent`` once the device has taken it:
``prime`` the 64-sample primer burst of zeros (as ``UhdAir._prime`` does), ``AMPLITUDE`` the burst
``AMPLITUDE * lab_burst(argv[2])``. Ends at end of input."""
from __future__ import annotations

import sys
import time

import numpy as np

RATE = 1e6
BURST_SAMPLES = 4000
PRIMER_SAMPLES = 64


def lab_burst(seed: int, n: int = BURST_SAMPLES) -> np.ndarray:
    """A known unit-modulus (QPSK) burst per transmitter: independent of every other seed's."""
    rng = np.random.default_rng(seed)
    return (np.exp(1j * (np.pi / 4 + np.pi / 2 * rng.integers(0, 4, n)))).astype(np.complex64)


def main() -> int:
    from gnuradio import gr, uhd

    from otafl_sdr.radio.uhd_burst import TimedBurstSource
    from otafl_sdr.radio.uhd_thread_slack import device_threads_slack

    args, seed = sys.argv[1], int(sys.argv[2])
    tb = gr.top_block("lab_tx")
    with device_threads_slack(True):             # a simulated device: its control thread polls less often
        sink = uhd.usrp_sink(uhd.device_addr_t(args), uhd.stream_args(cpu_format="fc32", channels=[0]), "")
    sink.set_samp_rate(RATE)
    source = TimedBurstSource()
    tb.connect(source, sink)
    tb.start()
    taken = 0

    def send(x: np.ndarray) -> None:
        nonlocal taken
        taken += source.send(x, None)
        deadline = time.monotonic() + 10.0
        while sink.nitems_read(0) < taken and time.monotonic() < deadline:
            time.sleep(0.002)
        if sink.nitems_read(0) < taken:
            raise SystemExit(f"{args}: the device took {sink.nitems_read(0)} of {taken} samples")

    print("open", flush=True)
    burst = lab_burst(seed)
    for line in sys.stdin:
        send(np.zeros(PRIMER_SAMPLES, np.complex64) if line.strip() == "prime" else float(line) * burst)
        print("sent", flush=True)
    tb.stop()
    tb.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
