"""docs/extending.md's example power policy, a whole plugin in one file: every client inverts its channel to the
weakest client's received power scaled by a knob c in (0, 1] (the "privacy for free" idea of Liu & Simeone:
give up power until the channel noise alone is enough), so the server receives the plain mean of the
payloads plus the channel noise:

    rho = c min_k P_k |h_k|^2,   alpha_k = sqrt(rho) / h_k,   alpha_u = K sqrt(rho)

One client moves the mean by at most max_k b_k / K (b_k: the payload bound of privacy/sensitivity.py that the
trainer enforces); the noise per real coordinate of the mean is sigma_c / alpha_u. Shapes: payload (K, d),
h (K,) complex. tests/test_extending_doc.py imports this file, registers it, runs it and passes it through
the contract tests every registered mechanism passes."""
from dataclasses import dataclass

import numpy as np

from otafl_sdr.errors import ConfigError
from otafl_sdr.power.base import PowerPolicy
from otafl_sdr.privacy.knobs import PrivacyKnob
from otafl_sdr.registry import POWER_POLICIES
from otafl_sdr.transmission import Mechanism, RoundPlan


@dataclass
class WeakestLinkOptions:
    power_scale: float = 1.0     # c in (0, 1]: the share of the weakest client's received power everyone sends at

    def check(self) -> None:
        if not 0 < self.power_scale <= 1:
            raise ConfigError("power.options.power_scale", f"must be in (0, 1], got {self.power_scale!r}")


@POWER_POLICIES.register("weakest_link", "example (docs/extending.md): everyone aligned at c x the weakest link")
class WeakestLinkPolicy(PowerPolicy):
    name = "weakest_link"
    Options = WeakestLinkOptions
    # capabilities, asked by the run (never a table elsewhere):
    rederivable = True               # the plan depends on the config and the round's seeded channels only
    ofdm_reason = "has not been checked per subcarrier (docs/examples/weakest_link.py)"
    small_run = ()                   # every option has a usable default

    def privacy_knob(self) -> PrivacyKnob:
        """privacy.targeting = "target" solves c; a smaller c spends less epsilon."""
        def put(value: float) -> None:
            self.options.power_scale = float(value)
        return PrivacyKnob(name="power.options.power_scale", get=lambda: self.options.power_scale, set=put,
                           lo=1e-12, hi=1.0, private_when="lower", limit="0 < c <= 1 (full power at c = 1)")

    def plan(self, round, payload, h, h_cj, rng, csi=None) -> RoundPlan:
        info = self.info
        K = payload.shape[0]
        known = h if csi is None else csi                 # what each client believes its channel is
        rho = self.options.power_scale * float(np.min(np.abs(known) ** 2 * info.power))
        alpha_u = K * np.sqrt(rho)
        mech = Mechanism(round=round, sensitivity=float(np.max(info.payload_bound())) / K,
                         sigma_eff=float(np.sqrt(info.sigma_c2)) / alpha_u)
        return RoundPlan(round=round, payload=payload, alpha=np.sqrt(rho) / known, h=h,
                         target_gain=np.full(K, 1.0 / K), alpha_u=alpha_u, alpha_cj=0.0, h_cj=h_cj,
                         sigma_c2=info.sigma_c2, mode=["update"] * K, mechanism=mech, power_limit=info.power)
