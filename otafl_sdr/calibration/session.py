"""One calibration session over one link (issue 13: calibration in one room): the lab order noise, power,
channel; each step fills its section of the calibration file and prints a line per result. Runs over the
loopback channel or the USRPs (:mod:`otafl_sdr.radio.calibration_flowgraphs`), from the CLI
(`otafl-sdr calibrate`) or inside a run with its own open radios (``calibration.session``)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.calibration.data import CalibrationFile, LinkRecord, calibration_air, check_matches, merge, run_setup

STEPS = ("noise", "power", "channel", "jammer")   # `all`, in the lab order (firmware_notes/calibration.md);
                                                  # jammer: its delivered noise (skipped in `all` without one)
DEFAULT_PILOT_SNR_DB = 20.0          # loopback: mean pilot SNR (E|h|^2 = 1) of the default amplitude
UHD_PILOT_AMPLITUDE = 0.25           # uhd: digital amplitude of the pilots (peak ~0.35 of full scale)
SWEEP_PILOT_LEN = 1024
LOOPBACK_SWEEP = (0.25, 0.5, 1.0, 2.0)              # x the pilot amplitude
UHD_SWEEP = (0.05, 0.1, 0.2, 0.4)                    # digital amplitudes
SWEEP_GAIN_STEPS = (-6.0, -3.0, 0.0)                 # dB relative to uhd.tx_gain


def recalibration_steps(cfg) -> tuple[str, ...]:
    """What a recalibration during a run re-measures: the channels, and the jammer's delivered noise when
    there is one (the noise floor and the power fit are the session's first calibration)."""
    return ("channel",) + (("jammer",) if cfg.power.jammer else ())


def _record(r) -> LinkRecord:
    truth = None
    if r.truth is not None:
        truth = {"h": r.truth["h"], "cfo": r.truth["cfo"], "delay": r.truth["delay"]}
    return LinkRecord(id=r.name, h=complex(r.h), h_std=float(r.h_std), cfo=float(r.cfo), cfo_std=float(r.cfo_std),
                      delay=float(r.delay), snr_db=float(r.snr_db), h_spread=float(r.h_spread), truth=truth,
                      t_ref=getattr(r, "t_ref", None), phase_noise=float(getattr(r, "phase_noise", 0.0)))


def run_calibration(cfg, what=STEPS, out: str | Path | None = None, air: str | None = None,
                    plots: str | Path | None = None, pilot_len: int | None = None,
                    pilot_amplitude: float | None = None, pilot_snr_db: float = DEFAULT_PILOT_SNR_DB,
                    repeats: int | None = None, noise_samples: int = 1 << 16, sweep_amplitudes=None,
                    sweep_gains=None, link=None, jammer_amplitude: float | None = None,
                    echo=print) -> CalibrationFile:
    """Measure ``what`` (a subset of channel, noise, power) over ``link`` (started here; its owner closes
    it: radio/calibration_flowgraphs.calibrate opens the config's own link), merge into ``out`` if it
    exists for the same setup, write it, draw plots; returns the file's contents."""
    from otafl_sdr.calibration import DEFAULT_PILOT_LEN, PilotBurst
    from otafl_sdr.calibration import procedures as P
    from otafl_sdr.phy.modem import Modem

    air = air or calibration_air(cfg)
    K = int(cfg.data.clients)
    what = tuple(what)
    bad = [w for w in what if w not in STEPS]
    if bad:
        raise UserError(f"calibration: unknown step(s) {bad}; choose from {', '.join(STEPS)}")
    old = None
    if out is not None and Path(out).exists():
        try:
            old = CalibrationFile.load(out)
        except UserError as e:
            raise UserError(f"{e}; remove it or choose another --out") from None
        check_matches(old, cfg, K, out, air=air)
    modem = Modem(cfg.phy)
    burst = PilotBurst(modem, DEFAULT_PILOT_LEN if pilot_len is None else int(pilot_len))
    if link is None:
        raise TypeError("run_calibration needs a link (radio/calibration_flowgraphs.calibrate opens one)")
    full_scale = getattr(link, "full_scale", None)
    if pilot_amplitude is None:
        pilot_amplitude = (UHD_PILOT_AMPLITUDE if air == "uhd"
                           else P.pilot_amplitude_for_snr(pilot_snr_db, cfg.channel.sigma_c2))
    P.check_amplitude(burst, pilot_amplitude, full_scale)
    repeats = (3 if air == "uhd" else 1) if repeats is None else int(repeats)
    setup = run_setup(cfg, K, air)
    cal = CalibrationFile(air=air, setup=setup, pilots={
        "length": burst.pilot_len, "preamble_len": burst.preamble_len, "amplitude": float(pilot_amplitude),
        "repeats": repeats, "sps": modem.sps, "rolloff": float(cfg.phy.rolloff)})
    plot_dir = Path(plots) if plots else None
    if plot_dir:
        plot_dir.mkdir(parents=True, exist_ok=True)
    sess = _Session(cfg, link, cal, modem, burst, float(pilot_amplitude), repeats, plot_dir, echo)
    link.start()
    if air == "uhd" and hasattr(link, "serials"):
        setup["serials"] = link.serials()
    for step in what:
        if step == "channel":
            sess.channel()
            if cfg.phy.waveform == "ofdm":         # per-subcarrier H_ik (calibration/ofdm_channel.py)
                sess.ofdm()
        elif step == "noise":
            sess.noise(noise_samples)
        elif step == "jammer":
            sess.jammer(jammer_amplitude, explicit=len(what) == 1)
        else:
            sess.power(sweep_amplitudes, sweep_gains)
    cal = merge(old, cal)
    if out is not None:
        cal.save(out)
        echo(f"calibration file: {out}")
    return cal


class _Session:
    """One calibration session over one link: each step fills its section of ``cal`` and prints."""

    def __init__(self, cfg, link, cal, modem, burst, amplitude, repeats, plot_dir, echo):
        self.cfg, self.link, self.cal, self.modem, self.burst = cfg, link, cal, modem, burst
        self.amplitude, self.repeats, self.plot_dir, self.echo = amplitude, repeats, plot_dir, echo
        self.K = int(cfg.data.clients)

    def channel(self) -> None:
        from otafl_sdr.calibration import procedures as P
        res = P.measure_channels(self.link, self.burst, self.amplitude, self.repeats,
                                 rate=float(self.cfg.uhd.rate) if self.cal.air == "uhd" else None)
        self.cal.clients = [_record(r) for r in res[:self.K]]
        self.cal.jammer = _record(res[self.K]) if len(res) > self.K else None
        _print_links(res, self.echo)
        if self.plot_dir:
            from otafl_sdr.calibration.plots import plot_channels, plot_constellations
            plot_constellations(res, self.plot_dir / "pilot_constellation.png")
            plot_channels(res, self.plot_dir / "channel_estimates.png")

    def ofdm(self) -> None:
        from otafl_sdr.calibration.ofdm_channel import run_ofdm_step
        self.cal.ofdm = run_ofdm_step(self.cfg, self.link, self.amplitude, self.repeats, self.echo)

    def noise(self, n_samples: int) -> None:
        from otafl_sdr.calibration import procedures as P
        nf = P.measure_noise(self.link, self.modem, n_samples)
        self.cal.noise = {"sigma_c2": nf.sigma_c2, "sigma_c2_std": nf.sigma_c2_std, "sigma_c2_raw": nf.sigma_c2_raw,
                          "dc": nf.dc, "symbols": nf.symbols}
        truth = getattr(self.link, "sigma_c2", None) if self.cal.air == "loopback" else None
        if truth is not None:
            self.cal.noise["truth"] = {"sigma_c2": float(truth)}
        self.echo(f"noise floor: sigma_c2 = {nf.sigma_c2:.6g} +- {nf.sigma_c2_std:.2g} per real coordinate "
                  f"(unfiltered {nf.sigma_c2_raw:.6g}, DC {abs(nf.dc):.2g})"
                  + (f"; channel block {truth:.6g} ({(nf.sigma_c2 / truth - 1) * 100:+.2f}%)" if truth else ""))

    def jammer(self, amplitude, explicit: bool) -> None:
        """The jammer's delivered noise per unit amplitude^2 (calibration/jammer_noise.py)."""
        from otafl_sdr.calibration.jammer_noise import default_amplitude, measure_jammer_noise
        if not getattr(self.link, "has_jammer", False):
            if explicit:
                raise UserError("calibration: `jammer` needs a jammer (power.jammer = true and uhd.jammer_args)")
            self.echo("jammer noise: no jammer configured, step skipped")
            return
        floor = float((self.cal.noise or {}).get("sigma_c2", self.cfg.channel.sigma_c2))
        a = default_amplitude(self.cal.air, floor) if amplitude is None else float(amplitude)
        jn = measure_jammer_noise(self.link, self.modem, a)
        self.cal.jammer_noise = jn.to_dict()
        truth = getattr(self.link, "h_cj", None) if self.cal.air == "loopback" else None
        if truth is not None:
            self.cal.jammer_noise["truth"] = float(abs(truth) ** 2)
        self.echo(f"jammer noise: delivered {jn.gain:.6g} +- {jn.gain_std:.2g} per unit amplitude^2 (lower 3-sigma "
                  f"{jn.lower():.6g}; test amplitude {a:g}, floor {jn.sigma_c2:.4g})"
                  + (f"; channel block |h_cj|^2 = {abs(truth) ** 2:.6g}" if truth is not None else ""))

    def power(self, amplitudes, gains) -> None:
        from otafl_sdr.calibration import PilotBurst
        from otafl_sdr.calibration import procedures as P
        g0 = float(self.cfg.uhd.tx_gain)
        uhd = self.cal.air == "uhd"
        amps = (np.asarray(amplitudes, float) if amplitudes is not None else
                np.asarray(UHD_SWEEP if uhd else LOOPBACK_SWEEP, float) * (1.0 if uhd else self.amplitude))
        gains = np.asarray(gains, float) if gains is not None else g0 + np.asarray(SWEEP_GAIN_STEPS)
        burst = PilotBurst(self.modem, SWEEP_PILOT_LEN)
        P.check_amplitude(burst, float(np.max(amps)), getattr(self.link, "full_scale", None))
        sw = P.sweep_power(self.link, burst, amps, gains, g0)
        self.cal.power = {k: f.to_dict() for k, f in sw.fits.items()}
        for k, f in sw.fits.items():
            self.echo(f"power {k}: P_rx = {f.c0_db:.2f} dB + {f.k_amp:.3f} x 20log10(a) + {f.k_gain:.3f} x "
                      f"(G - {g0:g}) (rms {f.rms_db:.2f} dB, {int(np.sum(~f.used))} compressed point(s) left out)")
        if self.plot_dir:
            from otafl_sdr.calibration.plots import plot_power
            plot_power(sw, self.plot_dir / "power_sweep.png")


def _print_links(res, echo) -> None:
    echo(f"{'link':<10} {'|h|':>9} {'arg h':>8} {'rel s.e.':>9} {'SNR dB':>7} {'cfo (cyc/smp)':>14} {'delay':>7}"
         + ("   truth: rel err, cfo, delay" if res and res[0].truth is not None else ""))
    for r in res:
        line = (f"{r.name:<10} {abs(r.h):9.4g} {np.angle(r.h):8.4f} {r.h_std / abs(r.h):9.2e} {r.snr_db:7.2f} "
                f"{r.cfo:14.4e} {r.delay:7.2f}")
        if r.truth is not None:
            line += f"   {r.rel_error:.2e}, {r.truth['cfo']:.4e}, {r.truth['delay']:g}"
        if r.h_spread > 3 * r.h_std * math.sqrt(len(r.estimates)):
            line += "  UNSTABLE across repeats: check the shared 10 MHz reference"
        echo(line)
