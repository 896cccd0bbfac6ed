"""A results page keeps why a cell was refused (issue 37): a cell its set-up refuses (the planner's one line, e.g.
a jammer that would need more than power.jammer_max_snr_db) finishes no run and so has no compact data; the page
data keeps its refusal in ``cells/refused.json`` so the page, regenerated anywhere, says why instead of "not
run". Only set-up refusals are kept (deterministic from the cell's config); a crash is not, and a cell that
finishes later leaves the file; a file that is not a table of refusals is refused in one line."""
import json
from pathlib import Path

import pandas as pd
import pytest

from test_page_data_paths import _regenerate_command
from otafl_sdr.cli.main import build_parser
from otafl_sdr.errors import UserError
from otafl_sdr.sweeps.cell_overrides import apply_overrides
from otafl_sdr.sweeps import page_data
from otafl_sdr.sweeps.sweep import load_spec

SPEC = "sim_loopback/compare/paper000_jammer.toml"
WHY = "failed: UserError: cannot plan round 1: the jammer would need 94.8 dB above the noise (power.jammer_max_snr_db = 90)"


def _table(statuses: dict) -> pd.DataFrame:
    return pd.DataFrame.from_records([{"dir": k, "status": v} for k, v in statuses.items()])


def test_a_refused_cell_is_kept_a_crash_is_not_and_a_finished_one_leaves(tmp_path):
    spec = load_spec(SPEC, None)
    a, b, c = [x.label for x in spec.cells()[:3]]
    page = tmp_path / "docs" / "results" / "p.md"
    kept = page_data.record_refused(spec, page, _table({a: WHY, b: "failed: OSError: [Errno 28] No space left on device",
                                                         c: "ran"}), have={})
    assert kept == {a: WHY} and page_data.read_refused(spec, page) == {a: WHY}
    table = page_data.page_table(spec, {}, page_data.read_refused(spec, page))
    status = dict(zip(table["dir"], table["status"]))
    assert status[a] == WHY and status[b] == page_data.NOT_IN_DATA
    # the refused cell ran later (another jammer limit): it leaves the file, and an empty table leaves no file
    assert page_data.record_refused(spec, page, _table({a: "ran"}), have={a: None}) == {}
    assert not (page_data.cells_folder(page) / page_data.REFUSED).exists()


@pytest.mark.parametrize("text", ['{"x": "ran"}', '["failed: UserError: x"]', '{"x": 3}', "not json"])
def test_a_refused_file_that_is_not_a_table_of_refusals_is_refused_in_one_line(tmp_path, text):
    spec = load_spec(SPEC, None)
    page = tmp_path / "p.md"
    page_data.cells_folder(page).mkdir(parents=True)
    (page_data.cells_folder(page) / page_data.REFUSED).write_text(text)
    with pytest.raises(UserError) as e:
        page_data.read_refused(spec, page)
    assert "\n" not in str(e.value) and str(page_data.cells_folder(page) / page_data.REFUSED) in str(e.value)


def test_the_shipped_refusals_name_cells_of_their_pages_spec():
    """Every refusal a shipped page keeps names a cell of that page's spec (as its regenerate command reads it)."""
    for path in Path("docs/results").glob(f"*/{page_data.CELLS}/{page_data.REFUSED}"):
        page = path.parent.parent.with_suffix(".md")
        args = build_parser().parse_args(_regenerate_command(page))
        spec = load_spec(args.spec, args.out)
        apply_overrides(spec, args.seeds, args.set)
        kept = page_data.read_refused(spec, page)
        assert kept and len(kept) == len(json.loads(path.read_text())), path
