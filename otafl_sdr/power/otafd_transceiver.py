"""Power policy ``otafd_prop1``: the per-round transceiver of Proposition 1 of paper 003 (over-the-air
federated distillation with DP) and the number of rounds of Proposition 2.

Notation. Paper 003 has M devices and K classes; here the K = ``data.clients`` devices are i and the
C classes are k (C = num_classes). Device i sends, for every class k, its per-class average soft
prediction q_i^k (C numbers in the simplex); the payload row is the C x C matrix (q_i^1, ..., q_i^C)
flattened, d = C^2 reals. B_i^k = class-k samples at device i (``label_counts``), B^k = sum_i B_i^k,
w_i^k = B_i^k / B^k. Units: the paper's per-symbol peak power P_i and receiver noise sigma_n^2 are taken per
real coordinate, P_i = P_round_i / d (P_round from ``power.max_snr_db`` with d = C^2, so the SNR per channel
use is the one a FedAvg run at the same ``max_snr_db`` has) and sigma_n^2 = ``channel.sigma_c2``.

Per class k and round (perfect CSI; ``csi`` replaces |h| in the design and 1/h in the precoder):
  precoder (eq. 22)  h_i P_1,i^k sqrt(C) = lambda^k w_i^k        (channel inversion, zero bias: Phi_1 = 0)
  power (eq. 23)     lambda^2 (w_i^k)^2 / |h_i|^2 + C |P_2,i^k|^2 <= C P_i      (block energy, ||q|| <= 1)
  privacy (Thm 2)    sigma_c2 + N^k >= (z* Delta^k lambda^k)^2,   N^k = sum_j |h_j P_2,j^k|^2
where the received targets r^k = y^k / lambda^k = sum_i w_i^k q_i^k + noise carry per-coordinate noise
(sigma_c2 + N^k) / lambda^2, Delta^k is the L2 sensitivity of r^k and z* the noise multiplier that T rounds
need (``privacy.otafd_accountant.required_multiplier``; analysis ``calibrate``, Theorem 2's eq. (18) by
default). Sensitivity (derived; the payload needs no clipping because softmax outputs lie in the simplex,
whose diameter is sqrt(2), Lemma 1):
  privacy.unit = 'sample_paper' (named 'sample' inside this module): replacing one class-k sample of device i by another class-k sample (the counts
    B_i^k are public: the precoder uses them) moves q_i^k by <= sqrt(2)/B_i^k, so r^k by <= sqrt(2)/B^k and no
    other block: Delta^k = sqrt(2)/B^k. ``sensitivity = "paper"`` uses Lemma 1 as printed, which divides by
    B_i (the device's size) instead of B_i^k: Delta^k = sqrt(2) max_i w_i^k / B_i (smaller: optimistic).
    Both take the model G_theta as fixed; theta_i,t is trained on the same data, so a changed sample also
    moves the model and with it every q_i^k: the bound is the paper's premise, not a theorem about the run.
  every other privacy.unit ('client' inside this module): any change of device i's data (counts kept) moves r^k by <= sqrt(2) w_i^k in
    every block k, which holds whatever the model does. The design splits the budget evenly over the C
    classes: z* sqrt(C) with Delta^k = sqrt(2) max_i w_i^k, so that max_i sum_k (Delta_i^k / s_k)^2 <= 1/z*^2.
Case I (channel noise suffices at full power, no artificial noise): sigma_c2 >= (z* Delta^k lambda_max^k)^2
  with lambda_max^k = min_i sqrt(C P_i) |h_i| / w_i^k (Psi_1 at P_2 = 0); then P_2 = 0, lambda^k = lambda_max^k
  (eq. 27). This is the per-class form of the paper's condition, which writes min_i |h_i|^2 P_i and max_i rho_i
  separately although Psi_1 weighs them by B_i^k (see the extract); ours is exactly "the privacy constraint
  holds at full power".
Case II (otherwise): the privacy constraint is made tight, sigma_c2 + N^k = (z* Delta^k lambda^k)^2. The
  objective of (P2) is then fixed, (sigma_c2 + N)/lambda^2 = (z* Delta)^2, so the paper leaves lambda and the
  split of N open. Choices (``case2``, ``split``):
  * case2 = "artificial_noise" (default): the largest lambda for which the devices' remaining power can
    supply N; the signal stands as far above unmodelled impairments as the power allows and the privacy
    noise does not rest on the receiver's noise figure alone.
      split = "leftover" (default): every device spends the same fraction theta <= 1 of its leftover
        received power L_j = |h_j|^2 P_j - lambda^2 (w_j^k)^2 / C on noise, |h_j P_2,j|^2 = N L_j / sum L;
        this gives the largest lambda:  lambda^2 = min(lambda_max^2,
        (sigma_c2 + sum_j |h_j|^2 P_j) / ((z* Delta)^2 + sum_j (w_j^k)^2 / C)).
      split = "equal": every device contributes N / K at the receiver (no device's noise dominates; a
        colluding device removes at most 1/K of N); lambda^2 = min(lambda_max^2,
        min_j (|h_j|^2 P_j + sigma_c2 / K) / ((z* Delta)^2 / K + (w_j^k)^2 / C)).
  * case2 = "reduce_power": P_2 = 0 and lambda = sqrt(sigma_c2) / (z* Delta): the devices transmit below full
    power so that the channel noise alone is exactly enough (same objective value, no artificial noise).
The artificial noise is added by each device to its own payload (n_i ~ N(0, I) per real coordinate, from
the round's generator), so every air carries it as it carries the signal.

Plan mapping: alpha_u = lambda_ref = max_k lambda^k, alpha_i = lambda_ref / h_i (channel inversion),
payload block k of device i = (lambda^k / lambda_ref) w_i^k q_i^k + (|h_i P_2,i^k| / lambda_ref) n_i^k, so the
air's aggregate block k is (lambda^k / lambda_ref) (r^k + noise); ``targets`` rescales it to r^k.
The round's Mechanism is computed from the true channels (what really reaches the receiver): with
g_i = |h_i alpha_i| / lambda_ref (1 under perfect CSI) and s_k^2 = (sigma_c2 + sum_j g_j^2 |csi_j P_2,j^k|^2)
/ lambda_k^2, mu = max_k max_i g_i Delta_i^k / s_k ('sample') or max_i sqrt(sum_k (g_i Delta_i^k / s_k)^2)
('client'), recorded as an equivalent single Gaussian mechanism: sigma_eff = min_k s_k (target units),
sensitivity = mu sigma_eff.

Proposition 2 (``suggested_rounds``): Omega(T) = a / sqrt(T) + b sqrt(T), a = 3 sum_i f_i,max / eta_0,
b = A_2 sum_i sum_k (B_i^k / B_i) C (z* Delta^k)^2 / T (the T > T_0 branch; (z*)^2 grows linearly in T under
eq. (18)), A_2 = 6 eta_0 gamma^2 L_2^2 L_1, T* = round(a / b). f_max, L_1, L_2 are not given by the paper
(options; f_max = ln C, the cross-entropy of a uniform predictor, by default); eta_0 = train.lr, gamma =
algorithm.options.gamma. With ``rounds = "prop2"`` the design (and the run) uses T*, capped at
``max_rounds``. ``t0(h)`` is Proposition 2's switch point T_0 for given channels (Case I iff T <= T_0)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from otafl_sdr.errors import ConfigError, UserError
from otafl_sdr.privacy.otafd_accountant import ANALYSES, required_multiplier
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.transmission import Mechanism, RoundPlan
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.power.base import PowerPolicy, SystemInfo

SQRT2 = math.sqrt(2.0)


# ---------------------------------------------------------------------------------------------------
# the mathematics (pure functions of counts, channels, powers)
def class_weights(counts: np.ndarray) -> np.ndarray:
    """(K, C) w_i^k = B_i^k / B^k (0 for a class nobody holds)."""
    counts = np.asarray(counts, dtype=np.float64)
    tot = counts.sum(axis=0)
    return np.divide(counts, tot, out=np.zeros_like(counts), where=tot > 0)


def device_sensitivity(counts: np.ndarray, unit: str = "sample", mode: str = "class") -> np.ndarray:
    """(K, C) Delta_i^k: how far device i can move the received target r^k (target units).
    sample/class: sqrt(2)/B^k where B_i^k > 0; sample/paper: sqrt(2) w_i^k / B_i (Lemma 1 as printed);
    client: sqrt(2) w_i^k."""
    counts = np.asarray(counts, dtype=np.float64)
    w = class_weights(counts)
    if unit == "client":
        return SQRT2 * w
    if mode == "paper":
        return SQRT2 * w / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    tot = counts.sum(axis=0, keepdims=True)
    return np.where(counts > 0, SQRT2 / np.maximum(tot, 1.0), 0.0)


def design_zdelta(counts: np.ndarray, z_star: float, unit: str = "sample", mode: str = "class") -> np.ndarray:
    """(C,) z* Delta^k that the design meets per class (client unit: z* sqrt(C_active) max_i Delta_i^k)."""
    dsens = device_sensitivity(counts, unit, mode).max(axis=0)
    if unit == "client":
        return z_star * math.sqrt(max(int(np.count_nonzero(dsens)), 1)) * dsens
    return z_star * dsens


def lambda_max(w: np.ndarray, habs: np.ndarray, P: np.ndarray) -> np.ndarray:
    """(C,) Psi_1 at P_2 = 0: min_i sqrt(C P_i) |h_i| / w_i^k over devices holding class k (eq. 23/27)."""
    C = w.shape[1]
    with np.errstate(divide="ignore"):
        lim = np.where(w > 0, np.sqrt(C * P)[:, None] * habs[:, None] / np.where(w > 0, w, 1.0), np.inf)
    return lim.min(axis=0)


@dataclass
class RoundDesign:
    """One round's transceiver: lam (C,) receive factors lambda^k; rcv (K, C) received artificial noise
    power per coordinate |h_j P_2,j^k|^2 of each device; p2 (K, C) |P_2,j^k|^2; case (C,) 1 or 2 (0 for a
    class nobody holds); lam_max (C,) full-power lambda."""

    lam: np.ndarray
    rcv: np.ndarray
    p2: np.ndarray
    case: np.ndarray
    lam_max: np.ndarray

    @property
    def noise(self) -> np.ndarray:
        """(C,) artificial noise N^k at the receiver."""
        return self.rcv.sum(axis=0)


def design_round(w: np.ndarray, habs: np.ndarray, P: np.ndarray, sigma_c2: float, zdelta: np.ndarray,
                 case2: str = "artificial_noise", split: str = "leftover") -> RoundDesign:
    """Proposition 1 for every class. w (K, C), habs (K,) |h_i| (as the devices know them), P (K,) peak power
    per coordinate, zdelta (C,) z* Delta^k."""
    K, C = w.shape
    lam_max = lambda_max(w, habs, P)
    lam = np.ones(C)
    rcv = np.zeros((K, C))
    case = np.zeros(C, dtype=int)
    hp = habs ** 2 * P                                        # |h_j|^2 P_j: full received power
    for k in range(C):
        if not np.isfinite(lam_max[k]):                      # nobody holds class k: nothing to send
            continue
        zd2 = float(zdelta[k]) ** 2
        lm = float(lam_max[k])
        if sigma_c2 >= zd2 * lm ** 2:                         # Case I: channel noise suffices (eq. 27)
            lam[k], case[k] = lm, 1
            continue
        case[k] = 2
        wk2 = w[:, k] ** 2
        if case2 == "reduce_power":
            lam[k] = math.sqrt(sigma_c2 / zd2)
            continue
        if split == "leftover":
            l2 = (sigma_c2 + hp.sum()) / (zd2 + wk2.sum() / C)
        else:                                                  # equal shares N / K
            l2 = float(np.min((hp + sigma_c2 / K) / (zd2 / K + wk2 / C)))
        l2 = min(l2, lm ** 2)
        need = max(zd2 * l2 - sigma_c2, 0.0)                   # Case II: the privacy constraint is tight
        if split == "leftover":
            left = np.maximum(hp - l2 * wk2 / C, 0.0)
            rcv[:, k] = need * left / left.sum() if left.sum() > 0 else 0.0
        else:
            rcv[:, k] = need / K
        lam[k] = math.sqrt(l2)
    with np.errstate(divide="ignore", invalid="ignore"):
        p2 = np.where(habs[:, None] > 0, rcv / habs[:, None] ** 2, 0.0)
    return RoundDesign(lam=lam, rcv=rcv, p2=p2, case=case, lam_max=lam_max)


def prop2_rounds(counts: np.ndarray, zdelta: np.ndarray, design_T: int, f_max: float, eta0: float,
                 gamma: float, L1: float, L2: float) -> float:
    """Continuous T* = a / b of Proposition 2 (eq. 30, general form before its simplification)."""
    counts = np.asarray(counts, dtype=np.float64)
    K, C = counts.shape
    A2 = 6.0 * eta0 * gamma ** 2 * L2 ** 2 * L1
    frac = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)      # B_i^k / B_i
    b = A2 * float(np.sum(frac * C * (np.asarray(zdelta) ** 2 / design_T)[None, :]))
    a = 3.0 * K * f_max / eta0
    return math.inf if b == 0 else a / b


def t0(w: np.ndarray, habs: np.ndarray, P: np.ndarray, sigma_c2: float, zdelta_per_round: np.ndarray) -> float:
    """Proposition 2's switch point: the largest T for which every class is in Case I with these channels
    (zdelta_per_round = z* Delta / sqrt(T), i.e. the noise multiplier of one round's worth)."""
    lm = lambda_max(w, habs, P)
    ok = np.isfinite(lm) & (zdelta_per_round > 0)
    if not ok.any():
        return math.inf
    return float(np.min(sigma_c2 / (zdelta_per_round[ok] ** 2 * lm[ok] ** 2)))


# ---------------------------------------------------------------------------------------------------
@dataclass
class OtafdOptions:
    """calibrate: the analysis z* is set for (otafd = Theorem 2 / eq. 18, paper, rdp, pld).
    sensitivity: 'class' (derived, 1/B_i^k) or 'paper' (Lemma 1 as printed, 1/B_i); unit 'sample' only.
    case2: 'artificial_noise' | 'reduce_power'; split: 'leftover' | 'equal' (see the module docstring).
    rounds: 'config' (run.rounds) or 'prop2' (Proposition 2's T*, at most max_rounds).
    f_max (0 = ln C), L1, L2: Proposition 2's constants. margin: relative safety on z*."""

    calibrate: str = "otafd"
    sensitivity: str = "class"
    case2: str = "artificial_noise"
    split: str = "leftover"
    rounds: str = "config"
    max_rounds: int = 1000
    f_max: float = 0.0
    L1: float = 1.0
    L2: float = 1.0
    margin: float = 1e-4

    def check(self) -> None:
        def need(cond, key, msg):
            if not cond:
                raise ConfigError(f"power.options.{key}", msg)
        need(self.calibrate in ANALYSES, "calibrate", f"must be one of {', '.join(ANALYSES)}, got {self.calibrate!r}")
        need(self.sensitivity in ("class", "paper"), "sensitivity", f"must be 'class' or 'paper', got {self.sensitivity!r}")
        need(self.case2 in ("artificial_noise", "reduce_power"), "case2",
             f"must be 'artificial_noise' or 'reduce_power', got {self.case2!r}")
        need(self.split in ("leftover", "equal"), "split", f"must be 'leftover' or 'equal', got {self.split!r}")
        need(self.rounds in ("config", "prop2"), "rounds", f"must be 'config' or 'prop2', got {self.rounds!r}")
        need(isinstance(self.max_rounds, int) and self.max_rounds >= 1, "max_rounds", "must be an integer >= 1")
        for key in ("f_max", "margin"):
            v = getattr(self, key)
            need(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, key, f"must be a number >= 0, got {v!r}")
        for key in ("L1", "L2"):
            v = getattr(self, key)
            need(isinstance(v, (int, float)) and math.isfinite(v) and v > 0, key, f"must be a number > 0, got {v!r}")


@POWER_POLICIES.register("otafd_prop1", "paper 003 Prop. 1: channel-inversion precoding, Case I/II artificial "
                                        "noise making Theorem 2 tight (algorithm otafd only)")
class OtafdTransceiver(PowerPolicy):
    """``context``: {"label_counts": (K, C) B_i^k, "gamma": float, "eta0": float}; through the orchestrator
    ``attach(experiment)`` supplies them. ``info.power`` is P_round (energy per round) for d = C^2."""

    name = "otafd_prop1"
    ofdm_reason = ("designs each device's per-class precoder and artificial noise (paper 003 Prop. 1, Cases I/II) "
                   "from its one flat gain; per-subcarrier gains would need Prop. 1 solved per subcarrier")
    rederivable = True
    small_run = ("algorithm.name=otafd", "data.partition=dominant_class", "algorithm.options={gamma = 2.0, targets = 'simplex'}")
    Options = OtafdOptions

    def __init__(self, cfg, info: SystemInfo, options: dict | None = None, context: dict | None = None):
        super().__init__(cfg, info, options)          # options typed and check()ed by options.build_options
        # the per-class 'sample' bound below holds only with the device model fixed (the paper's premise):
        # it is used under privacy.unit = 'sample_paper' alone; every other unit takes the bound that holds
        # whatever the model does (a device moves its block by <= sqrt(2) w_i^k), a replacement bound.
        self.unit = "sample" if info.unit == "sample_paper" else "client"
        self.counts: np.ndarray | None = None
        self.gamma = 1.0
        self.eta0 = float(cfg.train.lr) if cfg is not None else 1.0
        self.T = int(info.rounds)
        if context:
            self.set_context(**context)

    # -- context ---------------------------------------------------------------------------------
    def set_context(self, label_counts=None, gamma: float | None = None, eta0: float | None = None) -> None:
        if gamma is not None:
            self.gamma = float(gamma)
        if eta0 is not None:
            self.eta0 = float(eta0)
        if label_counts is not None:
            counts = np.asarray(label_counts, dtype=np.float64)
            if counts.ndim != 2 or counts.shape[0] != self.info.clients:
                raise UserError(f"label_counts must be (clients={self.info.clients}, classes), got {counts.shape}")
            if counts.shape[1] ** 2 != self.info.dim:
                raise UserError(f"otafd_prop1: payload dim {self.info.dim} is not classes^2 = {counts.shape[1] ** 2}")
            self.counts = counts
            self._design_constants()

    needs_run_context = True

    def attach(self, context) -> None:
        """The devices' label counts and gamma (workload.parts.RunContext) of an OTA-FD run."""
        if context.workload != "distillation":
            raise ConfigError("power.policy", "'otafd_prop1' is the transceiver of algorithm 'otafd'; "
                                              "set algorithm.name = \"otafd\"")
        self.set_context(label_counts=np.asarray(context.label_counts),
                         gamma=getattr(context.algorithm_options, "gamma", None))

    def _design_constants(self) -> None:
        o, info = self.options, self.info
        self.C = self.counts.shape[1]
        self.w = class_weights(self.counts)
        self.P = np.asarray(info.power, dtype=np.float64) / info.dim          # per coordinate
        self.dsens = device_sensitivity(self.counts, self.unit, o.sensitivity)
        if o.rounds == "prop2":
            self.T = self.suggested_rounds
        self.z_star = required_multiplier(self.T, info.eps, info.delta, o.calibrate, o.margin)
        self.zdelta = design_zdelta(self.counts, self.z_star, self.unit, o.sensitivity)

    @property
    def suggested_rounds(self) -> int:
        """Proposition 2's T* (rounded, in [1, max_rounds])."""
        o = self.options
        # b uses (z* Delta)^2 / T at the run's T (independent of T under eq. 18)
        T_ref = max(int(self.info.rounds), 1)
        z_T = required_multiplier(T_ref, self.info.eps, self.info.delta, o.calibrate, 0.0)
        per_round = design_zdelta(self.counts, z_T, self.unit, o.sensitivity)
        f_max = o.f_max if o.f_max > 0 else math.log(self.counts.shape[1])
        T = prop2_rounds(self.counts, per_round, T_ref, f_max, self.eta0, self.gamma, o.L1, o.L2)
        return int(min(max(round(T), 1), o.max_rounds)) if math.isfinite(T) else o.max_rounds

    def t0(self, h_known: np.ndarray) -> float:
        """Proposition 2's T_0 for these channels."""
        return t0(self.w, np.abs(h_known), self.P, self.info.sigma_c2, self.zdelta / math.sqrt(self.T))

    def privacy_knob(self) -> PrivacyKnob:
        """privacy.targeting = "target": the knob is the design's noise multiplier z* (Theorem 2's privacy
        constraint sigma_c2 + N^k >= (z* Delta^k lambda^k)^2, Case II's artificial noise). The ledger's
        round is the realised mechanism (``mechanism``: the worst device over the classes, Case I classes
        with their spare channel noise), so z* is solved on the planned rounds themselves rather than by
        the closed form of ``power.options.calibrate`` (eq. 18 by default, which is not tight)."""
        o = self.options

        def put(v: float) -> None:
            self.z_star = float(v)
            self.zdelta = design_zdelta(self.counts, self.z_star, self.unit, o.sensitivity)
        return PrivacyKnob(name="power.options.z_star", get=lambda: self.z_star, set=put, lo=1e-4, hi=1e6,
                           private_when="higher", limit="1e-4 <= z* <= 1e6",
                           hand_keys=("power.options.calibrate", "power.options.margin"))

    # -- one round --------------------------------------------------------------------------------
    def design(self, h_known: np.ndarray) -> RoundDesign:
        o = self.options
        return design_round(self.w, np.abs(h_known), self.P, self.info.sigma_c2, self.zdelta, o.case2, o.split)

    def plan(self, round_index, payload, h, h_cj, rng, csi=None) -> RoundPlan:
        """payload: (K, C^2) rows = device i's (q_i^1, ..., q_i^C) flattened."""
        if self.counts is None:
            raise UserError("otafd_prop1 needs the label counts B_i^k (attach to an otafd run or pass context)")
        K, C, info = self.info.clients, self.C, self.info
        q = np.asarray(payload, dtype=np.float64).reshape(K, C, C)
        h = np.asarray(h, dtype=np.complex128)
        h_known = h if csi is None else np.asarray(csi, dtype=np.complex128)
        des = self.design(h_known)
        lam_ref = float(np.max(des.lam))
        scale = (des.lam / lam_ref)[None, :] * self.w                    # (K, C): (lambda^k/lambda_ref) w_i^k
        clean = scale[:, :, None] * q                                    # (K, C, C)
        noise_std = np.sqrt(des.rcv) / lam_ref                           # payload units: |csi_i P_2,i^k|/lambda_ref
        noisy = clean + noise_std[:, :, None] * rng.standard_normal((K, C, C))
        alpha = lam_ref / h_known                                        # channel inversion (eq. 22)
        g = np.abs(h * alpha) / lam_ref                                  # realised gain (1 under perfect CSI)
        mech, figures = self.mechanism(round_index, des, g)
        noise_var = (info.sigma_c2 / lam_ref ** 2 + (g[:, None] ** 2 * noise_std ** 2).sum(axis=0))   # (C,)
        extra = {"lambda": des.lam, "lambda_ref": lam_ref, "case": des.case, "p2": des.p2, "rcv_noise": des.rcv,
                 "clean_payload": clean.reshape(K, C * C), "block_scale": des.lam / lam_ref,
                 "aggregate_noise_var": np.repeat(noise_var, C), "z_star": self.z_star, **figures}
        return RoundPlan(round=round_index, payload=noisy.reshape(K, C * C), alpha=alpha, h=h,
                         target_gain=np.ones(K), alpha_u=lam_ref, alpha_cj=0.0, h_cj=h_cj,
                         sigma_c2=info.sigma_c2, mode=["update"] * K, mechanism=mech,
                         power_limit=np.asarray(info.power, dtype=np.float64), extra=extra)

    def mechanism(self, round_index: int, des: RoundDesign, g: np.ndarray) -> tuple[Mechanism, dict]:
        """The round's Gaussian mechanism in target units from the realised gains g (K,)."""
        active = np.isfinite(des.lam_max)
        s2 = (self.info.sigma_c2 + (g[:, None] ** 2 * des.rcv).sum(axis=0)) / des.lam ** 2      # (C,)
        s = np.sqrt(s2)
        ratio = np.where(active[None, :], g[:, None] * self.dsens / np.where(active, s, 1.0)[None, :], 0.0)
        if self.unit == "client":
            mu = float(np.sqrt((ratio ** 2).sum(axis=1)).max())
        else:
            mu = float(ratio.max())
        sigma_ref = float(s[active].min()) if active.any() else 1.0
        mech = Mechanism(round=round_index, sensitivity=mu * sigma_ref, sigma_eff=sigma_ref,
                         extra={"otafd": {"mu": mu, "case2_classes": int(np.sum(des.case == 2)),
                                          "unit": self.unit, "sensitivity_mode": self.options.sensitivity}})
        return mech, {"target_noise_std": s, "mu": mu}

    @staticmethod
    def targets(aggregate: np.ndarray, plan: RoundPlan) -> np.ndarray:
        """(C, C) received targets r^k (row k): the aggregate's block k times lambda_ref / lambda^k."""
        scale = np.asarray(plan.extra["block_scale"], dtype=np.float64)
        C = len(scale)
        return np.asarray(aggregate, dtype=np.float64).reshape(C, C) / scale[:, None]
