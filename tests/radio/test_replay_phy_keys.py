"""`otafl-sdr replay` reads the [phy] table a recording carries, the OFDM keys included (phy.waveform and
phy.ofdm_*, written into every recording since the OFDM mode): a single-carrier recording replays; an OFDM
table without the OFDM round's own metadata (tests/cli/test_replay_ofdm.py replays real ones) and
out-of-range values are refused in one line (exit 2). The recording is the real jammed round of
test_replay_jammer (phy modem + numpy; no GNU Radio)."""
import json

import pytest

from otafl_sdr.experiment.replay import cli_replay, replay
from test_replay_jammer import _jammed


def _edit(path, **phy):
    meta = json.loads(path.read_text())
    meta["global"]["otafl:phy"].update(phy)
    path.write_text(json.dumps(meta))


def test_a_single_carrier_recording_with_the_ofdm_keys_replays(tmp_path):
    path, _ = _jammed(tmp_path, 0.25)
    phy = json.loads(path.read_text())["global"]["otafl:phy"]
    assert phy["waveform"] == "single_carrier" and "ofdm_fft" in phy and "ofdm_smoothing" in phy
    assert replay(path)["ok"]


@pytest.mark.parametrize("phy, words", [
    ({"waveform": "ofdm"}, "'otafl:extra.ofdm' is missing: an OFDM recording carries its reference"),
    ({"waveform": "am"}, "is an 'am' round; replay demodulates single-carrier and OFDM recordings only"),
    ({"ofdm_smoothing": 3}, "'ofdm_smoothing' is 3; expected one of none, delay"),
    ({"ofdm_fft": 1e9}, "'ofdm_fft' is"),
    ({"ofdm_truncation": "x"}, "'ofdm_truncation' is"),
    ({"made_up": 1}, "unknown parameters made_up")])
def test_bad_or_ofdm_phy_tables_are_one_line(tmp_path, capsys, phy, words):
    path, _ = _jammed(tmp_path, 0.0)
    _edit(path, **phy)
    assert cli_replay([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1 and "Traceback" not in err
