"""Every key of a sweep / compare spec for `otafl-sdr config --explain` (``compare.last_k``, ``arms.NAME.set``,
...): type, default, range and meaning, as sweeps/sweep.load_spec and sweeps/compare.options check them.
``tests/cli/test_config_explain.py`` fails on a spec key (sweep.SWEEP_KEYS, ARM_KEYS, CLAIM_KEYS,
COMPARE_KEYS) without its entry here."""
from __future__ import annotations

from otafl_sdr.sweeps.sweep import ARM_KEYS, CLAIM_KEYS, COMPARE_KEYS, SWEEP_KEYS

# key: (type, default, range, meaning)
SPEC_KEYS = {
    "sweep.name": ("string", "the spec file's stem", "a non-empty string",
                   "names the sweep (its folder's default name, its tables and figures)"),
    "sweep.base": ("string", "the default experiment", "a config file (relative to the spec, or the cwd)",
                   "the config every cell starts from"),
    "sweep.seeds": ("list", "[0]", "a non-empty list of distinct integers >= 0",
                    "run.seed of each trial: every grid point runs once per seed"),
    "sweep.out": ("string", "results/sweeps/NAME", "a folder path (--out overrides it)",
                  "the sweep folder: one results folder per cell, sweep.csv, the figures"),
    "sweep.set": ("list", "[]", "a list of 'key=value' strings (config keys)",
                  "fixed overrides of every cell"),
    "sweep.dirs": ("string", "every key=value, then seed=N", "a str.format pattern over arm, seed and the grid "
                   "keys with '.' as '_'; two cells may not share a folder", "the cells' folder names"),
    "sweep.title": ("string", "the sweep's name", "any string", "the figures' title (screen preset; a journal "
                    "preset draws none: the caption carries it)"),
    "grid.KEY": ("list", "none", "a non-empty list of values of the config key; \"a.x,b.y\" = [[x1, y1], ...] for keys "
                 "that move together; not run.seed (sweep.seeds) nor 'arm'", "the grid: the cells are the "
                 "product of the keys' lists (x arms x seeds)"),
    "arms.NAME.set": ("list", "[]", "a list of 'key=value' strings (config keys)",
                      "the overrides that make this arm (a mechanism) what it is"),
    "arms.NAME.label": ("string", "NAME", "any string", "the arm's name in tables and figures (legends, "
                        "axes): e.g. \"CDPB (i)\" for an arm called cdpb_i"),
    "arms.NAME.reference": ("boolean", "false", "true or false", "a no-DP reference arm: reported apart, not "
                            "held to the eps target"),
    "claims.source": ("string", "\"\"", "any string", "where the claim comes from (a paper's figure)"),
    "claims.more": ("string", "none", "an arm of the spec", "the arm claimed to have the larger metric"),
    "claims.less": ("string", "none", "an arm of the spec", "the arm claimed to have the smaller metric"),
    "claims.metric": ("string", "accuracy_last_k", "accuracy_last_k or a numeric column of sweep.csv "
                      "(final_accuracy, eps_pld, ...)", "the figure the claim compares"),
    "claims.where": ("table", "{} (every grid point)", "a table of grid keys -> values",
                     "only these grid points are judged"),
    "claims.arm": ("string", "none", "an arm of the spec (then more_at and less_at, not more / less)",
                   "one arm compared with itself at two grid points"),
    "claims.more_at": ("table", "none", "a table of grid keys -> values", "with claims.arm: the point claimed larger"),
    "claims.less_at": ("table", "none", "a table of grid keys -> values", "with claims.arm: the point claimed smaller"),
    "claims.paper_effect": ("number", "none (the page says \"paper's effect not stated\")",
                            "a finite number > 0 in the metric's units (an accuracy as a fraction: at most 1); "
                            "only with claims.paper_effect_source",
                            "the difference the paper reports for this claim: the power table's minimum "
                            "detectable effect is set beside it and the seeds it needs are computed from it"),
    "claims.paper_effect_source": ("string", "none", "a non-empty string; only with claims.paper_effect",
                                   "where the paper states its effect (figure or table, setting, values)"),
    "compare.last_k": ("integer", "3", "must be an integer in [1, 10000]; not with compare.last_rounds",
                       "evaluations averaged into accuracy_last_k (each run's last k)"),
    "compare.last_rounds": ("number", "none", "a number of client rounds in (0, 1e6]; not with compare.last_k",
                            "accuracy_last_k over the evaluations of each run's last N client rounds (one "
                            "window for every arm)"),
    "compare.alpha": ("number", "0.05", "must be a number in (0, 0.5]",
                      "family-wise error rate of the claims' verdicts (Holm)"),
    "compare.power": ("number", "0.8", "must be a number in [0.5, 0.999]",
                      "the power the claims' seeds-needed figure and minimum detectable effect are for (the "
                      "paired t-test at Holm's first step, alpha / m)"),
    "compare.reference": ("list", "[]", "arms of the spec", "the reference arms (also arms.NAME.reference = true)"),
}


def spec_key_names() -> list[str]:
    """Every key a spec may hold, as SPEC_KEYS names them."""
    return (["grid.KEY"] + [f"sweep.{k}" for k in SWEEP_KEYS] + [f"arms.NAME.{k}" for k in ARM_KEYS]
            + [f"claims.{k}" for k in CLAIM_KEYS] + [f"compare.{k}" for k in COMPARE_KEYS])


def is_spec_key(key: str) -> bool:
    return key.split(".")[0] in ("sweep", "grid", "arms", "claims", "compare")


def explain_spec(key: str | None = None) -> str:
    """`config --explain compare.last_k` (or a table such as compare, or every spec key)."""
    from otafl_sdr.errors import UserError, did_you_mean
    norm = key
    if key and key.startswith("arms.") and key.count(".") >= 2:
        norm = "arms.NAME." + key.split(".", 2)[2]
    if key and key.startswith("grid."):
        norm = "grid.KEY"
    chosen = [k for k in SPEC_KEYS if not key or k == norm or k.startswith(norm + ".")]
    if not chosen:
        raise UserError(f"config --explain: no spec key '{key}'{did_you_mean(norm, SPEC_KEYS)}")
    out = []
    for k in chosen:
        typ, default, rng, meaning = SPEC_KEYS[k]
        out += [f"{k}  ({typ}; a sweep / compare spec key)", f"  meaning:  {meaning}", f"  default:  {default}",
                f"  range:    {rng}", "  paper:    the testbed (no paper)"]
    return "\n".join(out) + "\n"
