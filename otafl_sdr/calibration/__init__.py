"""Calibration, in one room: the mathematics (pure numpy: the pilot burst each radio sends in its own time
slot, least-squares channel estimation with its standard error, carrier-frequency and timing offsets, the
noise floor from silent captures, the transmit-power fit); ``procedures`` runs them over any link that can
carry a set of transmit streams and return the capture (the GNU Radio loopback channel or the USRPs,
:mod:`otafl_sdr.radio.calibration_flowgraphs`, the GNU Radio parts); ``session`` is one calibration in the
lab order (the CLI's and a run's own); ``data`` is the calibration file and the CSI a run takes from it;
``plots`` draws the results (matplotlib Agg). The CLI glue is ``otafl_sdr.cli.calibrate``."""
from otafl_sdr.calibration.estimation import LinkEstimate, estimate_link
from otafl_sdr.calibration.noise_floor import NoiseFloor, estimate_noise
from otafl_sdr.calibration.pilots import DEFAULT_PILOT_LEN, PilotBurst
from otafl_sdr.calibration.power_fit import PowerFit, fit_power

__all__ = ["DEFAULT_PILOT_LEN", "LinkEstimate", "NoiseFloor", "PilotBurst", "PowerFit", "estimate_link",
           "estimate_noise", "fit_power"]
