"""A calibration exchange whose capture misses one transmitter's pilot burst (on real radios: a burst lost late
or to an underflow on a loaded host; seen once in a full `make test` on the two-channel E320 simulator) is
exchanged again before the link is called broken (calibration/procedures.LOST_BURST_RETRIES); a burst that
never arrives still fails in one line naming the transmitter. Through the real GNU Radio loopback channel,
the loss injected by silencing that transmitter's stream for the first exchanges."""
import logging

import numpy as np
import pytest

from otafl_sdr.calibration import PilotBurst
from otafl_sdr.calibration import procedures as P
from otafl_sdr.configure.load import load_config
from otafl_sdr.errors import UserError
from otafl_sdr.phy.modem import Modem
from otafl_sdr.radio.calibration_flowgraphs import LoopbackLink

pytestmark = [pytest.mark.gnuradio]

K = 3
SETS = ["run.seed=11", f"data.clients={K}", "loopback.client_cfo_max=2e-4", "loopback.client_delay_max=6",
        "channel.sigma_c2=0.5"]


class BurstLostFirst(LoopbackLink):
    """The real loopback link, with transmitter ``lost``'s stream silenced in its first ``times`` exchanges."""

    def __init__(self, cfg, lost: int, times: int):
        super().__init__(cfg, K, h=np.array([1.0, 0.9j, -1.1]), h_cj=0.9)
        self.lost, self.times, self.calls = lost, times, 0

    def exchange(self, streams):
        self.calls += 1
        if self.calls <= self.times:
            streams = np.array(streams, copy=True)
            streams[self.lost] = 0
        return super().exchange(streams)


@pytest.fixture(scope="module")
def cfg():
    return load_config(None, SETS)


def _amplitude(link):
    return np.sqrt(2 * link.sigma_c2 * 10 ** (15 / 10)) / np.min(np.abs(np.append(link.h, link.h_cj)))


def test_a_burst_lost_once_is_exchanged_again_and_the_link_measured(cfg, caplog):
    burst = PilotBurst(Modem(cfg.phy))
    with BurstLostFirst(cfg, lost=1, times=1) as link, caplog.at_level(logging.WARNING):
        res = P.measure_channels(link, burst, _amplitude(link), repeats=1)
        assert link.calls == 2                                 # the exchange that lost it, and one more
    assert any("client 1" in r.getMessage() and "exchanging again (1 of" in r.getMessage() for r in caplog.records)
    for r in res:                                              # measured from the complete capture
        assert r.rel_error <= 0.02, (r.name, r.rel_error)


def test_a_burst_that_never_arrives_fails_naming_its_transmitter(cfg):
    burst = PilotBurst(Modem(cfg.phy))
    with BurstLostFirst(cfg, lost=2, times=99) as link:
        with pytest.raises(UserError) as e:
            P.measure_channels(link, burst, _amplitude(link), repeats=1)
        assert link.calls == 1 + P.LOST_BURST_RETRIES
    assert "client 2: no pilot burst detected in its slot" in str(e.value) and "\n" not in str(e.value)
