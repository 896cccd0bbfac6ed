"""Power policies (one file per paper) and jammer design. Importing registers them by name."""
from . import cj_adaptive  # noqa: F401
