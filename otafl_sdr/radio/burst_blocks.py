"""Flowgraph pieces for one round's bursts: client transmitter, jammer, burst sources and the capture.

Every hot path is a native GNU Radio block (no per-sample Python):

* :class:`ClientTx` (hier block, symbols in, samples out): RRC interpolation at ``sps``
  (``filter.interp_fir_filter_ccf`` with the modem's unit-energy taps, so sample energy = symbol
  energy), a complex scale (the client's phase pre-compensation; 0 = silent), an optional delay that
  schedules its start so that its known propagation delay is pre-compensated ("start earlier" =
  everyone else starts later), and an optional rotator that pre-compensates the client's own carrier
  offset (last, so that it turns with the same sample clock as the offset it cancels).
* :class:`JammerTx` (hier block, no input): ``analog.noise_source_c`` at the symbol rate with
  unit variance per real coordinate (n_cj ~ CN(0, 2), eq. 15 of paper 000), gated to the frame's
  payload slots, RRC-shaped like the clients (so it lands on the same symbols and band), times
  alpha_cj. ``reseed`` swaps the noise source for one seeded from the round's generator.
* :func:`burst_source` (``blocks.vector_source_c``) for a few radios, and :class:`StagedBursts`, which
  stages many clients' frames in one memory file (``os.memfd_create``) read by ``blocks.file_source``:
  pybind converts a numpy array into a vector_source element by element (~40 ms per 160k-sample burst,
  2 s per round for 50 clients), a file source reads the same bytes natively.
* :class:`Capture`: ``blocks.file_sink`` into a memory file holding one burst window, read back as
  numpy complex64.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
from gnuradio import analog, blocks, filter, gr

C64 = gr.sizeof_gr_complex
JAMMER_AMPLITUDE = float(np.sqrt(2.0))   # noise_source_c amplitude a gives E|n|^2 = a^2: CN(0, 2)


def _taps(taps: np.ndarray) -> list[float]:
    return [float(t) for t in np.asarray(taps, dtype=np.float64)]


class ClientTx(gr.hier_block2):
    """One client's transmitter: frame symbols (complex, symbol rate) -> baseband samples at ``sps``.

    Parameters: ``taps`` RRC taps (unit energy, from ``Modem.taps``), ``sps``; ``scale`` complex factor
    on every sample (phase pre-compensation; 0 = transmit nothing); ``cfo`` the client's own carrier
    offset in cycles/sample that it pre-compensates (a rotator by -cfo, present when ``with_cfo``);
    ``start`` samples the client waits before its burst (a delay, present when ``with_delay``).
    Chain: interp_fir_filter_ccf(sps, taps) -> multiply_const_cc(scale) -> [delay] -> [rotator]."""

    def __init__(self, taps: np.ndarray, sps: int, scale: complex = 1.0, cfo: float = 0.0, start: int = 0,
                 with_cfo: bool = False, with_delay: bool = False):
        gr.hier_block2.__init__(self, "otafl_client_tx", gr.io_signature(1, 1, C64), gr.io_signature(1, 1, C64))
        self.interp = filter.interp_fir_filter_ccf(int(sps), _taps(taps))
        self.scale = blocks.multiply_const_cc(complex(scale))
        chain = [self, self.interp, self.scale]
        self.delay = None
        if with_delay:
            self.delay = blocks.delay(C64, int(start))
            chain.append(self.delay)
        self.rotator = None
        self._phase_inc = -2 * np.pi * float(cfo)
        if with_cfo:   # after the delay: the pre-rotation runs on the air's clock, like the offset itself
            self.rotator = blocks.rotator_cc(self._phase_inc)
            chain.append(self.rotator)
        chain.append(self)
        self.connect(*chain)

    def set_scale(self, scale: complex) -> None:
        self.scale.set_k(complex(scale))

    def reset_state(self) -> None:
        """A fresh rotator (its phase would carry over from the last run; while stopped)."""
        if self.rotator is None:
            return
        new = blocks.rotator_cc(self._phase_inc)
        prev = self.delay if self.delay is not None else self.scale
        self.disconnect(prev, self.rotator)
        self.disconnect(self.rotator, self)
        self.connect(prev, new)
        self.connect(new, self)
        self.rotator = new


class JammerTx(gr.hier_block2):
    """Cooperative jammer: alpha_cj x RRC-shaped CN(0, 2) symbols in the payload slots of the frame.

    ``mask``: symbol-rate stream (1 in payload slots, 0 elsewhere: ``Modem.jammer_mask``), aligned with
    the clients' frames, as an array or as a finite complex source block (e.g. a file source); the jammer is silent in the reference slots (the reference carries no data, so
    no privacy is lost, and a strong jammer would otherwise bury the preamble), so its energy is
    alpha_cj^2 d per round, E||x_cj||^2 of paper 000. ``start`` delays it like a client's burst.
    The output is finite (len(mask) * sps samples, + ``start``: GNU Radio 3.10's delay block flushes
    its history at the end); ``rewind`` replays an array mask, ``reseed`` swaps the noise
    source for one with a new seed (both while the flowgraph is stopped).
    Chain: noise_source_c x vector_source_c(mask) -> interp_fir_filter_ccf -> multiply_const_cc -> [delay]."""

    def __init__(self, taps: np.ndarray, sps: int, mask: np.ndarray, alpha_cj: float = 0.0, seed: int = 0,
                 start: int = 0):
        gr.hier_block2.__init__(self, "otafl_jammer_tx", gr.io_signature(0, 0, 0), gr.io_signature(1, 1, C64))
        self.noise = analog.noise_source_c(analog.GR_GAUSSIAN, JAMMER_AMPLITUDE, int(seed))
        self.mask = mask if hasattr(mask, "to_basic_block") else burst_source(np.asarray(mask, dtype=np.complex64))
        self.gate = blocks.multiply_cc()
        self.interp = filter.interp_fir_filter_ccf(int(sps), _taps(taps))
        self.gain = blocks.multiply_const_cc(complex(alpha_cj))
        self.connect(self.noise, (self.gate, 0))
        self.connect(self.mask, (self.gate, 1))
        chain = [self.gate, self.interp, self.gain]
        if start:
            self.delay = blocks.delay(C64, int(start))
            chain.append(self.delay)
        chain.append(self)
        self.connect(*chain)

    def set_alpha(self, alpha_cj: float) -> None:
        self.gain.set_k(complex(alpha_cj))

    def rewind(self) -> None:
        self.mask.rewind()

    def reseed(self, seed: int) -> None:
        """New noise source with this seed (call while the flowgraph is stopped)."""
        new = analog.noise_source_c(analog.GR_GAUSSIAN, JAMMER_AMPLITUDE, int(seed))
        self.disconnect(self.noise, (self.gate, 0))
        self.connect(new, (self.gate, 0))
        self.noise = new


def burst_source(stream: np.ndarray) -> blocks.vector_source_c:
    """A finite source of one stream (symbols or samples), complex64."""
    return blocks.vector_source_c(np.ascontiguousarray(stream, dtype=np.complex64))


class StagedBursts:
    """K finite sources of equal-length streams, staged in one memory file and read natively.

    ``stage(streams)`` writes a (K, L) array; ``sources`` are ``blocks.file_source`` blocks reading row i
    (``make_sources()`` builds a fresh set, e.g. for a new top block; ``stage`` re-opens the current
    set). Call while the flowgraph is stopped; ``close`` frees the file."""

    def __init__(self, clients: int, length: int):
        self.clients, self.length = int(clients), int(length)
        self._file, self.path = _memory_file()
        self._write(np.zeros((self.clients, self.length), dtype=np.complex64))
        self.sources = []
        self.make_sources()

    def _write(self, streams: np.ndarray) -> None:
        self._file.seek(0)
        streams.tofile(self._file)
        self._file.flush()

    def make_sources(self) -> list:
        self.sources = [blocks.file_source(C64, self.path, False, i * self.length, self.length)
                        for i in range(self.clients)]
        return self.sources

    def stage(self, streams: np.ndarray) -> None:
        streams = np.ascontiguousarray(streams, dtype=np.complex64)
        if streams.shape != (self.clients, self.length):
            raise ValueError(f"expected streams of shape {(self.clients, self.length)}, got {streams.shape}")
        self._write(streams)
        self.rewind()

    def rewind(self) -> None:
        """Re-open every source at the start of its row (to play the staged streams again)."""
        for i, src in enumerate(self.sources):
            src.open(self.path, False, i * self.length, self.length)

    def close(self) -> None:
        for src in self.sources:
            try:
                src.close()
            except Exception:                          # noqa: BLE001 - best effort on teardown
                pass
        self.sources = []
        if self._file is not None:
            self._file.close()
            self._file = None


def _memory_file():
    """(file object, path) of an anonymous memory file; a tmpfs file that is unlinked at once if
    memfd is unavailable. The path stays valid while the file object is open (/proc/self/fd)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("otafl-bursts")
        f = os.fdopen(fd, "w+b")
        return f, f"/proc/{os.getpid()}/fd/{fd}"
    d = "/dev/shm" if os.path.isdir("/dev/shm") else None
    f = tempfile.NamedTemporaryFile(dir=d, prefix="otafl-bursts-", suffix=".c64")
    return f, f.name


class Capture:
    """The receiver's capture of one burst window: a ``blocks.file_sink`` into a memory file (read back
    with numpy; ``vector_sink_c`` would convert element by element). ``sink`` is the block to connect
    (``make_sink()`` builds a fresh one for a new top block); call ``reset`` before each run of the
    same top block and ``samples`` after it."""

    def __init__(self):
        self._file, self.path = _memory_file()
        self.make_sink()

    def make_sink(self):
        self.sink = blocks.file_sink(C64, self.path, False)
        self.sink.set_unbuffered(False)
        return self.sink

    def reset(self) -> None:
        self.sink.open(self.path)          # truncates

    def samples(self) -> np.ndarray:
        self.sink.close()                  # flushes
        self._file.seek(0)
        return np.fromfile(self._file, dtype=np.complex64)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
