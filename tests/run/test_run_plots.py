"""A run's figures (run_plots): PNG, PDF and SVG each; x in whole client rounds (Upcycled-FL's server-only
step drawn at its client round, never at +0.5); its NMSE and theory connected over the client iterations;
the epsilon axis labelled with plain numbers, ε with its δ."""
import math

from otafl_sdr.results.files import plot_rounds
from otafl_sdr.results.run_plots import per_client_round


def _upcycled_rows(n=8):
    """Upcycled-FL: odd iterations use the clients (an aggregate, its NMSE), even ones are server-only."""
    rows = []
    for it in range(1, n + 1):
        data = it % 2 == 1
        rows.append({"round": it, "client_round": (it + 1) // 2, "uses_clients": data,
                     "test_accuracy": 0.1 + 0.05 * it, "train_loss": 2.0 / it,
                     "aggregate_nmse": 3.0 / it if data else None, "aggregate_nmse_theory": 2.9 / it if data else None,
                     "eps_pld": 0.3 * math.ceil(it / 2), "eps_rdp": 0.35 * math.ceil(it / 2)})
    return rows


def test_run_figures_in_three_formats_against_client_rounds(tmp_path):
    rows = _upcycled_rows()
    written = plot_rounds(tmp_path, rows, {"eps_target": 1.2, "delta": 1e-5, "algorithm": "upcycled_fl"})
    assert [p.name for p in written] == ["accuracy.png", "loss.png", "epsilon.png", "nmse.png"]
    for p in written:
        for fmt in ("png", "pdf", "svg"):
            assert p.with_suffix(f".{fmt}").stat().st_size > 1000, (p.name, fmt)
    xs, ys = per_client_round(rows, "test_accuracy")     # the server-only step's model: after its client round
    assert xs == [1, 2, 3, 4] and ys == [rows[i]["test_accuracy"] for i in (1, 3, 5, 7)]
    xs, ys = per_client_round(rows, "aggregate_nmse_theory")
    assert xs == [1, 2, 3, 4] and len(ys) == 4                              # one line through every client round
    svg = (tmp_path / "nmse.svg").read_text()
    assert "theory" in svg and "client round" in svg
    eps = (tmp_path / "epsilon.svg").read_text()
    labels = [t for t in ("0.3", "0.5", "1", "2") if f">{t}<" in eps.replace(" ", "")]
    assert len(labels) >= 3 and "\u03b4 = 1e-05" in eps                     # plain numbers, several of them
