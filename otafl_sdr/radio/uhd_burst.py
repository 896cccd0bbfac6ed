"""Timed bursts for gr-uhd: the ``tx_time`` / ``tx_sob`` / ``tx_eob`` tags a ``usrp_sink`` obeys, and a
persistent message-driven burst source (a hier block of native blocks) that sends one burst per round.

usrp_sink semantics (gr-uhd 3.10, no length tag name): ``tx_sob`` on the first sample starts a burst,
``tx_time`` = (uint64 full secs, double frac secs) on that same sample makes UHD hold it until the
device time, ``tx_eob`` on the last sample ends the burst (UHD then posts ``burst_ack``).

:class:`TimedBurstSource` turns a numpy burst into PDUs for ``pdu.pdu_to_tagged_stream``: the PDU
metadata become tags on each PDU's first item, so a burst is cut into chunks (the first carrying
``tx_time``/``tx_sob``) followed by a one-sample PDU carrying ``tx_eob``, which lands exactly on the
last sample. The chunks fit the default stream buffers, so a burst of any length passes, and the
flowgraph (with the USRP and its async-message port) keeps running between rounds.
"""
from __future__ import annotations

import math

import numpy as np
import pmt
from gnuradio import gr, pdu

TX_TIME = "tx_time"
TX_SOB = "tx_sob"
TX_EOB = "tx_eob"
LENGTH_TAG = "packet_len"          # pdu_to_tagged_stream's own tag; usrp_sink ignores it (no length tag name)
DEFAULT_CHUNK = 2048               # samples per PDU (well inside the default 8192-item buffer)


def split_time(t: float | tuple[int, float]) -> tuple[int, float]:
    """Seconds -> (full secs, frac secs) as UHD's time_spec_t holds them; a tuple passes through."""
    if isinstance(t, tuple):
        secs, frac = int(t[0]), float(t[1])
    else:
        if not math.isfinite(t) or t < 0:
            raise ValueError(f"burst time must be a finite time >= 0 s, got {t!r}")
        secs = int(math.floor(t))
        frac = float(t - secs)
    if secs < 0 or not 0.0 <= frac < 1.0:
        raise ValueError(f"burst time ({secs}, {frac}) is not (secs >= 0, 0 <= frac < 1)")
    return secs, frac


def time_pmt(t: float | tuple[int, float]):
    """The ``tx_time`` value: a PMT tuple (uint64 full secs, double frac secs)."""
    secs, frac = split_time(t)
    return pmt.make_tuple(pmt.from_uint64(secs), pmt.from_double(frac))


def pmt_time(value) -> float:
    """Inverse of :func:`time_pmt` (also reads ``rx_time`` tags): seconds as a float."""
    return float(pmt.to_uint64(pmt.tuple_ref(value, 0))) + pmt.to_double(pmt.tuple_ref(value, 1))


def _tag(offset: int, key: str, value) -> gr.tag_t:
    t = gr.tag_t()
    t.offset = int(offset)
    t.key = pmt.intern(key)
    t.value = value
    t.srcid = pmt.intern("otafl_burst")
    return t


def burst_tags(n: int, t0: float | tuple[int, float] | None) -> list[gr.tag_t]:
    """Tags for an ``n``-sample burst in a vector_source: tx_sob (+ tx_time if t0) on 0, tx_eob on n-1."""
    if n < 1:
        raise ValueError("a burst needs at least one sample")
    tags = [_tag(0, TX_SOB, pmt.PMT_T)]
    if t0 is not None:
        tags.append(_tag(0, TX_TIME, time_pmt(t0)))
    tags.append(_tag(n - 1, TX_EOB, pmt.PMT_T))
    return tags


def burst_pdus(samples: np.ndarray, t0: float | tuple[int, float] | None,
               chunk: int = DEFAULT_CHUNK, end: bool = True) -> list:
    """A burst as a list of PDUs (pmt pairs meta . c32vector) for pdu_to_tagged_stream.

    The first PDU's metadata hold tx_sob (and tx_time if t0 is given); the last PDU is the final sample
    alone with tx_eob. Sample order and values are kept exactly (complex64). ``end=False``: no tx_eob, the
    burst stays open (on UHD's simulator only: the first part of an exchange whose second part the host
    makes from what it receives, UhdAir._capture; a real radio would underflow)."""
    x = np.ascontiguousarray(samples, dtype=np.complex64).ravel()
    n = x.size
    if n < 1:
        raise ValueError("a burst needs at least one sample")
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    first = pmt.dict_add(pmt.make_dict(), pmt.intern(TX_SOB), pmt.PMT_T)
    if t0 is not None:
        first = pmt.dict_add(first, pmt.intern(TX_TIME), time_pmt(t0))
    if not end:
        return [pmt.cons(first if start == 0 else pmt.make_dict(), pmt.init_c32vector(x[start:start + chunk].size,
                                                                                      x[start:start + chunk]))
                for start in range(0, n, chunk)]
    last = pmt.dict_add(pmt.make_dict(), pmt.intern(TX_EOB), pmt.PMT_T)
    if n == 1:
        return [pmt.cons(pmt.dict_add(first, pmt.intern(TX_EOB), pmt.PMT_T), pmt.init_c32vector(1, x))]
    pdus = []
    body = x[:-1]
    for k, start in enumerate(range(0, body.size, chunk)):
        part = body[start:start + chunk]
        meta = first if k == 0 else pmt.make_dict()
        pdus.append(pmt.cons(meta, pmt.init_c32vector(part.size, part)))
    pdus.append(pmt.cons(last, pmt.init_c32vector(1, x[-1:])))
    return pdus


class TimedBurstSource(gr.hier_block2):
    """Output: complex stream of timed bursts for a usrp_sink. ``send(samples, t0)`` queues one burst.

    Wraps ``pdu.pdu_to_tagged_stream`` (native); Python only posts the burst's PDUs."""

    def __init__(self, chunk: int = DEFAULT_CHUNK):
        gr.hier_block2.__init__(self, "timed_burst_source", gr.io_signature(0, 0, 0),
                                gr.io_signature(1, 1, gr.sizeof_gr_complex))
        self.chunk = int(chunk)
        self.p2s = pdu.pdu_to_tagged_stream(gr.types.complex_t, LENGTH_TAG)
        self.connect(self.p2s, self)

    def send(self, samples: np.ndarray, t0: float | tuple[int, float] | None, end: bool = True) -> int:
        """Queue one burst (starting at device time t0, or at once if None; ``end=False``: left open, see
        :func:`burst_pdus`); returns its length."""
        pdus = burst_pdus(samples, t0, self.chunk, end)
        port = pmt.intern("pdus")
        blk = self.p2s.to_basic_block()
        for p in pdus:
            blk._post(port, p)
        return int(np.size(samples))
