"""Errors a user can fix: the CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """Bad input from the user (config, files, arguments). Printed as one line, exit status 2."""


class ConfigError(UserError):
    """An invalid configuration value; the message names the key and what is allowed."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"config key '{key}': {message}")


class BudgetExceeded(Exception):
    """The privacy ledger refused a round: running it would exceed the (eps, delta) budget."""


class AirError(Exception):
    """An air (sim, loopback, zmq, uhd) could not carry out a round (no device, lost burst, ...). ``notes``:
    what the round noted before it failed (set by rounds/accounting.release and rounds/pipeline.py)."""

    notes: list = []


def did_you_mean(word: str, choices, prefix: str = "") -> str:
    """' (did you mean 'PREFIXx'?)' for the closest of ``choices`` to a misspelt ``word`` (difflib's ratio, the
    standard library's matcher), or '' where none is close."""
    import difflib
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""
