"""One round's OFDM bursts as every transmitter builds them (``phy.waveform = "ofdm"``, issue 26 item 2):
the frame of silent lead symbols, training, payload and silent tail that the loopback air
(radio/loopback_ofdm.py), the zmq airs (radio/zmq_ofdm.py: in process and on the testbed's nodes) and their
receivers share, and each sender's stream of subcarrier symbols in it (``OfdmLayout.grid``'s order, the
input of gr-digital's carrier allocator).

Client i's stream: its payload packed two reals per complex symbol (phy/packing.py) on the round's data
carriers, its pre-equalised reference c / H_ik divided by its per-subcarrier factor alpha_ik (the
transmitter's multiply by alpha_ik then leaves it as c / H_ik), zero where it truncates (alpha_ik = 0). A
payload row holding NaN / inf is sent as zeros at the planned power (never silenced by its data). The
jammer's stream: alpha_cj CN(0, 2) on every payload slot (data carriers of the payload symbols), nothing on
the reference. Everything here is decided by the plan (carriers, n_ofdm, factors), never by the payload."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.phy.packing import pack_reals, symbols_for

TIMING_SLACK = 16      # samples of tail beyond the channel, the receiver's delay and one symbol


@dataclass(frozen=True)
class OfdmFrame:
    """Where the round's OFDM frame sits in every stream: ``lead`` silent symbols, the frame
    (``lay.train`` + ``n_ofdm`` symbols), silent tail symbols, ``symbols`` S in all; ``carriers`` the round's
    data carriers (positions 0..U-1); ``rx_delay`` the emulated receiver delay (samples)."""

    lay: OfdmLayout
    carriers: np.ndarray
    n_ofdm: int
    lead: int
    symbols: int
    rx_delay: int = 0

    @property
    def n_items(self) -> int:
        """Subcarrier symbols per stream (S x U): the transmitter's input."""
        return self.symbols * self.lay.used

    @property
    def n_samples(self) -> int:
        """Samples per stream (S x (N + cp)): every transmitter's output, the channel's, the capture's."""
        return self.symbols * self.lay.symbol_len

    @property
    def search(self) -> int:
        """First-prefix positions the receiver tries: at most L - 1 past the true start (phy/ofdm.demodulate)."""
        return self.lead * self.lay.symbol_len + int(self.rx_delay) + self.lay.symbol_len - 1

    @property
    def burst_samples(self) -> int:
        """Channel uses of the round (guards, training, payload symbols with their prefixes)."""
        return self.lay.burst_samples(self.n_ofdm)

    def frame_rows(self) -> slice:
        return slice(self.lead, self.lead + self.lay.frame_symbols(self.n_ofdm))


def check_carriers(lay: OfdmLayout, carriers) -> np.ndarray:
    """The round's data carriers as received from a peer: a non-empty, strictly increasing list of the
    layout's data positions (never a pilot); ValueError otherwise."""
    c = np.asarray(carriers)
    if c.ndim != 1 or c.size == 0 or c.dtype.kind not in "iu":
        raise ValueError("the round's OFDM data carriers must be a non-empty list of integers")
    c = c.astype(np.int64)
    if np.any(np.diff(c) <= 0) or not np.all(np.isin(c, lay.data_pos)):
        raise ValueError(f"the round's OFDM data carriers must be increasing data positions of the layout "
                         f"(0..{lay.used - 1}, no pilot)")
    return c


def ofdm_frame(lay: OfdmLayout, dim: int, carriers, fir_len: int, rx_delay: int = 0) -> OfdmFrame:
    """The frame of a round carrying ``dim`` reals on ``carriers`` through a channel of ``fir_len`` taps and
    a receiver ``rx_delay`` samples late: a lead covering the guard, a tail covering the guard, the channel,
    the delay and the timing search's slack (one symbol)."""
    carriers = np.asarray(carriers, np.int64)
    n_ofdm = lay.payload_symbols(symbols_for(dim), len(carriers))
    L = lay.symbol_len
    lead = -(-lay.guard // L)
    tail = -(-(lay.guard + int(fir_len) + int(rx_delay) + L + TIMING_SLACK) // L)
    return OfdmFrame(lay, carriers, int(n_ofdm), lead, lead + lay.frame_symbols(n_ofdm) + tail, int(rx_delay))


def client_stream(frame: OfdmFrame, payload_row: np.ndarray, alpha_row: np.ndarray, ref_row: np.ndarray) -> np.ndarray:
    """(S, U) client i's subcarrier symbols (module doc): payload on the data carriers, reference
    ref_ik / alpha_ik (0 where alpha_ik = 0); a non-finite payload row goes as zeros."""
    lay = frame.lay
    row = np.asarray(payload_row, dtype=np.float64)
    if not np.all(np.isfinite(row)):
        row = np.zeros_like(row)
    alpha = np.asarray(alpha_row, np.complex128)
    safe = np.where(alpha != 0, alpha, 1.0)
    out = np.zeros((frame.symbols, lay.used), dtype=np.complex128)
    out[frame.frame_rows()] = lay.grid(pack_reals(row), frame.carriers, frame.n_ofdm,
                                       np.where(alpha != 0, np.asarray(ref_row, np.complex128) / safe, 0.0))
    return out


def jammer_draws(frame: OfdmFrame, rng: np.random.Generator) -> np.ndarray:
    """The jammer's CN(0, 2) draws, one per payload slot (real parts first, then imaginary: the loopback
    air's order from the round's generator)."""
    m = frame.n_ofdm * len(frame.carriers)
    return rng.standard_normal(m) + 1j * rng.standard_normal(m)


def jammer_stream(frame: OfdmFrame, alpha_cj: float, draws: np.ndarray) -> np.ndarray:
    """(S, U) the jammer's subcarrier symbols: alpha_cj x ``draws`` on the payload slots, nothing else."""
    out = np.zeros((frame.symbols, frame.lay.used), dtype=np.complex128)
    out[frame.frame_rows()] = frame.lay.grid(float(alpha_cj) * np.asarray(draws), frame.carriers, frame.n_ofdm)
    return out
