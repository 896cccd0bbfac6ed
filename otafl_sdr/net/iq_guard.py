"""The server's check of the IQ links of a zmq attempt, and the bound on attacked rounds.

Both ends of every IQ link report each burst (``iq_report``: the samples pushed / received and the
burst's tag, radio/zmq_channel.burst_tag, keyed per link so that only the two ends can compute it). A
link whose reader got fewer samples than its sender pushed (another reader took them), or whose tags
differ (samples injected, altered or replayed from another attempt), makes the attempt *attacked*: it is
lost, its aggregate is discarded, and the log and the round's notes name it. Every attempt that was sent
stays booked (the release rule). Once ``net.max_attacked_rounds`` rounds have been attacked the run stops
with that reason (exit 1; checkpoint and ledger kept) instead of paying for ever more retries."""
from __future__ import annotations

import logging

log = logging.getLogger("otafl.net")

ATTACKED = "IQ link attacked"


def link_problems(reports: dict[tuple[str, str], dict], dropped=frozenset()) -> list[str]:
    """``reports``: (link 'SENDER>READER', side 'sent' | 'got') -> the report's fields (``samples``: how
    many the sender pushed / the reader got; ``complete``: all of the burst; ``tag``: of the whole burst).
    One line per link that shows an attack: the sender pushed its whole burst and the reader got less
    (another reader took samples), or the reader got a whole burst whose tag is not the sender's
    (injected, altered or replayed from another attempt). A link is judged only when both ends reported
    and its sender was not dropped; a slow link (the sender could not push it all) is not an attack."""
    out = []
    for (link, side), got in sorted(reports.items()):
        sent = reports.get((link, "sent"))
        if side != "got" or sent is None:
            continue
        sender, reader = link.split(">", 1)
        if sender in dropped:
            continue
        n_s, n_g = int(sent["samples"]), int(got["samples"])
        if got["complete"] and sent["tag"] and got["tag"] and sent["tag"] != got["tag"]:
            out.append(f"{link}: the burst {reader} got fails its integrity tag (samples injected, altered "
                       f"or from another attempt)")
        elif sent["complete"] and n_g < n_s:
            out.append(f"{link}: {reader} got {n_g} of the {n_s} samples {sender} pushed (taken by another "
                       f"reader, or the link is broken)")
    return out


class IqGuard:
    """Counts the rounds whose attempts were attacked; ``judge`` returns the reason to stop, or ''."""

    def __init__(self, max_attacked_rounds: int):
        self.max = int(max_attacked_rounds)
        self.rounds: dict[int, list[str]] = {}

    def judge(self, it: int, attempt: int, reception, notes: list) -> str:
        problems = reception.extra.get("attacked") if isinstance(reception.extra, dict) else None
        if not problems:
            return ""
        self.rounds.setdefault(it, []).extend(problems)
        notes.append(f"round {it}: attempt {attempt} attacked on the IQ plane ({'; '.join(problems)}); "
                     f"booked, aggregate discarded")
        log.error("round %d attempt %d: %s: %s", it, attempt, ATTACKED, "; ".join(problems))
        if len(self.rounds) >= self.max:
            return (f"{ATTACKED} in {len(self.rounds)} round(s) ({', '.join(map(str, sorted(self.rounds)))}; "
                    f"net.max_attacked_rounds = {self.max}): {problems[0]}; stopped, checkpoint and ledger kept "
                    f"(every attempt sent is booked)")
        return ""
