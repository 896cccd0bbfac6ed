"""Transmit power planned as a lab plans it (issue 25, item 6): per-radio TX gains, the PA's compressed
region refused at plan time, the pilots' gain carried to the payload's operating point, and a planned,
data-independent scale for a round whose payload would pass the DAC. Pure numpy (tested without radios);
the uhd airs call it through radio/uhd_power.py.

Drive. The power fit (calibration/power_fit.py) models the received power of the pilot at digital
amplitude a and TX gain G as c0 + k_amp 20 log10 a + k_gain (G - G_ref). What drives the PA is the digital
level times the gain, so a sample of magnitude |x| sent at gain G is at the *drive*

    D(|x|, G) = 20 log10 |x| + (G - G_ref)      (dB; 0 = full scale at the sweep's reference gain).

The sweep's points left out as compressed (more than 1 dB under the line) mark where the PA (or the DAC)
compresses: the lowest compressed point's drive, taken at the pilot's *peak* (the unit sweep pilot's peak
``pilot_peak``, PAPR ~3.8 dB), is the radio's compression onset D_c. Without a compressed point D_c is
unknown: the sweep's highest linear point is then the verified limit and the plan is not refused on it.

A payload's planned peak. A client's payload is alpha_i s(u_i) with ||s(u_i)|| <= 1 (the enforced clip);
its symbols have unit pulse energy, so over its n_sym sps samples its rms is at most
|alpha_i| / sqrt(n_sym sps) (:func:`payload_rms`), and the Gaussian-like payload's peak sits
``papr_db`` (uhd.payload_papr_db, 12 dB) above it (:func:`planned_peak`). Every quantity is planned: a
client's data never changes what it sends except through the mechanism (a rarer, peakier payload is cut by
the fixed-level DAC clip, a contraction: radio/uhd_round_signal.clip_to_dac)."""
from __future__ import annotations

import math

import numpy as np

from otafl_sdr.errors import UserError
from otafl_sdr.calibration.power_fit import PowerFit

FALSE_CORRECTION = 1e-4       # a linear radio's fit is taken for a departure from linear (k_amp != 1) this rarely
GAIN_STEP_DB = 0.5            # proposed gains are rounded to this (most USRP gain stages step 0.25-1 dB)


def radio_name(role: str) -> str:
    """'client 0' / 'client-0' -> 'client-0'; 'jammer' -> 'jammer' (the key of uhd.tx_gains and of the fits)."""
    return role.strip().replace(" ", "-")


def tx_gain_for(u, role: str, serial: str = "") -> float:
    """The TX gain of one radio: ``uhd.tx_gains[name]`` (name 'client-0', '0', 'jammer', or the radio's
    serial), else ``uhd.tx_gain`` (every radio's default)."""
    gains = dict(getattr(u, "tx_gains", {}) or {})
    name = radio_name(role)
    keys = [name] + ([name.split("-", 1)[1]] if name.startswith("client-") else []) + ([serial] if serial else [])
    for k in keys:
        if k in gains:
            return float(gains[k])
    return float(u.tx_gain)


def fit_for(power: dict | None, role: str) -> PowerFit | None:
    """The power fit of one radio from a calibration file's ``power`` section (keys 'client 0' / 'jammer')."""
    if not power:
        return None
    name = radio_name(role)
    for k, v in power.items():
        if radio_name(k) == name:
            return v if isinstance(v, PowerFit) else PowerFit.from_dict(v)
    return None


def drive_db(amplitude, gain_db, gain_ref: float) -> np.ndarray:
    """D = 20 log10 |x| + (G - G_ref) (module docstring)."""
    return 20 * np.log10(np.asarray(amplitude, dtype=np.float64)) + (np.asarray(gain_db, dtype=np.float64) - gain_ref)


def compression_onset_db(fit: PowerFit, pilot_peak: float) -> float | None:
    """The drive at the lowest compressed sweep point, at the pilot's peak; None if none was compressed.
    Compression is monotone in drive (a PA compressed at D is compressed at every higher drive), so a point
    left off the line with a linear point at a higher drive is a glitch of its capture (a late packet's
    zero fill on a loaded host: 12.7 dB of "compression" at -18.6 dBFS once), not the PA: it marks no onset."""
    if fit.amplitude.size == 0:
        return None
    used = np.asarray(fit.used, dtype=bool)
    drive = drive_db(fit.amplitude * pilot_peak, fit.gain_db, fit.gain_ref)
    top_linear = float(np.max(drive[used])) if used.any() else -np.inf
    bad = ~used & (drive > top_linear)
    if not bad.any():
        return None
    return float(np.min(drive[bad]))


def linear_limit_db(fit: PowerFit, pilot_peak: float) -> float | None:
    """The drive of the highest sweep point still on the line (the verified linear region), at the pilot's peak."""
    ok = np.asarray(fit.used, dtype=bool)
    if fit.amplitude.size == 0 or not ok.any():
        return None
    return float(np.max(drive_db(fit.amplitude[ok] * pilot_peak, fit.gain_db[ok], fit.gain_ref)))


def payload_rms(alpha: float, n_symbols: int, sps: int) -> float:
    """Planned rms per sample of a payload alpha s(u), ||s(u)|| <= 1, unit-energy pulses: |alpha| / sqrt(n sps)."""
    return abs(alpha) / math.sqrt(max(int(n_symbols), 1) * max(int(sps), 1))


def planned_peak(alpha: float, n_symbols: int, sps: int, papr_db: float) -> float:
    """Planned peak magnitude of a payload: its planned rms times the PAPR budget."""
    return payload_rms(alpha, n_symbols, sps) * 10 ** (papr_db / 20)


def dac_scale(peaks, full_scale: float = 1.0) -> float:
    """The round's common digital scale f <= 1: every client's planned peak brought to the DAC's full scale
    (f = full_scale / max peak when that passes it, else 1). Common to every client, so the over-the-air sum
    keeps its weights and the receiver divides by f alpha_u. Privacy: the received signal is f times the
    planned one plus the same noise, i.e. the planned aggregate plus independent Gaussian noise of variance
    sigma^2 (1/f^2 - 1) / alpha_u^2: a post-processing of the planned release, so the booked (planned)
    mechanism bounds it (eps can only be smaller than booked)."""
    top = max([float(p) for p in peaks] or [0.0])
    return 1.0 if top <= full_scale else float(full_scale / top)


def over_compression(peak: float, gain_db: float, fit: PowerFit | None, pilot_peak: float,
                     backoff_db: float = 0.0) -> float:
    """By how many dB a planned peak at this gain passes the radio's compression onset less ``backoff_db``
    (<= 0: clear; 0 when the fit saw no compression)."""
    if fit is None or peak <= 0:
        return 0.0
    onset = compression_onset_db(fit, pilot_peak)
    if onset is None:
        return 0.0
    return float(drive_db(peak, gain_db, fit.gain_ref)) - (onset - backoff_db)


def refuse_compression(peaks: dict, gains: dict, fits: dict, pilot_peak: float, round_: int | None = None) -> None:
    """UserError in one line naming the first radio whose planned peak drive passes its compression onset
    (``peaks``, ``gains``, ``fits``: by radio name). Called before anything of the round is booked or sent."""
    for name, peak in peaks.items():
        over = over_compression(peak, gains[name], fits.get(name), pilot_peak)
        if over > 0:
            where = f"round {round_}: " if round_ is not None else ""
            raise UserError(f"{where}{name} would drive its PA {over:.1f} dB into compression (planned peak "
                            f"{20 * math.log10(peak):.1f} dBFS, past the compression onset of its power fit): plan "
                            f"{over:.1f} dB less power for it (power.max_snr_db, privacy.eps) or take attenuation "
                            f"out of its path (then recalibrate); its TX gain cannot help (same drive)")


def _k_amp_se_dof(fit: PowerFit) -> tuple[float, int]:
    """(standard error of k_amp, the fit's residual degrees of freedom); (inf, 0) when it cannot be had."""
    used = np.asarray(fit.used, dtype=bool)
    if used.sum() < 3:
        return math.inf, 0
    a, g = fit.amplitude[used], fit.gain_db[used]
    cols = [np.ones_like(a), 20 * np.log10(a)] + ([g - fit.gain_ref] if fit.gain_swept else [])
    X = np.stack(cols, axis=1)
    dof = int(used.sum() - X.shape[1])
    if dof <= 0:
        return math.inf, 0
    p = np.asarray(fit.rx_power_db, dtype=np.float64)[used]
    coef, *_ = np.linalg.lstsq(X, p, rcond=None)
    s2 = float(np.sum((p - X @ coef) ** 2) / dof)
    try:
        return float(math.sqrt(s2 * np.linalg.inv(X.T @ X)[1, 1])), dof
    except np.linalg.LinAlgError:
        return math.inf, 0


def departs_from_linear(fit: PowerFit) -> bool:
    """The fit's k_amp departs from 1 beyond its noise: |k_amp - 1| / se over Student-t's two-sided
    1 - FALSE_CORRECTION quantile at the fit's residual degrees of freedom (the scale is estimated from the
    same few points: a fixed 3 standard errors passed a linear simulator's fit for non-linear in a full test
    run, k_amp's t about 3 at 10 degrees of freedom being a 1.3 % event, not 0.3 %)."""
    from scipy.stats import t as student_t
    se, dof = _k_amp_se_dof(fit)
    if not math.isfinite(se) or dof <= 0:
        return False
    return abs(fit.k_amp - 1.0) > max(float(student_t.ppf(1 - FALSE_CORRECTION / 2, dof)) * se, 1e-6)


def envelope_moment(samples: np.ndarray, k: float) -> float:
    """M(k) = sum |b|^(k+1) / sum |b|^2 of a waveform normalised to unit rms (its nonzero samples)."""
    b = np.abs(np.asarray(samples))
    b = b[b > 0]
    b = b / math.sqrt(float(np.mean(b ** 2)))
    return float(np.sum(b ** (k + 1)) / np.sum(b ** 2))


def payload_gain_ratio(k: float, payload_rms_: float, pilot_rms: float, pilot_moment: float) -> float:
    """Gain the payload sees over the gain the calibration pilot measured, on the fitted curve (item 3).

    Derivation. Slope k_amp = k of the fit in 20 log10 a is a power-law AM/AM y = c |x|^(k-1) x (linear: k
    = 1). The least-squares gain of a known waveform x through it is g = <y, x> / <x, x> = c sum |x|^(k+1) /
    sum |x|^2. The pilot at rms sigma_p measures g_p = c sigma_p^(k-1) M_p(k) (M_p = :func:`envelope_moment`
    of the unit-rms pilot). The payload is Gaussian-like (a sum of many shaped symbols): |x|^2 ~ sigma_d^2
    Exp(1), E|x|^m = sigma_d^m Gamma(1 + m/2), so g_d = c sigma_d^(k-1) Gamma((k+3)/2). Hence

        g_d / g_p = (sigma_d / sigma_p)^(k-1) Gamma((k+3)/2) / M_p(k)        (= 1 when k = 1).

    A client dividing its payload amplitude by this ratio arrives with the gain its calibrated h_hat (a
    pilot measurement) promised: the pilots' PAPR (3-5 dB) and operating point no longer bias the payload's
    (12 dB PAPR) gain, in either direction (a payload arriving stronger than booked would understate the
    sensitivity)."""
    if payload_rms_ <= 0 or pilot_rms <= 0:
        return 1.0
    return float((payload_rms_ / pilot_rms) ** (k - 1) * math.gamma((k + 3) / 2) / pilot_moment)


def pa_correction(fit: PowerFit | None, payload_rms_: float, pilot_rms: float, pilot_samples: np.ndarray) -> float:
    """The factor a client multiplies its payload by (1 / :func:`payload_gain_ratio`), or exactly 1 when the
    fit shows no departure from linear (:func:`departs_from_linear`: the correction would then be the fit's
    noise; a linear radio's rounds stay bit-identical)."""
    if fit is None or not departs_from_linear(fit):
        return 1.0
    k = float(fit.k_amp)
    return 1.0 / payload_gain_ratio(k, payload_rms_, pilot_rms, envelope_moment(pilot_samples, k))


def propose_tx_gains(peaks: dict, gains: dict, fits: dict, pilot_peak: float, *, dac_backoff_db: float,
                     gain_range: tuple[float, float] = (0.0, 89.5)) -> tuple[dict, dict]:
    """Per radio (by name): the TX gain that puts its planned peak ``dac_backoff_db`` under the DAC's full
    scale, and its planned peak's margin to its PA's compression onset (dB, None when the fit saw none).

    ``peaks[name]``: the radio's planned digital peak at its current gain ``gains[name]``. With the fitted
    k_gain, raising the gain by dG lets the same received level go out at a digital amplitude k_gain dG dB
    lower, so the DAC target gives dG = (20 log10 peak + dac_backoff_db) / k_gain (rounded down to
    ``GAIN_STEP_DB``, clipped to ``gain_range``). The drive that delivers a planned received level does not
    depend on how it is split between digital amplitude and gain (k_amp = k_gain = 1), so the PA margin is
    the plan's, not the gain's: a negative margin is refused at plan time (:func:`refuse_compression`) and
    only a lower planned power (power.max_snr_db) or a stronger path (less attenuation) cures it."""
    out, margin = {}, {}
    for name, peak in peaks.items():
        g0 = float(gains[name])
        fit = fits.get(name)
        kg = fit.k_gain if (fit is not None and fit.gain_swept and fit.k_gain > 0.1) else 1.0
        onset = compression_onset_db(fit, pilot_peak) if fit is not None else None
        margin[name] = (None if onset is None or peak <= 0 else onset - float(drive_db(peak, g0, fit.gain_ref)))
        if peak <= 0:
            out[name] = g0
            continue
        g = g0 + (20 * math.log10(peak) + dac_backoff_db) / kg
        g = math.floor(g / GAIN_STEP_DB + 1e-9) * GAIN_STEP_DB
        out[name] = float(min(max(g, gain_range[0]), gain_range[1]))
    return out, margin


def tx_gains_problem(u, clients: int, jammer: bool) -> str:
    """Why a uhd.tx_gains key names no radio of the run ('client-N', 'N', 'jammer', or a serial given as
    serial=... in uhd.tx_args / uhd.jammer_args), or '' when every key does."""
    serials = set()
    for a in list(u.tx_args) + [u.jammer_args]:
        for part in str(a).split(","):
            k, _, v = part.partition("=")
            if k.strip() == "serial" and v.strip():
                serials.add(v.strip())
    names = {f"client-{i}" for i in range(clients)} | {str(i) for i in range(clients)} | ({"jammer"} if jammer else set())
    for k in dict(u.tx_gains):
        if k not in names and k not in serials:
            return (f"'{k}' names no radio of the run (use client-0..client-{clients - 1}"
                    f"{', jammer' if jammer else ''} or a serial given in uhd.tx_args / uhd.jammer_args)")
    return ""


def plan_gains(cfg, cal, dac_backoff_db: float = 3.0, pilot_peak: float = 1.0) -> tuple[dict, list[str]]:
    """`otafl-sdr calibrate gains`: per radio, its planned maximum power from the config's limits against
    the calibration's noise floor and channels, and the TX gain that puts its planned peak ``dac_backoff_db``
    under the DAC's full scale (:func:`propose_tx_gains`), with its PA margin (None: no compression seen).

    Planned maximum (calibrated units, every quantity planned): a client sends at most
    P_i = d sigma_c2 10^(power.max_snr_db / 10) per round over n_sym = d / 2 symbols, i.e. an rms of
    sqrt(2 sigma_c2 10^(max_snr_db / 10) / sps) per sample at the receiver, |h_i| less at its DAC, peaking
    uhd.payload_papr_db over it; the jammer's alpha_cj = sqrt(sigma_c2 10^(jammer_max_snr_db / 10)) per real
    coordinate peaks at 4.5 sqrt(2) alpha_cj / |h_cj|. Returns (the record kept in the calibration file as
    ``tx_plan``, the table's lines)."""
    u, pw = cfg.uhd, cfg.power
    if not cal.noise or not cal.clients or not cal.power:
        raise UserError("calibrate gains needs the calibration's noise floor, channels and power sweep "
                        "(run `otafl-sdr calibrate all` into the same file first)")
    s2, sps, papr = float(cal.noise["sigma_c2"]), int(cfg.phy.sps), float(u.payload_papr_db)
    rms = math.sqrt(2 * s2 * 10 ** (pw.max_snr_db / 10) / sps)
    links = {f"client-{i}": c for i, c in enumerate(cal.clients)}
    peaks = {name: rms * 10 ** (papr / 20) / abs(c.h) for name, c in links.items()}
    if pw.jammer and cal.jammer is not None:
        peaks["jammer"] = 4.5 * math.sqrt(2 * s2 * 10 ** (pw.jammer_max_snr_db / 10)) / abs(cal.jammer.h)
    gains = {name: tx_gain_for(u, name) for name in peaks}
    fits = {name: fit_for(cal.power, name) for name in peaks}
    proposed, margin = propose_tx_gains(peaks, gains, {k: v for k, v in fits.items() if v is not None},
                                        pilot_peak, dac_backoff_db=dac_backoff_db)
    lines = [f"{'radio':<10} {'gain now':>9} {'planned peak':>13} {'proposed':>9} {'PA margin':>10}"]
    for name in peaks:
        m = margin[name]
        lines.append(f"{name:<10} {gains[name]:9.1f} {20 * math.log10(peaks[name]):10.1f} dBFS {proposed[name]:9.1f} "
                     + ("  not seen" if m is None else f"{m:7.1f} dB" + ("  INTO COMPRESSION" if m < 0 else "")))
    toml = ", ".join(f"'{k}' = {v:g}" for k, v in proposed.items())
    lines.append(f"set uhd.tx_gains = {{{toml}}} (then recalibrate: the channels change with the gains)")
    record = {"proposed": proposed, "gains": gains, "planned_peak_dbfs": {k: 20 * math.log10(v) for k, v in peaks.items()},
              "pa_margin_db": {k: v for k, v in margin.items() if v is not None}, "dac_backoff_db": float(dac_backoff_db), "payload_papr_db": papr,
              "max_snr_db": float(pw.max_snr_db)}
    return record, lines
