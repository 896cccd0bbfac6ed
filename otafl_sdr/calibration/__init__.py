"""Calibration mathematics (pure numpy; issue 5): the pilot burst each radio sends in its own time slot,
least-squares channel estimation with its standard error, carrier-frequency and timing offsets, the
noise floor from silent captures, and the transmit-power fit. ``procedures`` runs them over any link
that can carry a set of transmit streams and return the capture (the GNU Radio loopback channel or the
USRPs, :mod:`otafl_sdr.radio.calibration_flowgraphs`); ``plots`` draws the results (matplotlib Agg)."""
from .estimation import LinkEstimate, estimate_link
from .noise_floor import NoiseFloor, estimate_noise
from .pilots import DEFAULT_PILOT_LEN, PilotBurst
from .power_fit import PowerFit, fit_power

__all__ = ["DEFAULT_PILOT_LEN", "LinkEstimate", "NoiseFloor", "PilotBurst", "PowerFit", "estimate_link",
           "estimate_noise", "fit_power"]
