"""The coherence check at the start of every uhd run, in process or on the testbed's nodes (issue 34, item 4).

After the run's calibration and before its first round (a new run's and a resumed one's: the radios are
opened and calibrated again), ``calibration.coherence_check`` rounds (3) of known, independent payloads go
over the run's own radios and calibration at a high SNR (calibration/coherence_check.CHECK_SETS: no jammer,
20 dB), each client's residual phase measured by its sounding (``air.coherence = "measure"`` for the check,
or the run's ``track``: radio/uhd_air.UhdAir.rounds_under). The payloads are public
(experiment/coherence_rounds.known_payload): no client's data goes out and nothing is booked. The verdict is
calibration/coherence_check.judge's: a coherent sum off its theory, or a client whose residual phase passes
0.1 rad, stops the run before round 1 is released, the client named; the stop is a radio failure (exit 4):
fix the lab, then ``--resume`` (calibrated and checked again). A check that cannot see 0.1 rad at this run's
policy (one that does not plan to ``power.max_snr_db``) judges the sum alone and says so; a check whose
plan the radios refuse (a PA driven into compression at its SNR) is recorded as not run, and the run goes on.

Every check is appended to DIR/coherence-checks.jsonl (one line per run start: the round it came before, the
verdict, its rounds' figures); the summary's ``coherence_check`` holds the latest verdict's figures.
On the uhd testbed the server runs it over the nodes' radios (net/uhd_check_rounds.py: the server plans the
check's rounds and tells each client node its share; the testbed measures each client, it does not track). A
client node gone since the calibration is left silent and declared dead when ``net.dead_client_policy`` is
"drop" (the check measures the others, the run goes on without it); under "abort" the check stops the run."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from otafl_sdr.errors import UserError

NOT_SENSITIVE = "not sensitive"      # judge's failure that only says the check is blind at this SNR
LOG_NAME = "coherence-checks.jsonl"


def applies(cfg, air) -> bool:
    """The check runs on a uhd air that can run rounds under the check's config (``rounds_under``: the
    in-process air, the testbed server's; ``calibration.coherence_check`` > 0)."""
    return int(cfg.calibration.coherence_check) > 0 and cfg.air.name == "uhd" and hasattr(air, "rounds_under")


def check_before_rounds(parts, transport, out: Path, first_round: int,
                        echo: Callable[[str], None]) -> tuple[str, dict | None]:
    """Run the check on ``transport``'s started, calibrated uhd air before iteration ``first_round`` (module
    doc). Returns (the run's stop reason, '' when it passed or does not apply; the summary's figures, None
    when it did not run)."""
    from otafl_sdr.calibration.coherence_check import CHECK_SNR_DB, check_sets, judge, report_lines
    from otafl_sdr.configure.load import with_overrides
    from otafl_sdr.experiment.coherence_rounds import known_rounds
    from otafl_sdr.results.files import to_plain
    from otafl_sdr.workload.build import planner

    cfg, air = parts.cfg, getattr(transport, "air", None)      # the testbed's server: its nodes' radios
    if not applies(cfg, air):
        return "", None
    sets = check_sets(cfg)
    check = planner(parts, with_overrides(cfg, sets))
    log = Path(out) / LOG_NAME
    line = {"before_round": first_round, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sets": sets}
    try:
        with air.rounds_under(check.cfg, first_round) as check_air:
            rows = known_rounds(check, check_air, int(cfg.calibration.coherence_check), echo=lambda m: None)
    except UserError as e:          # the check's power refused by the radios (a PA's compression): not run
        why = f"not run: its {CHECK_SNR_DB:g} dB plan was refused ({str(e).splitlines()[0]})"
        _append(log, {**line, "verdict": None, "not_run": why})
        echo(f"coherence check {why}")
        return "", {"passed": None, "before_round": first_round, "not_run": why}
    senders = max([int(r.get("clients", check.K)) for r in rows if r.get("ok")] or [check.K])   # a dropped one: none
    verdict = judge(rows, max(senders, 1), check.dim, tracked=check.cfg.air.coherence == "track")
    _append(log, to_plain({**line, "verdict": verdict, "rounds": rows}))
    for text in report_lines(verdict):
        echo(text)
    blocking = [f for f in verdict["failures"] if not f.startswith(NOT_SENSITIVE)]
    figures = {"passed": not blocking, "before_round": first_round, "ratio": verdict["ratio"],
               "tolerance": verdict["tolerance"], "sensitive": verdict["sensitive"], "received": verdict["received"],
               "rounds": verdict["rounds"], "failures": verdict["failures"],
               "clients": [{k: c[k] for k in ("client", "phase_rad", "phase_se", "phase_wander_rad")}
                           for c in verdict["clients"]]}
    if not blocking:
        return "", figures
    return (f"radio failure: the coherence check before round {first_round} failed: {'; '.join(blocking)} "
            f"({log}); fix the lab, then resume with --resume (calibrated and checked again)"), figures


def _append(log: Path, line: dict) -> None:
    """One line per run start: nothing of an earlier check is lost."""
    with open(log, "a") as f:
        f.write(json.dumps(line) + "\n")


__all__ = ["LOG_NAME", "applies", "check_before_rounds"]
