"""The radios' front-end impairments (channel/front_end.py) on an OFDM round (``phy.waveform = "ofdm"``):
the `sim` air's time-domain model, what the loopback's OFDM round needs to configure its GNU Radio front
ends (radio/loopback_ofdm.py), and how far each impairment can stretch one client's payload difference
(the ledger's booking, workload/parts.py -> workload/booking.py).

Sim model (``transmit``): every client's burst is built as the loopback builds it (phy/ofdm.py grid:
payload, pre-equalised reference, alpha_ik per subcarrier, unitary IFFT, cyclic prefix), the same
per-sample chain of channel/front_end.py is applied with channel/impairments.py's functions (IQ (tx) ->
Rapp -> + DC -> Wiener phase noise -> residual CFO -> SRO resampler -> Doppler rho_i(t), t counted from
the stream's first sample, front_end.doppler_paths), then h_i, the round's multipath
FIR, the jammer (DC, phase noise, CFO only), thermal noise, the receiver's phase noise and IQ (rx), and
the loopback's own receiver (phy/ofdm.demodulate: timing, CFO, LS channel, pilot phase tracking). The
SRO resampler is channel/sim_impairments.resample with a raised cosine of roll-off ``SRO_PULSE`` (flat to
0.425 cycles/sample: the occupied band of the default layout, 26/64 = 0.406, passes undistorted; the
single-carrier pulse, roll-off 0.35, would attenuate the band edge). The planned RMS amplitude that
scales Rapp's A_sat and the DC is data-independent (``planned_rms``): sqrt(sum_{k in carriers} |alpha_ik|^2
/ (n N)) per sample for a unit-norm payload over n complex symbols (unitary FFT); the jammer's,
alpha_cj sqrt(2 n_d / N).

What OFDM shows under each impairment: phase noise and CFO rotate a client's samples within an OFDM symbol
(inter-carrier interference, beyond the common phase the pilots track); IQ imbalance puts an image of
subcarrier k onto -k (through H_{i,-k}: channel inversion makes the image |nu| |G_{-k} / G_k| of the
payload); DC lands on the unused DC bin; SRO drifts the FFT window across symbols (a linear phase in k
that the common-phase tracker does not take out); PA compression clips OFDM's Gaussian-like peaks; Doppler
decorrelates each client's gain from the one it inverted over the burst (the tracker follows only the
common phase). The ICI of a Wiener phase noise and a CFO: Pollet, Van Bladel & Moeneclaey, "BER
sensitivity of OFDM systems to carrier frequency offset and Wiener phase noise", IEEE Trans. Commun. 1995;
the IQ image: Tarighat, Bagheri & Sayed, IEEE Trans. Signal Process. 2005; Rapp's model: Rapp, 1991.

Privacy (``booking_stretch``). Three regimes, by what the impairments do to the receiver's estimates.

1. DC only: an additive data-independent constant through a linear channel. The receiver's estimates
   (timing, CFO, LS channel: the training; phase: the comb pilots) see no data, so the per-subcarrier
   mechanism (privacy/subcarrier_mechanism.py) holds unchanged: stretch 1.
2. IQ imbalance (with or without DC), the layout's comb pilots mirror onto pilots (``pilots_mirror``):
   y = mu x + nu x* in time is, per subcarrier, mu X_k + nu conj(X_{-k}) (unitary FFT), so after the
   channel and the receiver's unit-modulus equalisation output k of client i is
   mu g_ik s_k + nu c_ik conj(s_{-k}),  c_ik = h_i G_ik conj(alpha_{i,-k}) / alpha_u
   (g_ik the planned gain; data carriers mirror onto data carriers or unread slots, pilots onto pilots:
   the estimates stay data-free). Each pair (k, -k) is a real-linear map of two complex symbols whose
   blocks are scaled rotations / conjugations (norm |entry|), so by Schur's test its norm is at most
   sqrt(max row sum x max column sum) of the |entries| (``iq_pair_gain``); the receiver's IQ (rx), after
   the noise, is post-processing and counted only so that the released aggregate itself moves by at most
   the booked figure (a factor |mu| + |nu|, as front_end.sensitivity_gain counts it for single carrier).
   The per-subcarrier noise (the jammer's included) is unchanged: booked per coordinate, stretch =
   max_i b_i op_i / max_i b_i max_k |g_ik|. A channel-inverting client's image costs |G_{-k} / G_k|.
3. Phase noise, residual CFO, Rapp, SRO or Doppler (and the loopback's residual CFO / delay,
   ``offset_keys``): the client's samples are multiplied by a time-varying unit phasor or gain,
   compressed sample by sample, resampled or shifted, which spreads its payload over every subcarrier,
   the comb pilots included (inter-carrier interference, intermodulation, window drift), so the
   receiver's phase track depends on the data and no per-subcarrier bound holds. The round is booked at
   the capture (as channel/capture_bound.py does for single carrier): the capture is a Gaussian mechanism
   with the channel's white noise sigma_c2 per real coordinate and every receiver step is
   post-processing. Client i's chain from payload difference to capture is the composition of
   diag(alpha_ik) -> IFFT with cyclic prefix (norm sqrt(lambda_i), lambda_i = lambda_max(D^H (I + F^H P F)
   D), D = diag(alpha_ik) on the data carriers, P the prefix's copied samples: the prefix repeats up to
   all of a symbol's energy, ``prefix_gain``) -> tx IQ (|mu| + |nu|) -> Rapp (a contraction,
   front_end.sensitivity_gain) -> DC (none) -> phase noise, CFO (unit modulus: isometries) -> SRO
   (front_end.sro_gain's Schur bound of the resampler) -> Doppler (|rho_i(t)| <= front_end.doppler_peak
   over ``stream_window``, the round's seeded paths) -> h_i and the multipath FIR (linear convolution:
   |h_i| max_f |G_i(f)|, Young). Booked: sensitivity max_i b_i op_i / alpha_u against the channel noise
   alone (the jammer's noise sits on the payload slots only; the ledger takes min(sigma_eff, sqrt(sigma_c2)
   / alpha_u), workload/booking.py). Loose where channel inversion meets a deep fade: op_i / max_k |g_ik|
   is up to sqrt(2) max_f |G_i| / min_k |G_ik| (``planned_stretch``, what targeting plans on). Where the
   only impairments at the capture are slowly varying factors (CFO, Doppler, the loopback's residual CFO
   and delay; no IQ), the smaller of that and ``slow_phasor_gain`` (the channel moved past the factor,
   plus its commutator) is booked: TDL-C 3 us, 20 dB: 2.45 against 4.24, one sample's change 0.45 of it."""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np

from otafl_sdr.phy.ofdm import OfdmLayout, demodulate
from otafl_sdr.phy.packing import pack_reals, symbols_for, unpack_reals
from otafl_sdr.transmission import Reception
from otafl_sdr.channel import impairments
from otafl_sdr.channel.front_end import FrontEnd, SRO_SCHUR_LOOPBACK, iq_mu_nu, sro_gain
from otafl_sdr.channel.ofdm_sim import delay_extent, round_firs, subcarrier_shapes
from otafl_sdr.channel.sim_impairments import resample, wiener

SRO_PULSE = SimpleNamespace(rolloff=0.15, rrc_span=12)    # the sim's SRO interpolator (module doc)
MIN_TRACK_PHASE_NOISE = 1e-6
GAIN_GRID = 8192


def capture_keys(fe: FrontEnd) -> list[str]:
    """The impairments that book an OFDM round at the capture (module doc, regime 3)."""
    return [k for k, on in (("phase_noise", fe.phase_noise), ("residual_cfo_hz", fe.cfo), ("pa_a_sat", fe.a_sat),
                            ("sro_ppm", fe.sro), ("doppler_hz", fe.doppler)) if on]


def offset_keys(cfg, air: str) -> list[str]:
    """The loopback's per-client residual offsets that book an OFDM round at the capture (regime 3: a
    residual CFO is a time-varying unit phasor, a residual delay can put part of a symbol outside the
    FFT window, inter-symbol and inter-carrier interference; both are isometries of the capture). The
    residual phase is a unit constant per client (regime 1); client_cfo_max / client_delay_max are
    pre-compensated. None on sim (it does not model the loopback's offsets)."""
    if air != "loopback":
        return []
    return [f"loopback.{k}" for k in ("residual_cfo", "residual_delay") if getattr(cfg.loopback, k)]


def at_capture(cfg, air: str) -> bool:
    """True when an OFDM round of this config is booked at the capture (regime 3)."""
    return bool(capture_keys(FrontEnd.from_config(cfg)) + offset_keys(cfg, air))


def pilots_mirror(lay: OfdmLayout) -> bool:
    """True when no comb pilot's mirror (-f) is a data subcarrier, so an IQ image keeps data off the pilots."""
    data = set(lay.freqs[lay.data_pos].tolist())
    return not any(-f in data for f in lay.freqs[lay.pilot_pos].tolist())


def tracker_phase_noise(cfg) -> float:
    """rad / sqrt(sample) the receiver's phase tracker assumes: its own and one client's walk, relative."""
    return max(float(np.sqrt(cfg.loopback.rx_phase_noise ** 2 + 2 * cfg.channel.phase_noise ** 2)),
               MIN_TRACK_PHASE_NOISE)


def planned_rms(od: dict, n: int, fft: int) -> np.ndarray:
    """(K,) each client's planned RMS amplitude per sample (module doc; data-independent)."""
    a = np.asarray(od["alpha"], np.complex128)[:, np.asarray(od["carriers"], np.int64)]
    return np.sqrt(np.sum(np.abs(a) ** 2, axis=1) / (max(int(n), 1) * fft))


def jammer_rms(alpha_cj: float, n_data: int, fft: int) -> float:
    return float(alpha_cj) * float(np.sqrt(2.0 * n_data / fft))


def sro_pad(fe: FrontEnd, lay: OfdmLayout, n_ofdm: int) -> int:
    """Samples of tail the loopback stream needs for the SRO resamplers' shortfall (delta fewer samples per
    sample, plus GNU Radio's 8-tap history)."""
    return int(np.ceil(fe.sro * (lay.burst_samples(int(n_ofdm)) + 4 * lay.symbol_len))) + 16 if fe.sro else 0


def stream_window(cfg, n_ofdm: int, fir_len: int) -> int:
    """An upper bound on the samples of an OFDM round's stream on either air (lead, frame, the tail for
    the guard, channel, SRO, residual delays, receiver delay and the timing search): the span over which
    both apply the Doppler factor rho_i(t), t from the stream's first sample, and the booking bounds it."""
    lay, fe, lb = OfdmLayout.from_phy(cfg.phy), FrontEnd.from_config(cfg), cfg.loopback
    L = lay.symbol_len
    return int((-(-lay.guard // L) + lay.frame_symbols(n_ofdm)) * L + lay.guard + int(fir_len) + sro_pad(fe, lay, n_ofdm)
               + 2 * int(lb.residual_delay) + int(lb.rx_delay) + 2 * L + 32)


# ------------------------------------------------------------------------------------------ the sim model
def _tx_chain(fe, x: np.ndarray, rms: np.ndarray, dc_phase: np.ndarray, cfo: np.ndarray, sro: np.ndarray,
              phase_seeds: list, rho: np.ndarray | None = None) -> np.ndarray:
    """(A, n) transmitters' samples through their front ends (module doc's chain), per row: planned RMS,
    DC phase, CFO (cycles/sample), SRO (fraction), phase-noise seed, Doppler factor rho (A, n) or None."""
    if fe.iq:
        x = impairments.iq_imbalance(x, fe.iq_mag_db, fe.iq_phase_deg)
    if fe.a_sat:
        x = impairments.rapp(x, np.where(rms > 0, fe.a_sat * rms, 1.0)[:, None], fe.p)
    if fe.dc:
        x = x + (fe.dc * rms * np.exp(1j * dc_phase))[:, None]
    if fe.phase_noise or np.any(cfo):
        n = np.arange(x.shape[1])
        for a, s in enumerate(phase_seeds):
            x[a] = x[a] * np.exp(1j * (wiener(s, x.shape[1], fe.phase_noise) + 2 * np.pi * cfo[a] * n))
    x = resample(x, sro, SRO_PULSE)
    return x if rho is None else x * rho


def transmit(cfg, fe: FrontEnd, plan, rng: np.random.Generator, keep_capture: bool = False) -> Reception:
    """The sim air's OFDM round with ``fe`` on (module doc); ``keep_capture``: extra["capture"] holds the
    receiver's samples before its own front end (tests: the capture-level sensitivity)."""
    t0 = time.perf_counter()
    od, lay, seed = plan.extra["ofdm"], OfdmLayout.from_phy(cfg.phy), int(cfg.run.seed)
    K, d = plan.clients, plan.dim
    n = symbols_for(d)
    carriers = np.asarray(od["carriers"], np.int64)
    n_ofdm = int(od["n_ofdm"])
    alpha, ref = np.asarray(od["alpha"], np.complex128), np.asarray(od["ref"], np.complex128)
    finite = np.all(np.isfinite(plan.payload), axis=1)
    active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
    idx = np.flatnonzero(active)
    L = lay.symbol_len
    fir = round_firs(cfg, plan.round, K)
    lead = -(-lay.guard // L)
    frame = lay.frame_symbols(n_ofdm) * L
    total = lead * L + frame + lay.guard + fir.shape[1] + L + 16 + int(np.ceil(fe.sro * (lead * L + frame))) + 16
    dr = fe.draws(seed, K)
    rms = planned_rms(od, n, lay.fft)
    safe = np.where(alpha != 0, alpha, 1.0)
    x = np.zeros((idx.size, total), np.complex128)
    for a, i in enumerate(idx):
        row = plan.payload[i] if finite[i] else np.zeros(d)
        g = lay.grid(pack_reals(row), carriers, n_ofdm, np.where(alpha[i] != 0, ref[i] / safe[i], 0.0)) * alpha[i]
        x[a, lead * L:lead * L + frame] = lay.to_time(g)
    y = np.zeros(total, np.complex128)
    if idx.size:
        rho = fe.doppler_paths(seed, plan.round, K, np.arange(float(total)))[idx] if fe.doppler else None
        x = _tx_chain(fe, x, rms[idx], dr["dc_phase"][idx], dr["cfo"][idx], dr["sro"][idx],
                      [fe.phase_seed(seed, plan.round, int(i)) for i in idx], rho) * plan.h[idx, None]
        for a, i in enumerate(idx):
            y += np.convolve(x[a], fir[i])[:total]
    if plan.alpha_cj > 0:                                    # the jammer: payload slots; DC, phase noise, CFO
        nj = n_ofdm * len(carriers)
        jam = plan.alpha_cj * (rng.standard_normal(nj) + 1j * rng.standard_normal(nj))
        xj = np.zeros(total, np.complex128)
        xj[lead * L:lead * L + frame] = lay.to_time(lay.grid(jam, carriers, n_ofdm))
        jfe = FrontEnd(phase_noise=fe.phase_noise, dc=fe.dc, cfo=fe.cfo)            # no IQ, PA, SRO (front_end.py)
        xj = _tx_chain(jfe, xj[None, :], np.array([jammer_rms(plan.alpha_cj, len(carriers), lay.fft)]),
                       dr["dc_phase"][[K]], np.array([dr["jammer_cfo"]]), np.zeros(1),
                       [fe.phase_seed(seed, plan.round, "jammer")])[0]
        y += plan.h_cj * xj
    sigma_c2 = plan.extra.get("air_sigma_c2", plan.sigma_c2)
    y = y + np.sqrt(sigma_c2) * (rng.standard_normal(total) + 1j * rng.standard_normal(total))
    cap = y.copy() if keep_capture else None
    if fe.phase_noise:
        y = y * np.exp(1j * wiener(fe.phase_seed(seed, plan.round, "rx"), total, fe.phase_noise))
    if fe.iq:
        y = impairments.iq_imbalance(y, fe.iq_mag_db, fe.iq_phase_deg, receiver=True)
    res = demodulate(y, lay, n, carriers, n_ofdm, np.asarray(od["ref_amp"], np.complex128), search=lead * L + L - 1,
                     backoff=max(0, (lay.cp - delay_extent(cfg)) // 2), smoothing=cfg.phy.ofdm_smoothing,
                     phase_noise=tracker_phase_noise(cfg))
    extra = {"waveform": "ofdm", "ofdm_symbols": n_ofdm, "data_carriers": int(len(carriers)), "timing": res.timing,
             "rho": res.rho, "front_end": True}
    if cap is not None:
        extra["capture"] = cap
    uses = lay.burst_samples(n_ofdm)
    if not res.ok:
        return Reception(aggregate=None, ok=False, reason=res.reason, channel_uses=uses,
                         wall_s=time.perf_counter() - t0, extra=extra)
    return Reception(aggregate=unpack_reals(res.symbols, d) / plan.alpha_u, ok=True, channel_uses=uses,
                     wall_s=time.perf_counter() - t0, extra=extra)


# ------------------------------------------------------------------------------------------ privacy bounds
def prefix_gain(lay: OfdmLayout, positions: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """(K,) sqrt(lambda_max(D_i^H (I + F^H P F) D_i)): the norm of payload difference -> one OFDM symbol's
    samples with its prefix, D_i = diag(alpha_ik) on ``positions`` (module doc, regime 3)."""
    bins = lay.bins[np.asarray(positions, np.int64)]
    tail = np.arange(lay.fft - lay.cp, lay.fft)
    F = np.exp(2j * np.pi * np.outer(tail, bins) / lay.fft) / np.sqrt(lay.fft)     # (cp, n_d): the prefix rows
    Q = np.eye(len(bins)) + F.conj().T @ F
    out = np.zeros(alpha.shape[0])
    for i, a in enumerate(np.asarray(alpha, np.complex128)[:, positions]):
        if np.any(a != 0):
            out[i] = float(np.sqrt(max(np.linalg.eigvalsh((a.conj()[:, None] * Q) * a[None, :])[-1], 0.0)))
    return out


def fir_peak(fir: np.ndarray) -> np.ndarray:
    """(links,) max_f |G_i(f)| of each link's FIR over all frequencies: the grid's maximum plus the largest
    change between grid points (|G'| <= 2 pi sum_n n |g_n|)."""
    fir = np.atleast_2d(np.asarray(fir, np.complex128))
    peak = np.abs(np.fft.fft(fir, GAIN_GRID, axis=1)).max(axis=1)
    return peak + np.pi * np.abs(fir) @ np.arange(fir.shape[1]) / GAIN_GRID


def resampler_gain(fe: FrontEnd, air: str) -> float:
    if not fe.sro:
        return 1.0
    return SRO_SCHUR_LOOPBACK if air != "sim" else sro_gain(fe.sro, SRO_PULSE, "sim")


def iq_pair_gain(lay: OfdmLayout, fe: FrontEnd, carriers: np.ndarray, eff: np.ndarray, H: np.ndarray,
                 alpha: np.ndarray, alpha_u: float) -> np.ndarray:
    """(K,) the largest Schur bound over subcarrier pairs (k, -k) of client i's tx-IQ map (module doc,
    regime 2), times |mu| + |nu| for the receiver's IQ."""
    mu, nu = (abs(v) for v in iq_mu_nu(fe.iq_mag_db, fe.iq_phase_deg))
    carriers = np.asarray(carriers, np.int64)
    pos = {int(f): p for p, f in enumerate(lay.freqs)}
    on = np.zeros(lay.used, bool)
    on[carriers] = True
    mirror = np.array([pos.get(-int(lay.freqs[p]), -1) for p in range(lay.used)])
    g = np.where(on[None, :], np.abs(eff), 0.0)                                    # |g_ik| on data carriers
    m_ok = (mirror >= 0) & on[np.where(mirror >= 0, mirror, 0)]                    # the mirror carries data too
    c = np.zeros_like(g)                                                           # |c_ik|: conj(s_{-k}) onto k
    c[:, m_ok] = np.abs(H[:, m_ok] * alpha[:, mirror[m_ok]]) / alpha_u
    c = np.where(on[None, :], c, 0.0)
    row = mu * g + nu * c
    col = mu * g + nu * np.where(m_ok[None, :], c[:, np.where(mirror >= 0, mirror, 0)], 0.0)   # s_k's column
    best = np.zeros(g.shape[0])
    for p in carriers:
        q = mirror[p] if m_ok[p] else p
        r = np.maximum(row[:, p], row[:, q])
        cl = np.maximum(col[:, p], col[:, q])
        best = np.maximum(best, np.sqrt(r * cl))
    return best * (mu + nu)


SLOW_PHASOR = {"residual_cfo_hz", "doppler_hz", "loopback.residual_cfo", "loopback.residual_delay"}


def slow_phasor_gain(lay: OfdmLayout, carriers: np.ndarray, alpha: np.ndarray, h: np.ndarray, fir: np.ndarray,
                     peak: float, slope: np.ndarray) -> np.ndarray:
    """(K,) a tighter regime-3 bound (x alpha_u) when every impairment at the capture is a slowly varying
    factor Phi_n (a CFO, Doppler; delays commute with the channel): with C the link's convolution (h_i and
    its FIR) and u = IFFT-with-prefix diag(alpha_i) Delta, C Phi u = Phi C u + sum_l c_l (Phi_{n-l} - Phi_n)
    u_{n-l}, so ||C Phi u|| <= peak ||C u|| + sum_l |c_l| l slope_i ||u|| (|Phi_n - Phi_{n-l}| <= l slope_i).
    ||C u|| over the burst: each symbol's output splits into its own N + cp samples (disjoint across
    symbols) and the channel's tail of L - 1 samples into the next symbol (disjoint across symbols too),
    so ||C u|| <= (||M_main|| + ||M_tail||) ||Delta||, M = C X D for one symbol (X: IFFT with prefix):
    about the planned gain max_k |h_i G_ik alpha_ik| (channel inversion) rather than
    max_k |alpha_ik| max_f |h_i G_i(f)| (``booking_stretch``'s general bound)."""
    bins = lay.bins[np.asarray(carriers, np.int64)]
    n = np.arange(lay.symbol_len)
    X = np.exp(2j * np.pi * np.outer(n - lay.cp, bins) / lay.fft) / np.sqrt(lay.fft)    # (N + cp, n_d)
    lam = prefix_gain(lay, carriers, alpha)
    out = np.zeros(alpha.shape[0])
    for i, a in enumerate(np.asarray(alpha, np.complex128)[:, carriers]):
        if not np.any(a != 0):
            continue
        c = h[i] * np.asarray(fir[i], np.complex128)
        M = np.apply_along_axis(lambda col: np.convolve(col, c), 0, X * a[None, :])      # (N + cp + L - 1, n_d)
        main = np.linalg.norm(M[:lay.symbol_len], 2)
        tail = np.linalg.norm(M[lay.symbol_len:], 2) if M.shape[0] > lay.symbol_len else 0.0
        out[i] = peak * (main + tail) + float(np.abs(c) @ np.arange(len(c))) * slope[i] * lam[i]
    return out


def booking_stretch(cfg, plan, bound, air: str) -> tuple[float, bool]:
    """(stretch, at_capture) for an OFDM round planned by power/ofdm_plan.plan_ofdm (``plan.extra["ofdm"]``,
    its per-subcarrier mechanism): the factor the booked sensitivity is multiplied by, and whether the round
    is booked at the capture (channel noise alone). ``bound``: b_i, the payload bound (K,) or a float."""
    fe = FrontEnd.from_config(cfg)
    m = plan.mechanism
    at_capture = bool(capture_keys(fe) + offset_keys(cfg, air))
    if not (fe.enabled or at_capture) or not m.uses_data or m.sensitivity <= 0:
        return 1.0, at_capture
    od, lay = plan.extra["ofdm"], OfdmLayout.from_phy(cfg.phy)
    K = plan.clients
    b = np.broadcast_to(np.asarray(bound, float), (K,))
    carriers = np.asarray(od["carriers"], np.int64)
    alpha = np.asarray(od["alpha"], np.complex128)
    sending = np.any(alpha[:, carriers] != 0, axis=1)
    if at_capture:
        iq = sum(abs(v) for v in iq_mu_nu(fe.iq_mag_db, fe.iq_phase_deg)) if fe.iq else 1.0
        fir = round_firs(cfg, plan.round, K)
        dop = fe.doppler_peak(int(cfg.run.seed), plan.round, K, stream_window(cfg, int(od["n_ofdm"]), fir.shape[1]))
        op = (prefix_gain(lay, carriers, alpha) * iq * resampler_gain(fe, air) * dop * np.abs(plan.h)
              * fir_peak(fir) / plan.alpha_u)
        if set(capture_keys(fe) + offset_keys(cfg, air)) <= SLOW_PHASOR and not fe.iq:
            f_max = fe.cfo + (float(cfg.loopback.residual_cfo) if air == "loopback" else 0.0)
            line = np.ones(K)
            if fe.doppler:
                from otafl_sdr.channel.doppler import DopplerRound
                line = DopplerRound(fe.doppler, int(cfg.run.seed), plan.round, K).sup_line()
            slope = 2 * np.pi * (f_max * dop + fe.doppler * line)        # Bernstein: |rho'| <= 2 pi f_D sup|rho|
            op = np.minimum(op, slow_phasor_gain(lay, carriers, alpha, np.asarray(plan.h, np.complex128), fir, dop,
                                                 slope) / plan.alpha_u)
        return float(max(np.max(np.where(sending, b * op, 0.0)) / m.sensitivity, 1.0)), True
    if not fe.iq:
        return 1.0, False
    H = np.asarray(plan.h, np.complex128)[:, None] * subcarrier_shapes(cfg, plan.round, K)
    op = iq_pair_gain(lay, fe, carriers, od["eff_gain"], H, alpha, plan.alpha_u)
    return float(max(np.max(np.where(sending, b * op, 0.0)) / m.sensitivity, 1.0)), False


def planned_stretch(cfg, round_indices, links: int, air: str, dim: int | None = None) -> float:
    """An upper bound of ``booking_stretch`` for the rounds ``round_indices`` before they are planned (privacy
    targeting): with alpha_ik = alpha_i / (G_ik s_ik), s_ik >= 1, max_k |alpha_ik| / max_k |g_ik| <=
    alpha_u / (|h_i| min_k |G_ik|) over the untruncated data carriers, so regime 3 gives
    sqrt(lambda) (|mu| + |nu|) sro max_f |G_i| / min_k |G_ik| (lambda: ``prefix_gain`` of unit alpha on
    every data carrier), times Doppler's draw-free doppler.planned_peak over the stream's window (the round
    carries at least min_i (client i's untruncated data carriers) carriers, so at most that many OFDM
    symbols; ``dim`` None: the window unknown, its ceiling 9), and regime 2
    (|mu| + |nu| max |G_ik / G_i,-k|)(|mu| + |nu|)."""
    fe = FrontEnd.from_config(cfg)
    at_capture = bool(capture_keys(fe) + offset_keys(cfg, air))
    if not (fe.iq or at_capture):
        return 1.0
    lay = OfdmLayout.from_phy(cfg.phy)
    mu, nu = (abs(v) for v in iq_mu_nu(fe.iq_mag_db, fe.iq_phase_deg))
    thr = max(float(cfg.phy.ofdm_truncation), 1e-300)
    worst = 1.0
    for round_index in round_indices:
        G = subcarrier_shapes(cfg, round_index, links)[:, lay.data_pos]
        ok = np.abs(G) ** 2 >= thr
        gmin = np.min(np.where(ok, np.abs(G), np.inf), axis=1)
        if at_capture:
            lam = prefix_gain(lay, lay.data_pos, np.ones((1, lay.used)))[0]
            peak = fir_peak(round_firs(cfg, round_index, links))
            r = lam * (mu + nu if fe.iq else 1.0) * resampler_gain(fe, air) * peak / np.where(np.isfinite(gmin), gmin, 1)
            if fe.doppler:
                from otafl_sdr.channel.doppler import planned_peak
                n_d = max(int(np.min(np.sum(ok, axis=1))), 1)
                window = (stream_window(cfg, lay.payload_symbols(symbols_for(dim), n_d), lay.cp + 1)
                          if dim else 0)
                r = r * planned_peak(fe.doppler, window)
        else:
            Gf = subcarrier_shapes(cfg, round_index, links)
            pos = {int(f): p for p, f in enumerate(lay.freqs)}
            mir = np.array([pos.get(-int(lay.freqs[p]), p) for p in lay.data_pos])
            ratio = np.abs(G) / np.maximum(np.abs(Gf[:, mir]), np.sqrt(thr))
            r = (mu + nu * np.max(np.where(ok, ratio, 0.0), axis=1)) * (mu + nu)
        worst = max(worst, float(np.max(r)))
    return worst
