"""The progress bar (issue 27, items 5-6): drawn by ``tqdm.auto`` (a widget in a notebook, text in a
terminal), counting Upcycled-FL's iterations as "iteration" with the client round beside them, and a
FedAvg run's as "client round" (the two coincide there)."""
import pytest
import tqdm.auto

import otafl_sdr

SMALL = {"air.name": "sim", "run.rounds": 2, "data.dataset": "digits", "data.clients": 4, "model.name": "logreg",
         "run.torch_threads": 1, "privacy.enforce": False}


@pytest.mark.experiment
def test_the_bar_is_tqdm_auto_and_names_its_unit(tmp_path, monkeypatch, capsys):
    made = []

    class Recording(tqdm.auto.tqdm):            # the real bar, recorded: which class the run asked for
        def __init__(self, *a, **kw):
            made.append(kw)
            super().__init__(*a, **kw)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    otafl_sdr.run({**SMALL, "algorithm.name": "upcycled_fl"}, out=tmp_path / "u", progress=True)
    err = capsys.readouterr().err
    assert len(made) == 1 and made[0]["total"] == 4 and made[0]["unit"] == "iteration"
    assert "4/4" in err and "iteration/s" in err and "client_round=2/2" in err
    otafl_sdr.run({**SMALL, "algorithm.name": "fedavg"}, out=tmp_path / "f", progress=True)
    err = capsys.readouterr().err
    assert len(made) == 2 and made[1]["total"] == 2 and made[1]["unit"] == "client round"
    assert "2/2" in err and "client_round=" not in err
