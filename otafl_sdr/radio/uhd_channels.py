"""Radio channels of one USRP as separate radios (issue 13): a two-channel device (B210, X310, E320, N310)
may carry two clients, one per TX channel.

A device address may end in ``channel=N`` (e.g. ``tx_args = ["serial=31A0B1C,channel=0",
"serial=31A0B1C,channel=1"]``): the key is ours (UHD never sees it); the radio's streamer uses that
channel of the device (gr-uhd maps the block's channel 0 to it). Two transmitters may share a device on
different channels, never on the same one. UHD's E3xx radio (E310, E320; its ``check_topology``) runs
1 TX x 1 RX or 2 x 2, never 2 TX x 1 RX, and refuses the streams mid-run: two TX channels of such a
device with the receiver on its one RX channel are refused at start, in one line. (2 x 2 with gr-uhd
needs one two-channel sink and one two-channel source: separate blocks connect their streamers one at
a time, through a 2 x 1 state; not done here.)"""
from __future__ import annotations

from ..errors import ConfigError

CHANNEL_KEY = "channel"
MAX_CHANNEL = 15
AD936X_TYPES = ("e3xx",)                 # discovery's 'type' of the devices UHD runs 1x1 or 2x2 only


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
    on one channel; no E3xx device with two TX channels and one RX channel in use."""
    by_dev: dict[str, list] = {}
    for r in radios:
        d = found.get(id(r)) or {}
        dev = d.get("serial") or d.get("addr") or r.args
        by_dev.setdefault(dev, []).append((r, d))
    for dev, members in by_dev.items():
        tx = [r for r, _ in members if r.role != "receiver"]
        rx = [r for r, _ in members if r.role == "receiver"]
        taken: dict[int, object] = {}
        for r in tx:
            if r.channel in taken:
                other = taken[r.channel]
                raise ConfigError(r.key, f"{r.role} and {other.role} use the same USRP ({dev}) and channel "
                                         f"{r.channel}; give each transmitter its own radio or channel "
                                         f"('{CHANNEL_KEY}=1' in its address)")
            taken[r.channel] = r
        kind = str(members[0][1].get("type", ""))
        if kind in AD936X_TYPES and len(tx) == 2 and len(rx) == 1:
            raise ConfigError(tx[1].key, f"{tx[0].role} and {tx[1].role} use both TX channels of the "
                                         f"{members[0][1].get('product', kind)} {dev} while the receiver uses one "
                                         f"of its RX channels: UHD runs an E3xx 1 TX x 1 RX or 2 x 2, not "
                                         f"2 TX x 1 RX; put the receiver on another USRP")
