"""Per-client sounding on the uhd testbed's single-carrier rounds (issue 34, item 2; ``air.coherence =
"measure"``): every client's residual phase, carrier offset and gain, each with its standard error, read by
the server from the receiver node's capture every round (``link_health['clients']``).

The in-process air sounds before the payload and corrects it within the round (radio/uhd_coherent_round.py:
one process drives every radio, so its feedback is a computation). Over the nodes a correction would need a
message round trip inside the round, so the testbed *measures*: each client's burst continues, after its
payload frame and the jammer's slot (``slot`` samples of silence), with its part of the sounding
(phy/client_sounding.SoundingLayout: its reference blocks in slots of its own, at one level for all clients,
radio/uhd_coherent_round.sounding_boost, from the attempt's planned reference gains only). The part goes
through the client's pre-compensation with its frame (calibration/csi.precompensate over the whole burst),
so what it reads is the residual the payload carried, a few milliseconds earlier. The server finds the part
(``SoundingLayout.find`` around its scheduled sample), reads each client against its planned arrival h_i g_i b
(calibration/coherence_loop.measure_clients) and the per-client loop, in ``measure`` mode, names events and
raises the ``measure`` alarms (net/link_watch.py asks for a recalibration). The sounding carries no data:
reference symbols at a planned level, sent whatever the client's data."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy.client_sounding import TIMING_SEARCH, SoundingLayout


def add_sounding(cfg, clients: int, sends: dict, slot: int, n_cap: int) -> tuple[SoundingLayout | None, int]:
    """(the attempt's sounding layout, the capture's length with it): every ``transmit_at`` told to continue
    its burst with its part after ``slot`` silent samples, every message's capture ``n`` lengthened (in
    place); (None, ``n_cap``) without ``air.coherence = "measure"`` or on OFDM (net/uhd_ofdm_round.py)."""
    if cfg.air.coherence != "measure" or cfg.phy.waveform == "ofdm":
        return None, int(n_cap)
    layout = SoundingLayout.for_phy(clients, cfg.phy)
    n_cap = int(n_cap) + layout.n_samples
    for mtype, fields, _ in sends.values():
        fields["n"] = n_cap
        if mtype == "transmit_at":
            fields.update(sounding=1, slot=int(slot))
    return layout, n_cap


MAX_PAD = 1 << 20          # samples of silence a client is asked to keep before its part (the jammer's slot: 2^15)


def _gains(ref_gains: dict, clients: int) -> np.ndarray:
    """(K,) the attempt's planned reference gains g_i from the message's {"client-i": [re, im]} (0: silent;
    a name that is no client's is ignored)."""
    g = np.zeros(int(clients), np.complex128)
    for name, v in ref_gains.items():
        prefix, _, index = str(name).rpartition("-")
        if prefix == "client" and index.isdigit() and int(index) < clients:
            g[int(index)] = complex(v[0], v[1])
    return g


def client_part(cfg, i: int, ref_gains: dict, slot: int) -> np.ndarray:
    """What client i's burst continues with after its frame: ``slot`` zeros, then its sounding part at the
    common level b (module doc)."""
    from otafl_sdr.errors import UserError
    from otafl_sdr.radio.uhd_coherent_round import sounding_boost
    if not 0 <= int(slot) <= MAX_PAD:
        raise UserError(f"'transmit_at': slot {slot} is outside 0..{MAX_PAD} samples")
    K = int(cfg.data.clients)
    layout = SoundingLayout.for_phy(K, cfg.phy)
    g = _gains(ref_gains, K)
    boost = sounding_boost(layout, g)
    return np.concatenate([np.zeros(int(slot), np.complex128), layout.burst(int(i), boost * g[int(i)])])


def read_clients(air, layout: SoundingLayout, capture: np.ndarray, first: int, h_known, ref_gains: dict,
                 clean: bool) -> None:
    """Each client's estimate from the part scheduled at capture sample ``first`` (searched where the frame's
    own timing puts it: ``timing_offset`` samples off its schedule, as the whole burst is), into the server's
    link health (``air.health['clients']``) and ``air.coherence_alarms`` (in place; nothing when the capture
    had a fault (``clean`` False), does not hold the part, or the frame was not demodulated)."""
    from otafl_sdr.calibration.coherence_loop import measure_clients, measured
    from otafl_sdr.radio.uhd_coherent_round import link_phase_noise, sounding_boost
    cfg = air.exp.cfg
    air.coherence_alarms = []
    capture = np.asarray(capture, np.complex128)
    if not clean or air.health is None:
        return
    first = int(first) + int(air.health.get("timing_offset", 0))   # the part is late (early) as its frame was
    if first - TIMING_SEARCH < 0 or first + layout.n_samples + TIMING_SEARCH > len(capture):
        return
    rate = float(cfg.uhd.rate)
    g = _gains(ref_gains, layout.clients)
    boost = sounding_boost(layout, g)
    amplitudes = [complex(h * gi * boost) if gi else 0j for h, gi in zip(np.asarray(h_known, np.complex128), g)]
    start = layout.find(capture, int(first))
    est = measure_clients(layout, layout.symbols(capture, start), amplitudes, rate / layout.sps,
                          link_phase_noise(air, layout.clients))
    air.health["clients"], air.coherence_alarms = measured(
        air, est, [layout.b_centre_sample(i) for i in range(layout.clients)], cfg, rate, layout.unambiguous_hz(rate))


__all__ = ["add_sounding", "client_part", "read_clients"]
