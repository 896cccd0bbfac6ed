"""One USRP driven by one process: the radio of a testbed node on its own host (issue 13, item 4).

The in-process ``uhd`` air (:mod:`otafl_sdr.radio.uhd_air`) drives every radio from one flowgraph; a
testbed node (``otafl-sdr node client|jammer|receiver --air uhd``) drives only its own. :class:`UhdRadio`
is that radio: discovery of its one address, the air's settings checks (coerced rate, gain and frequency,
LO lock, reference lock), device time, the primer burst (end-of-burst fix), a timed burst with its
acknowledgement, and a timed capture with its ``rx_time`` faults, using the same pieces as the air.

Device time across hosts: with a shared reference (``clock_source`` and ``time_source`` external or gpsdo
in the address) each radio waits for a PPS edge, reads the UTC second of that edge from the host clock
(rounded: right for any host clock error under half a second) and sets the NEXT edge to the next second
(``set_time_next_pps(edge + 1)``, as UHD's manual does with ``get_time_last_pps``), then waits for that edge
and checks the device took it (:func:`pps_second`), so radios on hosts whose clocks agree to well under half a second
(NTP) share one time base and the server schedules bursts in UTC seconds. Without one the node refuses
unless ``air.allow_unsynced`` (then ``set_time_now(host UTC)``, a recorded warning: bursts are aligned only
to the hosts' clock error). UHD's simulator keeps no device time: timed commands run at once there.
"""
from __future__ import annotations

import time

import numpy as np

from otafl_sdr.errors import AirError, ConfigError
from otafl_sdr.radio.uhd_device import (ACK_MARGIN_S, CLOCK_KEYS, DAC_FULL_SCALE, FIND_HINT, GAIN_TOLERANCE_DB, PPS_TIMEOUT_S,
                         PRIMER_LEAD_S, PRIMER_SAMPLES, REF_LOCK_TIMEOUT_S, RUNBOOK, SIM_EXTRA_WAIT_S, SYNC_SOURCES,
                         find_usrps, first_line, parse_device_args, the_one_device)
from otafl_sdr.radio.uhd_channels import split_channel

HOST_CLOCK_TOLERANCE_S = 0.25     # a PPS-set device time this far from the host's UTC: the host clock is off
SIM_CFO_ENV = "OTAFL_SIM_TX_CFO"  # tests: a simulated transmitter's LO offset (cycles/sample), UHD's simulator only


def sim_lo_offset(burst: np.ndarray, t_tx: float, rate: float) -> np.ndarray:
    """UHD's simulator has no LO: ``OTAFL_SIM_TX_CFO`` = f gives this process's simulated transmitters one, a
    rotation continuous in device time (sample n of a burst at t_tx turns by 2 pi f (rate t_tx + n)), as a real
    radio's offset from the receiver's LO is (tests of calibration/phase_ref.py). Unset: the burst as it is."""
    import os
    try:
        f = float(os.environ.get(SIM_CFO_ENV, "") or 0.0)
    except ValueError:
        f = 0.0
    if not f:
        return burst
    start = (f * float(rate) * float(t_tx)) % 1.0
    return (burst * np.exp(2j * np.pi * (start + f * np.arange(burst.size)))).astype(np.complex64)


def pps_second(host_time_after_edge: float) -> int:
    """The UTC second of a PPS edge seen at host time ``host_time_after_edge`` (right after it): the nearest
    whole second. ``floor(now) + 1`` (the old rule) is one second short whenever the host clock runs a few
    ms behind UTC (then refused by the 0.25 s check: intermittent refusals); rounding holds for any host
    clock error and detection delay under half a second."""
    return int(round(float(host_time_after_edge)))


def wait_for_pps_edge(block, what: str, check: str) -> None:
    """Return right after the device's next PPS edge; AirError "{what} within ... s; check {check}" if none
    comes within PPS_TIMEOUT_S."""
    last = block.get_time_last_pps(0).get_real_secs()
    deadline = time.monotonic() + PPS_TIMEOUT_S
    while block.get_time_last_pps(0).get_real_secs() == last:
        if time.monotonic() > deadline:
            raise AirError(f"{what} within {PPS_TIMEOUT_S} s; check {check} (see {RUNBOOK})")
        time.sleep(0.01)

def wait_sensor(blk, name: str, board: bool = True, chan: int = 0) -> bool:
    """True once the sensor reads true (or the radio has no such sensor), False after a timeout."""
    names = blk.get_mboard_sensor_names if board else blk.get_sensor_names
    read = (lambda: blk.get_mboard_sensor(name, 0)) if board else (lambda: blk.get_sensor(name, chan))
    try:
        if name not in names(0 if board else chan):
            return True
        deadline = time.monotonic() + REF_LOCK_TIMEOUT_S
        while time.monotonic() < deadline:
            if read().to_bool():
                return True
            time.sleep(0.1)
    except (RuntimeError, AttributeError):
        return True
    return False


def configure_radio(cfg, blk, port: int, role: str, key: str, clock: dict, gain: float, lo_offset: float,
                    args: str = "") -> dict:
    """Apply a radio's reference, rate, tuning (with LO offset), AGC off (receivers) and gain on port ``port``
    of its gr-uhd block (opened with device address ``args``); refuse a coerced rate / master clock / gain /
    frequency and an unlocked LO or reference in one line. Returns the actual (not requested) settings,
    with the master clock, the AGC state and the tune result (radio/uhd_settings.py)."""
    from gnuradio import uhd

    from otafl_sdr.radio.uhd_settings import agc_off, check_clock, tune_record

    u = cfg.uhd
    agc = "n/a"
    try:
        if clock.get("clock_source"):
            blk.set_clock_source(clock["clock_source"], 0)
        if clock.get("time_source"):
            blk.set_time_source(clock["time_source"], 0)
        blk.set_samp_rate(u.rate)
        # LO offset tuning: the LO sits lo_offset away and the DSP shifts the band back, so every radio's
        # LO leakage (and the receiver's DC) lands outside the band instead of adding a coherent bias
        tuned = blk.set_center_freq(uhd.tune_request(u.freq, lo_offset), port)
        if role == "receiver":
            agc = agc_off(blk, port)            # explicitly, before the gain (a device default may be on)
        blk.set_gain(gain, port)
        if role == "receiver" and hasattr(blk, "set_auto_dc_offset"):
            blk.set_auto_dc_offset(True, port)
    except RuntimeError as e:
        raise AirError(f"uhd: {role} ({key}) rejected its settings: {first_line(e)}; check the ranges with "
                       f"`uhd_usrp_probe --args \"...\"`") from None
    actual = blk.get_samp_rate()
    mcr = check_clock(blk, args, u.rate)
    if abs(actual - u.rate) > 1e-6 * u.rate:
        raise ConfigError("uhd.rate", f"{role} cannot run at {u.rate:g} S/s (UHD coerced it to {actual:g}); "
                                      "pick a rate its master clock divides")
    got_gain, got_freq = float(blk.get_gain(port)), float(blk.get_center_freq(port))
    gkey = "uhd.rx_gain" if role == "receiver" else "uhd.tx_gain"
    if abs(got_gain - gain) > GAIN_TOLERANCE_DB:
        raise ConfigError(gkey, f"{role} ({key}) coerced gain {gain:g} dB to {got_gain:g} dB; its range is "
                                f"{blk.get_gain_range(port)}")
    if abs(got_freq - u.freq) > 1.0:
        raise ConfigError("uhd.freq", f"{role} ({key}) tuned to {got_freq:.6g} Hz, not {u.freq:.6g} Hz")
    if not wait_sensor(blk, "lo_locked", board=False, chan=port):
        raise AirError(f"uhd: {role} ({key}): LO not locked at {u.freq:.6g} Hz (sensor lo_locked false)")
    if clock.get("clock_source") not in (None, "", "internal") and not wait_sensor(blk, "ref_locked"):
        raise AirError(f"uhd: {role} ({key}) does not lock to its {clock['clock_source']} 10 MHz reference "
                       f"(sensor ref_locked false); check the reference cable (see {RUNBOOK})")
    return {"role": role, "rate": float(actual), "freq": got_freq, "gain": got_gain, "lo_offset": float(lo_offset),
            "master_clock_rate": mcr, "agc": agc, "tune": tune_record(tuned, u.freq, got_freq),
            **{k: clock.get(k, "internal") for k in CLOCK_KEYS}}


def stop_capture(blk) -> None:
    """Stop a receive stream now (a timed-out capture must not leak into the next one)."""
    from gnuradio import uhd
    stop = uhd.stream_cmd_t(uhd.stream_mode_t.STREAM_MODE_STOP_CONTINUOUS)
    stop.stream_now = True
    blk.issue_stream_cmd(stop)


SIM_ARM_MARGIN_S = 0.02   # simulator: a capture commanded later than this before its t_rx may open its round late
SIM_HOLD_MAX_S = 10.0     # simulator: the longest a burst is held for its t_tx (a farther t_tx: sent at once)


def sim_hold(t_tx: float) -> None:
    """UHD's simulator keeps no device time: a burst reaches its cable (the lab's hub) as soon as it is sent
    and lands in whatever capture is open then. A node's burst is therefore held until this host's clock (the
    simulator's schedule clock, :meth:`UhdRadio.schedule_clock`) reaches ``t_tx``, as a timed burst is held by a
    USRP. Before (issue 25), the jammer node, told 'go' together with the receiver, sent at once: in about a
    third of the lab's rounds its burst reached the hub before the receiver's capture opened that round and the
    round carried none of the jammer's noise (measured NMSE / theory 0.005 where the jammer is 99.5 % of the
    noise); the receiver flags a capture commanded too close to its start (``SIM_ARM_MARGIN_S``) as a late
    command, so a burst that may have missed its round is never read as delivered."""
    delay = float(t_tx) - time.time()
    if 0.0 < delay <= SIM_HOLD_MAX_S:
        time.sleep(delay)


def settle_capture_faults(faults: dict, sim: bool, received: int, t_issued: float, t_rx: float) -> dict:
    """A capture's faults as they should be read: on the simulator an overflow is its per-capture restart of
    sequence numbers, not a fault; on hardware a capture that got nothing because its command reached the
    radio after its time is a late command, not a timeout."""
    if sim:
        faults.pop("rx_overflow", None)
    elif received == 0 and t_issued >= t_rx and "rx_timeout" in faults:
        faults.pop("rx_timeout")
        faults["rx_late_command"] = 1
    return faults


def stop_flowgraph(tb) -> None:
    if tb is not None:
        try:
            tb.stop()
            tb.wait()
        except RuntimeError:
            pass


class UhdRadio:
    """One transmitting (``tx=True``: client, jammer) or receiving radio of one node.

    ``args`` is its device address as in the config (``uhd.tx_args[i]``, ``uhd.jammer_args``,
    ``uhd.rx_args``; ``channel=N`` and the clock keys allowed); ``key`` names that config entry in errors."""

    def __init__(self, cfg, role: str, key: str, args: str, tx: bool):
        self.cfg, self.role, self.key, self.tx = cfg, role, key, bool(tx)
        addr, self.clock = parse_device_args(args)
        self.args, self.channel = split_channel(addr, key)
        self.sim = bool(cfg.uhd.simulator)
        self.serial = ""
        self.settings: dict = {}
        self.warnings: list[str] = []
        self._tb = self._blk = self._source = self._counter = self._sink = None
        self.device: dict = {}
        self.open_args = self.args

    # ------------------------------------------------------------------ open
    def _discover(self) -> None:
        found = find_usrps(self.args)
        if found is None:
            return                                  # no discovery available: opening will tell
        self.device = the_one_device(found, self.key, self.args, self.role, "uhd", self.sim,
                                     "the devices this host sees (see " + RUNBOOK + ")")
        self.serial = self.device.get("serial", "")

    def _fail(self, what: str, e: BaseException) -> AirError:
        """The radio stopped answering: park its objects (never destroyed: their destructors would talk to
        the dead device with the GIL held, radio/uhd_watchdog.py) and say so in one line naming it."""
        from otafl_sdr.radio.uhd_watchdog import park
        tb, blk, sink, source, counter = self._tb, self._blk, self._sink, self._source, self._counter
        self._tb = self._blk = self._source = self._counter = self._sink = None
        park(tb, blk, sink, source, counter)
        return AirError(f"uhd: the {self.role} radio ({self.key}) {what}: {first_line(e)}; check it with {FIND_HINT}")

    def _call(self, fn, what: str):
        """A device call, bounded by the watchdog (a hung radio raises RadioHung, a RuntimeError)."""
        from otafl_sdr.radio.uhd_watchdog import guarded
        return guarded(fn, f"{self.role} {what}")

    def open(self) -> "UhdRadio":
        """Discover, open, configure, set device time, start the flowgraph and (TX) send the primer."""
        try:
            from gnuradio import blocks, gr, uhd
        except ImportError:
            raise AirError(f"uhd: GNU Radio's UHD bindings (gr-uhd) are not installed; install gnuradio and "
                           f"python3-uhd, then check the radio with {FIND_HINT}") from None
        from otafl_sdr.radio.uhd_burst import TimedBurstSource
        from otafl_sdr.radio.uhd_events import ASYNC_PORT, AsyncEventCounter

        from otafl_sdr.radio.uhd_settings import device_args
        self._discover()
        self.open_args, chosen = device_args(self.args, self.device, self.cfg.uhd.rate, self.sim)
        sa = uhd.stream_args(cpu_format="fc32", channels=[self.channel])
        from otafl_sdr.radio.uhd_thread_slack import device_threads_slack
        try:
            with device_threads_slack(self.sim):                  # the device's polling control thread
                self._blk = (uhd.usrp_sink(uhd.device_addr_t(self.open_args), sa, "") if self.tx
                             else uhd.usrp_source(uhd.device_addr_t(self.open_args), sa, False))
        except RuntimeError as e:
            raise AirError(f"uhd: cannot open {self.role} ({self.key} = '{self.args}'): {first_line(e)}; check it "
                           f"with `uhd_usrp_probe --args \"{self.args}\"` and {FIND_HINT}") from None
        tb = gr.top_block(f"otafl_uhd_{self.role.replace(' ', '_')}")
        try:
            from otafl_sdr.calibration.tx_gains import tx_gain_for          # uhd.tx_gains, else uhd.tx_gain
            gain = tx_gain_for(self.cfg.uhd, self.role, self.serial) if self.tx else self.cfg.uhd.rx_gain
            lo = 0.0 if self.sim else float(self.cfg.uhd.lo_offset)
            self.settings = {"args": self.args, "channel": self.channel, **chosen,
                             **configure_radio(self.cfg, self._blk, 0, self.role, self.key, self.clock, gain, lo,
                                               self.open_args)}
            if self.tx:
                self._source, self._counter = TimedBurstSource(), AsyncEventCounter(self.role.replace(" ", ""))
                tb.msg_connect(self._blk, ASYNC_PORT, self._counter, ASYNC_PORT)
                tb.connect(self._source, self._blk)
            else:
                self._sink = blocks.vector_sink_c()
                tb.connect(self._blk, self._sink)
            self._align_time()
            self._retune()
            self.settings.update(serial=self.serial, simulator=self.sim)
            self._tb = tb
            tb.start()
            if self.tx:
                self._prime()
            elif self.sim:
                # a lab of simulators: the receiver's simulator (the hub) starts hearing the others' forwarded
                # streams at its first capture; one short capture now, so every transmitter is joined before
                # the first exchange (the simulator keeps no time: a forwarded stream unknown to a capture
                # could be read past)
                self.arm(PRIMER_SAMPLES, 0.0)
                self.collect(time.time())
        except BaseException:
            self.close()
            raise
        return self

    def _align_time(self) -> None:
        from gnuradio import uhd

        blk = self._blk
        shared = (self.clock.get("time_source") in SYNC_SOURCES and self.clock.get("clock_source") in SYNC_SOURCES)
        if not shared:
            if not self.cfg.air.allow_unsynced:
                raise ConfigError("air.allow_unsynced", f"{self.role} ({self.key}) has no shared 10 MHz and PPS "
                                  "(clock_source=external,time_source=external, or gpsdo, in its address): its "
                                  "bursts would not line up with the other hosts' radios; wire it (see "
                                  f"{RUNBOOK}) or set air.allow_unsynced = true to run anyway")
            blk.set_time_now(uhd.time_spec_t(time.time()), 0)
            self.warnings.append(f"{self.role}: no shared 10 MHz / PPS (air.allow_unsynced): device time set from the "
                                 "host clock; bursts line up only to the hosts' clock error")
            return
        wait_for_pps_edge(blk, f"uhd: no PPS edge on {self.role}", "the PPS cable or the GPSDO")
        second = pps_second(time.time()) + 1                 # the NEXT edge's UTC second
        blk.set_time_next_pps(uhd.time_spec_t(float(second)))
        wait_for_pps_edge(blk, f"uhd: no PPS edge on {self.role}", "the PPS cable or the GPSDO")
        last = blk.get_time_last_pps(0).get_real_secs()
        if abs(last - second) > 0.5:
            raise AirError(f"uhd: {self.role}'s device did not take time {second} at the PPS edge (it reads "
                           f"{last:.3f}); check its time_source and the PPS cable (see {RUNBOOK})")
        off = blk.get_time_now(0).get_real_secs() - time.time()
        if abs(off) > HOST_CLOCK_TOLERANCE_S:
            raise AirError(f"uhd: {self.role}'s device time is {off:+.3f} s from this host's clock after the PPS edge: "
                           f"the host clock is not synchronised (check NTP/chrony; see {RUNBOOK})")

    def _retune(self) -> None:
        """Timed tuning where the family supports it (radio/uhd_settings.timed_retune), once device time is
        UTC: the LO and DSP phases restart at a whole second plus 0.5 s of device time."""
        from otafl_sdr.radio.uhd_settings import family, timed_retune
        shared = (self.clock.get("time_source") in SYNC_SOURCES and self.clock.get("clock_source") in SYNC_SOURCES)
        if self.sim or not shared:
            self.settings["timed_tune"] = None
            return
        lo = float(self.cfg.uhd.lo_offset)
        self.settings["timed_tune"] = timed_retune([(self._blk, 0, family(self.device))], float(self.cfg.uhd.freq),
                                                   lo, self._blk.get_time_now(0).get_real_secs())

    def device_time(self) -> float:
        if self._blk is None:
            raise AirError(f"uhd: the {self.role} radio ({self.key}) is closed after an earlier failure")
        blk = self._blk
        try:
            return self._call(lambda: blk.get_time_now(0).get_real_secs(), "get_time_now")
        except RuntimeError as e:
            raise self._fail("stopped answering", e) from None

    def schedule_clock(self) -> float:
        """The device time bursts are scheduled in, as reported to the server's clock check (net/uhd_clock.py):
        the radio's own; on UHD's simulator, which keeps none (it stays 0), this host's clock (what an unsynced
        radio's device time is set from)."""
        return time.time() if self.sim else self.device_time()

    # ------------------------------------------------------------------ transmit
    def _prime(self) -> None:
        """The end-of-burst fix of :meth:`UhdAir._prime` for this radio: one short timed burst of zeros
        absorbs the start-of-burst gr-uhd caches at start; its ``burst_ack`` is awaited (not on the simulator,
        which sends no async messages)."""
        t0 = self.device_time() + PRIMER_LEAD_S
        self._counter.take()
        self._source.send(np.zeros(PRIMER_SAMPLES, np.complex64), (int(t0), t0 - int(t0)))
        if self.sim:
            deadline = time.monotonic() + SIM_EXTRA_WAIT_S
            while time.monotonic() < deadline and self._blk.nitems_read(0) < PRIMER_SAMPLES:
                time.sleep(0.01)
            return
        wait = PRIMER_LEAD_S + PRIMER_SAMPLES / float(self.cfg.uhd.rate) + ACK_MARGIN_S
        if not self._counter.wait_for("burst_ack", 1, wait):
            raise AirError(f"uhd: no burst_ack for the primer burst from {self.role} within {wait:.1f} s (events: "
                           f"{dict(self._counter.take()) or 'none'}): the radio does not end timed bursts; check its "
                           f"time source and {RUNBOOK}")
        self._counter.take()

    def set_gain(self, gain_db: float) -> float:
        """A power-sweep step: ``gain_db`` on uhd.tx_gain's scale, so a TX radio goes to its own gain
        (uhd.tx_gains, else uhd.tx_gain) + (gain_db - uhd.tx_gain), as the in-process link steps it."""
        from otafl_sdr.radio.uhd_watchdog import RadioHung
        if self._blk is None:
            raise AirError(f"uhd: the {self.role} radio ({self.key}) is closed after an earlier failure")
        if self.tx:
            from otafl_sdr.calibration.tx_gains import tx_gain_for
            gain_db = tx_gain_for(self.cfg.uhd, self.role, self.serial) + float(gain_db) - float(self.cfg.uhd.tx_gain)
        blk = self._blk
        try:
            self._call(lambda: blk.set_gain(float(gain_db), 0), "set_gain")
        except RadioHung as e:
            raise self._fail("stopped answering", e) from None
        except RuntimeError as e:
            raise AirError(f"uhd: {self.role} ({self.key}) rejected gain {gain_db:g} dB: {first_line(e)}") from None
        got = float(self._blk.get_gain(0))
        if abs(got - gain_db) > GAIN_TOLERANCE_DB:
            raise AirError(f"uhd: {self.role} ({self.key}) coerced gain {gain_db:g} dB to {got:g} dB")
        return got

    def send(self, burst: np.ndarray, t_tx: float, t_rx: float, n_cap: int = 0) -> dict[str, int]:
        """One timed burst at device time ``t_tx`` (the receiver's capture of ``n_cap`` samples starts at
        ``t_rx``); waits for its ``burst_ack`` and returns the radio's fault counts (``dac_clip`` and nothing
        sent if the burst passes the DAC's full scale). On the simulator (no device time) the burst is sent
        with zeros for its offset into the capture in front, which the simulator's cable keeps, and zeros
        to the capture's end behind it (a capture there waits for every stream to cover what it reads)."""
        from otafl_sdr.radio.uhd_events import merge_counts

        if self._tb is None:
            raise AirError(f"uhd: {self.role} radio is not open")
        burst = np.asarray(burst, dtype=np.complex64)
        t_now = self.device_time()              # a radio that stopped answering raises here (UDP sends never do)
        if burst.size and float(np.max(np.abs(burst))) > DAC_FULL_SCALE:
            return {"dac_clip": 1}
        rate = float(self.cfg.uhd.rate)
        if self.sim:
            sim_hold(t_tx)                      # a timed burst: not before t_tx (else it can miss its capture)
            burst = sim_lo_offset(burst, t_tx, rate)
            lead = max(int(round((t_tx - t_rx) * rate)), 0)
            tail = max(int(n_cap) - lead - burst.size, 0)
            burst = np.concatenate([np.zeros(lead, np.complex64), burst, np.zeros(tail, np.complex64)])
        try:
            self._counter.take()                                  # stray events from before this burst
            self._source.send(burst, (int(t_tx), t_tx - int(t_tx)))
            if self.sim:
                from otafl_sdr.radio.uhd_exchange import wait_for_items
                wait_for_items(self._blk, int(self._blk.nitems_read(0)), burst.size,
                               time.monotonic() + SIM_EXTRA_WAIT_S)
                return {}
            wait = max(t_tx - t_now, 0.0) + burst.size / rate + ACK_MARGIN_S
            acked = self._counter.wait_for("burst_ack", 1, wait)
            return merge_counts(self._counter.take(), {"missing_burst_ack": 0 if acked else 1})
        except RuntimeError as e:
            raise self._fail("failed during a burst", e) from None

    # ------------------------------------------------------------------ receive
    def arm(self, n: int, t_rx: float) -> None:
        """Command a capture of ``n`` samples from device time ``t_rx`` (STREAM_MODE_NUM_SAMPS_AND_DONE)."""
        from gnuradio import uhd

        if self._tb is None:
            raise AirError(f"uhd: {self.role} radio is not open")
        self._sink.reset()
        self._base = int(self._sink.nitems_read(0))
        self._n, self._t_rx = int(n), float(t_rx)
        self._t_armed = self.device_time()
        blk = self._blk
        try:
            cmd = uhd.stream_cmd_t(uhd.stream_mode_t.STREAM_MODE_NUM_SAMPS_AND_DONE)
            cmd.num_samps = int(n)
            cmd.stream_now = False
            cmd.time_spec = uhd.time_spec_t(int(t_rx), t_rx - int(t_rx))
            self._call(lambda: blk.issue_stream_cmd(cmd), "issue_stream_cmd")
        except RuntimeError as e:
            raise self._fail("failed to arm its capture", e) from None
        self._t_issued = self.schedule_clock() if self.sim else self.device_time()

    def collect(self, deadline: float) -> tuple[np.ndarray, dict[str, int]]:
        """The armed capture once it is complete (or at ``deadline``, time.time()) and its faults
        (``rx_timeout``, overflow, late command, from the ``rx_time`` tags). The wait reads the sink's item
        counter; the samples are copied once, at the end (radio/uhd_exchange.py: no GIL stall)."""
        from otafl_sdr.radio.uhd_events import rx_tag_faults
        from otafl_sdr.radio.uhd_exchange import read_capture, wait_for_items

        if self._sink is None:
            raise AirError(f"uhd: the {self.role} radio ({self.key}) is closed after an earlier failure")
        rate, n = float(self.cfg.uhd.rate), self._n
        end = max(deadline, time.time() + (SIM_EXTRA_WAIT_S if self.sim else 0.0))
        blk = self._blk
        try:
            wait_for_items(self._sink, self._base, n, time.monotonic() + max(0.0, end - time.time()))
            samples, tags = read_capture(self._sink, self._base, n)
            faults = rx_tag_faults(tags, n, len(samples), None if self.sim else self._t_rx, rate)
            if "rx_timeout" in faults:                   # cut short: a receiver that stopped answering fails here
                self._call(lambda: blk.get_time_now(0).get_real_secs(), "get_time_now")
                self._call(lambda: stop_capture(blk), "stop its capture")
        except RuntimeError as e:
            raise self._fail("failed during its capture", e) from None
        if self.sim and self._t_rx > 0 and self._t_issued > self._t_rx - SIM_ARM_MARGIN_S:
            faults["rx_late_command"] = faults.get("rx_late_command", 0) + 1      # sim_hold: its round may be late
        return samples, settle_capture_faults(faults, self.sim, len(samples), self._t_issued, self._t_rx)

    def close(self) -> None:
        tb, self._tb = self._tb, None
        stop_flowgraph(tb)
        self._blk = self._source = self._counter = self._sink = None
