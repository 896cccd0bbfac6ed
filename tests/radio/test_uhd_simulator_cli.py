"""`python -m otafl_sdr.radio.uhd_simulator`'s refusals (nothing started): a hub wait outside its range and the
lab-only options without a lab, each one line and exit 2."""
from otafl_sdr.radio.uhd_simulator import main


def test_the_lab_options_are_refused_in_one_line_where_they_cannot_apply(capsys):
    assert main(["--radios", "5", "--idle-s", "0"]) == 2
    assert capsys.readouterr().err.strip() == "error: --idle-s must be in [0.1, 60] seconds"
    assert main(["--oscillators", "b210"]) == 2
    assert capsys.readouterr().err.strip() == "error: --oscillators needs a lab (--radios 2 or more)"
