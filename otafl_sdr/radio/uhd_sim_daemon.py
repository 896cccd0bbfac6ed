"""Launcher for UHD 4.3's device simulator (the MPM daemon built with MPM_DEVICE=sim, a simulated E320).

Debian's python3-uhd ships the ``usrp_mpm`` package but not its launcher script (``usrp_hwd.py``); this file
is our own small replacement. It is standalone on purpose (no otafl_sdr import): it runs under the simulator's
interpreter (``.venv-uhdsim``: system Python + usrp_mpm + pyudev, gevent, netaddr, pyroute2 0.5.19, mprpc,
msgpack < 1), not the project's venv (torch, Ray with msgpack >= 1).

Usage: python uhd_sim_daemon.py [--discovery-addr 127.0.0.1] [--bind-addr 127.0.0.2] [--config sim.ini]

Work-arounds for the simulator as Debian packages it (in this process only, never in system files):
- ``usrp_mpm.xports`` imports ``sys_utils.uio``, which imports the compiled ``libpyusrp_periphs`` that is
  not built for the simulator; the simulated device never maps a UIO region, so a ``uio`` module whose
  ``UIO``/``open_uio`` refuse to be used is put in its place (anything that did use it fails loudly).
- the device info carries ``mender_artifact = None`` (no /etc/mender on a PC), which UHD's RPC client
  cannot cast to a string ("get_device_info: std::bad_cast"); the simulator reports "" instead.
- a receive stream endpoint accepts one stream command per streamer: the finished output stream is never
  cleared ("Output Stream already running") and the flow-control capacity is consumed by the first
  command (the socket thread then dies on ``None[0]``, taking the device down). Before each new command
  the finished stream is ended and the streamer's capacity reused.
- one stream endpoint serves both radio ports and channel 1's stream commands are ignored, so the E320's
  2 x 2 mode cannot stream: each port gets its own stream endpoint (``_patch_two_channels``).
- every socket binds 0.0.0.0 on fixed ports (discovery 49600, RPC 49601, CHDR 49153) and the CHDR link is
  advertised on each interface's first address, so one simulator per machine. ``--bind-addr 127.0.0.N``
  binds all three to that loopback address and advertises only it (``_patch_bind_address``): several
  simulators, one per address, stand for the USRPs of several hosts.
- a timed receive stream's first packet is built with a timestamp but typed ``DATA_NO_TS``: UHD's
  serializer then counts the 8-byte timestamp in the packet's length without writing it, so the host
  reads two sc16 zeros after that packet's payload: every timed capture had two zero samples inserted
  after its first packet (371 samples at the default MTU) and the rest of it two samples late
  (``_patch_timed_rx_packets`` leaves the timestamp out of such a packet, as its type says). This was the simulator's spurious
  carrier offset: a calibration pilot starting before sample 371 was seen at delay 0 for its first
  ~50 samples and at delay 2 after, which tilted the residual-frequency fit (2.5e-7 cycles/sample at
  9 sigma on client 0's slot; the jammer's later slot was clean), and a round's preamble straddled the
  gap (NMSE 1.08-1.15 x its theory).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import types


def _install_uio_placeholder() -> None:
    mod = types.ModuleType("usrp_mpm.sys_utils.uio")

    class UIO:  # noqa: D401 - refuses, the simulator has no UIO regions
        def __init__(self, *a, **k):
            raise RuntimeError("UIO access is not available in the UHD simulator")

    def open_uio(*a, **k):
        raise RuntimeError("UIO access is not available in the UHD simulator")

    mod.UIO = UIO
    mod.open_uio = open_uio
    sys.modules["usrp_mpm.sys_utils.uio"] = mod


def _patch_mender_artifact() -> None:
    from usrp_mpm.periph_manager import base
    real = base.get_mender_artifact
    base.get_mender_artifact = lambda *a, **k: real(*a, **k) or ""


def _patch_stream_endpoint() -> None:
    from usrp_mpm.simulator import stream_endpoint_node as sen
    real = sen.StreamEndpointNode.begin_output

    def begin_output(self, stream_spec):
        if self.downstream_capacity is not None:
            self._otafl_capacity = self.downstream_capacity
        else:
            self.downstream_capacity = getattr(self, "_otafl_capacity", None)
        if self.output_stream is not None:
            self.end_output()
        return real(self, stream_spec)

    sen.StreamEndpointNode.begin_output = begin_output


_TX_SINKS: dict = {0: [], 1: []}       # TX channel -> its cable sinks (created lazily by the stream endpoints)
_TX_BASE = {0: 1.0, 1: 1.0}             # the cable's own amplitude gain per TX channel (--tx1-gain)
_TX_GAIN_DB: dict = {}                  # TX channel -> the gain the host last set (dB)
_TX_GAIN_REF: list = [None]             # --tx-gain-ref: the gain (dB) at which the cable is unity; None: ignored


def _tx_amp(chan: int) -> float:
    ref, g = _TX_GAIN_REF[0], _TX_GAIN_DB.get(chan)
    return _TX_BASE[chan] * (1.0 if ref is None or g is None else 10 ** ((g - ref) / 20))


def _patch_tx_gain(ref: float | None) -> None:
    """The simulated radio's TX gain moves what its cable carries (``--tx-gain-ref G0``: amplitude
    10^((G - G0) / 20), a linear PA and attenuator): the host's ``set_gain`` on 'TX1' / 'TX2' reaches the
    simulated dboard, which Debian's simulator otherwise accepts and ignores. Without ``--tx-gain-ref`` the
    gain is ignored as before (every existing preset and test unchanged)."""
    _TX_GAIN_REF[0] = ref

    def set_gain(target, gain):
        t = str(target).upper()
        if "TX" in t:
            chan = 1 if t.endswith("2") or t.endswith("B") else 0
            _TX_GAIN_DB[chan] = float(gain)
            for s in _TX_SINKS[chan]:
                s.gain = _tx_amp(chan)
        return gain
    _replace_dboard_method("set_gain", set_gain)


def _patch_tx_tune() -> None:
    """A host's TX tune (UHD's ``set_tx_freq``, the simulated dboard's ``catalina_tune('TX...', f)``) reaches
    the lab's cable: each TX stream of this radio already heard by the hub says so (its sink's ``tuned``),
    and the hub draws the radio's LO phases anew, as an AD9361's PLL relocks at a random phase. A tune before
    the stream connected needs no word: connecting draws them (uhd_sim_loopback's module doc)."""

    def catalina_tune(which, freq):
        if "TX" in str(which).upper():
            for s in _TX_SINKS[0] + _TX_SINKS[1]:
                tuned = getattr(s, "tuned", None)
                if tuned is not None:
                    tuned()
        return freq
    _replace_dboard_method("catalina_tune", catalina_tune)


def _replace_dboard_method(name: str, func) -> None:
    """The simulated AD9361 dboard's RPC method ``name`` (one of its ``extra_methods``) becomes ``func``."""
    from usrp_mpm.simulator import sim_dboard as sd
    cls = sd.SimulatedCatalinaDboard
    cls.extra_methods = [(name, func) if (isinstance(e, tuple) and e[0] == name) else e for e in cls.extra_methods]


def _patch_two_channels(tx1_gain: float = 1.0) -> None:
    """The simulated E320's second channel: Debian's simulator has one stream endpoint (both radio ports on
    it, so a second streamer replaces the first) and ignores radio channel 1's stream commands. Here each
    radio port gets its own stream endpoint (SEP0 <-> port 0, SEP1 <-> port 1, as on a real E320) and
    channel 1's commands start a stream on SEP1 with a stream spec of its own. ``tx1_gain``: the cable's
    amplitude gain for TX channel 1 (its sink's ``gain``; an attenuator on that channel)."""
    from usrp_mpm.simulator import chdr_endpoint as ce
    from usrp_mpm.simulator import noc_block_regs as nbr
    from usrp_mpm.simulator import rfnoc_graph as rg
    from usrp_mpm.simulator.rfnoc_common import StreamSpec
    from usrp_mpm.simulator.stream_endpoint_node import StreamEndpointNode

    _TX_BASE[1] = float(tx1_gain)

    def get_default_nodes(self):
        def sink_for(chan):
            def make():
                sink = self.sink_gen()
                sink.gain = _tx_amp(chan)          # --tx1-gain, and the TX gain when --tx-gain-ref is given
                _TX_SINKS[chan].append(sink)
                return sink
            return make
        return [rg.XportNode(0), rg.XbarNode(0, [2, 3], [0]),
                StreamEndpointNode(0, self.source_gen, sink_for(0)),
                StreamEndpointNode(1, self.source_gen, sink_for(1))]
    ce.ChdrEndpoint.get_default_nodes = get_default_nodes

    real_init = rg.RFNoCGraph.__init__

    def init(self, graph_list, log, device_id, send_wrapper, chdr_w, rfnoc_device_id):
        real_init(self, graph_list, log, device_id, send_wrapper, chdr_w, rfnoc_device_id)
        adj = [(nbr.StreamEndpointPort(0, 0), nbr.NocBlockPort(0, 0)),
               (nbr.StreamEndpointPort(1, 0), nbr.NocBlockPort(0, 1)),
               (nbr.NocBlockPort(0, 0), nbr.StreamEndpointPort(0, 0)),
               (nbr.NocBlockPort(0, 1), nbr.StreamEndpointPort(1, 0))]
        self.regs = nbr.NocBlockRegs(self.log, 1 << 16, True, 1, self.regs.blocks, len(self.stream_ep), 1,
                                     rfnoc_device_id, adj, 8, 1, self.get_stream_spec, self.radio_tx_cmd,
                                     self.radio_tx_stop)
    rg.RFNoCGraph.__init__ = init

    real_write = nbr.NocBlockRegs.write_radio

    def write_radio(self, addr, value):
        chan = (addr - 0x1000) // 0x80
        if chan == 0:
            return real_write(self, addr, value)
        graph_spec = self.get_stream_spec
        spec = getattr(self, "_otafl_spec1", None)
        if spec is None:
            spec = self._otafl_spec1 = StreamSpec()
        spec.sample_rate = graph_spec().sample_rate
        self.get_stream_spec = lambda: spec
        try:
            reg = (addr - 0x1000) % 0x80
            if reg == nbr.REG_RX_CMD:
                self._otafl_spec_pending = spec
            return real_write(self, 0x1000 + reg, value) if reg != nbr.REG_RX_CMD else _command(self, chan, value)
        finally:
            self.get_stream_spec = graph_spec

    def _command(self, chan, value):
        if value & (1 << 31):
            value &= ~(1 << 31)
            self.get_stream_spec().is_timed = True
        sep = self.resolve_ep_towards_outputs((self.get_radio_port(), chan))
        if value == nbr.RX_CMD_STOP:
            self.stop_tx_stream(sep)
            return
        self.get_stream_spec().is_continuous = value == nbr.RX_CMD_CONTINUOUS
        self.create_tx_stream(sep)
    nbr.NocBlockRegs.write_radio = write_radio

    real_cmd = rg.RFNoCGraph.radio_tx_cmd

    def radio_tx_cmd(self, sep_block_id):
        spec = getattr(self.regs, "_otafl_spec_pending", None)
        if spec is None:
            return real_cmd(self, sep_block_id)
        self.regs._otafl_spec_pending = None
        saved, self.stream_spec = self.stream_spec, spec
        try:
            return real_cmd(self, sep_block_id)
        finally:
            self.stream_spec = saved
    rg.RFNoCGraph.radio_tx_cmd = radio_tx_cmd


def _patch_timed_rx_packets() -> None:
    """A packet the simulator types DATA_NO_TS carries no timestamp (see the module doc): its
    ``ChdrOutputStream`` passes the timed stream's first timestamp under a DATA_NO_TS header. The packet
    keeps the type the host already reads (typing it DATA_WITH_TS instead makes UHD's two-channel receive
    streamer wait to align the channels' times, and the 2 x 2 capture times out)."""
    from uhd.chdr import ChdrPacket, PacketType
    from usrp_mpm.simulator import chdr_stream

    def packet(chdr_w, header, payload, timestamp=None, *rest):
        if timestamp is not None and header.pkt_type == PacketType.DATA_NO_TS:
            timestamp = None
        return ChdrPacket(chdr_w, header, payload, timestamp, *rest)
    chdr_stream.ChdrPacket = packet


def _patch_bind_address(addr: str) -> None:
    """Bind discovery, RPC and CHDR to ``addr`` instead of 0.0.0.0 and advertise the CHDR link there only."""
    import socket as real_socket
    import types as _types

    from usrp_mpm import discovery, rpc_server
    from usrp_mpm.simulator import chdr_endpoint
    from usrp_mpm.xports import xportmgr_udp

    class BoundSocket(real_socket.socket):
        def bind(self, address):
            host, port = address[0], address[1]
            return super().bind((addr if host in ("0.0.0.0", "") else host, port))

    shim = _types.ModuleType("socket")
    shim.__dict__.update(vars(real_socket))
    shim.socket = BoundSocket
    discovery.socket = shim
    chdr_endpoint.socket = shim

    real_server = rpc_server.StreamServer
    rpc_server.StreamServer = lambda listener, *a, **k: real_server((addr, listener[1]), *a, **k)

    real_options = xportmgr_udp.XportMgrUDP.get_chdr_link_options

    def get_chdr_link_options(self, *a, **k):
        opts = real_options(self, *a, **k)
        lo = [dict(o, ipv4=addr) for o in opts if str(o.get("ipv4", "")).startswith("127.")]
        return lo[:1] or [dict(o, ipv4=addr) for o in opts[:1]]
    xportmgr_udp.XportMgrUDP.get_chdr_link_options = get_chdr_link_options


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="UHD device simulator (simulated E320 over MPM)")
    p.add_argument("--discovery-addr", default="127.0.0.1", help="address the discovery socket binds")
    p.add_argument("--config", default=None, help="simulator .ini (hardware preset, sample source/sink)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop when the process that started the simulator is gone (no orphaned simulators)")
    p.add_argument("--tx1-gain", type=float, default=1.0, help="the cable's amplitude gain on TX channel 1")
    p.add_argument("--tx-gain-ref", type=float, default=None,
                   help="TX gain (dB) at which the cable is unity; other gains scale it (default: gain ignored)")
    p.add_argument("--bind-addr", default=None,
                   help="bind discovery, RPC and CHDR to this address only (one simulator per 127.0.0.N)")
    p.add_argument("--check", action="store_true", help="import everything the simulator needs, then exit")
    p.add_argument("-v", "--verbose", action="count", default=0)
    a = p.parse_args(argv)
    _install_uio_placeholder()
    import usrp_mpm as mpm
    _patch_mender_artifact()
    _patch_stream_endpoint()
    _patch_two_channels(a.tx1_gain)
    _patch_tx_gain(a.tx_gain_ref)
    _patch_tx_tune()
    _patch_timed_rx_packets()
    if a.bind_addr:
        _patch_bind_address(a.bind_addr)
    if a.check:
        import mprpc  # noqa: F401
        from usrp_mpm.periph_manager import periph_manager  # noqa: F401
        print(f"usrp_mpm {mpm.__mpm_device__} simulator importable")
        return 0
    from usrp_mpm.mpmtypes import SharedState, MPM_RPC_PORT

    log = mpm.get_main_logger(use_logbuf=False, log_default_delta=a.verbose).getChild("main")
    log.info("Launching the UHD simulator (usrp_mpm %s)", mpm.__version__)
    default_args = {"config": a.config} if a.config else {}
    shared = SharedState()
    procs = [mpm.spawn_rpc_process(MPM_RPC_PORT, shared, default_args),
             mpm.spawn_discovery_process(shared, a.discovery_addr)]
    stop = threading.Event()

    def _stop(*_):
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    parent = os.getppid()
    while not stop.is_set() and all(pr.is_alive() for pr in procs):
        if a.exit_with_parent and os.getppid() != parent:
            log.info("parent process gone: stopping the simulator")
            break
        stop.wait(0.2)
    for pr in procs:
        if pr.is_alive():
            pr.terminate()
    for pr in procs:
        pr.join(5)
    dead = [pr for pr in procs if pr.exitcode not in (0, None, -signal.SIGTERM)]
    return 1 if dead and not stop.is_set() else 0


if __name__ == "__main__":
    sys.exit(main())
