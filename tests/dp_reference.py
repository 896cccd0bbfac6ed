"""The independent accountant the tests check printed epsilons against: dp-accounting directly, never the
project's own code."""
import dp_accounting
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant


def independent_pld_epsilon(records, delta):
    """dp-accounting's PLDAccountant, one GaussianDpEvent(sigma_eff / sensitivity) per data-using round."""
    acc = PLDAccountant(value_discretization_interval=1e-4)
    for r in records:
        if not r["uses_data"] or r["sensitivity"] == 0:
            continue
        ev = dp_accounting.GaussianDpEvent(noise_multiplier=r["sigma_eff"] / r["sensitivity"])
        if r["sampling_prob"] < 1:
            ev = dp_accounting.PoissonSampledDpEvent(sampling_probability=r["sampling_prob"], event=ev)
        acc.compose(ev)
    return acc.get_epsilon(delta)
