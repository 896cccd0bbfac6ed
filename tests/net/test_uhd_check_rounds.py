"""The coherence check's rounds on the uhd testbed (net/uhd_check_rounds.py): a check round's number is never a
run's round nor a calibration exchange, and a client takes a ``check_decision`` only for a check round, with a
finite payload of the model's size, exactly as it travelled (the wire format's round trip). The check itself on
the node lab: tests/net/test_net_uhd_nodes.py."""
import numpy as np
import pytest

from otafl_sdr.errors import UserError
from otafl_sdr.net.messages import MalformedMessage, Message, decode, encode
from otafl_sdr.net.uhd_check_rounds import check_round, client_decision, is_check_round
from otafl_sdr.net.uhd_rounds import CAL_ROUND


def _decision(round_index, payload, **arrays):
    msg = Message("check_decision", {"round": round_index, "mode": "update", "alpha_re": 0.5, "alpha_im": -0.25},
                  {"payload": payload, **arrays})
    return decode(encode(msg, sender="server"))


def test_check_rounds_never_collide_with_a_runs_rounds_or_a_calibration_exchange():
    numbers = [check_round(r) for r in range(1, 50)]
    assert len(set(numbers)) == 49 and all(is_check_round(n) for n in numbers)
    assert not any(is_check_round(n) for n in [CAL_ROUND, 0, 1, 2, 10_000])
    assert CAL_ROUND not in numbers and max(numbers) < CAL_ROUND


def test_a_client_takes_a_check_decision_as_sent():
    payload = np.random.default_rng(1).standard_normal(650)
    payload /= np.linalg.norm(payload)
    sc = np.exp(1j * np.linspace(0, 1, 48))
    dec = client_decision(_decision(check_round(2), payload, alpha_sc=sc), dim=650)
    assert dec["alpha"] == complex(0.5, -0.25) and dec["mode"] == "update"
    assert np.array_equal(dec["payload"], payload) and np.array_equal(dec["alpha_sc"], sc)
    assert "alpha_sc" not in client_decision(_decision(check_round(1), payload), dim=None)   # single carrier


@pytest.mark.parametrize("round_index", [1, 7, 0, CAL_ROUND])
def test_a_check_decision_cannot_replace_a_real_rounds_decision(round_index):
    with pytest.raises(UserError, match="no check round"):
        client_decision(_decision(round_index, np.ones(650)), dim=650)


@pytest.mark.parametrize("payload", [np.ones(649), np.ones((2, 325))])
def test_a_check_payload_must_be_the_models_size(payload):
    with pytest.raises(UserError, match="650 finite values"):
        client_decision(_decision(check_round(1), payload), dim=650)


def test_a_payload_with_nan_or_no_payload_never_reaches_the_client():
    bad = np.r_[np.ones(649), np.nan]
    with pytest.raises(MalformedMessage, match="NaN"):                  # the wire refuses it ...
        _decision(check_round(1), bad)
    fields = {"round": check_round(1), "mode": "update", "alpha_re": 1.0, "alpha_im": 0.0}
    with pytest.raises(UserError, match="finite"):                      # ... and so does the client
        client_decision(Message("check_decision", fields, {"payload": bad}), dim=650)
    with pytest.raises(MalformedMessage, match="needs array 'payload'"):
        encode(Message("check_decision", fields, {}), sender="server")
