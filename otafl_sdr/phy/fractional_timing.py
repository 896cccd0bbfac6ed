"""The fractional-timing score of a received preamble, built once per segment instead of once per delay.

A receiver finds its fractional timing by maximising, over delays tau, how well the preamble shaped by the
fractionally delayed taps h_tau (``pulse_shaping.delayed_taps``) matches the received segment ``seg``:

    score(tau) = |<s_tau[a:b], seg>|            (s_tau = shape(frame, h_tau, sps), the full convolution)

The shaped frame is linear in the taps: s_tau[n] = sum_j h_tau[j] u[n - j], u the frame upsampled by ``sps``
(zeros between symbols), so with U[n - a, j] = u[n - j] (n in [a, b)) and h_tau real

    <s_tau[a:b], seg> = h_tau . (U^H seg)

:class:`TimingScore` forms U^H seg once; each delay then costs one ``delayed_taps`` and one dot product, where
shaping the whole preamble again (``scipy.signal.upfirdn``) cost a convolution per delay (42 per golden-section
search, one search per carrier-offset candidate of every calibration estimate). The same sums in another
order: equal to about 1e-15 relative (the search's result to about 1e-8 samples, its flat peak)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy.pulse_shaping import delayed_taps


class TimingScore:
    """score(tau) of ``frame`` (symbols) shaped at ``sps`` samples per symbol by ``taps`` (real) delayed by tau
    (``pad`` samples of padding each side, as ``delayed_taps``), against ``seg``: the received samples at the
    shaped template's indices a .. b - 1."""

    def __init__(self, frame: np.ndarray, taps: np.ndarray, sps: int, pad: int, a: int, b: int, seg: np.ndarray):
        frame = np.asarray(frame)
        self.taps, self.pad = np.asarray(taps, dtype=np.float64), int(pad)
        u = np.zeros((len(frame) - 1) * int(sps) + 1, dtype=np.complex128)
        u[::int(sps)] = frame
        idx = np.arange(int(a), int(b))[:, None] - np.arange(len(self.taps) + 2 * self.pad)[None, :]
        inside = (idx >= 0) & (idx < len(u))
        U = np.where(inside, u[np.clip(idx, 0, len(u) - 1)], 0)          # U[n - a, j] = u[n - j]
        seg = np.asarray(seg, dtype=np.complex128)
        if len(seg) != U.shape[0]:
            raise ValueError(f"TimingScore: the segment has {len(seg)} samples, the template {U.shape[0]}")
        self.corr = U.conj().T @ seg

    def __call__(self, tau: float) -> float:
        return float(abs(np.dot(delayed_taps(self.taps, tau, self.pad), self.corr)))


__all__ = ["TimingScore"]
