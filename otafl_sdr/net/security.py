"""Control-plane security: loopback by default, CURVE (pyzmq ``zmq.auth``) for anything else.

Key folder layout (``otafl-sdr keys DIR`` makes it; after pyzmq's ironhouse example)::

    DIR/public/NAME.key            public certificates: the server needs every node's, a node the server's
    DIR/private/NAME.key_secret    one secret certificate per host (mode 0600, folder 0700)

NAME is ``server`` or a node name (``client-0`` .., ``jammer``, ``receiver``, ``channel``). The server
authenticates with ``ThreadAuthenticator.configure_curve(location=DIR/public)``: only holders of a secret
key whose public half lies there get through the handshake, and :meth:`KeyStore.owner_of` ties each
connection's key to the node name it claims, so a node cannot speak for another."""
from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from pathlib import Path

from otafl_sdr.errors import ConfigError, UserError

SERVER = "server"
PUBLIC = "public"
PRIVATE = "private"


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1."""
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_of(endpoint: str) -> str:
    """'tcp://HOST:PORT' -> HOST."""
    if not endpoint.startswith("tcp://") or ":" not in endpoint[6:]:
        raise UserError(f"endpoint '{endpoint}' must look like tcp://HOST:PORT")
    return endpoint[6:].rsplit(":", 1)[0].strip("[]")


def check_bind(bind: str, keys_dir: str) -> bool:
    """Raise ConfigError unless ``bind`` is loopback or CURVE keys are configured; returns use-CURVE."""
    if not bind:
        raise ConfigError("net.bind", "must name an address (127.0.0.1 keeps the testbed on this host)")
    if bind in ("*", "0.0.0.0", "::") or not is_loopback(bind):
        if not keys_dir:
            raise ConfigError("net.keys_dir", f"binding '{bind}' (not loopback) requires CURVE keys: "
                                              f"make them with `otafl-sdr keys DIR` and set net.keys_dir = DIR")
    return bool(keys_dir)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now on ``host`` (the OS picks it)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def node_names(clients: int, jammer: bool = True) -> list[str]:
    names = [f"client-{i}" for i in range(clients)] + ["receiver", "channel"]
    return names + (["jammer"] if jammer else [])


def make_keys(keys_dir: str | Path, names: list[str], overwrite: bool = False) -> list[Path]:
    """Create CURVE certificates for ``server`` and every name; returns the secret files written."""
    import zmq.auth
    d = Path(keys_dir)
    pub, priv = d / PUBLIC, d / PRIVATE
    todo = [SERVER] + [n for n in names if n != SERVER]
    if not overwrite:
        exist = [n for n in todo if (priv / f"{n}.key_secret").exists()]
        if exist:
            raise UserError(f"keys for {', '.join(exist[:4])} already exist in '{d}'; use --force to replace them")
    pub.mkdir(parents=True, exist_ok=True)
    priv.mkdir(parents=True, exist_ok=True)
    os.chmod(priv, 0o700)
    written = []
    for n in todo:
        public_file, secret_file = zmq.auth.create_certificates(str(priv), n)
        os.chmod(secret_file, 0o600)
        shutil.move(public_file, pub / f"{n}.key")
        written.append(Path(secret_file))
    return written


class KeyStore:
    """The CURVE key folder of one host."""

    def __init__(self, keys_dir: str | Path):
        self.dir = Path(keys_dir)
        if not self.dir.is_dir():
            raise UserError(f"key folder '{self.dir}' not found; make it with `otafl-sdr keys {self.dir}`")

    @property
    def public_dir(self) -> Path:
        return self.dir / PUBLIC

    def public(self, name: str) -> bytes:
        import zmq.auth
        f = self.public_dir / f"{name}.key"
        if not f.is_file():
            raise UserError(f"no public key for '{name}' ({f}); copy it from the host that made the keys")
        try:
            return zmq.auth.load_certificate(str(f))[0]
        except (ValueError, OSError) as e:
            raise UserError(f"public key '{f}' is unreadable: {e}") from None

    def pair(self, name: str) -> tuple[bytes, bytes]:
        """(public, secret) of ``name`` from DIR/private/NAME.key_secret."""
        import zmq.auth
        f = self.dir / PRIVATE / f"{name}.key_secret"
        if not f.is_file():
            raise UserError(f"no secret key for '{name}' ({f}); make keys with `otafl-sdr keys` and copy "
                            f"private/{name}.key_secret to this host")
        try:
            public, secret = zmq.auth.load_certificate(str(f))
        except (ValueError, OSError) as e:
            raise UserError(f"secret key '{f}' is unreadable: {e}") from None
        if secret is None:
            raise UserError(f"'{f}' holds no secret key")
        return public, secret

    def owners(self) -> dict[str, str]:
        """z85 public key -> node name, for every certificate in DIR/public."""
        import zmq.auth
        out = {}
        for f in sorted(self.public_dir.glob("*.key")):
            try:
                out[zmq.auth.load_certificate(str(f))[0].decode("ascii")] = f.stem
            except (ValueError, OSError):
                continue
        return out
