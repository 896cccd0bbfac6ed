"""Per-client sounding on the uhd testbed's single-carrier rounds (issue 34, item 2; ``air.coherence =
"measure"``): every client's residual phase, carrier offset and gain, each with its standard error, read by
the server from the receiver node's capture every round (``link_health['clients']``).

Over the nodes a correction within the round would need a message round trip, so the testbed *measures*, as
the in-process air's ``"measure"`` does: each client's burst continues, after its frame and the jammer's
slot, with its part of the sounding (radio/appended_sounding.py, shared; here each client node builds its own
part from the reference gains in its ``transmit_at``, and the server reads the receiver node's capture). In
``measure`` mode the per-client loop names events and raises the alarms for which net/link_watch.py asks a
recalibration. The sounding carries no data: reference symbols at a planned level, sent whatever the
client's data."""
from __future__ import annotations

import numpy as np

from otafl_sdr.phy.client_sounding import SoundingLayout


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
    common level b (radio/appended_sounding.sounding_part, from the message's reference gains)."""
    from otafl_sdr.radio.appended_sounding import sounding_part
    K = int(cfg.data.clients)
    return sounding_part(SoundingLayout.for_phy(K, cfg.phy), _gains(ref_gains, K), i, slot)


def read_clients(air, layout: SoundingLayout, capture: np.ndarray, first: int, h_known, ref_gains: dict,
                 clean: bool) -> None:
    """Each client's estimate from the part scheduled at capture sample ``first`` into the server's link health
    (``air.health['clients']``) and ``air.coherence_alarms`` (radio/appended_sounding.read_parts)."""
    from otafl_sdr.radio.appended_sounding import read_parts
    read_parts(air, air.exp.cfg, layout, capture, first, h_known, _gains(ref_gains, layout.clients), clean)


__all__ = ["add_sounding", "client_part", "read_clients"]
