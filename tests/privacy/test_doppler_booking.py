"""channel.doppler_hz in a whole loopback run (issue 26 item 1): every data round's ledger line carries the Doppler
factor front_end.sensitivity_gain books (this round's seeded peak of |rho_i| over the burst window,
channel/doppler.py), its epsilon rechecked with dp-accounting, and `verify` re-derives it from the config."""
import json

import pytest

from otafl_sdr.channel.front_end import sensitivity_gain
from otafl_sdr.cli.main import main
from otafl_sdr.phy.modem import Modem
from otafl_sdr.configure.load import load_config

from dp_reference import independent_pld_epsilon

pytestmark = [pytest.mark.gnuradio, pytest.mark.usefixtures("figures_not_drawn")]          # the run CLI imports the GNU Radio airs

ARGS = ["--set", "air.name=loopback", "--set", "data.dataset=digits", "--set", "run.rounds=2", "--set", "run.progress=false",
        "--set", "channel.doppler_hz=5.0"]


def test_a_loopback_run_with_doppler_books_the_seeded_peak(tmp_path, capsys):
    out = tmp_path / "dop"
    assert main(["run", *ARGS, "--out", str(out)]) == 0
    lines = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    data = [x for x in lines if x["uses_data"]]
    assert data
    cfg = load_config(out / "config.toml")
    assert cfg.channel.doppler_hz == 5.0
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    uses = {r["round"]: r["channel_uses"] for r in rows if r.get("channel_uses")}
    for x in data:
        g = x["extra"]["multipath_gain"]                # front-end x multipath stretch (flat: the Doppler peak)
        n_sym = next(n for n in range(uses[x["round"]], 0, -1)          # the payload's symbols (less overhead)
                     if Modem(cfg.phy).channel_uses(n) == uses[x["round"]])
        assert g == pytest.approx(sensitivity_gain(cfg, x["round"], cfg.data.clients, n_sym), rel=1e-12)
        assert 1.0 < g < 3.0                            # rho(0) = 1: the peak over a 26 ms window, not 9
        print(f"round {x['round']}: booked Doppler factor {g:.4f} (n_sym {n_sym})")
    summary = json.loads((out / "summary.json").read_text())
    assert independent_pld_epsilon(data, 1e-5) == pytest.approx(summary["eps_pld"], rel=2e-3)
    # targeting planned with the same seeded peaks (RunParts.planned_multipath_gain), not the draw-free 9:
    # the round booked at the largest peak spends its share of privacy.eps = 1
    print(f"eps {summary['eps_pld']:.4f}")
    assert 0.75 < summary["eps_pld"] <= 1.0 + 1e-9
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "re-derived" in capsys.readouterr().out
