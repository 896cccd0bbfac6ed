"""The audit's transport: the run's own transport (the real air) with canaries in the released aggregates.

``AuditTransport(inner, canaries, rng)`` delegates every step of the round to ``inner`` and, before each
attempt, adds the inserted canaries to the payload of the round's *carrier*: the transmitting client whose
per-sample bound moves the aggregate most, max_i |g_i| b_i, with g_i = h_i alpha_i / alpha_u its
effective gain into the aggregate (transmission.py, eq. 16 of paper 000) and b_i the payload bound of
one neighbouring change that the round books (``AuditTransport.bounds``: the policy's for privacy.unit,
privacy/sensitivity.py, or the algorithm's own data sensitivity where it books one: paper 002's
Noisy-FedAvg / FedProx, Lemma 20 / 22, 2 V sum_k eta_k / tau per unit gain). Canary c is the direction
u_c = D2 DCT D1 e_{j_c} (random signs D1, D2, the orthonormal DCT; distinct j_c): unit, exactly orthogonal
to each other, dense, fixed for the run; canary c is inserted iff its private coin says so (exactly half
are, drawn from OS entropy). Each inserted canary enters client i's payload as b_i u_c, so it moves the
noiseless aggregate by |g_i| b_i: the worst case of one neighbour, which is what the ledger books as the
round's sensitivity for an honest mechanism (tests/privacy/test_audit.py and test_audit_noisy.py check the
ratio is 1.000).

After each received attempt the transport keeps, per canary, the projection <r_t, v_c> of the residual
r_t = received - the noiseless aggregate without canaries (the experimenter knows every payload) on the
canary's image direction v_c (u_c rotated by the carrier's channel phase), with the ledger's (s_t, sigma_t)
for the Neyman-Pearson weight s_t / sigma_t^2 (privacy/audit_stats.py).

Two black-box probes ride along:
- presence: a private coin per client round (the black-box canary of a data-dependent behaviour, e.g. a
  client silenced by its data); its statistic is the residual's projection on minus the carrier's own
  contribution. The honest pipeline never looks at the coin, so the two sides are the same distribution.
- fresh noise (airs that declare secret noise): in PROBE_ROUNDS client rounds (a private choice) one extra
  release of the same round with all payloads zero (no client data, nothing to book); its received noise
  must be uncorrelated with the real release's. If it is not, the noise is regenerable from what the server
  holds and the adversary subtracts it (one such round already separates the canaries perfectly)."""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy import fft

from otafl_sdr.airs import air_capabilities
from otafl_sdr.phy.packing import pack_reals, unpack_reals
from otafl_sdr.transport import Attempt


PROBE_ROUNDS = 4     # client rounds (drawn privately) re-released with zero payloads by the fresh-noise probe


class CanaryBasis:
    """m orthonormal canary directions in R^d: u_c = D2 DCT D1 e_{j_c} (all m applied at once)."""

    def __init__(self, d: int, m: int, rng: np.random.Generator):
        if not 2 <= m <= d:
            raise ValueError(f"canaries must be in 2..d={d}, got {m}")
        self.d, self.m = d, m
        self.s1 = rng.choice([-1.0, 1.0], size=d)
        self.s2 = rng.choice([-1.0, 1.0], size=d)
        self.index = rng.choice(d, size=m, replace=False)

    def combine(self, amplitudes: np.ndarray) -> np.ndarray:
        """sum_c a_c u_c."""
        z = np.zeros(self.d)
        z[self.index] = amplitudes
        return self.s2 * fft.dct(self.s1 * z, norm="ortho")

    def project(self, r: np.ndarray) -> np.ndarray:
        """(<r, u_c>)_c: the transpose D1 DCT^T D2 (DCT^T = IDCT for the orthonormal DCT)."""
        return (self.s1 * fft.idct(self.s2 * r, norm="ortho"))[self.index]

    def vector(self, c: int) -> np.ndarray:
        a = np.zeros(self.m)
        a[c] = 1.0
        return self.combine(a)


def air_image(gain: complex, x: np.ndarray) -> np.ndarray:
    """What payload x arrives as in the aggregate through effective gain g: unpack(g pack(x))."""
    return unpack_reals(gain * pack_reals(x), x.shape[-1])


class AuditTransport:
    """The run's transport with canaries (module docstring). ``AuditTransport(inner, canaries, rng)``;
    ``rng``: the private generator of the coins and directions (OS entropy in `otafl-sdr audit`)."""

    def __init__(self, inner, canaries: int, rng: np.random.Generator, probe_fresh_noise: bool | None = None,
                 probe_rounds: int = PROBE_ROUNDS):
        self.inner = inner
        self.m = int(canaries)
        self.rng = rng
        self.coins = np.zeros(self.m, bool)
        self.coins[rng.permutation(self.m)[: self.m // 2]] = True
        self.basis: CanaryBasis | None = None
        self.probe = probe_fresh_noise
        self.probe_rounds = int(probe_rounds)
        self.probe_its: set[int] = set()
        self.round_coins: dict[int, bool] = {}
        self.rounds: list[dict] = []       # one per received attempt: projections and the ledger's (s, sigma)
        self.local = None                  # the round's LocalRound (the clean payloads)

    # -- delegation ------------------------------------------------------------------------------
    def bind(self, parts) -> None:
        self.parts = parts
        self.inner.bind(parts)
        d = int(parts.dim)
        self.m = min(self.m, d)
        if len(self.coins) != self.m:
            self.coins = np.zeros(self.m, bool)
            self.coins[self.rng.permutation(self.m)[: self.m // 2]] = True
        self.basis = CanaryBasis(d, self.m, self.rng)
        algo, n_it = parts.algorithm, parts.algorithm.iterations(parts.cfg.run.rounds)
        client_its = [round_index for round_index in range(1, n_it + 1) if algo.uses_clients(round_index)]
        heads = set(self.rng.permutation(client_its)[: len(client_its) // 2].tolist())
        self.round_coins = {round_index: round_index in heads for round_index in client_its}     # balanced over the planned client rounds
        if self.probe is None:
            self.probe = air_capabilities(parts.cfg.air.name).secret_noise
        k = min(self.probe_rounds, len(client_its))                     # probed rounds: a private choice
        self.probe_its = set(self.rng.permutation(client_its)[:k].tolist())

    def __getattr__(self, name):
        """Every other step of the round is the run's own transport's (whatever the interface grows)."""
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # -- the canaries ----------------------------------------------------------------------------
    def gains(self, plan) -> np.ndarray:
        """(K,) complex g_i = h_i alpha_i / alpha_u of the transmitting clients (0 for silent ones), where
        the plan's h is the channel the air applies (sim, loopback, zmq_inproc); on calibrated radios (the
        run has CSI estimates: plan.h is not the physical channel) the planned gain, target_gain_i."""
        active = np.array([m != "silent" for m in plan.mode]) & (plan.alpha != 0)
        if getattr(self.parts, "csi", None) is not None:
            return np.where(active, plan.target_gain, 0).astype(complex)
        return np.where(active, plan.h * plan.alpha / plan.alpha_u, 0)

    def bounds(self, plan) -> np.ndarray:
        """(K,) b_i, the payload bound of one neighbouring change that the round's mechanism books: the
        algorithm's own (``booked_payload_bound(it)``: paper 002's Lemma 20 / 22, where a sample in every
        clipped local step moves the update by 2 V sum_k eta_k, whatever privacy.unit says), else the
        policy's for privacy.unit (``info.payload_bound()``, privacy/sensitivity.py)."""
        own = getattr(self.parts.algorithm, "booked_payload_bound", None)
        if own is not None:
            return np.full(len(plan.mode), float(own(int(plan.round))))
        return np.asarray(self.parts.info.payload_bound(), float)

    def carrier(self, plan) -> int:
        """The transmitting client whose one sample moves the aggregate most: argmax |g_i| b_i."""
        return int(np.argmax(np.abs(self.gains(plan)) * self.bounds(plan)))

    def round_coin(self, round_index: int) -> bool:
        """The presence probe's private coin of client round ``round_index`` (drawn once)."""
        if round_index not in self.round_coins:
            self.round_coins[round_index] = bool(self.rng.integers(2))
        return self.round_coins[round_index]

    def canary_payload(self, plan) -> tuple[int, np.ndarray]:
        """(carrier i, b_i sum_{c inserted} u_c): what the inserted canaries add to client i's payload."""
        i = self.carrier(plan)
        b = float(self.bounds(plan)[i])
        return i, b * self.basis.combine(self.coins.astype(float))

    def insert(self, plan, round_index: int):
        """The plan the air carries: the carrier's payload plus the inserted canaries (a copy; the
        pipeline's plan is untouched). A test plants a defect by overriding this."""
        i, add = self.canary_payload(plan)
        payload = plan.payload.astype(np.float64, copy=True)
        payload[i] += add
        return dataclasses.replace(plan, payload=payload), i

    def local_round(self, round_index: int, w):
        local = self.inner.local_round(round_index, w)
        self.local = None if isinstance(local, str) else local
        return local

    def clean_payload(self, plan) -> np.ndarray:
        """(K, d) what the experimenter knows of the payloads, without protective noise: OTA-FD's
        ``clean_payload``, else the clients' local payloads (before paper 002's client noise is added by
        ``finish_plan``); rows of clients that send noise (CDPB) or nothing are zero."""
        clean = plan.extra.get("clean_payload")
        if clean is None or np.shape(clean) != plan.payload.shape:
            local = getattr(self, "local", None)
            ok = local is not None and np.shape(local.payload) == plan.payload.shape
            clean = local.payload if ok else plan.payload
        update = np.array([m == "update" for m in plan.mode])
        return np.where(update[:, None], np.asarray(clean, np.float64), 0.0)

    def noiseless(self, plan, payload=None) -> np.ndarray:
        """The noiseless aggregate as the air maps payloads: sum_i unpack(g_i pack(x_i)) over the clients
        sending their update; x: ``clean_payload(plan)`` unless given."""
        x = self.clean_payload(plan) if payload is None else \
            np.where(np.array([m == "update" for m in plan.mode])[:, None], payload, 0.0)
        return unpack_reals(self.gains(plan) @ pack_reals(x), plan.dim)

    def attempt(self, plan, round_index: int, attempt: int) -> Attempt:
        self.round_coin(round_index)
        sent_plan, i = self.insert(plan, round_index)
        sent = self.inner.attempt(sent_plan, round_index, attempt)
        rec = sent.reception
        notes = list(sent.notes)
        if rec.ok and rec.aggregate is not None and plan.mechanism.uses_data:
            self._observe(plan, round_index, attempt, i, np.asarray(rec.aggregate, float), notes)
        return dataclasses.replace(sent, notes=notes)

    # -- what the statistic reads (black-box canaries override these: audit/blackbox.py) -------------
    def project(self, back: np.ndarray, plan) -> np.ndarray:
        """(<back, u_c>)_c: the residual in the carrier's payload frame on each canary's direction."""
        return self.basis.project(back)

    def canary_image(self, plan, i: int, g: complex) -> np.ndarray:
        """What the inserted canaries add to the aggregate: unpack(g pack(b_i sum_{inserted} u_c))."""
        b = float(self.bounds(plan)[i])
        return air_image(g, b * self.basis.combine(self.coins.astype(float)))

    def canary_shift(self, plan, i: int, g: complex) -> float:
        """How far one inserted canary moves the noiseless aggregate: |g_i| b_i."""
        return abs(g) * float(self.bounds(plan)[i])

    def describe(self) -> dict:
        """What audit.json says of the canaries."""
        own = getattr(getattr(self, "parts", None), "algorithm", None)
        bound = (f"algorithm {own.name}: its booked data sensitivity per unit gain (paper 002, Lemma 20/22: "
                 "2 V sum_k eta_k / tau)") if hasattr(own, "booked_payload_bound") else \
            "privacy.unit's payload bound (privacy/sensitivity.py)"
        return {"canary": "white-box", "canary_bound": bound}

    def _observe(self, plan, round_index: int, attempt: int, i: int, received: np.ndarray, notes: list) -> None:
        g = self.gains(plan)[i]
        clean = self.noiseless(plan)
        r = received - clean
        phase = g / abs(g) if abs(g) > 0 else 1.0
        back = air_image(np.conj(phase), r)                   # r seen in the carrier's payload frame
        carrier_part = air_image(g, self.clean_payload(plan)[i])
        cn = float(np.linalg.norm(carrier_part))
        entry = {"round": round_index, "attempt": attempt, "carrier": i,
                 "sensitivity": float(plan.mechanism.sensitivity), "sigma": float(plan.mechanism.sigma_eff),
                 "shift": self.canary_shift(plan, i, g),
                 "proj": self.project(back, plan), "round_coin": self.round_coins[round_index],
                 "presence": float(-(r @ carrier_part) / cn) if cn > 0 else 0.0}
        if self.probe and round_index in self.probe_its:
            entry.update(self._fresh_noise_probe(plan, round_index, attempt, r, i, g, notes))
        self.rounds.append(entry)

    def _fresh_noise_probe(self, plan, round_index, attempt, r, i, g, notes) -> dict:
        """One more release of the round with public payloads (random rows of norm 1/2 drawn by the auditor:
        no client data, nothing to book): its residual is the air's noise alone, and must be uncorrelated
        with the real release's noise (r minus the canaries' image)."""
        x = self.rng.standard_normal(plan.payload.shape)
        x *= 0.5 / np.linalg.norm(x, axis=1, keepdims=True)
        public = dataclasses.replace(plan, payload=x)
        probe_attempt = self.inner.attempt(public, round_index, attempt)
        notes.extend(probe_attempt.notes)
        probe = probe_attempt.reception
        if not probe.ok or probe.aggregate is None:
            return {"probe_lost": probe.reason or "lost"}
        noise = r - self.canary_image(plan, i, g)
        probe_noise = np.asarray(probe.aggregate, float) - self.noiseless(public, x)
        phase = g / abs(g) if abs(g) > 0 else 1.0
        from otafl_sdr.privacy.audit_stats import correlation_z
        return {"probe_z": correlation_z(noise, probe_noise),
                "proj_probe": self.project(air_image(np.conj(phase), probe_noise), plan)}
