"""Per-client sounding appended to a round's one burst (issue 34, item 2; ``air.coherence = "measure"``, single
carrier): every client's residual phase, carrier offset and gain, each with its standard error, in
``link_health['clients']`` every round, without a feedback step.

Each sending client's burst continues, after its payload frame and the jammer's slot (``slot`` samples of
silence), with its part of the sounding (phy/client_sounding.SoundingLayout: its reference blocks in slots of
its own, at one level for all clients, radio/uhd_coherent_round.sounding_boost, from the attempt's planned
reference gains only). The part goes through the client's pre-compensation with its frame (one rotation over
the whole burst), so what it reads is the residual the payload carried, a few milliseconds earlier. The
receiver finds the part (``SoundingLayout.find`` around its scheduled sample), reads each client against its
planned arrival h_i g_i b (calibration/coherence_loop.measure_clients), and the per-client loop names events
and raises the ``measure`` alarms (calibration/coherence_loop.measured); nothing is corrected. The sounding
carries no data: reference symbols at a planned level, sent whatever the client's data.

Used by the in-process uhd air's plain round (radio/uhd_air.py) and the testbed's nodes (net/uhd_sounding.py:
the client node builds its part, the server reads the receiver node's capture). One closed burst per radio:
unlike ``"track"`` (radio/uhd_coherent_round.py: sounding, feedback, payload, the sounding an open burst on
UHD's simulator) a radio that dies mid-round leaves no burst open behind it."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.phy.client_sounding import TIMING_SEARCH, SoundingLayout

MAX_PAD = 1 << 20          # samples of silence a client may keep before its part (the jammer's slot: 2^15)


def sounding_part(layout: SoundingLayout, ref_gain: np.ndarray, i: int, slot: int) -> np.ndarray:
    """What client ``i``'s burst continues with after its frame: ``slot`` zeros, then its sounding part at the
    common level b (module doc); ``ref_gain`` (K,) the attempt's planned reference gains g (0: silent)."""
    if not 0 <= int(slot) <= MAX_PAD:
        raise UserError(f"the sounding's slot {slot} is outside 0..{MAX_PAD} samples")
    from otafl_sdr.radio.uhd_coherent_round import sounding_boost
    g = np.asarray(ref_gain, np.complex128)
    boost = sounding_boost(layout, g)
    return np.concatenate([np.zeros(int(slot), np.complex128), layout.burst(int(i), boost * g[int(i)])])


def read_parts(owner, cfg, layout: SoundingLayout, capture: np.ndarray, first: int, h_known, ref_gain: np.ndarray,
               clean: bool, tunes: list | None = None) -> None:
    """Each client's estimate from the parts scheduled at capture sample ``first`` (searched where the frame's
    own timing puts them: ``timing_offset`` samples off its schedule, as the whole burst is) into
    ``owner.health['clients']`` and ``owner.coherence_alarms`` (in place; ``owner``: the in-process air or the
    testbed's server). Nothing when the capture had a fault (``clean`` False), does not hold the parts, or
    the frame was not demodulated (``owner.health`` None). ``tunes``: each client's host tunes, where the
    owner knows them (the in-process air: calibration/coherence_loop.CoherenceLoop.observe)."""
    from otafl_sdr.calibration.coherence_loop import measure_clients, measured
    from otafl_sdr.radio.uhd_coherent_round import link_phase_noise, sounding_boost
    owner.coherence_alarms = []
    capture = np.asarray(capture, np.complex128)
    if not clean or owner.health is None:
        return
    first = int(first) + int(owner.health.get("timing_offset", 0))   # the part is late (early) as its frame was
    if first - TIMING_SEARCH < 0 or first + layout.n_samples + TIMING_SEARCH > len(capture):
        return
    rate = float(cfg.uhd.rate)
    g = np.asarray(ref_gain, np.complex128)
    boost = sounding_boost(layout, g)
    amplitudes = [complex(h * gi * boost) if gi else 0j for h, gi in zip(np.asarray(h_known, np.complex128), g)]
    start = layout.find(capture, int(first))
    est = measure_clients(layout, layout.symbols(capture, start), amplitudes, rate / layout.sps,
                          link_phase_noise(owner, layout.clients))
    owner.health["clients"], owner.coherence_alarms = measured(
        owner, est, [layout.b_centre_sample(i) for i in range(layout.clients)], cfg, rate, layout.unambiguous_hz(rate),
        tunes=tunes)


__all__ = ["MAX_PAD", "read_parts", "sounding_part"]
