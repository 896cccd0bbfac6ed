"""The radio-side sections of the run configuration (air, phy, loopback, uhd, net, calibration): dataclasses
only, parsed and validated with the others by config.py (which re-exports them). The comment beside each
field is its one-line meaning (configure/explain.py reads it)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AirConfig:
    name: str = "sim"                 # sim | loopback | zmq | uhd
    record_iq: bool = False           # SigMF recording of each round's received IQ
    retries: int = 1                  # a lost burst is retried this many times, then the round is skipped
    csi: str = "perfect"              # perfect | calibrated (needs calibration.file)
    allow_unsynced: bool = False      # uhd: run radios without a shared 10 MHz / PPS (bursts will not align)
    recalibrate_every: int = 20       # calibration.session: re-measure channels + jammer every N rounds (0 = never)
    drift_gain_db: float = 1.0        # uhd testbed link health: |reference gain| beyond this (dB) is a drift
    drift_phase_rad: float = 0.35     # ... |reference phase| beyond this (rad)
    drift_cfo: float = 1e-5           # ... |residual carrier offset| beyond this (cycles/sample)
    drift_timing: float = 1.0         # ... frame this many samples off its scheduled time
    on_drift: str = "recalibrate"     # recalibrate (calibration.session; else stop) | stop | ignore
    coherence: str = "off"            # uhd: per-client sounding: off | measure (link_health clients; each
                                      # client's part after the frame, radio/appended_sounding.py) | track
                                      # (in process, single carrier: sounded before the payload, each client's
                                      # phase and offset corrected; calibration/coherence_loop.py)


@dataclass
class PhyConfig:
    sps: int = 2                      # samples per symbol
    rolloff: float = 0.35             # RRC roll-off
    rrc_span: int = 8                 # RRC span in symbols
    preamble_len: int = 139           # Zadoff-Chu length (prime)
    pilot_spacing: int = 1024         # a pilot symbol every N payload symbols (0 = none)
    guard: int = 64                   # silent samples around a burst
    waveform: str = "single_carrier"  # single_carrier (RRC burst, phy/modem.py) | ofdm (phy/ofdm.py; sim, loopback)
    ofdm_fft: int = 64                # ofdm: FFT size N (subcarriers incl. the unused ones)
    ofdm_cp: int = 16                 # ofdm: cyclic prefix, samples (>= the channel's delay extent + timing error)
    ofdm_used: int = 52               # ofdm: occupied subcarriers, centred on DC (DC unused)
    ofdm_pilot_spacing: int = 13      # ofdm: a comb pilot on every Nth occupied subcarrier of each symbol (0 = none)
    ofdm_train: int = 4               # ofdm: training symbols (per-subcarrier LS channel estimate) before the payload
    ofdm_truncation: float = 0.01     # ofdm: a client sends nothing on a subcarrier whose |G_ik|^2 is below this
    ofdm_smoothing: str = "delay"     # ofdm: channel estimate: none (per-subcarrier LS) | delay (one delay + phase fit)


@dataclass
class LoopbackConfig:
    client_cfo_max: float = 0.0       # per-client carrier offset, cycles/sample (pre-compensated)
    client_delay_max: int = 0         # per-client integer delay, samples (pre-compensated)
    client_phase: bool = True         # per-client random phase (part of h)
    rx_cfo: float = 0.0               # receiver frequency offset, cycles/sample
    rx_delay: int = 0                 # receiver timing offset, samples
    rx_phase_noise: float = 0.0       # receiver phase-noise std per sample (rad, random walk)
    residual_cfo: float = 0.0         # uncompensated per-client residual CFO (sync study)
    residual_delay: int = 0           # uncompensated per-client residual delay, samples
    residual_phase: float = 0.0       # uncompensated per-client residual phase std, rad


@dataclass
class UhdConfig:
    tx_args: list = field(default_factory=list)   # device args per client radio, e.g. ["serial=31A0B1C"]
    jammer_args: str = ""
    rx_args: str = ""
    freq: float = 915e6
    rate: float = 1e6
    tx_gain: float = 40.0
    tx_gains: dict = field(default_factory=dict)   # per radio ('client-0', '0', 'jammer' or a serial) -> dB;
                                                   # the others at tx_gain (calibration/tx_gains.py)
    payload_papr_db: float = 12.0     # planned peak-to-average of a client's payload (Gaussian-like): the DAC
                                      # scale and the PA compression check plan its peak this far over its rms
    rx_gain: float = 30.0
    start_delay: float = 0.5          # seconds between command and timed burst
    feedback_gap_s: float = 0.002     # air.coherence: from the sounding's end to the payload (s): covers the
                                      # host's turnaround on real radios (a late payload burst is lost as late)
    clock_tolerance_s: float = 0.05   # testbed: the server's clock may be off a node's device time by this (s)
    lo_offset: float = 1e6            # Hz between LO and carrier (LO leakage / DC out of band); 0 = LO on carrier,
                                      # else |lo_offset| >= rate / 2
    simulator: bool = False           # radios are UHD's device simulator (no device time, no burst acks):
                                      # refused when a real USRP answers; the summary marks the run simulated


@dataclass
class NetConfig:
    bind: str = "127.0.0.1"
    port: int = 0                     # 0 = pick a free port
    keys_dir: str = ""                # CURVE keys (required when binding a non-loopback address)
    timeout_s: float = 60.0
    heartbeat_s: float = 1.0
    dead_client_policy: str = "drop"  # drop | abort
    insecure: bool = False            # local zmq runs without CURVE (default: ephemeral keys per run)
    diagnostics: bool = False         # clients also send norms, losses and their update in the clear:
                                      # the run is then marked "not private (diagnostics)"
    max_attacked_rounds: int = 2      # zmq: rounds whose IQ links were attacked (samples stolen / injected,
                                      # net/iq_guard.py) before the run stops (exit 1)


@dataclass
class CalibrationConfig:
    file: str = ""                    # calibration file consumed by runs (air.csi = calibrated)
    session: bool = False             # uhd: calibrate with the run's own radios right before round 1 (the LO
                                      # phase changes whenever a radio is tuned), into DIR/calibration.json
    max_age_days: float = 7.0         # older files: a warning (gains, noise floor drift slowly)
    max_phase_age_min: float = 30.0   # uhd: channel phases older than this are refused (0 = no limit)
    coherence_check: int = 3          # uhd (in process and on the testbed): rounds of the high-SNR coherence
                                      # check at the start of every run, after the calibration
                                      # (experiment/coherence_gate.py); 0: none
