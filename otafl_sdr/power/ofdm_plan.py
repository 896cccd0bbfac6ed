"""Per-subcarrier power control of an OFDM round (``phy.waveform = "ofdm"``, issue 26 item 2): the policy's
flat plan carried onto every subcarrier by truncated channel inversion, and the round's mechanism restated
per subcarrier (privacy/subcarrier_mechanism.py).

The policy plans alpha_i for the flat gain h_i it knows (paper 000 eq. 14: h_i alpha_i / alpha_u = p_i / s_i).
On subcarrier k the channel is H_ik = h_i G_ik (channel/ofdm_sim.py), so client i inverts G_ik too:

    alpha_ik = alpha_i / (G_ik s_ik),   s_ik = max(1, |alpha_i / G_ik| W / sqrt(P_i)),

the eq. 11 scaling of Appendix A per subcarrier (W = 1 the payload's clip, phy/reference.py): then
sum_k |alpha_ik|^2 ||u_ik||^2 <= max_k |alpha_ik|^2 W^2 <= P_i whatever the data, and the effective gain
g_ik = H_ik alpha_ik / alpha_u = (p_i / s_i) / s_ik <= the flat plan's. Truncation: where
|G_ik|^2 < ``phy.ofdm_truncation`` client i sends nothing on k (alpha_ik = 0, g_ik = 0: its coordinates there
are left out of the aggregate, as in broadband analog aggregation, Zhu, Wang & Huang 2020); a data subcarrier
that every sending client truncates carries no payload: the round's common map (``carriers``) skips it. All
of it is decided at plan time from CSI (h_i known, the seeded G_ik) and planned quantities only, never from
the payload. The reference (training, comb pilots) is pre-equalised, c / H_ik on each client's
untruncated subcarriers, c the largest common amplitude under each client's reference budget
(phy/reference.py with the client's energy per unit c^2), so the receiver sees A_k = c x (senders on k).

Mechanism: subcarrier_mechanism(round, g (K, U), target_gain, b_i, sigma^2 per subcarrier) with sigma^2 the
flat plan's per-coordinate noise (channel noise plus jammer over alpha_u^2; the receiver's equalisation has
unit modulus; kept as ``noise_var``). The jammer's noise is white over the payload subcarriers as sent but
arrives coloured by its link, alpha_cj^2 |H_cj,k|^2: with calibrated CSI its share on subcarrier k is the
calibration's lower bound (calibration/ofdm_channel.SubcarrierCsi.jammer_lower, L_k):

    sigma_k^2 = sigma_plan^2 - (|h_cj| alpha_cj / alpha_u)^2 + r (L_k alpha_cj / alpha_u)^2,

r = min(1, r~ - 3 s.e.(r~)) with r~ the jammer's noise delivered over its coherent gain, measured by the
calibration's OFDM noise test (calibration/ofdm_channel.py: a PA compressing noise peaks gives r~ < 1). The mechanism then books the
subcarrier where the jammer is weakest relative to the data (``extra["jammer_subcarriers"]``), and
workload/booking.py does not restate the jammer again. An OFDM round with a jammer on calibrated CSI whose
file has no jammer sounding is refused (recalibrate). Perfect CSI (sim, loopback, zmq): their jammer link is
flat, the flat share as planned.

Policies: those whose flat plan inverts each client's gain to a common level and books noise that is the
same on every subcarrier declare it on their class (``PowerPolicy.ofdm_carried``: cj_adaptive, h_min
without artificial noise, noise_free) and are carried as above; paper 002's client noise is restated per
subcarrier by the algorithm (privacy/subcarrier_mechanism.client_noise_mechanism); the others say why not
(``ofdm_reason``) and are refused in one line."""
from __future__ import annotations

import numpy as np

from otafl_sdr.channel.ofdm_sim import subcarrier_shapes
from otafl_sdr.phy.ofdm import OfdmLayout
from otafl_sdr.phy.packing import symbols_for, unpack_reals
from otafl_sdr.phy.reference import PAYLOAD_NORM_BOUND, reference_budget, reference_gains
from otafl_sdr.phy.reference_design import allowance, sending
from otafl_sdr.privacy.subcarrier_mechanism import subcarrier_mechanism


def plan_subcarriers(alpha: np.ndarray, shape: np.ndarray, power_limit, active: np.ndarray,
                     threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alpha_sc (K, U), s (K, U), truncated (K, U) bool) from the flat alpha (K,), the per-subcarrier
    shape G (K, U), P_i (K,) or None (no limit) and the truncation threshold on |G_ik|^2 (module doc)."""
    G = np.asarray(shape, dtype=np.complex128)
    act = np.asarray(active, bool)[:, None]
    trunc = ~act | (np.abs(G) ** 2 < float(threshold)) | (G == 0)
    a = np.where(trunc, 0.0, np.asarray(alpha, np.complex128)[:, None] / np.where(trunc, 1.0, G))
    if power_limit is None:
        s = np.ones(G.shape)
    else:
        P = np.broadcast_to(np.asarray(power_limit, dtype=np.float64), (G.shape[0],))[:, None]
        root = np.sqrt(np.where(np.isfinite(P) & (P > 0), P, np.inf))
        s = np.maximum(1.0, np.abs(a) * PAYLOAD_NORM_BOUND / root)
    return a / s, s, trunc


def data_carriers(lay: OfdmLayout, truncated: np.ndarray, active: np.ndarray) -> np.ndarray:
    """The round's data subcarriers (positions 0..U-1): the layout's data carriers that some sending client
    does not truncate (all of them when none sends)."""
    act = np.asarray(active, bool)
    if not act.any():
        return lay.data_pos.copy()
    keep = np.any(~np.asarray(truncated)[act][:, lay.data_pos], axis=0)
    return lay.data_pos[keep] if keep.any() else lay.data_pos.copy()


def ofdm_reference(lay: OfdmLayout, H_known: np.ndarray, truncated: np.ndarray, budget_allow: np.ndarray,
                   n_complex: int, n_ofdm: int) -> tuple[np.ndarray, np.ndarray]:
    """(ref (K, U) the factor c / H_ik each client puts on its reference (0: not sent), ref_amp (U,) the
    superposed reference A_k). Client i's reference costs c^2 E_i, E_i = sum over its untruncated
    reference slots of |value|^2 / |H_ik|^2; reference_gains sees it as a flat link of gain
    sqrt(N_ref / E_i) (same energy per c^2), budgets from ``reference_budget`` (planned allowance)."""
    H = np.asarray(H_known, np.complex128)
    ok = ~np.asarray(truncated, bool)
    inv2 = np.where(ok, 1.0 / np.maximum(np.abs(H) ** 2, 1e-300), 0.0)
    E = lay.train * inv2.sum(axis=1) + int(n_ofdm) * inv2[:, lay.pilot_pos].sum(axis=1)
    n_ref = lay.reference_energy(n_ofdm)
    h_eq = np.where(E > 0, np.sqrt(n_ref / np.where(E > 0, E, 1.0)), 0.0)
    gains, _ = reference_gains(h_eq, reference_budget(budget_allow, n_ref, n_complex), n_ref)
    c = float(np.max(np.abs(gains * h_eq))) if np.any(gains != 0) else 0.0
    senders = (gains != 0)[:, None] & ok
    ref = np.where(senders, c / np.where(senders, H, 1.0), 0.0)
    return ref, c * senders.sum(axis=0).astype(np.complex128)


def plan_ofdm(plan, cfg, info, csi=None) -> None:
    """Carry the policy's flat ``plan`` onto the subcarriers (module doc), in place: ``plan.extra["ofdm"]``
    = {alpha (K, U), eff_gain (K, U), truncated, carriers, n_ofdm, ref (K, U), ref_amp (U,), ref_delay} and
    ``plan.mechanism`` the per-subcarrier one (its flat figures kept in extra["flat"]).

    ``csi``: the run's calibrated CSI (air.csi = "calibrated"). Its per-subcarrier section
    (calibration/ofdm_channel.py) replaces the seeded shapes: G_ik = H~_ik / h_i, so each client inverts its
    measured H~_ik; the booked gains are the planned ones times the estimate's per-subcarrier margin
    1 / (1 - 3 std_ik / |H~_ik|) (the true H_ik may exceed the estimate; a subcarrier it cannot bound is
    truncated). Perfect CSI (None): the seeded shapes (channel/ofdm_sim.py). With a jammer on calibrated CSI
    its share is per subcarrier (``jammer_noise_var``)."""
    from otafl_sdr.calibration.ofdm_channel import subcarrier_csi
    lay = OfdmLayout.from_phy(cfg.phy)
    K = plan.clients
    h_known = np.asarray(plan.extra.get("csi", plan.h), np.complex128)
    sub = subcarrier_csi(csi, cfg, K)
    G = subcarrier_shapes(cfg, plan.round, K) if sub is None else sub.shapes(h_known)
    margin = np.ones(G.shape) if sub is None else np.where(G != 0, sub.gain_margin(), 1.0)
    active = sending(plan)
    alpha_sc, s, trunc = plan_subcarriers(plan.alpha, G, plan.power_limit, active, cfg.phy.ofdm_truncation)
    H_known = h_known[:, None] * G
    eff = H_known * alpha_sc / plan.alpha_u
    carriers = data_carriers(lay, trunc, active)
    n = symbols_for(plan.dim)
    n_ofdm = lay.payload_symbols(n, len(carriers))
    ref, ref_amp = ofdm_reference(lay, H_known, trunc, allowance(plan, active), n, n_ofdm)
    plan.extra["ofdm"] = {"alpha": alpha_sc, "eff_gain": eff, "truncated": trunc, "carriers": carriers,
                          "n_ofdm": int(n_ofdm), "ref": ref, "ref_amp": ref_amp, "s_max": float(np.max(s)),
                          "ref_delay": 0 if sub is None else sub.ref_delay, "csi_margin": float(np.max(margin))}
    m = plan.mechanism
    plan.extra["ofdm"]["noise_var"] = np.full(lay.used, float(m.sigma_eff) ** 2)   # the air's, per real coordinate
    if not m.uses_data:
        return
    jammer = None
    if sub is not None and plan.alpha_cj > 0:
        jammer = jammer_noise_var(plan, sub, getattr(csi, "path", ""))
        for key in ("noise_var", "noise_var_expected", "jammer_booked", "jammer_expected"):
            plan.extra["ofdm"][key] = jammer.pop(key)
    sigma2 = plan.extra["ofdm"]["noise_var"]
    on_carriers = np.zeros(lay.used, bool)
    on_carriers[carriers] = True
    booked_gain = np.where(on_carriers[None, :], eff * margin, 0.0)
    plan.extra["ofdm"].update(booked_gain=booked_gain, payload_bound=info.payload_bound())   # a charge's recipe
    mech = subcarrier_mechanism(plan.round, booked_gain, plan.target_gain,
                                info.payload_bound(), sigma2, sampling_prob=m.sampling_prob,
                                **{**m.extra, "waveform": "ofdm",
                                   "flat": {"sensitivity": m.sensitivity, "sigma_eff": m.sigma_eff},
                                   **({"jammer_subcarriers": jammer} if jammer else {})})
    plan.mechanism = mech


def jammer_noise_var(plan, sub, path="") -> dict:
    """The per-subcarrier noise with the jammer's share at its calibrated lower bound (module doc):
    {'noise_var' (U,) what the mechanism books, 'noise_var_expected' (U,) the estimates' value (|H~_cj,k|
    and r's estimate: the NMSE theory's), 'jammer_booked' / 'jammer_expected' (U,) the jammer's share of each
    (privacy/ofdm_jammer_shortfall.py), and the record's figures: 'lower_db' [weakest, strongest]
    20 log10 (L_k / |h_cj|), 'efficiency' r, 'flat_share', 'share_min', 'share_max' (shares of sigma^2 per
    real coordinate)}."""
    from otafl_sdr.errors import UserError
    lower = sub.jammer_lower()
    if lower is None or sub.jammer_efficiency is None:
        raise UserError(f"calibration file '{path}': its OFDM section holds no jammer sounding, so the jammer's "
                        f"noise per subcarrier is unknown (a multipath jammer link colours it); recalibrate with "
                        f"phy.waveform = 'ofdm' and the jammer on")
    a = float(plan.alpha_cj) / float(plan.alpha_u)
    flat = (abs(plan.h_cj) * a) ** 2
    power = np.abs(sub.jammer_H) ** 2
    eff, eff_se = sub.jammer_efficiency
    r, r_mean = min(1.0, max(eff - 3.0 * eff_se, 0.0)), min(1.0, max(eff, 0.0))
    share = r * (lower * a) ** 2
    base = max(float(plan.mechanism.sigma_eff) ** 2 - flat, 0.0)
    ref = abs(plan.h_cj) if abs(plan.h_cj) > 0 else 1.0
    with np.errstate(divide="ignore"):
        db = 20 * np.log10(np.maximum(lower, 1e-300) / ref)
    expected = r_mean * power * a ** 2
    return {"noise_var": base + share, "noise_var_expected": base + expected, "jammer_booked": share,
            "jammer_expected": expected,
            "lower_db": [float(db.min()), float(db.max())], "efficiency": r,
            "flat_share": flat, "share_min": float(share.min()), "share_max": float(share.max())}


def planned_aggregate(plan) -> np.ndarray:
    """(d,) the noiseless aggregate the OFDM round plans: coordinate pair m on subcarrier k(m) is
    sum_i g_ik(m) (u_i[2m] + j u_i[2m+1]) (truncation and per-subcarrier scaling included; for NMSE)."""
    od = plan.extra["ofdm"]
    n = symbols_for(plan.dim)
    carriers = np.asarray(od["carriers"], np.int64)
    k_of = carriers[np.arange(n) % len(carriers)]
    from otafl_sdr.phy.packing import pack_reals
    y = np.einsum("im,im->m", np.asarray(od["eff_gain"])[:, k_of] * (np.asarray(plan.mode)[:, None] == "update"),
                  pack_reals(plan.payload))
    return unpack_reals(y, plan.dim)


def ofdm_nmse_theory(plan, expected: np.ndarray) -> float:
    """The OFDM round's aggregate NMSE against the intended sum ``expected`` (sum_i p_i u_i), in theory:
    (||planned - expected||^2 + sum_j sigma_k(j)^2 + the noise-mode payloads through g_ik) / ||expected||^2.
    The first term is what truncation and per-subcarrier scaling leave out (``planned_aggregate``: it is 0 on
    a flat channel), the second the booked per-coordinate noise (``noise_var``) on each real coordinate j's
    subcarrier k(j) (``noise_var_expected`` where the jammer was booked per subcarrier at its lower bound: the
    calibration's estimates); the single-carrier figure is transmission.aggregate_nmse_theory."""
    od = plan.extra["ofdm"]
    den = float(np.sum(expected ** 2))
    if den <= 0:
        return float("nan")
    carriers = np.asarray(od["carriers"], np.int64)
    n = symbols_for(plan.dim)
    k_of = carriers[np.arange(n) % len(carriers)] if len(carriers) else np.zeros(n, np.int64)
    var = np.asarray(od.get("noise_var_expected", od["noise_var"]))    # the estimates', not the booked bound
    noise = float(np.sum(var[k_of[np.arange(plan.dim) // 2]])) if len(carriers) else 0.0
    from otafl_sdr.phy.packing import pack_reals
    for i, mode in enumerate(plan.mode):
        if mode == "noise" and len(carriers):
            noise += float(np.sum(np.abs(np.asarray(od["eff_gain"])[i, k_of] * pack_reals(plan.payload[i:i + 1])[0]) ** 2))
    bias = float(np.sum((planned_aggregate(plan) - expected) ** 2))
    return (bias + noise) / den
