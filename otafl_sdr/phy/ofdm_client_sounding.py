"""Per-client sounding of an OFDM round (issue 34, item 2 for ``phy.waveform = "ofdm"``): every client's
residual phase, carrier offset and gain, each with its standard error, from OFDM reference symbols sent in
slots of its own after the round's frame. Reference symbols only, sent whatever the client's data: a
client's part depends on planned quantities alone (its pre-equalisation c / H~_ik and the round's common
level).

Why: the OFDM receiver (phy/ofdm.demodulate) equalises the *composite* reference, sum_i c H_ik / H~_ik, and
its pilots track the composite's common phase; what costs the coherent sum is a client whose own link moved
against the others (an LO phase at a retune, a cable, a drift), which the composite cannot name. Here each
client's link is read alone.

Layout (OFDM symbols, each with its prefix; K clients, B = ``block`` identical symbols per block, S =
``spacing`` silent symbols):

    [A_0 A_1 ... A_{K-1} | S silent | B_0 B_1 ... B_{K-1}]      (A_i, B_i: B symbols each)

Client i sends X_k ref_ik b on its own subcarriers k (those it sends its reference on, ref_ik != 0) in its A
and B blocks, nothing elsewhere; X_k a fixed unit QPSK sequence over the occupied subcarriers, ref_ik = c /
H~_ik the pre-equalisation of its frame's reference (power/ofdm_plan.ofdm_reference), b a level common to all
clients (the radio's choice, radio/uhd_ofdm.py: the sounding carries no data, so its level is a planned
constant). On a link that holds its calibration client i's symbols arrive as c b X_k on every k.

Estimates (``measure``; Y_mk the unitary-FFT readings with the receiver's CFO, timing and window backoff, as
the frame's): R_mk = Y_mk / (c b X_k) on client i's subcarriers (N_i of them); one delay fitted to its block
average (the window's backoff and any residual timing are a linear phase over k, phy/ofdm.delay_and_gain) and
taken out; z_m = mean_k R_mk e^{+j 2 pi f_k tau / N} per symbol, g_A, g_B the block means. Then

    phase_i  = arg(g_B,i) - arg(g_B,c),   g_B,c = sum_j N_j g_B,j / sum_j N_j   (relative to the composite;
               each g_B,j carried with its own offset to the B group's centre, so all at one instant)
    gain_i   = 20 log10 |mean(g_A, g_B)| dB (against the planned arrival c b: 0 when calibrated)
    offset_i: the coarse one from the phase advance over one symbol inside each block (L samples, +- rate /
              (2 L)), resolved to the A -> B lever D = (K B + S) L samples: +- rate / (2 D)

with sigma^2 per real coordinate read on the silent symbols, sigma_phi = sqrt(sigma^2 / (c^2 b^2 N_i B)) /
|g| per block (the gain's in dB 20 / ln 10 of it), the offset's sqrt(sigma_A^2 + sigma_B^2) / (2 pi D) x rate;
the relative phase's error sqrt((1 - w_i)^2 s_i^2 + sum_{j != i} w_j^2 s_j^2), w_j = N_j |g_j| / sum N |g|.
The offset too is stated against the composite's (the weighted mean sum_j w_j nu_j): the receiver takes the
common offset out (the frame's Schmidl-Cox estimate, then its pilots track the common phase), so what costs
the sum is a client's offset against the others; on UHD's simulator the frame's estimate is several Hz off
(its own noise over two training symbols), which every client would otherwise show.

At the defaults (B = 2, S = 40, 80-sample symbols, three clients, 1 MS/s): D = 3,680 samples, +- 136 Hz
without ambiguity; at 30 dB per subcarrier over 48 subcarriers a block's phase is 2.3 mrad, the offset 0.14 Hz.

Shapes: a client's part ``grid(i, ref_row, level)`` (n_symbols, U) complex; ``measure(Y, ...)`` takes Y
(n_symbols, U) and ``senders`` (K, U) bool."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from otafl_sdr.phy.ofdm import OfdmLayout, delay_and_gain

BLOCK = 2                  # identical OFDM symbols per block (the coarse offset's phase advance)
SPACING = 40               # silent symbols between the A and B groups: the lever, and the noise floor
SEQUENCE_SEED = 34         # the fixed QPSK sequence X_k (never the training's Zadoff-Chu: no timing confusion)
DB_PER_NEPER = 20.0 / math.log(10.0)


@dataclass(frozen=True)
class OfdmSounding:
    """The sounding for ``clients`` clients on layout ``lay`` (module doc)."""

    lay: OfdmLayout
    clients: int
    block: int = BLOCK
    spacing: int = SPACING

    @cached_property
    def sequence(self) -> np.ndarray:
        """(U,) the unit QPSK X_k."""
        q = np.random.default_rng(SEQUENCE_SEED).integers(0, 4, self.lay.used)
        return np.exp(1j * np.pi / 4 * (2 * q + 1))

    @property
    def n_symbols(self) -> int:
        return 2 * self.clients * self.block + self.spacing

    @property
    def n_samples(self) -> int:
        return self.n_symbols * self.lay.symbol_len

    def a_row(self, i: int) -> int:
        return int(i) * self.block

    def b_row(self, i: int) -> int:
        return self.clients * self.block + self.spacing + int(i) * self.block

    @property
    def lever(self) -> int:
        """D: samples from a client's A block to its B block (the same for every client)."""
        return (self.clients * self.block + self.spacing) * self.lay.symbol_len

    def b_centre(self) -> float:
        """The instant (samples from the sounding's start) every client's phase is referred to: the B group's
        centre."""
        return (self.b_row(0) + self.clients * self.block / 2) * self.lay.symbol_len

    def unambiguous_hz(self, rate: float) -> float:
        """The offset the A -> B lever resolves without ambiguity: +- rate / (2 D)."""
        return float(rate) / (2.0 * self.lever)

    def noise_rows(self) -> slice:
        """The silent symbols the floor is read on (the first one left out: the last A block's channel tail)."""
        first = self.clients * self.block
        return slice(first + 1, first + self.spacing)

    def grid(self, i: int, ref_row: np.ndarray, level: float = 1.0) -> np.ndarray:
        """(n_symbols, U) client i's subcarrier symbols: X_k ref_ik ``level`` in its A and B blocks."""
        out = np.zeros((self.n_symbols, self.lay.used), np.complex128)
        row = self.sequence * np.asarray(ref_row, np.complex128) * float(level)
        for r0 in (self.a_row(i), self.b_row(i)):
            out[r0:r0 + self.block] = row
        return out

    def measure(self, Y: np.ndarray, senders: np.ndarray, amplitude: float, rate: float,
                phase_noise=None) -> list[dict | None]:
        """Per client {phase_rad, phase_std, cfo_hz, cfo_std_hz, gain_db, gain_db_std, delay_samples} (module
        doc), None for a client that sent no reference; ``Y`` (n_symbols, U) the readings, ``senders`` (K, U)
        where each client sends, ``amplitude`` c b (the planned arrival), ``rate`` samples / s;
        ``phase_noise`` (K,) each link's Wiener phase variance per sample (its calibration's): the A -> B
        advance over ``lever`` samples carries phase_noise x lever beside the groups' thermal errors."""
        Y = np.asarray(Y, np.complex128)
        S = np.asarray(senders, bool)
        if Y.shape != (self.n_symbols, self.lay.used) or S.shape != (self.clients, self.lay.used):
            raise ValueError(f"OFDM sounding: readings {Y.shape} / senders {S.shape} do not fit "
                             f"({self.n_symbols}, {self.lay.used}) / ({self.clients}, {self.lay.used})")
        noise = Y[self.noise_rows()]
        sigma2 = max(float(np.mean(np.abs(noise) ** 2)) / 2.0, 1e-30)            # per real coordinate
        R = Y / (float(amplitude) * self.sequence[None, :]) if amplitude > 0 else np.zeros_like(Y)
        L, D, B = self.lay.symbol_len, self.lever, self.block
        blocks = []
        for i in range(self.clients):
            on = S[i]
            n_i = int(np.count_nonzero(on))
            if n_i == 0 or amplitude <= 0:
                blocks.append(None)
                continue
            a, b = R[self.a_row(i):self.a_row(i) + B], R[self.b_row(i):self.b_row(i) + B]
            w = on.astype(np.float64)
            _, ramp = delay_and_gain(np.where(on, np.mean(np.concatenate([a, b]), axis=0), 0.0), self.lay, w)
            za = (a * np.conj(ramp)[None, :])[:, on].mean(axis=1)                  # (B,) per symbol
            zb = (b * np.conj(ramp)[None, :])[:, on].mean(axis=1)
            blocks.append((n_i, za, zb, ramp))
        out: list[dict | None] = []
        for i, blk in enumerate(blocks):
            if blk is None:
                out.append(None)
                continue
            n_i, za, zb, ramp = blk
            q = 0.0 if phase_noise is None else max(float(phase_noise[i]), 0.0)
            ga, gb = complex(za.mean()), complex(zb.mean())
            mag_a, mag_b = max(abs(ga), 1e-300), max(abs(gb), 1e-300)
            s_a = math.sqrt(sigma2 / (float(amplitude) ** 2 * n_i * B)) / mag_a
            s_b = math.sqrt(sigma2 / (float(amplitude) ** 2 * n_i * B)) / mag_b
            lag = complex(np.sum(za[1:] * np.conj(za[:-1])) + np.sum(zb[1:] * np.conj(zb[:-1])))
            coarse = math.atan2(lag.imag, lag.real) / (2 * math.pi * L)            # cycles / sample
            turned = math.atan2((gb * ga.conjugate()).imag, (gb * ga.conjugate()).real) - 2 * math.pi * coarse * D
            nu = coarse + math.remainder(turned, 2 * math.pi) / (2 * math.pi * D)
            mag = 0.5 * (mag_a + mag_b)
            slope = float(np.angle(np.sum(ramp[1:] * np.conj(ramp[:-1]))))         # -2 pi tau / N per subcarrier
            # the phase carried to the B group's centre with the client's own offset: every client at one instant
            gb_c = gb * complex(np.exp(2j * np.pi * nu * (self.b_centre() - (self.b_row(i) + B / 2) * L)))
            out.append({"client": i, "phase_rad": math.atan2(gb_c.imag, gb_c.real), "phase_std": s_b,
                        "cfo_hz": nu * float(rate), "cfo_std_hz": math.sqrt(s_a ** 2 + s_b ** 2 + q * D) / (2 * math.pi * D)
                        * float(rate),
                        "gain_db": DB_PER_NEPER * math.log(mag), "gain_db_std": DB_PER_NEPER * math.hypot(s_a, s_b) / 2,
                        "delay_samples": -slope * self.lay.fft / (2 * math.pi), "_g": gb_c, "_n": n_i})
        return _relative_to_composite(out)


def _relative_to_composite(est: list[dict | None]) -> list[dict | None]:
    """Each client's phase and offset against the composite's (module doc), with their standard errors: for
    a figure x_i of standard error s_i, x_i - sum_j w_j x_j has sqrt((1 - w_i)^2 s_i^2 + sum_{j != i} w_j^2
    s_j^2) (the phases' composite is the argument of sum_j N_j g_j, to first order sum_j w_j phi_j). A lone
    sender is its own composite: its phase and offset read 0 +- 0 by construction, not as a measurement, so
    its estimate says ``alone`` (its gain is still measured)."""
    live = [e for e in est if e is not None]
    if not live:
        return est
    weights = np.array([e["_n"] * abs(e["_g"]) for e in live], np.float64)
    weights = weights / max(float(weights.sum()), 1e-300)
    comp = complex(np.sum([e["_n"] * e["_g"] for e in live]))
    ref = math.atan2(comp.imag, comp.real)
    common = float(np.sum(weights * np.array([e["cfo_hz"] for e in live])))

    def relative_std(s: np.ndarray, j: int) -> float:
        return math.sqrt((1 - weights[j]) ** 2 * s[j] ** 2 + float(np.sum(np.delete(weights, j) ** 2 * np.delete(s, j) ** 2)))
    s_phase = np.array([e["phase_std"] for e in live])
    s_cfo = np.array([e["cfo_std_hz"] for e in live])
    for j, e in enumerate(live):
        e["phase_rad"] = math.remainder(e["phase_rad"] - ref, 2 * math.pi)
        e["phase_std"] = relative_std(s_phase, j)
        e["cfo_hz"] = e["cfo_hz"] - common
        e["cfo_std_hz"] = relative_std(s_cfo, j)
        del e["_g"], e["_n"]
        if len(live) == 1:
            e["alone"] = True
    return est


__all__ = ["BLOCK", "SPACING", "OfdmSounding"]
