"""Power analysis of `otafl-sdr compare`'s claims: how small a difference the seeds run can detect, and how many
seeds the paper's own effect needs, for the two-sided paired t-test that decides a claim (``stats.compare_pair``)
under Holm's control across the spec's claims (``stats.holm_verdicts``).

For n paired seeds whose per-seed differences d_1..d_n have standard deviation sd, a true mean difference
``effect`` gives the t statistic t = mean(d) / (sd / sqrt(n)) a noncentral t distribution with df = n - 1 and
noncentrality nc = effect * sqrt(n) / sd (exact for normal differences; scipy.stats.nct). The test at level a
rejects when |t| > c = t_{1 - a/2, n-1}, so its power is

    power(effect, sd, n, a) = P(T > c) + P(T < -c),  T ~ nct(n - 1, nc).

The level is Holm's first (most stringent) step, a = alpha / m for the m testable claims of the spec: a claim
with this power at alpha / m is held by Holm with at least this probability, whatever the other claims do
(Holm rejects everything Bonferroni at alpha / m rejects). The minimum detectable effect at n seeds is the
effect whose power is the target (``compare.power``, default 0.8); the seeds needed for the paper's effect are
the smallest n >= 2 whose power reaches the target. The sd is the sample standard deviation (ddof = 1) of the
per-seed paired differences of the run's own cells, or of a pilot run's.

A claim's paper effect (``paper_effect`` in the claim's metric, e.g. 0.0146 for 1.46 percentage points of
accuracy, and ``paper_effect_source``, the figure or table it is read from) is checked by
:func:`check_paper_effect`.
"""
from __future__ import annotations

import math

from otafl_sdr.errors import UserError

DEFAULT_POWER = 0.8
MAX_SEEDS = 100_000
ACCURACY_METRICS = ("accuracy_last_k", "final_accuracy")
NOT_STATED = "paper's effect not stated"
NC_BOOST = 1000.0      # scipy's nct (boost) below this noncentrality; the exact integral over Z above it


def paired_power(effect: float, sd: float, n: int, level: float) -> float:
    """Power of the two-sided paired t-test at ``level`` for a true mean difference ``effect`` over ``n`` pairs
    whose differences have standard deviation ``sd`` (> 0): P(|T| > t_{1-level/2, n-1}), T ~ nct(n-1, effect
    sqrt(n) / sd). Above NC_BOOST the same probability is integrated over Z (quadrature): boost's nct fails there."""
    from scipy import stats
    if n < 2 or not sd > 0:
        raise ValueError("paired_power needs n >= 2 and sd > 0")
    import numpy as np
    df = n - 1
    c = float(stats.t.ppf(1.0 - level / 2.0, df))
    nc = abs(effect) * math.sqrt(n) / sd
    if not math.isfinite(nc):
        return 1.0
    if nc >= NC_BOOST:      # boost's nct aborts the process once nc^2 / 2 leaves a C int; here P(T < -c) = 0
        from scipy import integrate   # and P(T > c) = E_Z[P(chi2_df < df ((Z + nc) / c)^2)], Z ~ N(0, 1)
        f = lambda z: stats.norm.pdf(z) * stats.chi2.cdf(df * np.square(np.float64(z + nc) / c), df)  # noqa: E731
        with np.errstate(over="ignore"):                     # (Z + nc)^2 beyond double: chi2's cdf at inf, 1
            return min(1.0, float(integrate.quad(f, -40.0, 40.0, points=[0.0], limit=200)[0]))
    with np.errstate(divide="ignore", invalid="ignore"):     # boost's nct flags underflow in a negligible tail
        upper, lower = float(stats.nct.sf(c, df, nc)), float(stats.nct.cdf(-c, df, nc))
    lower = lower if math.isfinite(lower) else 0.0           # P(T < -c) for nc >= 0 is below P(T > c) at nc = 0
    if not math.isfinite(upper):
        raise ValueError(f"noncentral t: no finite tail at df {df}, nc {nc:g}")
    return min(1.0, upper + lower)


def min_detectable_effect(sd: float, n: int, level: float, power: float = DEFAULT_POWER) -> float:
    """The mean difference (in the metric's units) that the paired t-test at ``level`` over ``n`` pairs detects
    with probability ``power``: the root in effect of paired_power(effect, sd, n, level) = power (power rises
    with effect; scipy.optimize.brentq)."""
    from scipy.optimize import brentq
    if n < 2 or not sd > 0:
        return float("nan")
    hi = sd
    while paired_power(hi, sd, n, level) < power:
        hi *= 2.0
        if hi > 1e12 * sd:
            return float("inf")
    return float(brentq(lambda e: paired_power(e, sd, n, level) - power, 0.0, hi, xtol=max(1e-12 * sd, 1e-300), rtol=1e-10))


def seeds_needed(effect: float, sd: float, level: float, power: float = DEFAULT_POWER,
                 most: int = MAX_SEEDS) -> int | None:
    """The smallest number of paired seeds n >= 2 at which the paired t-test at ``level`` detects ``effect``
    with probability ``power`` (power rises with n: bisection over the integers); None beyond ``most``."""
    if not sd > 0 or not effect:
        return None
    if paired_power(effect, sd, 2, level) >= power:
        return 2
    lo, hi = 2, 4                       # invariant: power(lo) < target
    while paired_power(effect, sd, hi, level) < power:
        if hi >= most:
            return None
        lo, hi = hi, min(2 * hi, most)
    return _bisect(effect, sd, level, power, lo, hi)


def _bisect(effect, sd, level, power, lo, hi) -> int:
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if paired_power(effect, sd, mid, level) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def check_paper_effect(claim: dict, where: str) -> None:
    """A claim's ``paper_effect`` / ``paper_effect_source``, refused in one line unless: the effect is a finite
    number > 0 (the size of the difference the claim states, in the direction it states), at most 1 for an
    accuracy metric (a fraction: 0.0146 for 1.46 percentage points), given with a non-empty source, and the
    source only with an effect."""
    metric = claim.get("metric", ACCURACY_METRICS[0])
    src = claim.get("paper_effect_source")
    if "paper_effect" not in claim:
        if src is not None:
            raise UserError(f"{where}: paper_effect_source without paper_effect (give the paper's effect, or drop both)")
        return
    e = claim["paper_effect"]
    if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e) or e <= 0:
        raise UserError(f"{where}: paper_effect must be a finite number > 0 (the paper's difference, in the "
                        f"claim's direction, in {metric}'s units); got {e!r}")
    if metric in ACCURACY_METRICS and e > 1:
        raise UserError(f"{where}: paper_effect = {e!r} is not an accuracy difference; give it as a fraction "
                        f"(0.0146 for 1.46 percentage points)")
    if not isinstance(src, str) or not src.strip():
        raise UserError(f"{where}: paper_effect needs paper_effect_source (the figure or table it is read from)")


def power_row(test: dict, n_plan: int | None, m: int, alpha: float, power: float) -> dict:
    """One claim test's power figures. ``test``: a claim test of ``compare.judge`` (its ``sd`` of the paired
    differences, ``n`` pairs, ``paper_effect``; ``why``: the reason it has no variance, if any); ``n_plan``: the seeds to plan for (None: the pairs run).
    Returns: level (alpha / m), n, sd, mde (at n), paper_effect, paper_effect_source, power_at_n (for the
    paper's effect), seeds_needed (for it; None beyond MAX_SEEDS) and note (why a figure is missing)."""
    level = alpha / max(m, 1)
    eff, src = test.get("paper_effect"), test.get("paper_effect_source") or ""
    row = {"claim": test["claim"], "at": test.get("at") or {}, "source": test.get("source", ""), "level": level,
           "n": None, "sd": None, "mde": None, "paper_effect": eff, "paper_effect_source": src,
           "power_at_n": None, "seeds_needed": None, "note": "" if eff is not None else NOT_STATED}
    sd = test.get("sd")
    if test.get("test") != "paired t" or sd is None or not math.isfinite(sd):
        why = test.get("why") or ("not paired by seed (Welch): no paired variance" if test.get("test") == "Welch t"
                                  else "fewer than two paired seeds: variance unknown")
        return row | {"n": n_plan, "note": "; ".join(x for x in (row["note"], why) if x)}
    n = n_plan if n_plan is not None else int(test["n"])
    row.update(n=n, sd=float(sd))
    if sd == 0:
        return row | {"note": "; ".join(x for x in (row["note"], "the paired differences do not vary (sd 0)") if x)}
    row["mde"] = min_detectable_effect(sd, n, level, power) if n >= 2 else None
    if eff is not None:
        row["power_at_n"] = paired_power(eff, sd, n, level) if n >= 2 else None
        row["seeds_needed"] = seeds_needed(eff, sd, level, power)
        if row["seeds_needed"] is None:
            row["note"] = "; ".join(x for x in (row["note"], f"more than {MAX_SEEDS} seeds") if x)
    return row


def power_markdown(rows: list[dict], alpha: float, m: int, power: float, variance: str) -> list[str]:
    """The power table (markdown lines): per claim test, the paper's effect and its source, n, the paired sd,
    the minimum detectable effect at n, the power at n for the paper's effect and the seeds it needs."""
    from otafl_sdr.sweeps.report import at, cell
    lines = [f"Power: the two-sided paired t-test at Holm's first step, alpha / m = {alpha:g} / {m} = "
             f"{alpha / max(m, 1):.3g} (m = {m} testable claim tests; a claim with this power is held by Holm "
             f"with at least this probability), power target {power:g}, noncentral t (scipy.stats.nct). "
             f"Variance: {variance}.", "",
             "| claim | paper's effect (source) | seeds n | paired sd | detectable at n | power at n | "
             "seeds needed | note |", "|" + "---|" * 8]
    for r in rows:
        where = f" at {at(r['at'])}" if r["at"] else ""
        eff = (f"{cell(r['paper_effect'], 4)} ({r['paper_effect_source']})" if r["paper_effect"] is not None
               else NOT_STATED)
        lines.append(f"| {r['claim']}{where} | {eff} | {cell(r['n'])} | {cell(r['sd'])} | {cell(r['mde'])} | "
                     f"{cell(r['power_at_n'], 2)} | {cell(r['seeds_needed'])} | {r['note'] or '-'} |")
    return lines
