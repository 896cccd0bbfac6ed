"""privacy/subcarrier_mechanism.py (issue 26 item 3): the OFDM round's mechanism under frequency-selective
channels. Checked against an OFDM link simulated in the time domain (IFFT, cyclic prefix, the seeded
TDL-C taps of channel/multipath.py convolved per client, FFT, per-subcarrier receiver scaling): one
client's payload changed within its bound moves the equalised aggregate by a Mahalanobis distance no
larger than booked sensitivity / sigma_eff (and the worst change reaches it); the noise after
equalisation is what the mechanism assumes; truncated subcarriers carry nothing; flat gains give the flat
policy's Mechanism exactly; every epsilon is rechecked with dp-accounting directly; the target solver
calibrates a knob on top of it unchanged."""
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

from otafl_sdr.channel.multipath import Multipath
from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.phy.packing import pack_reals, unpack_reals
from otafl_sdr.privacy.events import dp_event
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.privacy.subcarrier_mechanism import subcarrier_mechanism
from otafl_sdr.privacy.targeting import TOL, solve_knob
from otafl_sdr.transmission import Mechanism
from dp_reference import independent_pld_epsilon
from loopback_helpers import make_cfg, make_plan

DELTA = 1e-5
N_SC = 128


class OfdmLink:
    """K clients on N_SC subcarriers through their own TDL channel h_i f_i (seeded taps of round ``it``),
    per-subcarrier truncated, power-limited inversion on estimated CSI, receiver scaling w_k / alpha_u."""

    def __init__(self, K=4, spread=4.0, seed=11, it=1, alpha_u=3.0, cut=0.25, est_err=0.05, name="tdl-c"):
        rng = np.random.default_rng(seed)
        mp = Multipath(name, spread)
        self.fir = mp.fir(mp.round_taps(seed, it, K))                       # (K, L) unit-energy taps
        self.fir *= ((rng.standard_normal(K) + 1j * rng.standard_normal(K)) / np.sqrt(2))[:, None]   # flat h_i
        self.cp = self.fir.shape[1] - 1                                     # CP covers the delay spread
        H = np.fft.fft(self.fir, N_SC, axis=1)                              # H_ik, the channel per subcarrier
        H_hat = H + est_err * (rng.standard_normal(H.shape) + 1j * rng.standard_normal(H.shape))
        self.p = np.full(K, 1.0 / K)
        self.P_sc = 2.0                                                     # energy per subcarrier symbol
        s = np.maximum(1.0, alpha_u * self.p[:, None] / (np.abs(H_hat) * np.sqrt(self.P_sc)))
        keep = np.abs(H_hat) >= cut * np.sqrt(np.mean(np.abs(H_hat) ** 2, axis=1, keepdims=True))
        self.alpha = np.where(keep, alpha_u * self.p[:, None] / (H_hat * s), 0.0)   # truncated inversion
        self.w = rng.uniform(0.7, 1.3, N_SC) * np.exp(1j * rng.uniform(-np.pi, np.pi, N_SC))  # rx scaling
        self.alpha_u, self.sigma_c2, self.H, self.keep = alpha_u, 0.5, H, keep
        self.eff_gain = self.w[None, :] * H * self.alpha / alpha_u           # h_ik alpha_ik / alpha_u (equalised)
        self.noise_var = self.sigma_c2 * np.abs(self.w) ** 2 / alpha_u ** 2  # per real, after equalisation

    def aggregate(self, payload: np.ndarray, rng=None) -> np.ndarray:
        """(K, d) reals -> (d,) equalised aggregate, simulated in the time domain (noise if ``rng``)."""
        K, d = payload.shape
        n_sym = -(-d // (2 * N_SC))
        S = np.zeros((K, n_sym * N_SC), complex)
        S[:, :(d + 1) // 2] = pack_reals(payload)
        S = S.reshape(K, n_sym, N_SC) * self.alpha[:, None, :]
        x = np.fft.ifft(S, axis=2, norm="ortho")
        x = np.concatenate([x[:, :, -self.cp:], x], axis=2).reshape(K, -1)  # cyclic prefix
        y = sum(np.convolve(x[i], self.fir[i])[:x.shape[1]] for i in range(K))
        if rng is not None:
            y = y + np.sqrt(self.sigma_c2) * (rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape))
        Y = np.fft.fft(y.reshape(n_sym, N_SC + self.cp)[:, self.cp:], axis=1, norm="ortho")
        return unpack_reals((Y * self.w / self.alpha_u).reshape(-1), d)

    def mahalanobis(self, shift: np.ndarray) -> float:
        """||Sigma^{-1/2} shift|| with sigma_k^2 on both reals of subcarrier k (every OFDM symbol)."""
        k = (np.arange(len(shift)) // 2) % N_SC
        return float(np.sqrt(np.sum(shift ** 2 / self.noise_var[k])))

    def mechanism(self, b=1.0, rnd=1):
        return subcarrier_mechanism(rnd, self.eff_gain, self.p, b, self.noise_var)


def independent_z(eff_gain, noise_var, b):
    """1 / mu with mu = max_i b_i max_k |g_ik| / sigma_k over the subcarriers some client uses, by hand."""
    b = np.broadcast_to(np.asarray(b, float), (eff_gain.shape[0],))
    mu = 0.0
    for i in range(eff_gain.shape[0]):
        for k in range(eff_gain.shape[1]):
            if eff_gain[i, k] != 0:
                mu = max(mu, b[i] * abs(eff_gain[i, k]) / math.sqrt(noise_var[k]))
    return 1.0 / mu


@pytest.mark.parametrize("spread", [1.0, 4.0, 8.0])
def test_one_clients_change_stays_within_the_booked_sensitivity(spread):
    link = OfdmLink(spread=spread)
    mech = link.mechanism()
    bound = mech.sensitivity / mech.sigma_eff
    assert link.keep.sum() < link.keep.size                         # some subcarriers are truncated
    assert np.ptp(np.abs(link.eff_gain[link.keep])) > 0.1           # the gains really differ per subcarrier
    K, d = 4, 2 * N_SC * 3
    rng = np.random.default_rng(5)
    base = rng.standard_normal((K, d))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    y0 = link.aggregate(base)
    worst = 0.0
    for i in range(K):
        for _ in range(20):
            delta = rng.standard_normal(d) * rng.uniform(0, 3, d) ** 2   # uneven over subcarriers
            delta /= np.linalg.norm(delta)
            other = base.copy()
            other[i] += delta                                           # ||change|| = b = 1 (client unit)
            m = link.mahalanobis(link.aggregate(other) - y0)
            assert m <= bound * (1 + 1e-9)
            worst = max(worst, m)
    # the worst change: all of the bound on the worst client's worst subcarrier, on I (a real coordinate)
    i, k = mech.extra["worst_client"], mech.extra["worst_subcarrier"]
    other = base.copy()
    other[i, 2 * k] += 1.0
    m = link.mahalanobis(link.aggregate(other) - y0)
    assert m == pytest.approx(bound, rel=1e-9)                          # the bound is tight
    assert worst < bound
    assert 1.0 / bound == pytest.approx(independent_z(link.eff_gain, link.noise_var, 1.0), rel=1e-12)


def test_the_noise_after_equalisation_is_what_the_mechanism_assumes():
    """Per real coordinate of subcarrier k, I and Q alike, variance sigma_c2 |w_k|^2 / alpha_u^2 and no I/Q
    correlation (circular): the premise of the |g_ik| / sigma_k bound."""
    link = OfdmLink()
    d = 2 * N_SC * 2000
    z = link.aggregate(np.zeros((4, d)), rng=np.random.default_rng(1)).reshape(-1, N_SC, 2)
    var_i, var_q = z[..., 0].var(axis=0), z[..., 1].var(axis=0)
    n = z.shape[0]
    tol = 5 * math.sqrt(2 / n)
    assert np.all(np.abs(var_i / link.noise_var - 1) < tol) and np.all(np.abs(var_q / link.noise_var - 1) < tol)
    corr = np.mean(z[..., 0] * z[..., 1], axis=0) / link.noise_var
    assert np.all(np.abs(corr) < 5 / math.sqrt(n))


def test_truncated_subcarriers_carry_nothing():
    link = OfdmLink(cut=0.6)
    i, k = np.argwhere(~link.keep)[0]
    assert link.eff_gain[i, k] == 0
    rng = np.random.default_rng(2)
    base = rng.standard_normal((4, 2 * N_SC))
    other = base.copy()
    other[i, 2 * k] += 5.0
    other[i, 2 * k + 1] -= 5.0
    assert np.array_equal(link.aggregate(other), link.aggregate(base))   # nothing of it reaches the aggregate
    # a subcarrier nobody uses: its gain and noise are ignored (no noise there is not a release in the clear)
    g, var = link.eff_gain.copy(), link.noise_var.copy()
    g[:, 7], var[7] = 0.0, 0.0
    m = subcarrier_mechanism(1, g, link.p, 1.0, var)
    var[7] = np.inf
    assert subcarrier_mechanism(1, g, link.p, 1.0, var).noise_multiplier == m.noise_multiplier
    assert m.noise_multiplier == pytest.approx(independent_z(g, var, 1.0), rel=1e-12)
    assert m.sigma_eff > 0
    # nothing carried at all: the round costs nothing
    none = subcarrier_mechanism(1, np.zeros_like(g), link.p, 1.0, link.noise_var)
    assert none.sensitivity == 0.0


def test_a_noiseless_carrying_subcarrier_is_a_release_in_the_clear():
    link = OfdmLink()
    var = link.noise_var.copy()
    k = int(np.argwhere(link.keep.any(axis=0))[0, 0])
    var[k] = 0.0
    m = subcarrier_mechanism(1, link.eff_gain, link.p, 1.0, var)
    assert m.sigma_eff == 0.0 and m.sensitivity > 0
    assert isinstance(dp_event(m), dp_accounting.NonPrivateDpEvent)


def test_flat_gains_give_the_flat_policys_mechanism_exactly():
    cfg = make_cfg()
    for jammer in (False, True):
        plan = make_plan(cfg, 5, 300, np.random.default_rng(4), jammer=jammer, snr_db=-3.0)
        flat = plan.mechanism
        var = plan.sigma_eff() ** 2
        eff = np.repeat(plan.target_gain.astype(complex)[:, None], N_SC, axis=1)
        m = subcarrier_mechanism(plan.round, eff, plan.target_gain, np.ones(5), np.full(N_SC, var))   # p_i / s_i
        assert m.sensitivity == flat.sensitivity and m.sigma_eff == flat.sigma_eff
        assert m.noise_multiplier == flat.noise_multiplier
    # and with a float bound and a client truncated everywhere (silent), the others decide
    g = np.array([0.3, 0.2, 0.1])
    eff = np.repeat(g.astype(complex)[:, None], N_SC, axis=1)
    eff[0] = 0
    m = subcarrier_mechanism(2, eff, g, 2.0, np.full(N_SC, 0.04))
    assert (m.sensitivity, m.sigma_eff) == (0.4, 0.2)


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_the_ledgers_eps_is_rechecked_with_dp_accounting(accountant):
    """Rounds of different TDL draws (and a subsampled one) booked in the ledger: its eps equals
    dp-accounting's, composed from the worst coordinate's noise multiplier computed by hand."""
    ledger = PrivacyLedger(PrivacyConfig(eps=50.0, delta=DELTA, accountant=accountant, report=["pld", "rdp"]))
    pld, rdp = PLDAccountant(value_discretization_interval=1e-4), RdpAccountant()
    records = []
    for it in range(1, 7):
        link = OfdmLink(it=it, seed=20 + it, alpha_u=1.0 + 0.3 * it)
        q = 0.5 if it == 6 else 1.0
        m = subcarrier_mechanism(it, link.eff_gain, link.p, 1.0, link.noise_var, sampling_prob=q, waveform="ofdm")
        assert m.extra["waveform"] == "ofdm"
        eps = ledger.record(m)
        ev = dp_accounting.GaussianDpEvent(noise_multiplier=independent_z(link.eff_gain, link.noise_var, 1.0))
        if q < 1:
            ev = dp_accounting.PoissonSampledDpEvent(sampling_probability=q, event=ev)
        pld.compose(ev)
        rdp.compose(ev)
        records.append({"uses_data": True, "sensitivity": m.sensitivity, "sigma_eff": m.sigma_eff,
                        "sampling_prob": q})
    assert eps["pld"] == pytest.approx(pld.get_epsilon(DELTA), rel=2e-3)
    assert eps["rdp"] == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-6)
    assert eps["pld"] == pytest.approx(independent_pld_epsilon(records, DELTA), rel=2e-3)


def test_the_target_solver_calibrates_alpha_u_on_top_of_it():
    """privacy/targeting.solve_knob, unchanged: the server factor alpha_u of an OFDM run (more alpha_u, less
    noise, more eps) solved so 10 rounds of per-subcarrier mechanisms spend eps = 2; the booked rounds then
    spend that in the ledger and by dp-accounting."""
    eps, its = 2.0, range(1, 11)
    state = {"alpha_u": 1.0}

    def mechs(v):
        return [OfdmLink(it=it, seed=40 + it, alpha_u=v).mechanism(rnd=it) for it in its]

    knob = PrivacyKnob(name="alpha_u", get=lambda: state["alpha_u"], set=lambda v: state.update(alpha_u=v),
                       lo=1e-3, hi=1e3, private_when="lower", limit="1e-3 <= alpha_u <= 1e3")
    cal = solve_knob(eps, DELTA, "pld", knob, lambda v: [(m.noise_multiplier, m.sampling_prob) for m in mechs(v)])
    assert (1 - TOL) * eps <= cal.eps_planned <= eps
    ledger = PrivacyLedger(PrivacyConfig(eps=eps, delta=DELTA, accountant="pld", report=["pld"]))
    booked = mechs(cal.value)
    for m in booked:
        ledger.check(m)                                                 # within the budget: never refused
        out = ledger.record(m)
    assert out["pld"] == pytest.approx(cal.eps_planned, rel=1e-6)
    recs = [{"uses_data": True, "sensitivity": m.sensitivity, "sigma_eff": m.sigma_eff, "sampling_prob": 1.0}
            for m in booked]
    assert independent_pld_epsilon(recs, DELTA) == pytest.approx(out["pld"], rel=2e-3)
    assert independent_pld_epsilon(recs, DELTA) <= eps * (1 + 2e-3)


def test_bad_input_is_refused():
    g = np.ones((2, 4), complex)
    with pytest.raises(ValueError):
        subcarrier_mechanism(1, g, np.ones(3), 1.0, np.ones(4))
    with pytest.raises(ValueError):
        subcarrier_mechanism(1, g, np.ones(2), 1.0, -np.ones(4))
    with pytest.raises(ValueError):
        subcarrier_mechanism(1, g * np.nan, np.ones(2), 1.0, np.ones(4))
    assert isinstance(subcarrier_mechanism(1, g, np.ones(2), 1.0, np.ones(4)), Mechanism)
