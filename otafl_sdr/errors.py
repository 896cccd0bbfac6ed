"""Errors a user can fix: the CLI prints them as one line and exits with status 2. Also ``Terminated``: a
stop asked for by a signal other than Ctrl-C (SIGTERM), and ``signals_raise``, which turns it into that exception."""
import contextlib
import signal
import threading


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


class Terminated(KeyboardInterrupt):
    """The process was told to stop by ``signum`` (SIGTERM: what `kill`, SLURM and systemd send). A
    KeyboardInterrupt, so every place that handles Ctrl-C handles it the same way: the round in flight is
    abandoned (what was booked stays booked), the summary is written, the run resumes with --resume. The CLI
    exits ``128 + signum`` (143 for SIGTERM)."""

    def __init__(self, signum: int = signal.SIGTERM):
        self.signum = int(signum)
        try:
            self.signame = signal.Signals(self.signum).name
        except ValueError:
            self.signame = f"signal {self.signum}"
        super().__init__(self.signame)

    def __reduce__(self):                # crosses process boundaries (a sweep's worker) as itself
        return (Terminated, (self.signum,))


def signal_number(e: KeyboardInterrupt) -> int:
    """The signal behind a KeyboardInterrupt: a Terminated's own, else SIGINT (Ctrl-C)."""
    return int(getattr(e, "signum", signal.SIGINT))


def raise_terminated(signums=(signal.SIGTERM,), fired: list | None = None) -> dict:
    """From now on, the first of ``signums`` to arrive raises Terminated(signum) in the main thread; any later
    one is ignored (the process is already stopping and must get to write its summary; a supervisor or service
    manager that forwards the signal, or signals the whole group, may send it twice; SIGKILL still ends it).
    ``fired``: a list the signal's number is appended to (what a sweep's worker checks before a new cell).
    Returns the previous handlers."""
    fired = [] if fired is None else fired

    def _raise(signum, frame):
        if fired:
            return
        fired.append(signum)
        raise Terminated(signum)
    return {s: signal.signal(s, _raise) for s in signums}


@contextlib.contextmanager
def signals_raise(signums=(signal.SIGTERM,)):
    """``raise_terminated(signums)`` while inside; the previous handlers are put back on leaving. Outside the
    main thread (where Python cannot install a handler) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = raise_terminated(signums)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_held(signums=(signal.SIGINT, signal.SIGTERM)):
    """Hold ``signums`` while inside (a write that must not be torn by a stop: the checkpoint): one that
    arrives is recorded, not acted on, and delivered again (``signal.raise_signal``) to the handler in force
    once the block is left, so a stop asked for during the write stops the run right after it. Outside the
    main thread it does nothing (signals are handled in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: arrived.append(signum)) for s in signums}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if arrived:
            signal.raise_signal(arrived[0])


def did_you_mean(word: str, choices, prefix: str = "") -> str:
    """' (did you mean 'PREFIXx'?)' for the closest of ``choices`` to a misspelt ``word`` (difflib's ratio, the
    standard library's matcher), or '' where none is close."""
    import difflib
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""
