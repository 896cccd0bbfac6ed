"""Power policies (one file per paper) and jammer design. Importing registers them by name."""
from otafl_sdr.power import cj_adaptive  # noqa: F401
from otafl_sdr.power import cdpb, baselines  # noqa: F401,E402  (paper 001: cdpb_*, h_min, gamma_bar, independent_sampling, noise_free)
from otafl_sdr.power import lapa, ddpg  # noqa: F401,E402  (paper 004: lapa, ddpg)
from otafl_sdr.power import otafd_transceiver  # noqa: F401,E402  (registers otafd_prop1; paper 003)
