"""Data sets, partitions, models, local training and FL algorithms (torch). Importing registers them."""
from . import algorithms  # noqa: F401,E402
