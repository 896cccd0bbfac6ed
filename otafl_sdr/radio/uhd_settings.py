"""Device settings a lab sets explicitly instead of leaving them to UHD's defaults (issue 25, item 7).

* Master clock rate per device family (:func:`master_clock_rate`): every radio of a family runs the same
  master clock, chosen so that ``uhd.rate`` divides it, and the rate UHD reports is checked. Mixed clocks
  quantise the DSP tuning differently (the 32-bit NCO's step is MCR / 2^32): tens of mHz of differential
  carrier offset between radios that are nominally on one frequency.
* Frame sizes (:func:`device_args`): network-attached families (X3xx, N3xx, E320, N2xx) get
  ``send_frame_size`` / ``recv_frame_size`` for a 1500-byte MTU unless the address sets them (jumbo frames:
  put the larger sizes in the address), instead of UHD's MTU auto-detection.
* Tune results (:func:`tune_record`): the RF and DSP frequencies UHD actually reached, and the residual
  of the centre frequency, recorded with each radio's settings (summary.json, the calibration file).
* Timed tuning (:func:`timed_retune`): where the family tunes on a timed command (X3xx, N3xx, N32x
  daughterboards), every radio is retuned at one device time after the time is set, so the LO and DSP
  phases restart together (deterministic across retunes); AD9361 radios (B2xx, E3xx) cannot.
* AGC explicitly off on every receiver (:func:`agc_off`), before its gain is set.

UHD's simulator is left at its defaults (it has no master clock to choose, no MTU, no LO); what it
reports is still recorded."""
from __future__ import annotations

import time

AD9361_MAX_MCR = 30.72e6             # both channels of an AD9361 (B210, E320) stream up to this master clock
FAMILY_MCRS = {                      # master clock rates each fixed-clock family can run, preferred first
    "x300": (200e6, 184.32e6),
    "n300": (125e6, 122.88e6, 153.6e6),
    "n320": (200e6, 245.76e6, 250e6),
}
NETWORK_FAMILIES = ("x300", "n300", "n320", "e320", "usrp2")
TIMED_TUNE_FAMILIES = ("x300", "n300", "n320")
FRAME_SIZE = 1472                    # bytes: a 1500-byte MTU less the IP and UDP headers
MCR_TOLERANCE_HZ = 1.0
RETUNE_LEAD_S = 0.5                  # a timed retune is commanded this far ahead of device time


def family(device: dict) -> str:
    """A discovery dict's device family: 'b200', 'e3xx', 'e320', 'x300', 'n300', 'n320', 'usrp2' or ''."""
    t = str(device.get("type", "")).lower()
    p = str(device.get("product", "")).lower()
    if t == "b200" or p.startswith("b2"):
        return "b200"
    if p.startswith("e320"):
        return "e320"
    if t == "e3xx" or p.startswith("e31"):
        return "e3xx"
    if t == "x300" or p.startswith("x3"):
        return "x300"
    if p.startswith("n32"):
        return "n320"
    if t == "n3xx" or p.startswith("n3"):
        return "n300"
    if t == "usrp2" or p.startswith("n2"):
        return "usrp2"
    return ""


def master_clock_rate(fam: str, rate: float) -> float | None:
    """The master clock a radio of family ``fam`` runs at for sample rate ``rate`` (None: leave it to UHD).
    AD9361 families: the largest rate x 2^k not above 30.72 MHz (integer decimation by half-band filters);
    fixed-clock families: the first of their clocks that ``rate`` divides."""
    rate = float(rate)
    if rate <= 0:
        return None
    if fam in ("b200", "e3xx", "e320"):
        if rate > AD9361_MAX_MCR:
            return None
        mcr = rate
        while mcr * 2 <= AD9361_MAX_MCR:
            mcr *= 2
        return mcr
    for mcr in FAMILY_MCRS.get(fam, ()):
        ratio = mcr / rate
        if abs(ratio - round(ratio)) < 1e-9 * ratio:
            return mcr
    return None


def _has(args: str, key: str) -> bool:
    return any(p.split("=", 1)[0].strip() == key for p in args.split(",") if p.strip())


def device_args(args: str, device: dict | None, rate: float, sim: bool) -> tuple[str, dict]:
    """The address a radio is opened with: ``args`` plus ``master_clock_rate`` and, for network families,
    ``send_frame_size`` / ``recv_frame_size``, each only where the address does not set it itself.
    Returns (address, what was chosen: {"family", "master_clock_rate", "frame_size"})."""
    from otafl_sdr.radio.uhd_device import is_simulator
    fam = family(device or {})
    chosen: dict = {"family": fam or "unknown"}
    if sim or not fam or is_simulator(device or {}):      # the simulator refuses a master clock / frame sizes
        return args, chosen
    extra = []
    mcr = master_clock_rate(fam, rate)
    if mcr is not None and not _has(args, "master_clock_rate"):
        extra.append(f"master_clock_rate={mcr:.0f}")
        chosen["master_clock_rate"] = mcr
    if fam in NETWORK_FAMILIES:
        for key in ("send_frame_size", "recv_frame_size"):
            if not _has(args, key):
                extra.append(f"{key}={FRAME_SIZE}")
                chosen["frame_size"] = FRAME_SIZE
    return ",".join([a for a in [args] + extra if a]), chosen


def requested_mcr(args: str) -> float | None:
    """The master_clock_rate an address asks for (ours or the user's), else None."""
    for p in args.split(","):
        k, _, v = p.partition("=")
        if k.strip() == "master_clock_rate":
            try:
                return float(v)
            except ValueError:
                return None
    return None


def check_clock(blk, args: str, rate: float) -> float:
    """The master clock UHD runs (``get_clock_rate``): refused in one line when it is not the one the
    address asked for, or when ``rate`` does not divide it. Returns it (0.0 where the device cannot say)."""
    from otafl_sdr.errors import ConfigError
    try:
        mcr = float(blk.get_clock_rate(0))
    except (RuntimeError, AttributeError):
        return 0.0
    want = requested_mcr(args)
    if want is not None and abs(mcr - want) > MCR_TOLERANCE_HZ:
        raise ConfigError("uhd.rate", f"the radio at '{args}' runs its master clock at {mcr:.6g} Hz, not the "
                                      f"{want:.6g} Hz asked for; give master_clock_rate= in its address")
    ratio = mcr / float(rate) if rate else 0.0
    if mcr and abs(ratio - round(ratio)) > 1e-6 * max(ratio, 1.0):
        raise ConfigError("uhd.rate", f"{rate:g} S/s does not divide the master clock {mcr:.6g} Hz of "
                                      f"'{args}'; pick a rate it divides")
    return mcr


def tune_record(result, requested: float, got: float) -> dict:
    """What a ``tune_result_t`` says UHD reached, and the centre frequency's residual (Hz)."""
    rec = {"freq_error_hz": float(got) - float(requested)}
    for k in ("target_rf_freq", "actual_rf_freq", "target_dsp_freq", "actual_dsp_freq"):
        v = getattr(result, k, None)
        if v is not None:
            rec[k] = float(v)
    return rec


def agc_off(blk, port: int) -> str:
    """Switch the receiver's AGC off explicitly (UHD would otherwise keep a device's default); 'off', or
    'n/a' where the device has no AGC."""
    try:
        blk.set_rx_agc(False, port)
        return "off"
    except (RuntimeError, AttributeError, TypeError):
        return "n/a"


def timed_retune(radios, freq: float, lo_offset: float, device_now: float) -> float | None:
    """Retune every ``(block, port, fam)`` of ``radios`` on one timed command at device time
    ``device_now + RETUNE_LEAD_S`` (rounded up to a whole second plus 0.5 s, the same instant on every
    radio whose time is UTC), where the family supports it; returns the command time, or None when no
    radio does. Waits until that time has passed."""
    from gnuradio import uhd

    timed = [(b, p) for b, p, fam in radios if fam in TIMED_TUNE_FAMILIES]
    if not timed:
        return None
    t_cmd = float(int(device_now + RETUNE_LEAD_S) + 1) + 0.5
    for blk, port in timed:
        blk.set_command_time(uhd.time_spec_t(t_cmd), 0)
        blk.set_center_freq(uhd.tune_request(freq, lo_offset), port)
        blk.clear_command_time(0)
    time.sleep(max(0.0, t_cmd - device_now) + 0.1)
    return t_cmd
