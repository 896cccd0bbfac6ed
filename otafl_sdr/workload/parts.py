"""The parts of a built run (``RunParts``: data, trainer, algorithm, SystemInfo, power policy, CSI; built
by workload/build.py ``build_run``) and what every node derives from the config alike: the round's seeded
channels, the run's CSI, the noise unit and SystemInfo. The in-process experiment, the testbed's server and
every node hold the same seeded objects; nothing here opens a radio or writes a file."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from pathlib import Path

import numpy as np

from otafl_sdr import seeding
from otafl_sdr.airs import air_capabilities
from otafl_sdr.channel.fading import BlockFading
from otafl_sdr.config.schema import Config

if TYPE_CHECKING:
    from otafl_sdr.power.base import SystemInfo


def snr_to_power(snr_db: float, dim: int, sigma_c2: float) -> float:
    """P_i from SNR_i = P_i / (d sigma_c2) (paper 000, sec. V)."""
    return float(10 ** (snr_db / 10) * dim * sigma_c2)


def draw_channels(cfg: Config, clients: int, round_index: int) -> tuple[np.ndarray, complex]:
    """(h (K,), h_cj) of iteration ``round_index`` from ``seeding.rng(seed, "channel", it)``: every node draws the
    same channels without them crossing the network."""
    g = seeding.rng(cfg.run.seed, "channel", round_index)
    h = BlockFading(cfg.channel.fading)(g, clients)
    h_cj = complex(BlockFading(cfg.channel.jammer_fading)(g, 1)[0])
    return h, h_cj


@dataclass
class RunContext:
    """What a power policy may know of the run beyond SystemInfo (``PowerPolicy.attach``): the clients'
    label counts (K, C), the workload's name and the algorithm's options."""

    label_counts: np.ndarray
    num_classes: int
    workload: str = "updates"
    algorithm_options: object = None


@dataclass
class RunParts:
    """The built run. ``dim``: the payload's size per client (the model's size for FL updates, C^2 for
    paper 003); ``info``: the policy's SystemInfo; ``csi``: None (perfect CSI) or the calibrated CSI."""

    cfg: Config
    data: object
    trainer: object
    algorithm: object
    workload: object
    dim: int
    K: int
    csi: object = None
    info: SystemInfo | None = None
    policy: object = None
    session_cal: Path | None = None
    extra: dict = field(default_factory=dict)
    # channel/multipath_rx.sensitivity_gain by (round, links, reference senders): targeting plans every
    # round once per candidate knob value (tens of times), each gain tens of FFTs
    _sensitivity_gains: dict = field(default_factory=dict, repr=False, compare=False)

    def draw_channels(self, round_index: int) -> tuple[np.ndarray, complex]:
        """The round's channels; where the air calibrates the jammer's path (a lab), the calibrated
        estimate stands in for the simulated draw."""
        h, h_cj = draw_channels(self.cfg, self.K, round_index)
        if self.csi is not None and air_capabilities(self.cfg.air.name).calibrated_jammer_path:
            est = self.csi.jammer_estimate(h_cj)
            if est is not None:
                h_cj = est
        return h, h_cj

    def multipath_gain(self, plan) -> float:
        """How far the round's multipath can stretch one client's payload difference in the aggregate
        (channel/multipath_rx.sensitivity_gain; 1.0 on a flat channel, the default). With phy.waveform = "ofdm"
        the round is first planned per subcarrier (power/ofdm_plan.plan_ofdm: plan.extra["ofdm"] and the
        per-subcarrier mechanism, in place), whose mechanism already holds the channel: 1.0, or the front-end
        impairments' stretch (channel/ofdm_impairments.booking_stretch; some book at the capture)."""
        if self.cfg.phy.waveform == "ofdm":
            from otafl_sdr.power.ofdm_plan import plan_ofdm
            plan_ofdm(plan, self.cfg, self.info, self.csi)          # calibrated: per-subcarrier CSI
            from otafl_sdr.channel.ofdm_impairments import booking_stretch     # channel.* impairments on OFDM
            stretch, capture = booking_stretch(self.cfg, plan, self.info.payload_bound(), self.cfg.air.name)
            if capture:
                plan.extra["multipath_capture"] = True                 # booked at the capture (channel noise)
            return stretch
        from otafl_sdr.channel.front_end import sensitivity_gain as front_end_gain
        fe = front_end_gain(self.cfg, plan.round, plan.clients, (plan.dim + 1) // 2)   # channel.* impairments
        from otafl_sdr.channel.multipath import Multipath
        mp = Multipath.from_config(self.cfg)
        if not mp.enabled:
            return fe
        if self.multipath_at_capture():        # booked at the capture: channel/capture_bound.py
            from otafl_sdr.channel.capture_bound import capture_gain
            plan.extra["multipath_capture"] = True
            return fe * capture_gain(mp, self.cfg.run.seed, plan.round, plan.clients, self.cfg.phy)
        from otafl_sdr.channel.multipath_rx import reference_senders, sensitivity_gain
        active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
        senders = reference_senders(plan, active, self.cfg.phy) if active.any() else None
        key = (plan.round, plan.clients, None if senders is None else senders.tobytes())
        if key not in self._sensitivity_gains:   # a function of the round's seeded links and its senders
            self._sensitivity_gains[key] = sensitivity_gain(mp, self.cfg.run.seed, plan.round, plan.clients,
                                                            self.cfg.phy, senders)
        return fe * self._sensitivity_gains[key]

    def multipath_at_capture(self) -> bool:
        """Single-carrier multipath on an air whose modem estimates timing and phase from references the
        payload's ISI reaches (not ``linear_receiver``): the round is booked at the capture, the channel
        noise alone against max_i g_i b_i op_i (channel/capture_bound.py; workload/booking.py). OFDM: where its
        front-end impairments or residual offsets book it there (channel/ofdm_impairments.at_capture)."""
        from otafl_sdr.channel.multipath import Multipath
        if self.cfg.phy.waveform == "ofdm":
            from otafl_sdr.channel.ofdm_impairments import at_capture
            return at_capture(self.cfg, self.cfg.air.name)
        return (self.cfg.phy.waveform != "ofdm" and Multipath.from_config(self.cfg).enabled
                and not air_capabilities(self.cfg.air.name).linear_receiver)

    def planned_multipath_gain(self, round_indices) -> float:
        """The largest multipath stretch over the planned rounds ``round_indices`` (every link sending the
        reference), for privacy targeting before round 1 (1.0 on a flat channel; 1.0 for OFDM, whose
        per-subcarrier gains never exceed the flat plan's, power/ofdm_plan.py)."""
        if self.cfg.phy.waveform == "ofdm":                 # calibrated: the per-subcarrier CSI's margin
            from otafl_sdr.calibration.ofdm_channel import planned_margin
            from otafl_sdr.channel.ofdm_impairments import planned_stretch
            return planned_margin(self.csi, self.cfg, self.K) * planned_stretch(self.cfg, round_indices, self.K, self.cfg.air.name,
                                                                           dim=self.info.dim)
        from otafl_sdr.channel.multipath import Multipath
        from otafl_sdr.channel.front_end import sensitivity_gain as front_end_gain
        n_sym = (int(self.info.dim) + 1) // 2 if self.info is not None else 0    # channel.* impairments: the
        fe = max((front_end_gain(self.cfg, round_index, self.K, n_sym) for round_index in round_indices if n_sym),  # rounds' seeded bounds
                 default=front_end_gain(self.cfg, None, self.K, 0))                   # (Doppler), as booked
        mp = Multipath.from_config(self.cfg)
        if not mp.enabled:
            return fe
        if self.multipath_at_capture():
            from otafl_sdr.channel.capture_bound import capture_gain
            return fe * max((capture_gain(mp, self.cfg.run.seed, round_index, self.K, self.cfg.phy) for round_index in round_indices), default=1.0)
        from otafl_sdr.channel.multipath_rx import sensitivity_gain
        return fe * max((sensitivity_gain(mp, self.cfg.run.seed, round_index, self.K, self.cfg.phy) for round_index in round_indices), default=1.0)

    def csi_estimates(self, round_index: int, h: np.ndarray):
        """What the clients believe of h this round (None: perfect CSI)."""
        return None if self.csi is None else self.csi.estimates(round_index, h)

    def use_calibration(self, path: Path | None) -> None:
        """A newer calibration (in-session, or the server's sent to a node): fresh channel estimates."""
        self.session_cal = path
        self.csi = csi_for_run(self.cfg, self.K, path)

    def ledger_sigma_c2(self) -> float:
        """The channel noise the server may count on for privacy: the config's value with perfect CSI;
        with a calibration, the measured noise floor lowered by two standard errors."""
        if self.csi is None:
            return float(self.cfg.channel.sigma_c2)
        lower = self.csi.sigma_c2 - 2.0 * getattr(self.csi, "sigma_c2_std", 0.0)
        return float(max(lower, 1e-3 * self.csi.sigma_c2))

    def noise_unit(self) -> float:
        """Powers are in the units of the noise: the config's (sim, loopback), else the measured floor."""
        return float(self.cfg.channel.sigma_c2) if self.csi is None else float(self.csi.sigma_c2)


def csi_for_run(cfg: Config, K: int, session_cal: Path | None):
    """None with ``air.csi = "perfect"``, else the run's calibrated CSI (file or in-session measurement)."""
    if cfg.air.csi == "perfect":
        return None
    from otafl_sdr.calibration.csi import CalibratedCsi
    return CalibratedCsi.for_run(cfg, K, session_cal)


def standard_info(parts: RunParts, sigma_c2: float, bound=None, jammer: bool = True) -> SystemInfo:
    """SystemInfo of a run whose clients send ``parts.dim`` reals each, at power.max_snr_db."""
    from otafl_sdr.power.base import SystemInfo     # the power package registers every policy (torch's DDPG):
                                                    # a channel node, which only draws channels, never loads it
    cfg, unit = parts.cfg, parts.noise_unit()
    return SystemInfo(
        p=np.asarray(parts.data.p, dtype=float), sizes=np.asarray(parts.data.sizes, dtype=float),
        power=np.full(parts.K, snr_to_power(cfg.power.max_snr_db, parts.dim, unit)), dim=parts.dim,
        sigma_c2=sigma_c2, rounds=cfg.run.rounds, eps=cfg.privacy.eps, delta=cfg.privacy.delta,
        unit=cfg.privacy.unit,
        jammer_power=snr_to_power(cfg.power.jammer_max_snr_db, parts.dim, unit) if jammer else 0.0,
        **({"bound": bound} if bound is not None else {}))
