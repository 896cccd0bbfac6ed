"""`otafl-sdr keys DIR`: CURVE key pairs for the control plane (server + one per node)."""
from __future__ import annotations

from otafl_sdr.errors import UserError
from otafl_sdr.net.security import make_keys, node_names


def add_arguments(p) -> None:
    p.add_argument("dir", help="key folder to create (public/ and private/ inside)")
    p.add_argument("--clients", type=int, default=10, help="number of client nodes (client-0 .. client-K-1)")
    p.add_argument("--no-jammer", action="store_true", help="no key for a jammer node")
    p.add_argument("--name", action="append", default=[], help="an extra node name (repeatable)")
    p.add_argument("--force", action="store_true", help="replace existing keys")


def main(args) -> int:
    if args.clients < 0:
        raise UserError("--clients must be >= 0")
    for n in args.name:
        if not n or "/" in n or n.startswith(".") or len(n) > 64:
            raise UserError(f"--name {n!r} is not a valid node name")
    names = node_names(args.clients, jammer=not args.no_jammer) + list(args.name)
    written = make_keys(args.dir, names, overwrite=args.force)
    print(f"names: {', '.join(names)} (--clients sets how many clients; default 10)")
    print(f"wrote {len(written)} key pairs to {args.dir}: public/NAME.key (give the server all of them) and "
          f"private/NAME.key_secret (give each host only its own, plus public/server.key)")
    return 0
