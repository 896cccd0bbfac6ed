"""Radio channels of one USRP as separate radios (issue 13): a two-channel device (B210, X310, E320, N310)
may carry two clients, one per TX channel.

A device address may end in ``channel=N`` (e.g. ``tx_args = ["serial=31A0B1C,channel=0",
"serial=31A0B1C,channel=1"]``): the key is ours (UHD never sees it); the radio's streamer uses that
channel of the device (gr-uhd maps the block's channel 0 to it). Two transmitters may share a device on
different channels, never on the same one. A device's TX channels are streamed by one multi-channel
``usrp_sink`` (:func:`stream_groups`, :func:`combine_sends`): UHD's E3xx radio (E310, E320; its
``check_topology``) runs 1 TX x 1 RX or 2 x 2, never 2 TX x 1 RX, and separate blocks would connect
their streamers one at a time, through such a state; a receiver on a device that carries two TX
channels streams both of its RX channels (the second capture is dropped)."""
from __future__ import annotations

import numpy as np

from otafl_sdr.errors import ConfigError

CHANNEL_KEY = "channel"
MAX_CHANNEL = 15


def split_channel(args: str, key: str) -> tuple[str, int]:
    """'serial=X,channel=1' -> ('serial=X', 1); no channel key: channel 0. ConfigError (naming ``key``)
    for a channel that is not an integer in [0, 15] or given twice."""
    keep, chans = [], []
    for part in (p.strip() for p in str(args).split(",")):
        if not part:
            continue
        k, _, v = part.partition("=")
        if k.strip() == CHANNEL_KEY:
            try:
                chans.append(int(v.strip()))
            except ValueError:
                raise ConfigError(key, f"channel must be an integer, got '{v.strip()}'") from None
        else:
            keep.append(part)
    if len(chans) > 1:
        raise ConfigError(key, f"names the channel {len(chans)} times")
    ch = chans[0] if chans else 0
    if not 0 <= ch <= MAX_CHANNEL:
        raise ConfigError(key, f"channel must be in [0, {MAX_CHANNEL}], got {ch}")
    return ",".join(keep), ch


def check_shared(radios, found: dict) -> None:
    """Radios that share one device (``found[id(r)]``: discovery's dict of r's device): no two transmitters
    on one channel."""
    by_dev: dict[str, list] = {}
    for r in radios:
        d = found.get(id(r)) or {}
        dev = d.get("serial") or d.get("addr") or r.args
        by_dev.setdefault(dev, []).append((r, d))
    for dev, members in by_dev.items():
        tx = [r for r, _ in members if r.role != "receiver"]
        taken: dict[int, object] = {}
        for r in tx:
            if r.channel in taken:
                other = taken[r.channel]
                raise ConfigError(r.key, f"{r.role} and {other.role} use the same USRP ({dev}) and channel "
                                         f"{r.channel}; give each transmitter its own radio or channel "
                                         f"('{CHANNEL_KEY}=1' in its address)")
            taken[r.channel] = r


def device_key(r) -> str:
    """The device a radio is on, as discovery named it (else its address)."""
    return r.serial or r.args


def stream_groups(radios) -> tuple[dict, list[int]]:
    """How the radios map onto gr-uhd blocks: {device: [TX radios]} (one multi-channel usrp_sink per device,
    its ports in this order; a device's channels are streamed by one streamer, as UHD's 2 x 2 devices need),
    and the receiver's channels: its own, plus the device's other channel when that device carries two TX
    channels (an E3xx runs 2 TX only with 2 RX; the extra capture is dropped)."""
    groups: dict[str, list] = {}
    rx = None
    for r in radios:
        if r.role == "receiver":
            rx = r
        else:
            groups.setdefault(device_key(r), []).append(r)
    rx_chans = [rx.channel] if rx is not None else []
    if rx is not None:
        tx_here = groups.get(device_key(rx), [])
        if len(tx_here) >= 2 and rx.channel in (0, 1):
            rx_chans = [0, 1]
    return groups, rx_chans


FRAC_PAD = 8          # samples appended before a fractional (FFT) delay, so the burst's tail does not wrap


def fractional_delay(x: np.ndarray, delay: float) -> np.ndarray:
    """Band-limited delay of a burst by ``delay`` samples (0 <= delay < 1), ``FRAC_PAD`` samples longer."""
    x = np.concatenate([np.asarray(x, dtype=np.complex128), np.zeros(FRAC_PAD)])
    if not delay:
        return x
    f = np.fft.fftfreq(len(x))
    return np.fft.ifft(np.fft.fft(x) * np.exp(-2j * np.pi * f * float(delay)))


def combine_sends(sends: list, tx_radios: list, rate: float) -> list:
    """Bursts for radios that share one multi-channel block go out as one timed burst per port, all of the
    same length from the earliest ``tx_time``, each shifted by its offset (whole samples by position, the
    fraction by :func:`fractional_delay`: what separate ``tx_time`` s would have done); a silent radio on a
    busy block sends zeros. ``sends``: [(radio, burst, t)]; radios alone on their block pass through."""
    by_block: dict[int, list] = {}
    for r in tx_radios:
        by_block.setdefault(id(r.block), []).append(r)
    shared = {k for k, v in by_block.items() if len(v) > 1}
    out = [s for s in sends if id(s[0].block) not in shared]
    for k in shared:
        mine = [s for s in sends if id(s[0].block) == k]
        if not mine:
            continue
        t0 = min(t for _, _, t in mine)
        offs, bursts = {}, {}
        for r, b, t in mine:
            o = (t - t0) * rate
            whole = int(np.floor(o + 1e-9))
            frac = o - whole
            offs[id(r)] = whole
            bursts[id(r)] = fractional_delay(b, frac) if frac > 1e-6 else np.asarray(b)
        length = max(offs[id(r)] + len(bursts[id(r)]) for r, _, _ in mine)
        for r in by_block[k]:
            x = np.zeros(length, dtype=np.complex64)
            if id(r) in bursts:
                b = np.asarray(bursts[id(r)], dtype=np.complex64)
                x[offs[id(r)]:offs[id(r)] + len(b)] = b
            out.append((r, x, t0))
    return out


def silent_radio_zeros(sends: list, tx_radios: list, t_rx: float, n_cap: int) -> list:
    """On UHD's simulator: zeros for every transmitter that sends nothing in this exchange (a dropped client,
    the jammer of a round without its noise), as long as the longest burst and from the earliest ``tx_time``
    (the whole capture, from ``t_rx``, where nothing is sent). The simulated lab's hub waits for a stream
    that has not sent this round (radio/uhd_sim_loopback.py, START_S: 3 s a round); a real radio's silence
    needs nothing. ``sends``: [(radio, burst, t)]; returns the same for the silent ones (no data, no noise:
    the caller does not count them as senders)."""
    if sends:
        t0, length = min(t for _, _, t in sends), max(len(b) for _, b, _ in sends)
    else:
        t0, length = t_rx, int(n_cap)
    busy = {id(r) for r, _, _ in sends}
    return [(r, np.zeros(length, np.complex64), t0) for r in tx_radios if id(r) not in busy]
