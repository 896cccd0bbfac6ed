"""compare.md and claims.md of `otafl-sdr compare`: the mechanisms' table (private arms, then the reference
arms apart), the degenerate arms, and each claim's verdict with the numbers that decided it."""
from __future__ import annotations

import math


def window(opts: dict) -> str:
    return (f"the evaluations in its last {opts['last_rounds']:g} client rounds (compare.last_rounds)"
            if opts["last_rounds"] else f"its last {opts['last_k']} evaluations (compare.last_k)")


def cell(v, digits=3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}g}" if isinstance(v, float) else str(v)


def at(pt: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in pt.items())


def markdown(spec, summary, claims: list[dict], same: list, opts: dict, keys: list) -> tuple[str, str]:
    """(compare.md, claims.md)."""
    what = f"last {opts['last_rounds']:g} client rounds" if opts["last_rounds"] else f"last {opts['last_k']} evals"
    head = ["mechanism", *keys, "seeds", f"accuracy, {what} (95% CI)", "at client rounds", "final round (95% CI)",
            "eps PLD mean / max", "target", "over", "rounds", "client rounds", "jammer (capped)", "knob"]
    lines = [f"# {spec.name}: {len(summary)} mechanism x grid points", ""]
    private = summary[~summary["reference"].astype(bool)] if len(summary) else summary
    reference = summary[summary["reference"].astype(bool)] if len(summary) else summary
    lines += _table(private, head, keys)
    if len(reference):
        lines += ["", "Reference arms (no DP target: reported apart, not held to the eps target):", ""]
        lines += _table(reference, head, keys)
    lines += ["", f"Accuracy: each run's mean test accuracy over {window(opts)}, then mean and 95 % "
              f"t-interval over seeds; the client rounds that window spans and the final round's accuracy beside it."]
    spans = {r["window"] for _, r in summary.iterrows() if r["window"]}
    if len(spans) > 1 and not opts["last_rounds"]:
        lines.append(f"\nNOTE: the arms' last {opts['last_k']} evaluations span different client rounds "
                     f"({'; '.join(sorted(spans))}); compare.last_rounds averages one window for every arm.")
    for a, b in same:
        lines.append(f"\nDEGENERATE: arms {spec.labels.get(a, a)!r} and {spec.labels.get(b, b)!r} gave identical "
                     f"results on every seed (the settings that tell them apart make no difference here); "
                     f"claims between them are not testable.")
    for _, r in summary[summary["failed"] != ""].iterrows():
        lines.append(f"\n{r['label']} {[r[c] for c in keys]}: {r['failed']}")
    cl = [f"# {spec.name}: the papers' claims", "",
          f"Each claim at each grid point: the paired t-test over seeds where both sides ran the same seeds "
          f"(Welch's t-test otherwise), two-sided, Holm-adjusted over the {sum(c['p_holm'] is not None for c in claims)} "
          f"testable claims at family-wise alpha = {opts['alpha']:g}; held / reversed: the adjusted p is below "
          f"alpha (the sign of the difference says which); tie: it is not; not at equal eps: two private arms "
          f"whose spent eps differ by more than the target's tolerance (the test's verdict in brackets; not a "
          f"comparison at one privacy level). The interval beside each difference is Holm-adjusted: the "
          f"t-interval at the claim's Holm step, 1 - alpha / (m - r + 1) for the r-th smallest p up to the first "
          f"claim Holm keeps, whose level every later claim shares, so it excludes 0 exactly when the claim is "
          f"held or reversed. Wilcoxon's signed-rank p and a "
          f"bootstrap 95 % interval of the mean paired difference are robustness checks (with n seeds the "
          f"exact signed-rank p cannot go below 2 / 2^n: 0.0625 for 5; a bootstrap over few seeds is too "
          f"narrow).", "",
          "| verdict | source | claim | more vs less | difference [Holm-adjusted CI] | test (n) | p | p Holm | Wilcoxon p "
          "| bootstrap 95% |", "|" + "---|" * 10]
    for c in claims:
        where = f" at {at(c['at'])}" if c["at"] else ""
        cl.append(f"| **{c['verdict']}** | {c['source']} | {c['claim']}{where} | {cell(c['more_mean'])} vs "
                  f"{cell(c['less_mean'])} | {cell(c['diff'])} [{cell(c['ci_low'])}, {cell(c['ci_high'])}]{_level(c)} | "
                  f"{c['test'] or '-'} ({_n(c['n'])}) | {cell(c['p'])} | {cell(c['p_holm'])} | "
                  f"{cell(c['wilcoxon_p'])} | [{cell(c['boot_low'])}, {cell(c['boot_high'])}] |")
    return "\n".join(lines) + "\n", "\n".join(cl) + "\n"


def _level(c: dict) -> str:
    lv = c.get("ci_level")
    return "" if lv is None else f" ({100 * lv:.3g} %)"


def _n(n) -> str:
    return "/".join(map(str, n)) if isinstance(n, tuple) else cell(n)


def _table(rows, head: list, keys: list) -> list:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in rows.iterrows():
        out.append("| " + " | ".join([
            str(r["label"]), *(cell(r[c]) for c in keys), f"{r['seeds']}/{r['of']}",
            f"{cell(r['accuracy'])} +- {cell(r['accuracy_ci95'], 2)}", cell(r["window"]),
            f"{cell(r['final_accuracy'])} +- {cell(r['final_accuracy_ci95'], 2)}",
            f"{cell(r['eps_pld_mean'], 4)} / {cell(r['eps_pld_max'], 4)}", cell(r["eps_target"]),
            cell(r["over_target"]), cell(r["rounds"]), cell(r["client_rounds"]),
            f"{cell(r['jammer_rounds'])} ({cell(r['capped_jammer_rounds'])})", cell(r["calibration"])]) + " |")
    return out


def claims_table(claims: list[dict]) -> list[dict]:
    """claims.csv: one flat row per claim and grid point (ci95_low / ci95_high: the unadjusted 95 % t-interval;
    ci_low / ci_high at ci_level: the Holm-adjusted one the tables print)."""
    return [{"verdict": c["verdict"], "source": c["source"], "claim": c["claim"], "at": at(c["at"]),
             "metric": c["metric"], "more_mean": c["more_mean"], "less_mean": c["less_mean"], "diff": c["diff"],
             "ci95_low": c["low"], "ci95_high": c["high"], "ci_level": c.get("ci_level"),
             "ci_low": c.get("ci_low"), "ci_high": c.get("ci_high"), "test": c["test"], "n": _n(c["n"]), "p": c["p"],
             "p_holm": c["p_holm"], "wilcoxon_p": c["wilcoxon_p"], "bootstrap_low": c["boot_low"],
             "bootstrap_high": c["boot_high"], "paper_effect": c.get("paper_effect"),
             "paper_effect_source": c.get("paper_effect_source"), "paired_sd": c.get("sd"),
             "equal_eps": c.get("equal_eps")} for c in claims]
