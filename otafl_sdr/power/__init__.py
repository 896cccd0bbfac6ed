"""Power policies (one file per paper) and jammer design. Importing registers them by name."""
from . import cj_adaptive  # noqa: F401
from . import cdpb, baselines  # noqa: F401,E402  (paper 001: cdpb_*, h_min, gamma_bar, independent_sampling, noise_free)
from . import lapa, ddpg  # noqa: F401,E402  (paper 004: lapa, ddpg)
from . import otafd_transceiver  # noqa: F401,E402  (registers otafd_prop1; paper 003)
