"""The in-process uhd air reports which transmitter's burst faulted (issue 24, item 4): a jammer fault
(late command, underflow, no burst ack) becomes ``Reception.undelivered['jammer']``, which the release
rule charges at channel noise; a clean burst (``burst_ack`` only) is not reported."""
import pytest

pytestmark = [pytest.mark.gnuradio]


def test_each_faulted_transmitter_is_named_with_its_faults():
    from otafl_sdr.radio.uhd_air import undelivered_noise
    got = undelivered_noise({"client 0": {"burst_ack": 1, "missing_burst_ack": 0},
                             "client 1": {"underflow": 2},
                             "jammer": {"time_error": 1, "missing_burst_ack": 1}})
    assert got == {"client-1": "underflow", "jammer": "no burst ack, late command"}
    assert undelivered_noise({"jammer": {"burst_ack": 1}}) == {}
