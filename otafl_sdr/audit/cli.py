"""`otafl-sdr audit [--config FILE] [--set KEY=VALUE ...] --out DIR`: the configured experiment run once
with canaries through its real air; prints eps_lower (the Gaussian fit's, at --confidence) beside the
printed eps and their ratio, and writes DIR/audit.json and DIR/audit.png (audit/runner.py)."""
from __future__ import annotations

from otafl_sdr.audit import DEFAULT_CANARIES


def add_arguments(p) -> None:
    p.add_argument("--config", help="TOML config (as `run`); default: the default experiment")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a dotted config key")
    p.add_argument("--air", choices=("sim", "loopback", "zmq_inproc", "uhd", "zmq"),
                   help="shorthand for --set air.name=AIR")
    p.add_argument("--out", required=True, help="audit folder (must not exist or be empty); the run is in DIR/run")
    p.add_argument("--canaries", type=int, default=DEFAULT_CANARIES, help="number of canaries (trials; at most d)")
    p.add_argument("--canary", choices=("white-box", "mislabeled", "nonfinite"), default="white-box",
                   help="white-box: crafted payloads at the booked sensitivity; mislabeled / nonfinite: black-box "
                        "crafted training samples (a wrong label / a NaN feature) in one client's data set")
    p.add_argument("--confidence", type=float, default=0.95, help="one-sided confidence of eps_lower")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="audit N times with fresh coins (DIR/repeat-K) and pool their samples: confirms an alarm")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def main(args) -> int:
    from otafl_sdr.configure.load import default_experiment, load_config
    from otafl_sdr.audit.runner import format_audit, run_audit
    sets = list(args.set or [])
    if args.air:
        sets.append(f"air.name={args.air}")
    cfg = load_config(args.config, sets) if args.config else default_experiment(sets)
    if args.repeat != 1:
        from otafl_sdr.audit.repeat import run_repeated_audit
        audit = run_repeated_audit(cfg, args.out, args.repeat, confidence=args.confidence,
                                   progress=not args.quiet, canaries=args.canaries, canary=args.canary)
        for r in audit["repetitions"]:
            print(f"{r['folder']}: eps_lower {r['eps_lower']:.4g} (Gaussian fit), {r['eps_lower_cp']:.4g} "
                  f"(Clopper-Pearson){'  alarm' if r['violation'] else ''}")
        print(f"pooled over {args.repeat} audits:")
    else:
        audit = run_audit(cfg, args.out, canaries=args.canaries, confidence=args.confidence,
                          progress=not args.quiet, canary=args.canary)
    print(format_audit(audit))
    print(f"audit: {args.out}/audit.json, {args.out}/audit.png")
    return 0
