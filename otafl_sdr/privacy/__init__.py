"""Accountants and the privacy ledger. Importing registers the accountants by name:
``paper`` (paper 000 closed form), ``rdp`` and ``pld`` (dp-accounting)."""
from otafl_sdr.privacy import paper000, pld, rdp  # noqa: F401  (registration)
from otafl_sdr.privacy.base import Accountant  # noqa: F401
from otafl_sdr.privacy import fdp  # noqa: F401,E402  (registers "fdp", "fdp_feasible"; paper 002)
from otafl_sdr.privacy import cdpb_rdp  # noqa: F401,E402  (registers "cdpb"; paper 001)
from otafl_sdr.privacy import lapa_budget  # noqa: F401,E402  (registers "lapa_sum"; paper 004)
from otafl_sdr.privacy import otafd_accountant  # noqa: F401,E402  (registers "otafd"; paper 003)
