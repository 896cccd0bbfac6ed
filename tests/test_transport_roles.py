"""The transport's two roles (issue 33, item 6: transport.py): ``ClientSide`` (the clients' computation and the
run's lifecycle) and ``AirCarrier`` (the planned round on the air) are typed protocols that both transports
satisfy, and a round's notes are returned, not collected in a list threaded through the calls: an attempt's
notes (``Attempt.notes``) come back in order in the release's (``Release.notes``), and an air failure carries
what the round noted before it (``AirError.notes``). Pure: a real ledger, no radio."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from otafl_sdr.config.schema import PrivacyConfig
from otafl_sdr.errors import AirError
from otafl_sdr.privacy.ledger import PrivacyLedger
from otafl_sdr.rounds.accounting import release
from otafl_sdr.rounds.in_process import AirTransport
from otafl_sdr.transmission import Mechanism, Reception
from otafl_sdr.transport import AirCarrier, Attempt, ClientSide, Transport


def test_both_transports_take_both_roles():
    from otafl_sdr.net.server import TestbedTransport
    air = AirTransport(cfg=None)                      # built, not bound: no air opened
    for transport in (air, TestbedTransport.__new__(TestbedTransport)):
        assert isinstance(transport, ClientSide) and isinstance(transport, AirCarrier)
    assert air.take_notes() == [] and air.evaluation_visible
    with pytest.raises(TypeError):
        Transport()                                   # a protocol: implemented, never instantiated


def _plan():
    return SimpleNamespace(mechanism=Mechanism(round=1, sensitivity=1.0, sigma_eff=2.0), extra={}, alpha_u=1.0,
                           alpha_cj=0.0, sigma_c2=1.0, h_cj=0.0)


def _ledger(tmp_path):
    return PrivacyLedger(PrivacyConfig(eps=100.0, delta=1e-5, accountant="pld", report=["pld"]),
                         tmp_path / "privacy_ledger.jsonl")


def test_the_attempts_notes_come_back_in_the_release_in_order(tmp_path):
    answers = iter([Attempt(Reception(None, ok=False, reason="lost"), infrastructure_died=True,
                            notes=["receiver dead (no heartbeat)"]),
                    Attempt(Reception(np.zeros(4), ok=True), notes=["receiver rejoined"])])
    out = release(_ledger(tmp_path), _plan(), 1, retries=1, enforce=True, send=lambda wire: next(answers))
    assert out.reception.ok and out.attempts == 2
    assert out.notes[0] == "receiver dead (no heartbeat)"
    assert "retried once it is back" in out.notes[1] and out.notes[2] == "receiver rejoined"


def test_an_air_failure_carries_what_the_round_noted(tmp_path):
    answers = iter([Attempt(Reception(None, ok=False, reason="lost"), infrastructure_died=True,
                            notes=["jammer dead"])])

    def send(wire):
        attempt = next(answers, None)
        if attempt is None:
            raise AirError("the receiver's radio stopped")
        return attempt
    with pytest.raises(AirError) as failed:
        release(_ledger(tmp_path), _plan(), 1, retries=1, enforce=True, send=send)
    assert failed.value.notes[0] == "jammer dead" and "retried once it is back" in failed.value.notes[1]
    assert AirError("another").notes == []            # a fresh error notes nothing
