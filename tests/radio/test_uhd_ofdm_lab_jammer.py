"""The in-process uhd air's OFDM round with the jammer on its own radio (issue 34: the OFDM jammer per
subcarrier), through real UHD against the simulated lab of the shared-reference preset (three clients, the
jammer and the receiver on five simulated E320s), the jammer's cable a two-path channel with a deep notch
inside the band. The session calibration sounds the jammer and its noise test; the booking counts it per
subcarrier; each round's jammer-only slot (radio/ofdm_jammer_slot.py) is read per subcarrier and follows the
calibrated profile; then the jammer's cable loses 2 dB and the next round is charged for it (a top-up line
that `verify` recomputes) at the scale it measured. With ``air.coherence = "measure"`` every round's
per-client OFDM sounding (phy/ofdm_client_sounding.py) reads each client's phase against the composite, its
offset and gain: calm at first, then client 1's cable turns by 0.3 rad and round 3 reads it on client 1
(2/3 of the step: the composite turns by a third) and -0.1 rad on the others."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dp_reference import independent_pld_epsilon

pytestmark = [pytest.mark.gnuradio, pytest.mark.uhd_sim, pytest.mark.slow]

PRESET = Path(__file__).resolve().parents[2] / "sim_loopback" / "presets" / "uhd_lab_shared_ref.toml"
SHARED = {"n": 5, "oscillators": "shared_ref", "seed": 1, "advance_s": 18.0, "idle_s": 2.0}
JAMMER = 4                                # the jammer's radio in the lab (jammer_args addr=127.0.0.5)
TAPS = [0.7, 0.0, 0.5]                    # an echo two samples late: |H_cj,k| from 0.2 to 1.2 of the path
CLIENT, STEP = 1, 0.3                     # client 1's cable turns by 0.3 rad after round 2
CLIENT_RADIO = 2                          # its radio in the lab (tx_args[1] addr=127.0.0.3; 0 the receiver)


@pytest.mark.parametrize("uhd_lab", [SHARED], indirect=True)
def test_the_ofdm_jammer_is_booked_and_measured_per_subcarrier_and_a_weaker_one_is_charged(uhd_lab, tmp_path):
    from otafl_sdr.cli.main import main
    from otafl_sdr.configure.load import load_config
    from otafl_sdr.experiment.orchestrator import make_experiment
    uhd_lab.set_cable(JAMMER, taps=TAPS)
    out = tmp_path / "run"
    cfg = load_config(PRESET, ["phy.waveform=ofdm", "air.coherence=measure", "run.rounds=3", "run.progress=false",
                               "run.eval_every=3", "model.name=mlp", "model.hidden=32",
                               "power.max_snr_db=15"])   # the jammer under the DAC (the refusal's advice: <= 18.1)

    def on_round(row):                      # after round 2 (calibrated on the whole cable): the cable 2 dB down
        if row["round"] == 2:
            uhd_lab.set_cable(JAMMER, gain_db=-2.0, taps=TAPS)
            uhd_lab.set_cable(CLIENT_RADIO, phase_rad=STEP)
    with make_experiment(cfg, out) as exp:
        exp.on_round = on_round
        outcome = exp.run()
    assert not outcome.stopped_reason, outcome.stopped_reason
    cal = json.loads((out / "calibration.json").read_text())
    jam = cal["ofdm"]["jammer"]
    Hj = np.abs(np.array([complex(*v) for v in jam["H"]]))
    print(f"jammer |H| {Hj.min():.3f} .. {Hj.max():.3f}; efficiency {jam['noise_efficiency']:.4f} "
          f"+- {jam['noise_efficiency_std']:.4f}")
    assert Hj.max() / Hj.min() > 4 and abs(jam["noise_efficiency"] - 1) < 0.05
    rows = [json.loads(x) for x in (out / "rounds.jsonl").read_text().splitlines() if x.strip()]
    assert [r["round"] for r in rows] == [1, 2, 3]
    for r in rows:
        print(f"round {r['round']}: profile {r['jammer_profile']} (P {r['jammer_profile_p']:.3g}), scale "
              f"{r['jammer_delivered_ratio']:.4f} +- {r['jammer_delivered_ratio_std']:.4f}, charged bound "
              f"{r['jammer_charged_bound']}, NMSE / theory {r['aggregate_nmse'] / r['aggregate_nmse_theory']:.3f}")
    for r in rows:
        for c in r["link_health"]["clients"]:
            print(f"round {r['round']} client {c['client']}: phase {c['phase_rad']:+.4f} +- {c['phase_std']:.4f} "
                  f"rad, offset {c['cfo_hz']:+.2f} +- {c['cfo_std_hz']:.2f} Hz, gain {c['gain_db']:+.3f} "
                  f"+- {c['gain_db_std']:.3f} dB")
    for r in rows[:2]:                   # calm clients: their calibration holds
        cl = r["link_health"]["clients"]
        assert [c["client"] for c in cl] == [0, 1, 2]
        for c in cl:
            assert abs(c["phase_rad"]) < 0.05 and abs(c["gain_db"]) < 0.5, c
            assert abs(c["cfo_hz"]) < 5 * c["cfo_std_hz"] + 0.5 and c["phase_std"] < 0.02, c
    for c in rows[2]["link_health"]["clients"]:      # the step, read on client 1 against the composite
        want = STEP * (2 / 3 if c["client"] == CLIENT else -1 / 3)
        assert abs(c["phase_rad"] - want) < 0.05, c
    for r in rows[:2]:                   # calm: the calibrated profile holds at scale 1
        assert r["jammer_profile"] == "scale" and abs(r["jammer_delivered_ratio"] - 1) < 0.05, r
    weak = rows[2]                       # 2 dB down: 0.63 of the power, the same profile
    assert weak["jammer_profile"] == "scale" and abs(weak["jammer_delivered_ratio"] - 10 ** -0.2) < 0.05, weak
    assert weak["jammer_charged_bound"] is not None and weak["jammer_charged_sigma_eff"] is not None
    ledger = [json.loads(x) for x in (out / "privacy_ledger.jsonl").read_text().splitlines() if x.strip()]
    charges = [x for x in ledger if (x.get("extra") or {}).get("jammer_shortfall")]
    assert any(x["round"] == 3 and x["extra"]["jammer_shortfall"]["per_subcarrier"] for x in charges), charges
    booked = [x for x in ledger if x["uses_data"] and not x["extra"].get("fault")]
    assert all(x["extra"]["jammer_subcarriers"]["lower_db"][0] < -8 for x in booked)
    summary = json.loads((out / "summary.json").read_text())
    eps = independent_pld_epsilon(ledger, float(summary.get("delta", 1e-5)))
    print(f"eps: ledger {summary['eps_pld']:.4f}, dp-accounting {eps:.4f}")
    assert eps == pytest.approx(summary["eps_pld"], rel=2e-3)
    assert main(["verify", str(out)]) == 0
