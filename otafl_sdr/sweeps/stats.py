"""The statistics of `otafl-sdr compare`: one claim ("arm A has a larger metric than arm B") tested on the
seeds' values, and Holm's control of the family-wise error across a spec's claims.

- Paired by seed where both sides ran the same seeds (the seed fixes the data split, the initial model
  and the channels, so the difference per seed removes that shared variation; a seed one side lacks, a
  failed cell, is left out of the pairs): Student's paired t-test
  (``scipy.stats.ttest_rel``) decides; Wilcoxon's signed-rank test (``scipy.stats.wilcoxon``, exact for
  small n) and a percentile bootstrap interval of the mean difference (fixed seed, reproducible) are
  reported beside it as robustness checks. Where they share fewer than two seeds: Welch's t-test.
- Holm's step-down adjustment over every testable claim of the spec (two-sided p-values); a claim is
  ``held`` / ``reversed`` when its Holm-adjusted p < alpha (the sign of the mean difference says which),
  otherwise ``tie``. The interval printed beside a claim is at its Holm step's level (``holm_levels``): it
  excludes 0 exactly when the claim is held or reversed, never beside a tie.
  ``not testable (one seed)`` / ``not testable (identical arms)``: fewer than two
  paired seeds, or a difference of exactly zero on every seed (the two arms are the same computation).
"""
from __future__ import annotations

import math

import numpy as np

HELD, REVERSED, TIE = "held", "reversed", "tie"
ONE_SEED, IDENTICAL, NOT_RUN = "not testable (one seed)", "not testable (identical arms)", "not run"
BOOTSTRAP_RESAMPLES = 9999


def compare_pair(a: dict, b: dict) -> dict:
    """Test "a > b" from ``a`` / ``b`` = {seed: value} (NaN values dropped).

    Returns the test's figures: ``test`` ("paired t" / "Welch t"), ``n`` (pairs, or (n_a, n_b)), ``diff``
    (mean difference a - b), ``low`` / ``high`` (its 95 % t-interval), ``p`` (two-sided), ``wilcoxon_p``,
    ``boot_low`` / ``boot_high`` (paired only), ``sd`` (standard deviation of the paired differences, ddof 1;
    paired only), ``se`` / ``df`` (the mean difference's standard error and the t-test's degrees of freedom,
    for intervals at other levels) and ``status``: None when testable, else ONE_SEED /
    IDENTICAL / NOT_RUN (the verdict is given by :func:`holm_verdicts`)."""
    from scipy import stats
    a = {s: float(v) for s, v in a.items() if v is not None and math.isfinite(float(v))}
    b = {s: float(v) for s, v in b.items() if v is not None and math.isfinite(float(v))}
    out = {"test": None, "n": None, "diff": None, "low": None, "high": None, "p": None, "wilcoxon_p": None,
           "boot_low": None, "boot_high": None, "status": None, "sd": None, "se": None, "df": None,
           "more_mean": float(np.mean(list(a.values()))) if a else None,
           "less_mean": float(np.mean(list(b.values()))) if b else None}
    if not a or not b:
        return out | {"status": NOT_RUN, "n": (len(a), len(b))}
    common = set(a) & set(b)
    if common and (len(common) >= 2 or set(a) == set(b)):     # paired on the seeds both sides completed
        seeds = sorted(common)
        x, y = np.array([a[s] for s in seeds]), np.array([b[s] for s in seeds])
        d = x - y
        out.update(test="paired t", n=len(d), diff=float(d.mean()), more_mean=float(x.mean()),
                   less_mean=float(y.mean()))
        if len(d) < 2:
            return out | {"status": ONE_SEED, "low": float(d[0]), "high": float(d[0])}
        sd = float(d.std(ddof=1))
        out.update(sd=sd, se=sd / math.sqrt(len(d)), df=float(len(d) - 1))
        if np.all(d == 0):
            return out | {"status": IDENTICAL, "low": 0.0, "high": 0.0}
        half = float(stats.t.ppf(0.975, len(d) - 1)) * sd / math.sqrt(len(d))
        p = float(stats.ttest_rel(x, y).pvalue) if sd > 0 else 0.0   # every seed differs by the same amount
        out.update(low=out["diff"] - half, high=out["diff"] + half, p=p, wilcoxon_p=wilcoxon_p(d))
        out["boot_low"], out["boot_high"] = bootstrap_interval(d)
        return out
    x, y = np.array(list(a.values())), np.array(list(b.values()))
    out.update(test="Welch t", n=(len(x), len(y)), diff=float(x.mean() - y.mean()))
    if len(x) < 2 or len(y) < 2:
        return out | {"status": ONE_SEED, "low": out["diff"], "high": out["diff"]}
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if va + vb == 0:
        out.update(se=0.0, df=float(len(x) + len(y) - 2))
        if out["diff"] == 0:
            return out | {"status": IDENTICAL, "low": 0.0, "high": 0.0}
        return out | {"low": out["diff"], "high": out["diff"], "p": 0.0}
    dof = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(y) - 1))
    out.update(se=math.sqrt(va + vb), df=float(dof))
    half = float(stats.t.ppf(0.975, dof)) * math.sqrt(va + vb)
    p = float(stats.ttest_ind(x, y, equal_var=False).pvalue)
    return out | {"low": out["diff"] - half, "high": out["diff"] + half, "p": p}


def wilcoxon_p(d: np.ndarray) -> float:
    """Two-sided p of Wilcoxon's signed-rank test of the paired differences (zero differences dropped;
    scipy's exact distribution for small n, its normal approximation where there are ties)."""
    import warnings

    from scipy import stats
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return float(stats.wilcoxon(d).pvalue)
        except ValueError:
            return float("nan")


def bootstrap_interval(d: np.ndarray, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the paired differences ``d`` (reproducible)."""
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(BOOTSTRAP_RESAMPLES, len(d)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given): p_(i) (m - i + 1), made monotone, <= 1."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


def holm_levels(pvalues: list[float], alpha: float) -> list[float]:
    """Each test's level at Holm's step-down (same order as given): sorting the m p-values ascending, the test
    of rank r (1-based) is rejected at level alpha / (m - r + 1) while every smaller p was; from the first
    rank s that is not, every remaining test keeps the level of that step, alpha / (m - s + 1). A test is
    rejected by Holm exactly when its p is below its level; its t-interval at 1 - level excludes 0 exactly
    then (a t-test's p < level iff its 1 - level interval excludes 0)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    levels, stopped = [0.0] * m, None
    for rank, i in enumerate(order):
        if stopped is None and (m - rank) * pvalues[i] < alpha:
            levels[i] = alpha / (m - rank)
        else:
            stopped = stopped if stopped is not None else alpha / (m - rank)
            levels[i] = stopped
    return levels


def holm_verdicts(tests: list[dict], alpha: float = 0.05) -> list[dict]:
    """Each test with ``p_holm`` (over the testable ones), its ``verdict`` and its Holm-adjusted interval:
    ``ci_level`` (1 - its Holm level, ``holm_levels``) and ``ci_low`` / ``ci_high`` = diff -+ t_{1 - level/2, df}
    se (the untestable ones: their point or zero interval, no level)."""
    from scipy import stats
    testable = [i for i, t in enumerate(tests) if t["status"] is None]
    adj = holm([tests[i]["p"] for i in testable])
    levels = holm_levels([tests[i]["p"] for i in testable], alpha)
    out = [dict(t, p_holm=None, verdict=t["status"], ci_level=None, ci_low=t["low"], ci_high=t["high"])
           for t in tests]
    for i, p, level in zip(testable, adj, levels):
        diff = out[i]["diff"]
        out[i]["p_holm"] = p
        out[i]["verdict"] = (HELD if diff > 0 else REVERSED) if p < alpha and diff != 0 else TIE
        half = float(stats.t.ppf(1.0 - level / 2.0, out[i]["df"])) * out[i]["se"]
        out[i].update(ci_level=1.0 - level, ci_low=diff - half, ci_high=diff + half)
    return out


def identical_arms(values: dict) -> list[tuple[str, str]]:
    """Pairs of arms whose values are equal on every seed at every grid point they share.

    ``values``: {arm: {(grid point..., seed): tuple of figures}}; arms with no common cell are never paired."""
    arms = list(values)
    out = []
    for i, x in enumerate(arms):
        for y in arms[i + 1:]:
            common = set(values[x]) & set(values[y])
            if common and all(_same(values[x][k], values[y][k]) for k in common):
                out.append((x, y))
    return out


def _same(u: tuple, v: tuple) -> bool:
    return all((p == q) or (isinstance(p, float) and isinstance(q, float) and math.isnan(p) and math.isnan(q))
               for p, q in zip(u, v))
