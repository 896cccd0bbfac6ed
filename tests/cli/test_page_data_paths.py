"""Each of the six shipped results pages finds its compact cell data where its campaign will commit it: the
command on the page's marker line (`compare SPEC ... --report-only --page docs/results/NAME.md`) parses, names
its own page, and reads its cells from ``docs/results/NAME/cells/<cell>/``, one folder per cell of its spec,
beside the figures the page already has (sweeps/page_data.py). The data itself comes from the campaigns."""
import shlex
import shutil
from pathlib import Path

import pytest

from otafl_sdr.cli.main import build_parser
from otafl_sdr.sweeps.cell_overrides import apply_overrides
from otafl_sdr.sweeps.page import MARKER, MARKER_LINES, check_page
from otafl_sdr.sweeps.page_data import CELLS, cells_folder
from otafl_sdr.sweeps.sweep import load_spec

PAGES = ("paper000_jammer", "paper000_no_jammer", "paper001_cdpb", "paper002_fdp", "paper003_otafd", "paper004_fig7")


def _regenerate_command(page: Path) -> list[str]:
    """The page's own regenerate command (its marker line), as argv after `otafl-sdr`."""
    head = page.read_text(encoding="utf-8").splitlines()[:MARKER_LINES]
    line = next(ln for ln in head if ln.startswith(MARKER))
    argv = shlex.split(line[len(MARKER):].split("`", 1)[0])
    assert argv[0].endswith("otafl-sdr")
    return argv[1:]


def test_the_six_pages_are_shipped():
    assert sorted(p.stem for p in Path("docs/results").glob("*.md") if p.name != "README.md") == sorted(PAGES)


@pytest.mark.parametrize("name", PAGES)
def test_a_shipped_page_regenerates_from_its_cells_folder(name, tmp_path):
    page = Path("docs/results") / f"{name}.md"
    args = build_parser().parse_args(_regenerate_command(page))
    assert args.report_only and Path(args.page) == page
    assert cells_folder(args.page) == Path("docs/results") / name / CELLS
    spec = load_spec(args.spec, args.out)
    apply_overrides(spec, args.seeds, args.set)
    labels = [c.label for c in spec.cells()]
    assert len(set(labels)) == len(labels) and all("/" not in x and x not in ("", ".", "..") for x in labels)
    assert all((cells_folder(args.page) / x).parent == cells_folder(args.page) for x in labels)
    # the page accepts its cells folder beside its figures (a copy, so nothing is written into the repository)
    copy = tmp_path / "docs" / "results" / f"{name}.md"
    shutil.copytree(page.parent / name, copy.parent / name)
    shutil.copyfile(page, copy)
    (cells_folder(copy) / labels[0]).mkdir(parents=True, exist_ok=True)     # a page with or without its cells yet
    assert check_page(copy) == copy
