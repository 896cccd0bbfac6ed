"""Per-client sounding: the first part of a coherent round (issue 34, item 2), reference symbols only.

A coherent uhd round is one timed capture in two parts. First every client sends, in slots of its own
(orthogonal in time: the others are silent), a known reference block twice: block A in the first group, block
B in the second, ``spacing`` symbols later. From the two the receiver measures each client's residual phase
(at its B block) and carrier offset (the phase advance from A to B, resolved by the coarse offset within the
blocks), with their standard errors (calibration/client_coherence.py). Then, ``feedback gap`` samples after
the sounding, comes the round's payload frame (phy/modem.py), each client's burst pre-compensated with what
its own slots measured (calibration/coherence_loop.py). The slots carry no client data and are sent whatever
the data: a client's sounding depends on planned quantities only (its reference gain c / h_i).

Layout (symbols; L = ``block``, g = ``gap`` silent symbols after every block so that the RRC tails of one
block do not reach the next; K clients):

    [A_0 g A_1 g ... A_{K-1} g | spacing (silent) | B_0 g B_1 g ... B_{K-1} g]

A_i starts at a_i = i (L + g), B_i at b_i = K (L + g) + spacing + i (L + g); n_frame = 2 K (L + g) + spacing.
The silent ``spacing`` symbols give the receiver its noise level. The reference is a Zadoff-Chu sequence of
prime length (root 7, the payload preamble's is root 1, so neither is mistaken for the other). Shaped like the
payload frame (RRC, ``phy.sps``, ``phy.guard`` silent samples each side), so symbol k's pulse peaks at sample
guard + k sps + (ntaps - 1) / 2 of the part.

The carrier offset's standard error from two blocks Delta = b_i - a_i symbols apart is
sqrt(var_A + var_B) / (2 pi Delta T_sym) (phase variances of the blocks, var = noise_var / (c^2 L) per block);
its range without ambiguity is +- 1 / (2 Delta T_sym) (the coarse offset within the blocks resolves it while
that is well above the coarse estimate's own standard error). At the defaults (L = 61, g = 8, spacing = 1000,
sps 2, 1 MS/s, three clients): Delta = 3207 symbols = 6.4 ms, +- 78 Hz, and 0.08 Hz at a 28 dB reference; the
transmitter's phase noise over the lever adds more (the lab's 1.2e-4 rad / sqrt(sample): 0.24 Hz), which a
longer lever would reduce as 1 / sqrt(Delta) (1,000 symbols: 0.44 Hz in all).

Shapes: a client's part ``(n_samples,)`` complex; ``symbols(capture, first)`` (n_frame,) complex."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from otafl_sdr.phy.pulse_shaping import matched_filter, rrc_taps, shape
from otafl_sdr.phy.zadoff_chu import zadoff_chu

BLOCK = 61              # reference symbols per block (prime: a Zadoff-Chu length)
ROOT = 7                # the sounding's Zadoff-Chu root (the payload preamble uses root 1)
GAP = 8                 # silent symbols after each block (the RRC pair's reach at span 8)
SPACING = 3000          # silent symbols between the A and B groups (the offset's lever arm; the noise)
TIMING_SEARCH = 8       # samples each side of the scheduled start the receiver searches


@dataclass(frozen=True)
class SoundingLayout:
    """The sounding part for ``clients`` clients; ``sps``, ``rolloff``, ``span``, ``guard`` as ``phy``."""

    clients: int
    sps: int = 2
    rolloff: float = 0.35
    span: int = 8
    guard: int = 64
    block: int = BLOCK
    gap: int = GAP
    spacing: int = SPACING

    @classmethod
    def for_phy(cls, clients: int, phy, spacing: int = SPACING) -> "SoundingLayout":
        return cls(int(clients), int(phy.sps), float(phy.rolloff), int(phy.rrc_span), int(phy.guard),
                   spacing=int(spacing))

    @cached_property
    def taps(self) -> np.ndarray:
        return rrc_taps(self.sps, self.rolloff, self.span)

    @cached_property
    def reference(self) -> np.ndarray:
        """(L,) the unit-modulus reference every client sends in its blocks."""
        return zadoff_chu(self.block, ROOT)

    @property
    def stride(self) -> int:
        return self.block + self.gap

    @property
    def n_frame(self) -> int:
        return 2 * self.clients * self.stride + self.spacing

    @property
    def n_samples(self) -> int:
        """Samples of one client's part (guards included): what ``burst`` returns."""
        return (self.n_frame - 1) * self.sps + len(self.taps) + 2 * self.guard

    def a_start(self, i: int) -> int:
        return int(i) * self.stride

    def b_start(self, i: int) -> int:
        return self.clients * self.stride + self.spacing + int(i) * self.stride

    @property
    def lever(self) -> int:
        """Delta = b_i - a_i (symbols), the same for every client."""
        return self.clients * self.stride + self.spacing

    def peak_sample(self, symbol: float) -> float:
        """The sample (from the part's first) where frame symbol ``symbol``'s pulse peaks."""
        return self.guard + float(symbol) * self.sps + (len(self.taps) - 1) / 2

    def b_centre_sample(self, i: int) -> float:
        """The sample (from the part's first) of the centre of client i's B block: where its phase is measured."""
        return self.peak_sample(self.b_start(i) + (self.block - 1) / 2)

    def noise_slice(self) -> slice:
        """The silent symbols between the groups, away from the blocks' tails."""
        lo = self.clients * self.stride + self.gap
        return slice(lo, lo + max(self.spacing - 2 * self.gap, 1))

    def frame(self, i: int, ref_gain: complex) -> np.ndarray:
        """(n_frame,) client i's symbols: its A and B blocks times ``ref_gain``, zeros elsewhere."""
        out = np.zeros(self.n_frame, dtype=np.complex128)
        if ref_gain:
            for s in (self.a_start(i), self.b_start(i)):
                out[s:s + self.block] = complex(ref_gain) * self.reference
        return out

    def burst(self, i: int, ref_gain: complex) -> np.ndarray:
        """(n_samples,) client i's part: guard, its RRC-shaped frame, guard."""
        shaped = shape(self.frame(i, ref_gain), self.taps, self.sps)
        out = np.zeros(self.n_samples, dtype=np.complex128)
        out[self.guard:self.guard + len(shaped)] = shaped
        return out

    def symbols(self, capture: np.ndarray, first: int) -> np.ndarray:
        """(n_frame,) the matched filter's symbols when the part's first sample is capture sample ``first``."""
        x = np.asarray(capture).astype(np.complex128, copy=False)
        return matched_filter(x, self.taps, self.sps, int(first) + self.guard, self.n_frame)

    def find(self, capture: np.ndarray, first: int, search: int = TIMING_SEARCH) -> int:
        """The part's first sample in ``capture`` within +- ``search`` of ``first``: the lag maximising the
        blocks' summed correlation magnitudes (each client's phase its own, so non-coherently)."""
        best, arg = -1.0, int(first)
        r = np.conj(self.reference)
        for lag in range(int(first) - search, int(first) + search + 1):
            z = self.symbols(capture, lag)
            score = sum(abs(np.dot(r, z[s:s + self.block])) for i in range(self.clients)
                        for s in (self.a_start(i), self.b_start(i)))
            if score > best:
                best, arg = score, lag
        return arg

    def unambiguous_hz(self, rate: float) -> float:
        """The residual offset the A-B phase advance measures without ambiguity, +- this (Hz)."""
        return float(rate) / self.sps / (2.0 * self.lever)


def combine_blocks(a: dict, b: dict, lever_symbols: int, symbol_rate: float, phase_noise: float = 0.0) -> dict:
    """One client's estimate from its A and B blocks (client_coherence.client_estimates dicts): the phase and
    gain at B, the offset from the phase advance A -> B (module doc), resolved around the blocks' own coarse
    offsets. Keys: phase_rad, phase_std, cfo_hz, cfo_std_hz, gain_db, gain_db_std (rad, Hz, dB).
    ``phase_noise``: the link's Wiener phase variance per symbol (rad^2; its calibration's, phase_wander.py):
    the advance over the lever then carries phase_noise x lever_symbols beside the blocks' thermal errors (the
    simulated lab's 1.2e-4 rad / sqrt(sample) put the offsets 0.3-0.5 Hz off where 0.08 Hz was stated)."""
    dt = float(lever_symbols) / float(symbol_rate)                      # seconds between the block centres
    coarse = 0.5 * (a["cfo_hz"] + b["cfo_hz"])
    turned = b["phase_rad"] - a["phase_rad"] - 2 * math.pi * coarse * dt
    cfo = coarse + math.remainder(turned, 2 * math.pi) / (2 * math.pi * dt)
    cfo_std = math.sqrt(a["phase_std"] ** 2 + b["phase_std"] ** 2 + max(float(phase_noise), 0.0) * lever_symbols) \
        / (2 * math.pi * dt)
    gain = 0.5 * (a["gain_db"] + b["gain_db"])
    return {"phase_rad": float(b["phase_rad"]), "phase_std": float(b["phase_std"]), "cfo_hz": float(cfo),
            "cfo_std_hz": float(cfo_std), "gain_db": float(gain),
            "gain_db_std": float(math.hypot(a["gain_db_std"], b["gain_db_std"]) / 2)}


__all__ = ["BLOCK", "GAP", "ROOT", "SPACING", "SoundingLayout", "combine_blocks"]
