"""Timed burst tags (tx_time / tx_sob / tx_eob) through real GNU Radio blocks."""
import time

import numpy as np
import pmt
import pytest
from gnuradio import blocks, gr

from otafl_sdr.radio.uhd_burst import TimedBurstSource, burst_tags, pmt_time, split_time

pytestmark = [pytest.mark.gnuradio]


def _tag_map(tags):
    return sorted((int(t.offset), pmt.symbol_to_string(t.key), t.value) for t in tags
                  if pmt.symbol_to_string(t.key) != "packet_len")


def test_split_time():
    assert split_time(12.25) == (12, 0.25)
    assert split_time((3, 0.5)) == (3, 0.5)
    with pytest.raises(ValueError):
        split_time(-1.0)
    with pytest.raises(ValueError):
        split_time((1, 1.5))


def test_burst_tags_in_a_vector_source_reach_the_sink():
    x = (np.arange(777) + 1j).astype(np.complex64)
    src = blocks.vector_source_c(x, False, 1, burst_tags(x.size, (41, 0.125)))
    dbg = blocks.tag_debug(gr.sizeof_gr_complex, "burst", "")
    dbg.set_display(False)
    sink = blocks.vector_sink_c()
    tb = gr.top_block()
    tb.connect(src, sink)
    tb.connect(src, dbg)
    tb.run()
    assert np.array_equal(np.array(sink.data()), x)
    for tags in (sink.tags(), dbg.current_tags()):
        got = _tag_map(tags)
        assert [(o, k) for o, k, _ in got] == [(0, "tx_sob"), (0, "tx_time"), (776, "tx_eob")]
        assert pmt_time(got[1][2]) == pytest.approx(41.125)
        assert pmt.to_uint64(pmt.tuple_ref(got[1][2], 0)) == 41      # uint64 full secs as UHD reads them


def _sent(chunk: int, sends: list) -> tuple[np.ndarray, list]:
    """What a TimedBurstSource puts out for ``sends`` [(samples, t0, end)]: the samples and the tags."""
    src = TimedBurstSource(chunk=chunk)
    sink = blocks.vector_sink_c()
    tb = gr.top_block()
    tb.connect(src, sink)
    tb.start()
    try:
        for b, t, end in sends:
            src.send(b, t, end)
        total = sum(b.size for b, _, _ in sends)
        deadline = time.monotonic() + 20
        while len(sink.data()) < total and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        tb.stop()
        tb.wait()
    return np.array(sink.data()), _tag_map(sink.tags())


def test_timed_burst_source_sends_bursts_of_any_length_with_exact_samples():
    rng = np.random.default_rng(1)
    bursts = [(rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
              for n in (50_001, 1, 3)]
    times = [5.5, (6, 0.75), None]
    y, got = _sent(4096, [(b, t, True) for b, t in zip(bursts, times)])
    assert np.array_equal(y, np.concatenate(bursts))
    want = [(0, "tx_sob"), (0, "tx_time"), (50_000, "tx_eob"),
            (50_001, "tx_eob"), (50_001, "tx_sob"), (50_001, "tx_time"),
            (50_002, "tx_sob"), (50_004, "tx_eob")]
    assert [(o, k) for o, k, _ in got] == want
    assert pmt_time(got[1][2]) == pytest.approx(5.5)
    assert pmt_time(got[5][2]) == pytest.approx(6.75)


def test_a_burst_left_open_carries_no_end_of_burst_and_the_next_one_starts_its_own():
    """The first part of a simulator feedback exchange (UhdAir._capture): no tx_eob, samples exact."""
    rng = np.random.default_rng(2)
    first, second = (rng.standard_normal(n).astype(np.complex64) for n in (5_000, 7))
    y, got = _sent(2048, [(first, 1.0, False), (second, 1.5, True)])
    assert np.array_equal(y, np.concatenate([first, second]))
    assert [(o, k) for o, k, _ in got] == [(0, "tx_sob"), (0, "tx_time"), (5_000, "tx_sob"), (5_000, "tx_time"),
                                           (5_006, "tx_eob")]
