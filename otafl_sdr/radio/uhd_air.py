"""The `uhd` air: real USRPs through gr-uhd, one timed burst per round (issue 3, item 3).

One persistent GNU Radio flowgraph drives every radio: per client (``uhd.tx_args[i]``) and for the
jammer (``uhd.jammer_args``) a :class:`~otafl_sdr.radio.uhd_burst.TimedBurstSource` feeds a
``usrp_sink`` whose ``async_msgs`` port goes to an :class:`~otafl_sdr.radio.uhd_events.AsyncEventCounter`;
the receiver (``uhd.rx_args``) is a ``usrp_source`` that streams only on a timed command into a vector
sink. A round:

1. each transmitting client i modulates alpha_i s(u_i) with the phy modem (paper 000 eq. 10), its
   reference pre-equalised with the channel it *knows* (the CSI the plan used; the air never knows the
   true h), the jammer draws alpha_cj n, n ~ CN(0, 2) per sample (eq. 15);
2. t0 = device time + ``uhd.start_delay``; the receiver is commanded to capture
   burst + 2 x lead samples from t0 - lead; every burst is sent with ``tx_time`` = t0;
3. the capture is checked: any async event (late command, underflow, sequence error), a missing
   ``burst_ack``, an overflow / late stream command seen in the ``rx_time`` tags, or a jammer sample
   beyond the DAC's full scale (the clients' bursts are clipped to it: ``clip_to_dac``) makes the round faulty, returned as ``Reception(ok=False, reason="uhd: late command
   x2", faults={...})`` and never demodulated;
4. otherwise the phy modem demodulates the capture; the aggregate is unpack(y) / alpha_u (eq. 16).

``air.coherence``: ``"measure"`` continues each client's burst with its sounding part after the frame and the
jammer's slot, read into ``link_health['clients']`` (radio/appended_sounding.py); ``"track"`` runs
radio/uhd_coherent_round.py instead (sounding, feedback, the payload corrected); OFDM: radio/uhd_ofdm.py.

Everything but the device objects is plain code tested without hardware: the round's signals in
uhd_round_signal.py (client_bursts, jammer_burst, finish_round), device facts and discovery in
uhd_device.py (parse_device_args, parse_find_devices_output).
With no USRP attached :meth:`UhdAir.start` raises AirError naming ``uhd_find_devices``.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from otafl_sdr.airs import Air
from otafl_sdr.errors import AirError, ConfigError
from otafl_sdr.phy import Modem
from otafl_sdr.phy.client_sounding import SoundingLayout
from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.transmission import Reception, RoundPlan
from otafl_sdr.radio.uhd_device import (ACK_MARGIN_S, DAC_FULL_SCALE, FIND_HINT, LEAD_SAMPLES,
                         RUNBOOK, SIM_EXTRA_WAIT_S, SYNC_SOURCES, find_usrps,
                         first_line, parse_device_args, the_one_device)
from otafl_sdr.radio.appended_sounding import read_parts, sounding_part
from otafl_sdr.radio.uhd_round_signal import (client_bursts, client_reference, clip_to_dac, dac_faults, finish_round,
                                              jammer_burst, known_channel)
from otafl_sdr.radio.uhd_round_signal import undelivered_noise  # noqa: F401  (moved there; imported from here too)

# UHD prints an INFO banner on stderr when libuhd loads; keep the console to warnings unless asked
os.environ.setdefault("UHD_LOG_CONSOLE_LEVEL", "warning")

# ------------------------------------------------------------------------------------------------
@dataclass
class Radio:
    role: str                      # 'client 0', 'jammer', 'receiver'
    key: str                       # config key of its device address
    args: str                      # UHD device address (clock/time keys removed)
    clock: dict
    serial: str = ""               # as discovery reports it
    device: dict | None = None     # discovery's dict of its device (family, product)
    open_args: str = ""            # the address its block was opened with (radio/uhd_settings.device_args)
    chosen: dict | None = None     # what that address chose: family, master clock, frame size
    channel: int = 0               # the device's channel this radio streams on ('channel=N' in its address)
    port: int = 0                  # its channel index on its gr-uhd block (blocks stream a device's channels)
    block: object = None           # usrp_sink / usrp_source
    source: object = None          # TimedBurstSource (TX radios)
    counter: object = None         # AsyncEventCounter (TX radios)
    tunes: int = 0                 # how often the host tuned it again since it was opened (UhdAir.retune)


class UhdAir(Air):
    """Real USRPs via gr-uhd, timed bursts (see the module docstring). Config: ``[uhd]`` tx_args (one
    device address per client), jammer_args, rx_args, freq, rate, tx_gain, rx_gain, start_delay; a
    ``clock_source=`` / ``time_source=`` key in an address selects the radio's reference
    (``external`` for a shared 10 MHz / PPS, see firmware_notes/uhd_runbook.md)."""

    name = "uhd"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.modem = Modem(cfg.phy)
        self._tb = None
        self._clients: list[Radio] = []
        self._jammer: Radio | None = None
        self._rx: Radio | None = None
        self._sink = None
        self.warnings: list[str] = []
        self.settings: list[dict] = []     # each radio's actual (not requested) rate, frequency, gain, sources
        self.calibration_path = None       # a calibration taken in this session (else calibration.file)
        self._known = None                 # (cfo, delay) pre-compensated per client, from that calibration
        self._jammer_gain = None           # (lower bound or None,) of that calibration's jammer step, once read
        self._jam_delay = None             # the jammer's calibrated delay (samples), once read
        self.hw = ""
        self.health: dict | None = None    # the last round's link health (calibration/link_health.py)
        self.coherence = None              # air.coherence: the per-client loop (calibration/coherence_loop.py)
        self.coherence_t0 = None           # ... the device time its last round started
        self.coherence_alarms: list[str] = []   # ... what its last round could not hold (recalibration_due)

    # -------------------------------------------------------------------- start: checks, devices
    def _check_config(self) -> None:
        u, K = self.cfg.uhd, self.cfg.data.clients
        if len(u.tx_args) != K:
            raise ConfigError("uhd.tx_args", f"needs one device address per client (data.clients = {K}), "
                                             f"got {len(u.tx_args)}")
        if not all(isinstance(a, str) and a.strip() for a in u.tx_args):
            raise ConfigError("uhd.tx_args", "every entry must be a non-empty device address, e.g. 'serial=31A0B1C'")
        if self.cfg.power.jammer and not u.jammer_args.strip():
            raise ConfigError("uhd.jammer_args", "power.jammer = true needs a jammer radio (its noise is part of "
                                                 "the privacy guarantee); give its device address")
        if not u.rx_args.strip():
            raise ConfigError("uhd.rx_args", "give the receiver's device address, e.g. 'serial=31A0B1D'")
        if u.start_delay <= 0:
            raise ConfigError("uhd.start_delay", f"must be > 0 s, got {u.start_delay}")
        if self.cfg.air.csi == "perfect":
            raise ConfigError("air.csi", "'perfect' CSI is a simulation's: on real radios the clients would invert "
                                         "a simulated channel; use air.csi = 'calibrated' (run `otafl-sdr calibrate "
                                         "channel --air uhd` first)")

    def _radios(self) -> list[Radio]:
        u = self.cfg.uhd
        from otafl_sdr.radio.uhd_channels import split_channel
        named = [(f"client {i}", f"uhd.tx_args[{i}]", a) for i, a in enumerate(u.tx_args)]
        if self.cfg.power.jammer:
            named.append(("jammer", "uhd.jammer_args", u.jammer_args))
        named.append(("receiver", "uhd.rx_args", u.rx_args))
        radios = []
        for role, key, a in named:
            args, clock = parse_device_args(a)
            args, channel = split_channel(args, key)
            radios.append(Radio(role, key, args, clock, channel=channel))
        return radios

    def _discover(self, radios: list[Radio]) -> None:
        """Each radio's address is looked up on its own (an ``addr=`` is asked by unicast, so a USRP on
        another subnet is found where broadcast finds nothing); in-process ``uhd.find``, no subprocess."""
        cache: dict[str, list | None] = {}
        for a in [""] + [r.args for r in radios if r.args]:     # broadcast, then each address
            if a not in cache:
                cache[a] = find_usrps(a)
        if all(v is None for v in cache.values()):
            self._check_config()
            return                          # no discovery available: opening the devices will tell
        if not any(cache.values()):
            raise AirError(f"uhd air: no USRP found (UHD sees no device); connect and power the radios and check "
                           f"them with {FIND_HINT} (see {RUNBOOK})")
        self._check_config()
        found: dict[int, dict] = {}
        for r in radios:
            device = the_one_device(cache[r.args], r.key, r.args, r.role, "uhd air", self.cfg.uhd.simulator)
            r.serial, r.device = device.get("serial", ""), device
            found[id(r)] = device
        from otafl_sdr.radio.uhd_channels import check_shared
        check_shared(radios, found)          # transmitters sharing a USRP: one channel each (uhd_channels.py)

    def _open(self, radios: list[Radio]) -> None:
        from gnuradio import blocks, gr, uhd

        from otafl_sdr.radio.uhd_burst import TimedBurstSource
        from otafl_sdr.radio.uhd_events import ASYNC_PORT, AsyncEventCounter

        from otafl_sdr.radio.uhd_channels import stream_groups
        u = self.cfg.uhd
        tb = gr.top_block("otafl_uhd_air")
        groups, rx_chans = stream_groups(radios)

        from otafl_sdr.radio.uhd_settings import device_args
        from otafl_sdr.radio.uhd_thread_slack import device_threads_slack

        def make(r, chans, sink: bool):
            # master clock per family, frame sizes (radio/uhd_settings.py); the simulator keeps its defaults
            r.open_args, r.chosen = device_args(r.args, r.device, u.rate, bool(u.simulator))
            try:
                with device_threads_slack(bool(u.simulator)):      # the device's polling control thread
                    if sink:
                        return uhd.usrp_sink(uhd.device_addr_t(r.open_args),
                                             uhd.stream_args(cpu_format="fc32", channels=chans), "")
                    return uhd.usrp_source(uhd.device_addr_t(r.open_args),
                                           uhd.stream_args(cpu_format="fc32", channels=chans), False)
            except RuntimeError as e:
                raise AirError(f"uhd air: cannot open {r.role} ({r.key} = '{r.args}'): {first_line(e)}; "
                               f"check it with `uhd_usrp_probe --args \"{r.args}\"` and {FIND_HINT}") from None
        for members in groups.values():            # one usrp_sink per device, one port per TX radio on it
            blk = make(members[0], [m.channel for m in members], True)
            counter = AsyncEventCounter("+".join(m.role.replace(" ", "") for m in members))
            tb.msg_connect(blk, ASYNC_PORT, counter, ASYNC_PORT)
            for port, r in enumerate(members):
                r.block, r.port, r.counter, r.source = blk, port, counter, TimedBurstSource()
                r.open_args, r.chosen = members[0].open_args, members[0].chosen
                from otafl_sdr.calibration.tx_gains import tx_gain_for
                self._configure(r, tx_gain_for(u, r.role, r.serial))      # uhd.tx_gains, else uhd.tx_gain
                tb.connect(r.source, (blk, port))
                if r.role == "jammer":
                    self._jammer = r
                else:
                    self._clients.append(r)
        for r in radios:
            if r.role != "receiver":
                continue
            r.block, r.port = make(r, rx_chans, False), rx_chans.index(r.channel)
            self._configure(r, u.rx_gain)
            self._sink = blocks.vector_sink_c()
            for p in range(len(rx_chans)):
                tb.connect((r.block, p), self._sink if p == r.port else blocks.null_sink(gr.sizeof_gr_complex))
            self._rx = r
        self._clients.sort(key=lambda c: int(c.role.split()[1]))
        self._tb = tb

    def _configure(self, r: Radio, gain: float) -> None:
        from otafl_sdr.radio.uhd_radio import configure_radio
        actual = configure_radio(self.cfg, r.block, r.port, r.role, r.key, r.clock, gain, self._lo_offset(),
                                 r.open_args)
        self.settings.append({"args": r.args, "serial": r.serial, "channel": r.channel, **r.chosen, **actual})

    def _lo_offset(self) -> float:
        """uhd.lo_offset, or 0 on UHD's simulator (it has no LO and no DSP tuning to undo an offset)."""
        return 0.0 if self.cfg.uhd.simulator else float(self.cfg.uhd.lo_offset)

    def _align_time(self) -> None:
        """Same device time on every radio: zero at the next PPS edge when every radio has both an external
        (or GPSDO) 10 MHz and PPS; radios that are one device share its clock. Otherwise the run is refused
        unless ``air.allow_unsynced`` (then set_time_now per radio, recorded as a warning)."""
        from gnuradio import uhd

        radios = self._tx_radios() + [self._rx]
        shared = all(r.clock.get("time_source") in SYNC_SOURCES and r.clock.get("clock_source") in SYNC_SOURCES
                     for r in radios)
        devices = {r.serial or r.args for r in radios}
        if not shared:
            if len(devices) > 1 and not self.cfg.air.allow_unsynced:
                raise ConfigError("air.allow_unsynced", f"the {len(devices)} radios do not share a 10 MHz and PPS "
                                  "(clock_source=external,time_source=external in every address, or gpsdo): their "
                                  "bursts would not superpose in time; wire them (see "
                                  f"{RUNBOOK}) or set air.allow_unsynced = true to run anyway")
            for r in radios:
                r.block.set_time_now(uhd.time_spec_t(0.0), 0)
            if len(devices) > 1:
                self.warnings.append("no shared 10 MHz / PPS (air.allow_unsynced): radio times differ by the host's "
                                     "call latency; bursts will not be aligned")
            return
        from otafl_sdr.radio.uhd_radio import wait_for_pps_edge
        wait_for_pps_edge(radios[0].block, f"uhd air: no PPS edge on {radios[0].role}",
                          "the PPS cable or set time_source=internal")
        for r in radios:                                    # right after an edge: all before the next one
            r.block.set_time_next_pps(uhd.time_spec_t(0.0))
        wait_for_pps_edge(radios[0].block, f"uhd air: no PPS edge on {radios[0].role}",
                          "the PPS cable or set time_source=internal")
        pps = [r.block.get_time_last_pps(0).get_real_secs() for r in radios]
        if max(pps) - min(pps) > 0.5:
            raise AirError(f"uhd air: radios disagree on the PPS second after set_time_next_pps ({pps}); check the "
                           f"PPS distribution (see {RUNBOOK})")
        from otafl_sdr.radio.uhd_settings import family, timed_retune        # LO / DSP phases restart together where timed
        t_cmd = timed_retune([(r.block, r.port, family(r.device or {})) for r in radios], float(self.cfg.uhd.freq),
                             self._lo_offset(), radios[0].block.get_time_now(0).get_real_secs())
        for d in self.settings:
            d["timed_tune"] = t_cmd

    def _tx_radios(self) -> list[Radio]:
        return self._clients + ([self._jammer] if self._jammer is not None else [])

    def _device_time(self) -> float:
        from otafl_sdr.radio.uhd_watchdog import guarded
        rx = self._rx.block
        try:
            return guarded(lambda: rx.get_time_now(0).get_real_secs(), "receiver get_time_now")
        except RuntimeError as e:
            key = self._rx.key
            self._park()
            raise AirError(f"uhd air: the receiver ({key}) stopped answering: {first_line(e)}; check the radio "
                           f"with {FIND_HINT}, then resume with --resume") from None

    def _capture(self, n_cap: int, t_rx: float, sends: list, feedback=None) -> tuple[np.ndarray, dict[str, int]]:
        """One timed exchange: arm the receiver for ``n_cap`` samples from device time ``t_rx``
        (``STREAM_MODE_NUM_SAMPS_AND_DONE``), send each ``(radio, burst, t)`` as a timed burst, wait for the
        capture and the burst acks. Returns the samples and every radio's fault counts. A UHD error (a radio
        gone) parks the radios (idle, never stopped: radio/uhd_watchdog.park) and raises AirError.
        ``feedback = (n_first, make)``: once the capture's first ``n_first`` samples are in, ``make(them)``
        returns the exchange's second sends (a coherent round's payload after its sounding,
        radio/uhd_coherent_round.py); a capture that stalls before them is cut short (``rx_timeout``).

        On UHD's simulator (``uhd.simulator``) the device time stays 0 and no burst ack comes: timing and
        acks are not checked there (the capture's length still is); each burst is sent with zeros for its
        offset from the capture's start in front, which the simulator's TX->RX cable then keeps; a radio with
        nothing to send sends zeros (the simulated lab's hub waits seconds for a stream that has not sent,
        radio/uhd_channels.silent_radio_zeros); where every transmitter is a device of its own (the
        simulated lab: each stream forwarded to the hub, which waits START_S for one that has not started)
        a single-carrier burst goes on with zeros to the capture's end, so the hub hands the capture over
        at once, not after its idle wait. Not padded: two channels of one simulated E320 (beside a busy core
        an OFDM check round there read 261x theory in 8 of 12 runs) and OFDM rounds (an OFDM check round in
        the lab read 418x theory once in a full test run); why is not pinned down (the cable's log shows no
        held burst). A ``feedback`` exchange's first part is sent without its end of burst, so the cable
        holds the capture where that part ends until the second part comes, however long the host takes to
        turn it round (radio/uhd_sim_loopback.py)."""
        from gnuradio import uhd

        from otafl_sdr.radio.uhd_events import merge_counts, rx_tag_faults
        from otafl_sdr.radio.uhd_radio import settle_capture_faults, stop_capture

        rate, sim = float(self.cfg.uhd.rate), bool(self.cfg.uhd.simulator)
        from otafl_sdr.radio.uhd_channels import combine_sends, silent_radio_zeros
        from otafl_sdr.radio.uhd_exchange import (failure_undelivered, gather_acks, probe_radios, read_capture, sender_faults,
                                   wait_for_items)
        from otafl_sdr.radio.uhd_watchdog import guarded
        rx, senders = self._rx.block, []
        try:
            t_now = guarded(lambda: rx.get_time_now(0).get_real_secs(), "receiver get_time_now")
            for r in self._tx_radios():
                r.counter.take()                                   # stray events from before this exchange
            self._sink.reset()
            base = int(self._sink.nitems_read(0))
            cmd = uhd.stream_cmd_t(uhd.stream_mode_t.STREAM_MODE_NUM_SAMPS_AND_DONE)
            cmd.num_samps = int(n_cap)
            cmd.stream_now = False
            cmd.time_spec = uhd.time_spec_t(int(t_rx), t_rx - int(t_rx))
            guarded(lambda: rx.issue_stream_cmd(cmd), "receiver issue_stream_cmd")
            t_issued = guarded(lambda: rx.get_time_now(0).get_real_secs(), "receiver get_time_now")
            sent: dict[int, int] = {}      # samples each radio handed over (the simulator pads from there)
            txs = self._tx_radios()
            pad_to_end = (len({id(r.block) for r in txs}) == len(txs)        # each its own device,
                          and self.cfg.phy.waveform != "ofdm")                 # single carrier (doc above)

            def send_all(sends, end=True):
                fill = silent_radio_zeros(sends, txs, t_rx, n_cap) if sim else []
                for r, burst, ts in combine_sends(sends + fill, txs, rate):   # one burst per device port
                    burst = np.asarray(burst, dtype=np.complex64)
                    if sim:                 # no device time: the burst's offset in the capture is padded in
                        pad = max(int(round((ts - t_rx) * rate)) - sent.get(id(r), 0), 0)
                        burst = np.concatenate([np.zeros(pad, np.complex64), burst])
                        if end and pad_to_end:      # to the capture's end: the hub hands it over at once
                            cover = n_cap + 8 - sent.get(id(r), 0) - len(burst)
                            burst = np.concatenate([burst, np.zeros(max(cover, 0), np.complex64)])
                    sent[id(r)] = sent.get(id(r), 0) + len(burst)
                    if not any(x is r for x in senders) and not any(f[0] is r for f in fill):
                        senders.append(r)   # handed to its radio: client data may be on the air from here
                    r.source.send(burst, (int(ts), ts - int(ts)), end)
            # the simulator's cable holds a capture at an open burst: the first part stays open until the second
            send_all(sends, end=not (sim and feedback is not None))
            wait = max(t_rx - t_now, 0.0) + n_cap / rate + ACK_MARGIN_S + (SIM_EXTRA_WAIT_S if sim else 0.0)
            deadline = time.monotonic() + wait
            if feedback is not None:        # the second part, made from the first part's samples
                n_first, make = feedback
                if wait_for_items(self._sink, base, n_first, deadline) >= n_first:
                    send_all(make(np.asarray(self._sink.data(), dtype=np.complex64)[:n_first]))
            wait_for_items(self._sink, base, n_cap, deadline)     # the item counter: no copy under the GIL
            acked = gather_acks(senders, deadline, sim)          # each radio its own channel's burst_ack
            samples, tags = read_capture(self._sink, base, n_cap)
            # each transmitter's own faults (jammer fault reporting: rounds/accounting.fault_charge)
            self.tx_faults = sender_faults(senders, acked)
            faults = merge_counts(*self.tx_faults.values(),
                                  rx_tag_faults(tags, n_cap, len(samples), None if sim else t_rx, rate))
            if "rx_timeout" in faults or not all(acked):        # cut short: is every radio still answering?
                probe_radios([rx] + [r.block for r in senders])
            if "rx_timeout" in faults:                         # do not let a late capture leak into the next one
                guarded(lambda: stop_capture(rx), "receiver stop_capture")
        except RuntimeError as e:
            err = AirError(f"uhd air: a radio failed during the exchange: {first_line(e)}; its radios are left "
                           f"idle; check them with {FIND_HINT} and resume with --resume")
            # what went out without its confirmed noise is charged before the run stops (accounting.release)
            err.undelivered = failure_undelivered(senders, first_line(e))
            self._park()
            raise err from None
        return samples, settle_capture_faults(faults, sim, len(samples), t_issued, t_rx)

    def use_calibration(self, path) -> None:
        """Take the clients' offsets (and the jammer's measured noise) from this (fresh) calibration from now on."""
        self.calibration_path, self._known, self._jammer_gain, self._jam_delay = path, None, None, None
        self.coherence, self.coherence_t0 = None, None   # the per-client loop starts again from it

    def retune(self, client: int, hop_hz: float = 1e6) -> None:
        """Tune client ``client``'s radio away by ``hop_hz`` and back (a frequency hop, a front end tuned
        again): an AD9361's PLLs relock at a random LO phase, which the next round's sounding measures. The
        host knows it tuned: the coherent round names it for that client ('retuned by its host', link_health)."""
        from gnuradio import uhd
        r = self._clients[int(client)]
        freq, lo = float(self.cfg.uhd.freq), self._lo_offset()
        try:
            for f in (freq + float(hop_hz), freq):
                r.block.set_center_freq(uhd.tune_request(f, lo), r.port)
        except RuntimeError as e:
            raise AirError(f"uhd air: {r.role} ({r.key}) could not be tuned again: {first_line(e)}") from None
        r.tunes += 1

    @contextmanager
    def rounds_under(self, cfg, before_round: int = 1):
        """Rounds under another config's settings for a while (the run's coherence check, in its per-client
        ``air.coherence`` mode, before the run's round ``before_round``: experiment/coherence_gate.py); the
        radios and the calibration are the run's, and the per-client loop starts again from the calibration
        before and after."""
        run_cfg, self.cfg = self.cfg, cfg
        self.coherence, self.coherence_t0, self.coherence_alarms = None, None, []
        try:
            yield self
        finally:
            self.cfg = run_cfg
            self.coherence, self.coherence_t0, self.coherence_alarms = None, None, []

    def _jammer_delay(self, clients: int) -> float:
        """The jammer's calibrated arrival delay relative to the earliest client (samples), in a calibrated
        run (radio/uhd_exchange.jammer_delay); 0 otherwise."""
        if self.cfg.air.csi != "calibrated":
            return 0.0
        if self._jam_delay is None:
            from otafl_sdr.radio.uhd_exchange import jammer_delay
            self._jam_delay = jammer_delay(self.cfg, clients, self.calibration_path)
        return self._jam_delay

    def delivered_jammer_gain(self) -> float | None:
        """The jammer step of the latest calibration (this session's, else calibration.file): the lower
        3-sigma bound of the noise variance its radio delivers per unit alpha_cj^2; None if not measured."""
        if not self.cfg.power.jammer:
            return None
        if self._jammer_gain is None:
            from otafl_sdr.calibration.csi import delivered_jammer_gain
            self._jammer_gain = (delivered_jammer_gain(self.calibration_path or self.cfg.calibration.file),)
        return self._jammer_gain[0]

    def start(self) -> None:
        if self._tb is not None:
            return                           # already open (a calibration in this session started it)
        try:
            from gnuradio import uhd  # noqa: F401
        except ImportError:
            raise AirError(f"uhd air: GNU Radio's UHD bindings (gr-uhd) are not installed; install gnuradio and "
                           f"python3-uhd, then check the radios with {FIND_HINT}") from None
        radios = self._radios()
        self._discover(radios)
        try:
            self._open(radios)
            self._align_time()
            self.hw = "; ".join(f"{r.role}: {r.args}" for r in radios)
            self._tb.start()
            self._prime()
        except BaseException:
            self.close()
            raise

    def _prime(self) -> None:
        """The end-of-burst fix for RFNoC devices (radio/uhd_exchange.prime_radios)."""
        from otafl_sdr.radio.uhd_exchange import prime_radios
        prime_radios(self._tx_radios(), self._device_time(), float(self.cfg.uhd.rate), bool(self.cfg.uhd.simulator))

    # -------------------------------------------------------------------- one round
    def describe(self) -> dict:
        """For summary.json: each radio's actual settings, warnings, and whether it is UHD's simulator."""
        return {"radios": self.settings, "warnings": list(self.warnings), "simulator": bool(self.cfg.uhd.simulator)}

    def preflight(self, plan: RoundPlan) -> dict:
        """Power to the DAC: the plan's amplitudes are in the calibrated units of the capture (the policy
        plans against the measured noise floor), sent as fc32 samples at ``uhd.tx_gain``. Refuses only on
        planned quantities, before anything is accounted or sent: a jammer burst that would pass the DAC's
        full scale at a 4.5-sigma peak (PAPR margin). A client's burst is never refused on its data: it is
        clipped to the full scale, a fixed planned level (``clip_to_dac``, sensitivity kept), recorded in the
        row and ``plan.extra['dac_clip_level']`` with the jammer's planned peak / full scale."""
        from otafl_sdr.radio.jammer_peak import refuse_jammer_peak     # with advice that works (issue 34)
        plan.extra["dac_clip_level"] = DAC_FULL_SCALE
        jam_peak = refuse_jammer_peak(self.cfg, plan, "uhd air")
        from otafl_sdr.radio.uhd_ofdm import ofdm_row
        from otafl_sdr.radio.uhd_power import plan_power         # DAC scale, PA correction, compression refused (issue 25 item 6)
        return {"dac_clip_level": DAC_FULL_SCALE, "jammer_dac_peak": jam_peak,
                **plan_power(self, self.cfg, plan, self.calibration_path), **ofdm_row(plan)}

    def transmit(self, plan: RoundPlan, rng: np.random.Generator) -> Reception:
        from otafl_sdr.radio.recording import round_meta

        if self._tb is None:
            raise AirError("uhd air: transmit() before start()")
        if plan.clients != len(self._clients):
            raise AirError(f"uhd air: the plan has {plan.clients} clients but {len(self._clients)} client radios "
                           f"are configured (uhd.tx_args)")
        self.health = None
        if self.cfg.phy.waveform == "ofdm":               # per-subcarrier OFDM round (radio/uhd_ofdm.py)
            from otafl_sdr.radio.uhd_ofdm import ofdm_round
            return ofdm_round(self, plan, rng)
        if self.cfg.air.coherence == "track":             # per-client sounding, then the corrected payload (issue 34)
            from otafl_sdr.radio.uhd_coherent_round import coherent_round
            return coherent_round(self, plan, rng)
        t_wall = time.perf_counter()
        u = self.cfg.uhd
        bursts, ref_amp = client_bursts(plan, self.modem)
        n = self.modem.burst_samples(symbols_for(plan.dim))
        jam, quiet = None, 0
        if plan.alpha_cj > 0:
            if self._jammer is None:
                raise AirError("uhd air: the plan needs the jammer (alpha_cj > 0) but no jammer radio is configured")
            # its burst goes on alone after the frame, and the capture opens with a quiet slot: the noise it
            # delivered is measured every round (radio/jammer_slots.py)
            from otafl_sdr.radio.jammer_slots import QUIET_SAMPLES, slot_noise
            jam = np.concatenate([jammer_burst(self.modem, symbols_for(plan.dim), plan.alpha_cj, rng),
                                  slot_noise(self.modem, plan.alpha_cj, rng)])
            quiet = QUIET_SAMPLES
        clip = dac_faults([jam])                      # the clients' bursts are clipped to the DAC (below)
        if clip:
            return finish_round(plan, self.modem, np.zeros(0, np.complex64), ref_amp, clip,
                                wall_s=time.perf_counter() - t_wall)

        rate = float(u.rate)
        n_cap = quiet + n + 2 * LEAD_SAMPLES + (len(jam) - n if jam is not None else 0)
        sounding, slot = None, (len(jam) - n if jam is not None else 0)
        if self.cfg.air.coherence == "measure":           # each client's sounding after the frame and the slot
            sounding, ref_gain = SoundingLayout.for_phy(plan.clients, self.cfg.phy), client_reference(plan, self.modem)[0]
            bursts = [b if b is None else np.concatenate([b, sounding_part(sounding, ref_gain, i, slot)])
                      for i, b in enumerate(bursts)]
            n_cap += sounding.n_samples
        t_now = self._device_time()
        t0 = t_now + float(u.start_delay)
        t_rx = t0 - (LEAD_SAMPLES + quiet) / rate
        if self.cfg.air.csi == "calibrated" and self._known is None:   # measured offsets (the latest calibration)
            from otafl_sdr.calibration.csi import known_offsets
            self._known = known_offsets(self.cfg, plan.clients, whole=False, path=self.calibration_path)
        sends = []
        for i, (r, b) in enumerate(zip(self._clients, bursts)):
            if b is not None:
                ts = t0
                if self.cfg.air.csi == "calibrated":
                    from otafl_sdr.calibration.csi import precompensate
                    from otafl_sdr.calibration.csi import phase_refs         # phase referenced to device time
                    t_ref = phase_refs(self.cfg, plan.clients, self.calibration_path)[i]
                    b, ts = precompensate(b, self._known[0][i], self._known[1][i], rate, t0,
                                          t_ref=t_ref if self._known[0][i] else None)
                sends.append((r, clip_to_dac(b), ts))
        jam_delay = self._jammer_delay(plan.clients) if jam is not None else 0.0
        if jam is not None:                    # its calibrated delay applied, as each client's own
            sends.append((self._jammer, jam, t0 - jam_delay / rate))
        self.tx_faults = {}
        capture, faults = self._capture(n_cap, t_rx, sends)
        samples = capture[quiet:quiet + n + 2 * LEAD_SAMPLES]       # the frame, as the modem reads it
        undelivered = undelivered_noise(self.tx_faults)
        meta = None
        if self.cfg.air.record_iq:
            meta = round_meta(self.cfg, plan, sample_rate=rate, ref_amplitude=ref_amp,
                              n_symbols=symbols_for(plan.dim), modem=self.modem, center_freq=u.freq,
                              air=self.name, hw=self.hw, t0=t0, annotation_start=LEAD_SAMPLES,
                              extra={"devices": self.settings, "simulator": bool(u.simulator), "rx_start": t_rx})
        rec = finish_round(plan, self.modem, samples, ref_amp, faults, wall_s=time.perf_counter() - t_wall,
                           record_meta=meta)
        rec.undelivered = undelivered
        from otafl_sdr.radio.jammer_slots import attach, clean, measure
        if jam is not None and clean(faults):    # a capture with a fault (overflow, timeout) measures nothing
            attach(rec, measure(capture, quiet + LEAD_SAMPLES + n, self.modem, plan.alpha_u, jam_delay,
                                quiet=quiet + LEAD_SAMPLES))
        from otafl_sdr.calibration.link_health import link_health
        self.health = link_health(rec.extra, LEAD_SAMPLES)
        if sounding is not None:
            read_parts(self, self.cfg, sounding, capture, quiet + LEAD_SAMPLES + n + slot, known_channel(plan), ref_gain,
                       clean(faults), tunes=[r.tunes for r in self._clients])
        return rec

    def round_fields(self) -> dict:
        """``link_health``: the last round's reference statistics against its calibration (None when it was
        not demodulated, and on OFDM rounds for now), as the testbed writes them."""
        return {"link_health": dict(self.health) if self.health else None}

    def recalibration_due(self) -> tuple[str, str]:
        """(why to recalibrate before the next round, or ''; why to stop instead, or ''): what the last round's
        per-client sounding could not hold (calibration/coherence_loop.alarms), as ``air.on_drift`` says."""
        why, self.coherence_alarms = "; ".join(self.coherence_alarms), []
        if not why or self.cfg.air.on_drift == "ignore":
            return "", ""
        if self.cfg.air.on_drift == "stop" or not self.cfg.calibration.session:
            return "", f"per-client link drift: {why} (air.on_drift = '{self.cfg.air.on_drift}'); recalibrate and resume"
        return f"per-client link drift: {why}", ""

    def _park(self) -> None:
        """A radio failed: keep its objects (never stopped or destroyed: radio/uhd_watchdog.park), close the air."""
        from otafl_sdr.radio.uhd_watchdog import park
        blocks = {id(r.block): r.block for r in self._tx_radios() + ([self._rx] if self._rx else [])}
        park(self._tb, self._sink, *blocks.values(), *(r.source for r in self._tx_radios()),
             *(r.counter for r in self._tx_radios()))
        self._tb = None
        self.close()

    def close(self) -> None:
        from otafl_sdr.radio.uhd_radio import stop_flowgraph
        tb, self._tb = self._tb, None
        stop_flowgraph(tb)
        self._clients, self._jammer, self._rx, self._sink = [], None, None, None
