"""Where protective noise comes from (docs/architecture.md, "Privacy: what is booked, ...").

The adversary is the honest-but-curious server: it holds the config, the run seed included. Noise drawn
from the run seed protects nothing against it, so on the airs with real nodes (``zmq``: one process per
radio; ``uhd``: one USRP per radio) every node that adds protective noise (the jammer, a client's
artificial noise, the channel emulator's thermal noise) draws it from the operating system's entropy at
that node and never sends it or a seed of it anywhere. On ``sim`` and ``loopback`` (one process, a
simulation) the noise stays seeded from the run seed so that a run is reproducible from its config; the
epsilon such a run prints is that of the simulated mechanism, and the summary says so."""
from __future__ import annotations

import secrets

import numpy as np

from otafl_sdr import seeding

def secret(air_name: str) -> bool:
    """True on airs whose nodes must draw protective noise from OS entropy (declared when the air
    registers: airs.AirCapabilities.secret_noise)."""
    from otafl_sdr.airs import air_capabilities
    return air_capabilities(air_name).secret_noise


def entropy_rng() -> np.random.Generator:
    """A generator seeded from the operating system's entropy (128 bits), never stored or sent."""
    return np.random.default_rng(secrets.randbits(128))


def entropy_seed() -> int:
    """A seed for a GNU Radio noise block (positive 31-bit int) from OS entropy."""
    return 1 + secrets.randbelow(2**31 - 2)


def protective_rng(cfg, *labels) -> np.random.Generator:
    """Seeded from (run.seed, *labels) on sim/loopback; OS entropy on zmq/uhd."""
    if secret(cfg.air.name):
        return entropy_rng()
    return seeding.rng(cfg.run.seed, *labels)


def describe(air_name: str) -> str:
    """The summary's ``noise_source`` field."""
    if secret(air_name):
        return "node entropy (each noise-adding node draws from its OS; the server cannot regenerate it)"
    return "seeded from the run seed (simulation: the eps is that of the simulated mechanism)"
