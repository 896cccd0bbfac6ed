"""Launcher for UHD 4.3's device simulator (the MPM daemon built with MPM_DEVICE=sim, a simulated E320).

Debian's python3-uhd ships the ``usrp_mpm`` package but not its launcher script (``usrp_hwd.py``); this file
is our own small replacement. It is standalone on purpose (no otafl_sdr import): it runs under the simulator's
interpreter (``.venv-uhdsim``: system Python + usrp_mpm + pyudev, gevent, netaddr, pyroute2 0.5.19, mprpc,
msgpack < 1), not the project's venv (torch, Ray with msgpack >= 1).

Usage: python uhd_sim_daemon.py [--discovery-addr 127.0.0.1] [--config sim.ini] [--serial FA4EDE7]

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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="UHD device simulator (simulated E320 over MPM)")
    p.add_argument("--discovery-addr", default="127.0.0.1", help="address the discovery socket binds")
    p.add_argument("--config", default=None, help="simulator .ini (hardware preset, sample source/sink)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop when the process that started the simulator is gone (no orphaned simulators)")
    p.add_argument("--check", action="store_true", help="import everything the simulator needs, then exit")
    p.add_argument("-v", "--verbose", action="count", default=0)
    a = p.parse_args(argv)
    _install_uio_placeholder()
    import usrp_mpm as mpm
    _patch_mender_artifact()
    _patch_stream_endpoint()
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
