"""Frame layout: [ ZC | ZC | P payload | pilot | P payload | pilot | ... | rest | pilot ].

Pilots are boosted (amplitude beta = sqrt(N_preamble / N_pilots), within [1, PILOT_MAX_BOOST]) so that
they carry as much reference energy as the preamble: the phase and frequency the receiver tracks over a
long burst come from the pilots, and their error adds to the aggregate's (~ E|s|^2 / (2 E_pilots) of
the noise). The preamble is a Zadoff-Chu sequence sent twice: a ZC chirp confuses a fractional timing offset with a
frequency offset (the correlation ridge), while the phase advance between two identical copies gives
the frequency offset whatever the timing (Schmidl-Cox); with the CFO removed, the correlation peak gives
an unbiased timing.

A pilot follows every ``pilot_spacing`` payload symbols and one more closes the last (partial) block,
so the receiver interpolates the phase over the whole burst instead of extrapolating it. The preamble
and pilots carry the pre-equalised reference (see :mod:`otafl_sdr.phy.reference`); the payload carries
the client's analog symbols alpha_i s(u_i) (paper 000 eq. 10)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from otafl_sdr.phy.zadoff_chu import zadoff_chu

ZC_ROOT = 1          # preamble root; pilots reuse the same sequence cyclically
PREAMBLE_REPEATS = 2
PILOT_MAX_BOOST = 4.0  # pilot amplitude cap (12 dB above the preamble's)


@dataclass(frozen=True)
class FrameLayout:
    """Index map of one frame of ``n_symbols`` payload symbols.

    ``zc_len`` is the Zadoff-Chu length (``phy.preamble_len``); the preamble holds PREAMBLE_REPEATS
    copies (``preamble_len`` symbols). Attributes: ``n_frame`` symbols in all, ``payload_idx`` (n,),
    ``pilot_idx`` (n_pilots,); ``preamble`` (preamble_len,) unit-modulus and ``pilots`` (n_pilots,) of
    modulus ``pilot_amplitude`` reference values; ``reference_energy`` their total energy."""

    n_symbols: int
    zc_len: int
    pilot_spacing: int

    @property
    def preamble_len(self) -> int:
        return PREAMBLE_REPEATS * self.zc_len

    @property
    def n_pilots(self) -> int:
        if self.pilot_spacing <= 0 or self.n_symbols == 0:
            return 0
        return -(-self.n_symbols // self.pilot_spacing)

    @property
    def n_frame(self) -> int:
        return self.preamble_len + self.n_symbols + self.n_pilots

    @property
    def n_reference(self) -> float:
        """Energy of the unit reference in symbol units (what ``reference_gains`` takes): the number of
        reference symbols with each pilot counted beta^2 times; same as ``reference_energy``."""
        return self.reference_energy

    @cached_property
    def payload_idx(self) -> np.ndarray:
        k = np.arange(self.n_symbols, dtype=np.int64)
        if self.n_pilots:
            k = k + k // self.pilot_spacing            # one pilot slot after each full block
        return self.preamble_len + k

    @cached_property
    def pilot_idx(self) -> np.ndarray:
        if not self.n_pilots:
            return np.zeros(0, dtype=np.int64)
        P = self.pilot_spacing
        j = np.arange(self.n_pilots, dtype=np.int64)
        idx = self.preamble_len + (j + 1) * (P + 1) - 1
        idx[-1] = self.n_frame - 1                      # the closing pilot after a partial block
        return idx

    @cached_property
    def zc(self) -> np.ndarray:
        return zadoff_chu(self.zc_len, ZC_ROOT)

    @cached_property
    def preamble(self) -> np.ndarray:
        return np.tile(self.zc, PREAMBLE_REPEATS)

    @property
    def pilot_amplitude(self) -> float:
        if not self.n_pilots:
            return 0.0
        return float(np.clip(np.sqrt(self.preamble_len / self.n_pilots), 1.0, PILOT_MAX_BOOST))

    @property
    def reference_energy(self) -> float:
        """Energy of the unit reference (preamble + pilots) in symbol-energy units."""
        return self.preamble_len + self.n_pilots * self.pilot_amplitude ** 2

    @cached_property
    def pilots(self) -> np.ndarray:
        return self.pilot_amplitude * self.zc[np.arange(self.n_pilots) % self.zc_len]

    def reference(self) -> np.ndarray:
        return np.concatenate([self.preamble, self.pilots])

    def build(self, symbols: np.ndarray, ref_gain=1.0) -> np.ndarray:
        """(..., n) payload symbols and (...,) ref_gain -> (..., n_frame) frame symbols (complex128)."""
        symbols = np.asarray(symbols)
        if symbols.shape[-1] != self.n_symbols:
            raise ValueError(f"expected {self.n_symbols} payload symbols, got {symbols.shape[-1]}")
        g = np.asarray(ref_gain, dtype=np.complex128)[..., None]
        out = np.empty(symbols.shape[:-1] + (self.n_frame,), dtype=np.complex128)
        out[..., :self.preamble_len] = g * self.preamble
        out[..., self.payload_idx] = symbols
        if self.n_pilots:
            out[..., self.pilot_idx] = g * self.pilots
        return out

    def write_reals(self, out: np.ndarray, reals: np.ndarray, ref_gain) -> None:
        """Pack and frame in one pass: ``out`` (..., n_frame) complex64/complex128 (a view is fine)
        receives pack_reals(reals) in the payload slots and ref_gain x reference in the reference slots
        (same result as ``build(pack_reals(reals), ref_gain)``, without complex temporaries: the reals
        are written pairwise into the real view of the payload blocks). ``reals``: (..., d), d <= 2n."""
        reals = np.asarray(reals)
        d = reals.shape[-1]
        n, P = self.n_symbols, self.pilot_spacing
        if not 2 * n - 1 <= d <= 2 * n:
            raise ValueError(f"{d} reals do not fill {n} symbols")
        if out.shape[-1] != self.n_frame:
            raise ValueError(f"expected a frame of {self.n_frame} symbols, got {out.shape[-1]}")
        ftype = np.float32 if out.dtype == np.complex64 else np.float64
        Np = self.preamble_len
        if self.n_pilots:
            nb = n // P                                                   # full blocks
            if nb:
                blocks = out[..., Np:Np + nb * (P + 1)].reshape(out.shape[:-1] + (nb, P + 1))[..., :P]
                blocks.view(ftype)[...] = reals[..., :2 * nb * P].reshape(reals.shape[:-1] + (nb, 2 * P))
            start, done = Np + nb * (P + 1), nb * P
        else:
            start, done = Np, 0
        rest = n - done                                                   # symbols of the last block
        if rest:
            tail = out[..., start:start + rest].view(ftype)
            tail[..., :d - 2 * done] = reals[..., 2 * done:]
            tail[..., d - 2 * done:] = 0
        g = np.asarray(ref_gain, dtype=np.complex128)[..., None]
        out[..., :Np] = g * self.preamble
        if self.n_pilots:
            out[..., self.pilot_idx] = g * self.pilots

    def payload_mask(self) -> np.ndarray:
        """(n_frame,) float64: 1 in payload slots, 0 in reference slots (where the jammer stays silent)."""
        m = np.zeros(self.n_frame)
        m[self.payload_idx] = 1.0
        return m

    def payload(self, frame: np.ndarray) -> np.ndarray:
        return frame[..., self.payload_idx]
