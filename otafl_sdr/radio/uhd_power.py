"""A uhd round's transmit power, planned before anything is booked or sent (issue 25, item 6), for the
in-process air (uhd_air.UhdAir.preflight) and the testbed's server (net/uhd_rounds.preflight_acks) alike.

From planned quantities only (the plan's alpha_i, alpha_cj, the payload's enforced clip ||s|| <= 1, the
PAPR budget ``uhd.payload_papr_db``, the radios' TX gains and the calibration's power fits:
calibration/tx_gains.py):

* ``tx_scale`` f <= 1, common to every client: the round's planned peaks brought under the DAC's full scale
  (a round that would clip is scaled, never stopped; the receiver divides by f alpha_u; the booked
  mechanism bounds what is sent: ``tx_gains.dac_scale``);
* ``pa_correction`` per client: its payload carried from the pilots' operating point to its own on the
  fitted curve (``tx_gains.pa_correction``; exactly 1 on a radio the fit finds linear);
* the compressed region refused: a radio whose planned peak drive passes its fit's compression onset stops
  the run before the round, in one line naming the radio and by how many dB.

The plan carries ``extra['tx_scale']`` and ``extra['tx_amp']`` (f x correction per client: what the client
multiplies its payload symbols by); the returned dict goes into the round's row in rounds.jsonl."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.calibration import tx_gains as T
from otafl_sdr.phy.packing import symbols_for
from otafl_sdr.radio.uhd_device import DAC_FULL_SCALE, JAMMER_PAPR_SIGMA


class PowerPlan:
    """The run's power facts, read once per calibration: each radio's gain and fit, the pilots' unit burst."""

    def __init__(self, cfg, clients: int, path=None):
        self.cfg, self.clients, self.path = cfg, int(clients), path
        self.fits: dict = {}
        self.pilot_samples = None
        self.pilot_amp = 0.0
        if cfg.air.csi == "calibrated":
            from otafl_sdr.calibration.csi import CalibratedCsi
            cal = CalibratedCsi.for_run(cfg, clients, path).file
            self.fits = {T.radio_name(k): T.fit_for(cal.power, k) for k in (cal.power or {})}
            pil = cal.pilots or {}
            if "length" in pil:
                from otafl_sdr.calibration.pilots import PilotBurst
                from otafl_sdr.phy import Modem
                self.pilot_samples = PilotBurst(Modem(cfg.phy), int(pil["length"])).samples
                self.pilot_amp = float(pil.get("amplitude", 0.0))
        from otafl_sdr.calibration.pilots import PilotBurst as PB
        from otafl_sdr.calibration.session import SWEEP_PILOT_LEN
        from otafl_sdr.phy import Modem
        self.sweep_peak = float(np.max(np.abs(PB(Modem(cfg.phy), SWEEP_PILOT_LEN).samples)))

    def pilot_rms(self) -> float:
        if self.pilot_samples is None or self.pilot_amp <= 0:
            return 0.0
        b = np.abs(self.pilot_samples)
        return self.pilot_amp * float(np.sqrt(np.mean(b[b > 0] ** 2)))

    def _pa_corrections(self, alpha, sending, n_sym: int, sps: int, f: float) -> list:
        """Per client (length plan.clients): the PA correction its payload at common scale ``f`` needs (1 for a
        silent client, or without a pilot calibration)."""
        corr = [1.0] * len(alpha)
        if self.pilot_samples is None:
            return corr
        for i in sending:
            corr[i] = T.pa_correction(self.fits.get(f"client-{i}"), T.payload_rms(alpha[i] * f, n_sym, sps),
                                      self.pilot_rms(), self.pilot_samples)
        return corr

    def plan_round(self, plan) -> dict:
        """Set plan.extra['tx_scale'] / ['tx_amp'] and return the row's fields; UserError (one line) when a
        radio's planned peak passes its compression onset. The power sweep steps every radio's gain about its
        own (uhd.tx_gains, else uhd.tx_gain), recorded as uhd.tx_gain + step: on a fit's gain axis each
        radio's run gain is uhd.tx_gain (the calibration's setup binds the per-radio gains)."""
        u, sps = self.cfg.uhd, int(self.cfg.phy.sps)
        n_sym = symbols_for(plan.dim)
        alpha = np.abs(np.asarray(plan.alpha, dtype=np.complex128))
        sending = [i for i in range(plan.clients) if alpha[i] > 0 and plan.mode[i] != "silent"]
        peaks = {i: T.planned_peak(alpha[i], n_sym, sps, float(u.payload_papr_db)) for i in sending}
        f = T.dac_scale(peaks.values(), DAC_FULL_SCALE)
        corr = self._pa_corrections(alpha, sending, n_sym, sps, f)
        top_client = max((peaks[i] * f * corr[i] for i in sending), default=0.0)
        if top_client > DAC_FULL_SCALE:        # a PA correction above 1 would push the common scale's peak past full scale
            f *= DAC_FULL_SCALE / top_client
            corr = self._pa_corrections(alpha, sending, n_sym, sps, f)
            top_client = max(peaks[i] * f * corr[i] for i in sending)
            if top_client > DAC_FULL_SCALE:    # the correction at the lower drive grew: bring that peak to full scale
                f *= DAC_FULL_SCALE / top_client
        amp = [0.0] * plan.clients
        names: dict = {}
        gains: dict = {}
        for i in sending:
            name = f"client-{i}"
            names[name] = peaks[i] * f * corr[i]
            gains[name] = float(u.tx_gain)     # the fit's gain axis: each radio's own gain is uhd.tx_gain + 0
            amp[i] = f * corr[i]
        if plan.alpha_cj > 0 and self.cfg.power.jammer:
            names["jammer"] = JAMMER_PAPR_SIGMA * float(plan.alpha_cj) * math.sqrt(2.0)
            gains["jammer"] = float(u.tx_gain)
        T.refuse_compression(names, gains, self.fits, self.sweep_peak, plan.round)   # UserError: bad input
        plan.extra["tx_scale"] = f
        plan.extra["tx_amp"] = amp
        top = max(names.values(), default=0.0)
        return {"tx_scale": f, "pa_correction": corr,
                "planned_peak_dbfs": (20 * math.log10(top) if top > 0 else None)}


def tx_scale(plan) -> float:
    """The round's planned common digital scale (1 when the plan has none)."""
    extra = plan.extra if isinstance(plan.extra, dict) else {}
    return float(extra.get("tx_scale", 1.0))


def plan_power(holder, cfg, plan, path) -> dict:
    """``holder``'s PowerPlan for the calibration at ``path`` (read again when the path changes, kept as
    ``holder._power``), applied to ``plan``: its row fields (:meth:`PowerPlan.plan_round`)."""
    pp = getattr(holder, "_power", None)
    if pp is None or pp.path != path:
        pp = holder._power = PowerPlan(cfg, plan.clients, path)
    return pp.plan_round(plan)
