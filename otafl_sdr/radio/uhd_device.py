"""UHD device facts and discovery, with no device objects: the limits and timings every uhd module uses,
device-address parsing, ``uhd_find_devices`` discovery and the simulator's signature. A leaf: it imports
nothing from the other radio modules, so the air (uhd_air.py), the radio setup (uhd_radio.py), the
calibration flowgraphs, the simulator and the testbed's nodes all read the same facts."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

DAC_FULL_SCALE = 1.0            # fc32 full scale of usrp_sink: |x| <= 1
LEAD_SAMPLES = 256              # capture starts this many samples before t0 (and ends as many after)
ACK_MARGIN_S = 1.0              # wait this long past the burst's end for captures and burst_acks
JAMMER_PAPR_SIGMA = 4.5        # the jammer's Gaussian burst is checked at this many sigma of its amplitude
PRIMER_SAMPLES = 64             # the primer burst each TX radio sends right after start (zeros)
PRIMER_LEAD_S = 0.1             # ... this far ahead of device time
SIM_EXTRA_WAIT_S = 4.0          # UHD's simulator streams at its own pace (python): wait longer for it
REF_LOCK_TIMEOUT_S = 3.0
PPS_TIMEOUT_S = 1.5
CLOCK_KEYS = ("clock_source", "time_source")
SYNC_SOURCES = ("external", "gpsdo")     # a shared reference (10 MHz / PPS cables, or a GPSDO per radio)
GAIN_TOLERANCE_DB = 0.5
FIND_HINT = "`uhd_find_devices`"
RUNBOOK = "firmware_notes/uhd_runbook.md"


# ------------------------------------------------------------------------------------------------
# device arguments and discovery (no device objects)
def parse_device_args(args: str) -> tuple[str, dict[str, str]]:
    """'serial=X,clock_source=external,time_source=external' -> ('serial=X', {'clock_source': ...}).

    The clock/time keys are applied with set_clock_source / set_time_source (so every device family
    gets them the same way); the rest is the UHD device address."""
    keep, clock = [], {}
    for part in (p.strip() for p in str(args).split(",")):
        if not part:
            continue
        key, _, value = part.partition("=")
        if key.strip() in CLOCK_KEYS:
            clock[key.strip()] = value.strip()
        else:
            keep.append(part)
    return ",".join(keep), clock


def parse_find_devices_output(text: str) -> list[dict[str, str]]:
    """The devices listed by the ``uhd_find_devices`` tool (one dict of its 'key: value' lines each)."""
    devices: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    for line in text.splitlines():
        if line.strip() == "Device Address:":
            cur = {}
            devices.append(cur)
            continue
        m = re.match(r"^\s+([A-Za-z0-9_]+):\s*(.*)$", line)
        if cur is not None and m:
            cur[m.group(1)] = m.group(2).strip()
        elif line.strip().startswith("--"):
            cur = None
    return devices


def addr_to_dict(addr) -> dict[str, str]:
    """A UHD device_addr_t (or its 'k=v,k=v' string) as a dict."""
    text = addr if isinstance(addr, str) else addr.to_string()
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if key.strip():
            out[key.strip()] = value.strip() if sep else ""
    return out


def find_usrps(args: str = "") -> list[dict[str, str]] | None:
    """USRPs matching a device address ('' = all), as dicts (serial, type, product, addr, ...).

    One discovery call through gr-uhd's ``uhd.find`` (Debian's ``find_devices`` wrapper is broken: it
    calls a missing ``find_devices_raw``); the ``uhd_find_devices`` tool answers where ``find`` is missing.
    None if neither is available."""
    try:
        from gnuradio import uhd
        return [addr_to_dict(d) for d in uhd.find(uhd.device_addr_t(args))]
    except (ImportError, AttributeError, TypeError):
        pass
    exe = shutil.which("uhd_find_devices")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, "--args", args], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, UHD_LOG_CONSOLE_LEVEL="error"))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_find_devices_output(r.stdout)


SIMULATOR_SERIAL = "FA4EDE7"     # otafl_sdr.radio.uhd_simulator's E320


def is_simulator(found: dict) -> bool:
    """True for UHD's device simulator as discovery reports it (our launcher's serial, or one of a simulated
    lab's FA4EDE7, FA4EDE8, ...; no FPGA image)."""
    return str(found.get("serial", "")).startswith(SIMULATOR_SERIAL[:-1]) and found.get("fpga") in ("n/a", None)


def first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def the_one_device(found: list[dict], key: str, args: str, role: str, prefix: str, simulator: bool,
                   hint: str = "the attached devices") -> dict:
    """The one device discovery found for ``key = args`` (``role``'s radio): AirError when none or several
    match, ConfigError (uhd.simulator) when a real USRP answers where the simulator is expected."""
    from otafl_sdr.errors import AirError, ConfigError
    if not found:
        raise AirError(f"{prefix}: no USRP matches {key} = '{args}' ({role}); {FIND_HINT} lists {hint}")
    if len(found) > 1:
        raise AirError(f"{prefix}: {key} = '{args}' matches {len(found)} USRPs; add serial=... ({FIND_HINT} lists them)")
    if simulator and not is_simulator(found[0]):
        raise ConfigError("uhd.simulator", f"{key} = '{args}' is a real USRP ({found[0].get('product')}, serial "
                                           f"{found[0].get('serial')}); uhd.simulator = true is only for UHD's "
                                           "device simulator")
    return found[0]
