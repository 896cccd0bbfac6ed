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
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def main(args) -> int:
    from otafl_sdr.configure.load import default_experiment, load_config
    from otafl_sdr.audit.runner import format_audit, run_audit
    sets = list(args.set or [])
    if args.air:
        sets.append(f"air.name={args.air}")
    cfg = load_config(args.config, sets) if args.config else default_experiment(sets)
    audit = run_audit(cfg, args.out, canaries=args.canaries, confidence=args.confidence,
                      progress=not args.quiet, canary=args.canary)
    print(format_audit(audit))
    print(f"audit: {args.out}/audit.json, {args.out}/audit.png")
    return 0
