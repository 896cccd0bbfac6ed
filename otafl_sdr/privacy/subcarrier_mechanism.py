"""The round's Gaussian mechanism when the payload rides on subcarriers of different gain and noise (OFDM,
issue 26 item 3): ``subcarrier_mechanism`` restates it as the one ``transmission.Mechanism`` the ledger books.

Setting (paper 000 eq. 16, per subcarrier). Client i puts its payload's reals, packed two per complex
symbol (I and Q), on subcarriers k = 0..n_sc-1 (over as many OFDM symbols as it needs). After the
receiver's FFT, per-subcarrier scaling and 1/alpha_u, a symbol on subcarrier k of the aggregate is

    y_k = sum_i g_ik s_ik + z_k,     g_ik = h_ik alpha_ik / alpha_u   (``eff_gain``, complex),
    z_k ~ CN(0, 2 sigma_k^2), i.e. sigma_k^2 per real coordinate (``noise_var``), independent over k
    and over OFDM symbols (block fading: g_ik and sigma_k are the same on every symbol of the burst).

Truncated channel inversion sets alpha_ik = 0 where |h_ik| is below the cut-off, so g_ik = 0: that
subcarrier carries nothing of client i, and a subcarrier that no client uses carries no payload at all
(its noise variance is then irrelevant and may be 0 or inf).

Derivation. Stack the aggregate's real coordinates (Re y, Im y per subcarrier and symbol). It is
G_i s_i + (the other clients' fixed contribution) + z with z ~ N(0, Sigma), Sigma diagonal with sigma_k^2
on both reals of subcarrier k: a Gaussian mechanism with diagonal covariance. For two neighbouring data
sets that differ in client i's payload by Delta (||Delta|| <= b_i, the relation's bound below), the two
output distributions are N(m, Sigma) and N(m + G_i Delta, Sigma), whose privacy profile is exactly that of
the scalar Gaussian with mu = ||Sigma^{-1/2} G_i Delta|| (whitening is invertible post-processing; Dong,
Roth & Su, GDP Prop. 2.8 / Balle & Wang 2018). On subcarrier k, G_i acts on the real pair (dI, dQ) of a
difference symbol delta as multiplication by g_ik: a rotation by angle(g_ik) (which maps a real coordinate
onto I and Q both) and a scaling by |g_ik|. The rotation is an isometry of R^2 and the noise of the pair is
isotropic (circular, sigma_k^2 on I and on Q), so the pair's whitened shift has norm exactly
|g_ik| |delta| / sigma_k; each real coordinate is bounded by |g_ik| (the rotation never adds to the
norm), never by |Re g_ik| + |Im g_ik|. Summing over subcarriers and symbols,

    ||Sigma^{-1/2} G_i Delta||^2 = sum_k |g_ik|^2 / sigma_k^2 ||Delta_k||^2 <= (max_k |g_ik| / sigma_k)^2 b_i^2,

with equality when all of Delta sits on client i's worst subcarrier, so

    mu_i = b_i max_k |g_ik| / sigma_k,      mu = max_i mu_i        (the worst client's worst subcarrier).

The ledger's Mechanism is a scalar (sensitivity, sigma_eff) with noise multiplier z = sigma_eff /
sensitivity = 1 / mu; we book sigma_eff = sigma_ref = sigma_{k*}, the noise of the worst coordinate k*
(the argmax above), and sensitivity = max_i b_i max_k |g_ik| sigma_ref / sigma_k = mu sigma_ref. Both
numbers are real figures of coordinate k*, and every accountant (pld, rdp, paper's S = sum Delta^2 /
(2 sigma^2), the targeting solver) sees the worst coordinate's noise multiplier. With flat gains
(g_ik = target_gain_i on every carrying subcarrier) and one noise variance, sigma_ref / sigma_k = 1.0
exactly and the record equals the flat policy's Mechanism(sensitivity = max_i g_i b_i, sigma_eff = sigma)
bit for bit (power/cj_adaptive.py).

The relation factor b_i (``clip``) is the one the flat case uses, not re-derived here: the bound on
||payload_i - payload_i'|| the code enforces for the run's ``privacy.unit`` (privacy/sensitivity.py
``payload_bounds``: 1 for ``client`` (update clipped to tau, payload u_i / tau), 2 for ``client_replace``,
the clipped schedule's bound for ``sample``), i.e. ``SystemInfo.payload_bound()``; a float applies to every
client. Assumptions (the caller's to meet): ``eff_gain`` and ``noise_var`` are in the same units (after
every receiver scaling), the noise is circular per subcarrier (an IQ-imbalanced receiver's improper noise
needs its smaller eigenvalue as sigma_k^2), and any uncertainty of g_ik (estimated CSI) is already in
``eff_gain`` as its upper bound (workload/booking.py scales the booked sensitivity by the CSI margin).

Client noise (paper 002's Noisy-FedAvg / Noisy-FedProx, ``client_noise_mechanism``). Client i adds
n_i ~ N(0, s^2 I_d), s = sigma / tau (payload units), to its payload BEFORE its radio, so the noise rides
the same per-subcarrier factor as the data: on subcarrier k the aggregate is

    y_k = sum_i g_ik (u_ik + n_ik) + z_k.

Packed two reals per symbol, n_ik is circular CN(0, 2 s^2); multiplying by g_ik rotates it (still
circular) and scales it by |g_ik|, so g_ik n_ik has s^2 |g_ik|^2 on each real coordinate. The clients'
noises (independent of each other, of the data and of the air), the channel noise and the jammer add, so
the booked noise per real coordinate on subcarrier k is

    sigma_k^2 = sigma_air,k^2 + s^2 sum_{i sending} |g_ik|^2,
    sigma_air,k^2 = (sigma_c2 + |h_cj alpha_cj|^2) / alpha_u^2    (the same on every payload subcarrier),

the client noise times the effective gain plus the channel and jammer noise. A client truncated on k
(g_ik = 0) delivers neither data nor noise there. The data's bound b_i is the algorithm's own (Lemma 20's
2 V sum_k eta_k,t / tau per unit gain, Lemma 22's for FedProx: the replace-one relation of paper 002), and
the derivation above applies unchanged: mu = max_i max_k b |g_ik| / sigma_k. The worst coordinate is
therefore NOT the one of the largest gain in general: a subcarrier where client i keeps a large |g_ik|
while the others' gains there are small (truncated, or scaled down by s_ik > 1 on their weak subcarriers)
carries little client noise besides i's own, so k* is where |g_ik|^2 / (sigma_air^2 + s^2 sum_j |g_jk|^2)
peaks. With flat gains (g_ik = g_i on every carrying subcarrier) sigma_k^2 = sigma_air^2 + s^2 sum_i g_i^2,
paper 002's round_sigma_eff, and the record equals the single-carrier Noisy-FedAvg Mechanism.

Per-subcarrier gains and noise make the round a Gaussian mechanism in the whitened coordinates only;
paper 002's last-model f-DP argument (accountants fdp / fdp_feasible) needs one scalar aggregation weight
per client and isotropic noise, so the record says ``extra["fdp"]["waveform"] = "ofdm"`` and those
accountants report the round as not covered (privacy/fdp.why_not); rdp / pld compose the booked rounds.

Targeting (``SubcarrierPlannedRound``): eps is a decreasing function of sigma (every sigma_k grows with
it), so privacy/targeting.solve_sigma bisects it on the per-subcarrier mechanism the round books."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from otafl_sdr.transmission import Mechanism
from otafl_sdr.privacy.targeting import PlannedRound


def subcarrier_mechanism(round_index: int, eff_gain: np.ndarray, target_gain: np.ndarray, clip, noise_var: np.ndarray,
                         sampling_prob: float = 1.0, **extra) -> Mechanism:
    """The round's Mechanism for per-subcarrier gains (module docstring): eff_gain (K, n_sc) complex
    g_ik = h_ik alpha_ik / alpha_u after truncation (0: subcarrier k carries nothing of client i);
    target_gain (K,) the gains the plan intends (recorded, and the flat reference); clip b_i, a float or
    (K,) (the relation's payload bound, privacy/sensitivity.py); noise_var (n_sc,) noise variance per
    real coordinate after equalisation; ``extra`` goes into Mechanism.extra. ValueError on bad shapes or
    values (a programming error upstream)."""
    g = np.atleast_2d(np.asarray(eff_gain, dtype=np.complex128))
    K, n_sc = g.shape
    tg = np.asarray(target_gain, dtype=float).reshape(-1)
    var = np.asarray(noise_var, dtype=float).reshape(-1)
    b = np.broadcast_to(np.asarray(clip, dtype=float), (K,)) if np.ndim(clip) == 0 else np.asarray(clip, float)
    if tg.shape != (K,) or var.shape != (n_sc,) or b.shape != (K,):
        raise ValueError(f"shapes: eff_gain {g.shape}, target_gain {tg.shape}, noise_var {var.shape}, "
                         f"clip {b.shape}; need (K, n_sc), (K,), (n_sc,), () or (K,)")
    if not np.all(np.isfinite(g)) or not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError("eff_gain must be finite and clip finite and >= 0")
    if not 0.0 <= float(sampling_prob) <= 1.0:
        raise ValueError(f"sampling_prob must be in [0, 1], got {sampling_prob!r}")
    amp = np.abs(g)                                                   # |g_ik|: the rotation is an isometry
    carries = np.any(amp > 0, axis=0)                                 # subcarriers with some client's payload
    if np.any(~np.isfinite(var[carries])) or np.any(var[carries] < 0):
        raise ValueError("noise_var must be finite and >= 0 on every subcarrier that carries payload")
    figures = {"subcarriers": int(n_sc), "payload_subcarriers": int(np.count_nonzero(carries)),
               "truncated": int(np.count_nonzero((amp == 0) & carries[None, :] & (b[:, None] > 0)))}
    sens_flat = float(np.max(np.abs(tg) * b)) if K else 0.0
    if not carries.any() or not np.any(b > 0):
        # nothing of any client reaches the aggregate: a release that costs nothing (privacy/base.costs_nothing)
        sigma = float(np.sqrt(np.min(var[np.isfinite(var)]))) if np.any(np.isfinite(var)) else 0.0
        return Mechanism(round=int(round_index), sensitivity=0.0, sigma_eff=sigma, sampling_prob=float(sampling_prob),
                         extra={**extra, **figures, "sensitivity_flat": sens_flat})
    sigma_k = np.sqrt(np.where(carries, var, 1.0))
    if np.any(sigma_k[carries] == 0):
        # a carrying subcarrier without noise: data released in the clear (a NonPrivateDpEvent)
        sens = float(np.max(b * np.max(amp, axis=1)))
        return Mechanism(round=int(round_index), sensitivity=sens, sigma_eff=0.0, sampling_prob=float(sampling_prob),
                         extra={**extra, **figures, "worst_subcarrier": int(np.argmax(np.max(amp, axis=0) *
                                                                                   (sigma_k == 0))),
                                "sensitivity_flat": sens_flat})
    ratio = np.where(carries[None, :], amp / sigma_k[None, :], 0.0) * b[:, None]    # b_i |g_ik| / sigma_k
    k_star = int(np.argmax(np.max(ratio, axis=0)))                    # the worst coordinate
    sigma_ref = float(sigma_k[k_star])
    sens = float(np.max(b * np.max(amp * (sigma_ref / sigma_k)[None, :] * carries[None, :], axis=1)))
    figures.update(worst_subcarrier=k_star, worst_client=int(np.argmax(np.max(ratio, axis=1))),
                   sigma_mean=float(np.sqrt(np.mean(var[carries]))), gain_max=float(np.max(amp)),
                   sensitivity_flat=sens_flat)
    return Mechanism(round=int(round_index), sensitivity=sens, sigma_eff=sigma_ref, sampling_prob=float(sampling_prob),
                     extra={**extra, **figures})


def client_noise_var(eff_gain: np.ndarray, sending: np.ndarray, client_std: float, air_var: np.ndarray) -> np.ndarray:
    """(n_sc,) sigma_k^2 = sigma_air,k^2 + s^2 sum_{i sending} |g_ik|^2 (module docstring, client noise)."""
    g = np.abs(np.atleast_2d(np.asarray(eff_gain, dtype=np.complex128))) ** 2
    on = np.asarray(sending, bool)[:, None]
    return np.asarray(air_var, dtype=float) + float(client_std) ** 2 * np.sum(np.where(on, g, 0.0), axis=0)


def client_noise_mechanism(plan, bound: float, client_std: float, sending: np.ndarray, **extra) -> Mechanism:
    """The OFDM round of a client-noise algorithm (module docstring): ``plan.extra["ofdm"]`` from
    power/ofdm_plan.plan_ofdm (``eff_gain`` (K, U), ``carriers``, ``noise_var`` the air's sigma_air,k^2 and
    ``csi_margin`` m, 1 with perfect CSI: a client inverting an estimate within 3 std arrives with between
    1 / m and m times its planned gain, so the data are booked at m g_ik and the client noise at g_ik / m
    (both conservative)); ``bound`` b, the data's
    payload bound per unit gain; ``client_std`` s = sigma / tau; ``sending`` (K,) the clients that add
    noise and send data. ``extra`` goes into Mechanism.extra (the plan's mechanism's extra is kept)."""
    od = plan.extra["ofdm"]
    eff = np.asarray(od["eff_gain"], dtype=np.complex128)
    on = np.zeros(eff.shape[1], bool)
    on[np.asarray(od["carriers"], np.int64)] = True
    eff = np.where(on[None, :] & np.asarray(sending, bool)[:, None], eff, 0.0)
    margin = float(od.get("csi_margin", 1.0))         # |true / planned gain| in [1 / margin, margin]
    var = client_noise_var(eff / margin, sending, client_std, od["noise_var"])     # the noise at its lower bound
    m = plan.mechanism
    return subcarrier_mechanism(plan.round, eff * margin, plan.target_gain, bound, var,
                                sampling_prob=m.sampling_prob, **{**m.extra, **extra, "client_std": float(client_std)})


@dataclass
class SubcarrierPlannedRound(PlannedRound):
    """privacy/targeting.PlannedRound of an OFDM round planned for a client-noise algorithm: ``z(sigma)``
    the booked per-subcarrier mechanism's noise multiplier (``client_noise_mechanism``) instead of the
    flat sqrt(sigma_air^2 + (sigma / tau)^2 sum g_i^2) / Delta; ``sens`` and ``gain_sq`` stay the flat
    figures (the solver's starting bracket and its no-sender check)."""

    plan: object = None
    bound: float = 0.0
    sending: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def z(self, sigma: float) -> float:
        m = client_noise_mechanism(self.plan, self.bound, sigma / self.tau, self.sending)
        sens, s = m.sensitivity, m.sigma_eff
        if self.finish is not None:
            sens, s = self.finish(sens, s)
        return math.inf if sens <= 0 else s / sens
