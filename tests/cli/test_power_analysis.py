"""The power of a claim's paired t-test (sweeps/power_analysis.py, scipy.stats.nct) against independent
computations: a Monte-Carlo simulation of the paired t-test (alone at alpha / m, and under Holm with m claims),
and the noncentral t's definition integrated over the chi-square by quadrature; the minimum detectable effect and
the seeds needed invert it; the Holm-adjusted interval beside a claim includes 0 exactly for a tie; a paper's
effect that is not a positive fraction is refused in one line."""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from otafl_sdr.errors import UserError
from otafl_sdr.sweeps.power_analysis import (check_paper_effect, min_detectable_effect, paired_power,
                                             seeds_needed)
from otafl_sdr.sweeps.stats import HELD, REVERSED, TIE, compare_pair, holm, holm_levels, holm_verdicts

REPS = 20_000


def power_by_quadrature(effect: float, sd: float, n: int, level: float) -> float:
    """P(|T| > c) for T = (Z + nc) / sqrt(V / df), Z ~ N(0, 1), V ~ chi2(df): the noncentral t by its
    definition, integrated over V (no scipy.stats.nct)."""
    df, nc = n - 1, effect * math.sqrt(n) / sd
    c = stats.t.ppf(1 - level / 2, df)

    def given_v(v):
        s = c * math.sqrt(v / df)
        return (stats.norm.sf(s - nc) + stats.norm.cdf(-s - nc)) * stats.chi2.pdf(v, df)
    lo, hi = stats.chi2.ppf([1e-12, 1 - 1e-12], df)
    step = df * (nc / c) ** 2                    # where the upper tail's integrand falls from 1 to 0
    points = [step] if lo < step < hi else None
    return integrate.quad(given_v, lo, hi, points=points, limit=400, epsabs=1e-11)[0]


def simulated_rejections(effect: float, sd: float, n: int, level: float, seed: int) -> tuple[float, float]:
    """Fraction of REPS simulated paired experiments (normal differences) whose two-sided t-test has p < level,
    and its standard error."""
    d = np.random.default_rng(seed).normal(effect, sd, size=(REPS, n))
    rate = float((stats.ttest_1samp(d, 0.0, axis=1).pvalue < level).mean())
    return rate, math.sqrt(rate * (1 - rate) / REPS)


@pytest.mark.parametrize("effect,sd,n,m", [(0.01, 0.01, 5, 6), (0.02, 0.015, 8, 4), (0.004, 0.01, 40, 1),
                                           (0.03, 0.01, 3, 2)])
def test_power_matches_a_monte_carlo_paired_t_test_at_holms_first_step(effect, sd, n, m):
    level = 0.05 / m
    stated = paired_power(effect, sd, n, level)
    rate, se = simulated_rejections(effect, sd, n, level, seed=n)
    assert abs(rate - stated) < 4 * se + 1e-3, (rate, stated, se)
    assert stated == pytest.approx(power_by_quadrature(effect, sd, n, level), abs=1e-6)
    # the normal approximation is not what is stated: at few seeds it overstates the power
    z = effect * math.sqrt(n) / sd - stats.norm.ppf(1 - level / 2)
    if n <= 5:
        assert stats.norm.cdf(z) > stated + 0.05


def test_holm_holds_the_claim_at_least_as_often_as_the_stated_power():
    """m = 4 claims, one at the stated effect, three null: Holm holds the true claim with at least the power at
    alpha / m (its first step) and at most the power at alpha (its last)."""
    effect, sd, n, m, alpha = 0.015, 0.01, 6, 4, 0.05
    stated = paired_power(effect, sd, n, alpha / m)
    rng = np.random.default_rng(7)
    d = rng.normal(0.0, sd, size=(REPS, n, m))
    d[:, :, 0] += effect
    p = stats.ttest_1samp(d, 0.0, axis=1).pvalue                        # (REPS, m)
    held = np.array([holm(list(row))[0] < alpha for row in p])
    rate, se = held.mean(), math.sqrt(held.mean() * (1 - held.mean()) / REPS)
    assert rate >= stated - 4 * se
    assert rate <= paired_power(effect, sd, n, alpha) + 4 * se
    assert rate - stated < 0.1            # the bound is close here: the other claims are null


def test_minimum_detectable_effect_and_seeds_needed_invert_the_power():
    sd, level, target = 0.02, 0.05 / 6, 0.8
    for n in (3, 5, 10, 30):
        mde = min_detectable_effect(sd, n, level, target)
        assert power_by_quadrature(mde, sd, n, level) == pytest.approx(target, abs=1e-6)
    for effect in (0.0027, 0.0146, 0.0587):
        k = seeds_needed(effect, sd, level, target)
        assert power_by_quadrature(effect, sd, k, level) >= target - 1e-9
        assert k == 2 or power_by_quadrature(effect, sd, k - 1, level) < target
    assert seeds_needed(0.0027, 0.02, level, target) > 500             # a 0.27 pp gap is out of reach
    assert seeds_needed(1e-6, 1.0, level, target) is None               # beyond MAX_SEEDS: said so, not looped


def _tests(rng, effects, n=5, sd=0.01):
    out = []
    for e in effects:
        base = rng.normal(0.8, 0.02, n)
        a = {s: v for s, v in enumerate(base + e + rng.normal(0, sd, n))}
        out.append(compare_pair(a, {s: v for s, v in enumerate(base)}) | {"source": "", "claim": "", "at": {},
                                                                         "metric": "m"})
    return out


def test_the_interval_beside_a_claim_is_holm_adjusted_and_includes_zero_exactly_for_a_tie():
    rng = np.random.default_rng(3)
    seen = {HELD: 0, REVERSED: 0, TIE: 0, "tie excluding 0 at 95 %": 0}
    for _ in range(40):
        tests = _tests(rng, rng.choice([0.0, 0.005, 0.01, -0.01, 0.03], size=5), n=int(rng.integers(3, 8)))
        for t in holm_verdicts(tests, 0.05):
            seen[t["verdict"]] += 1
            excludes = t["ci_low"] > 0 or t["ci_high"] < 0
            assert excludes == (t["verdict"] in (HELD, REVERSED)), t
            assert t["ci_level"] >= 0.95                             # never narrower than the unadjusted one
            seen["tie excluding 0 at 95 %"] += t["verdict"] == TIE and (t["low"] > 0 or t["high"] < 0)
    assert all(seen.values()), seen       # every case occurred, the one the adjustment is for included


def test_holm_levels_step_down_and_stop():
    # ascending 0.001, 0.01 pass their steps (alpha / 4, alpha / 3); 0.04 fails alpha / 2: it and 0.3 keep alpha / 2
    assert holm_levels([0.001, 0.04, 0.01, 0.3], 0.05) == pytest.approx([0.05 / 4, 0.05 / 2, 0.05 / 3, 0.05 / 2])
    assert holm_levels([0.001, 0.04, 0.02, 0.3], 0.05) == pytest.approx([0.05 / 4, 0.05 / 3, 0.05 / 3, 0.05 / 3])
    # the smallest p fails its step: every claim keeps the first step's level
    assert holm_levels([0.03, 0.04], 0.05) == pytest.approx([0.025, 0.025])


@pytest.mark.parametrize("claim,words", [
    ({"paper_effect": -0.01, "paper_effect_source": "Fig. 1"}, "finite number > 0"),
    ({"paper_effect": 0, "paper_effect_source": "Fig. 1"}, "finite number > 0"),
    ({"paper_effect": float("nan"), "paper_effect_source": "Fig. 1"}, "finite number > 0"),
    ({"paper_effect": "2 pp", "paper_effect_source": "Fig. 1"}, "finite number > 0"),
    ({"paper_effect": True, "paper_effect_source": "Fig. 1"}, "finite number > 0"),
    ({"paper_effect": 1.465, "paper_effect_source": "Fig. 7"}, "as a fraction"),
    ({"paper_effect": 0.01}, "needs paper_effect_source"),
    ({"paper_effect": 0.01, "paper_effect_source": " "}, "needs paper_effect_source"),
    ({"paper_effect_source": "Fig. 1"}, "without paper_effect"),
])
def test_bad_paper_effects_are_refused(claim, words):
    with pytest.raises(UserError, match=words) as e:
        check_paper_effect(claim, "spec")
    assert "\n" not in str(e.value)
    check_paper_effect({"paper_effect": 2.5, "paper_effect_source": "Fig. 2", "metric": "eps_pld"}, "spec")
    check_paper_effect({"paper_effect": 0.0146, "paper_effect_source": "Fig. 7"}, "spec")


@pytest.mark.parametrize("effect,sd,n,level", [(1.0, 1e-5, 2, 1e-6), (1.0, 1e-4, 3, 1e-4), (0.02, 1e-7, 5, 0.01)])
def test_power_at_a_noncentrality_beyond_boosts_range(effect, sd, n, level):
    """nc >= 1000 (scipy's nct aborts the process near nc 6.5e4): the integral over Z, equal to the definition."""
    assert effect * math.sqrt(n) / sd >= 1000
    assert paired_power(effect, sd, n, level) == pytest.approx(power_by_quadrature(effect, sd, n, level), abs=1e-6)
