"""Each of the eight shipped results pages finds its compact cell data where its campaign will commit it: the
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
from otafl_sdr.sweeps import page_data
from otafl_sdr.sweeps.page_data import CELLS, cells_folder
from otafl_sdr.sweeps.sweep import load_spec

PAGES = ("paper000_jammer", "paper000_no_jammer", "paper001_cdpb", "paper002_fdp", "paper002_fdp_target",
         "paper002_fdp_target_k50", "paper002_fdp_target_m50", "paper002_fdp_target_m100", "paper003_otafd",
         "paper004_fig7", "paper004_fig7_mnist")


def _regenerate_command(page: Path) -> list[str]:
    """The page's own regenerate command (its marker line), as argv after `otafl-sdr`."""
    head = page.read_text(encoding="utf-8").splitlines()[:MARKER_LINES]
    line = next(ln for ln in head if ln.startswith(MARKER))
    argv = shlex.split(line[len(MARKER):].split("`", 1)[0])
    assert argv[0].endswith("otafl-sdr")
    return argv[1:]


def test_the_eight_pages_are_shipped():
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


@pytest.mark.experiment
@pytest.mark.parametrize("name", [p for p in PAGES if (Path("docs/results") / p / CELLS).is_dir()])
def test_a_page_with_committed_cells_regenerates_byte_for_byte(name, tmp_path, monkeypatch):
    """The page's own regenerate command, run as written from a copy of the repository's layout (the page,
    its figures and cells; the specs and presets), rebuilds the markdown and every PNG byte for byte from the
    committed cells alone: no run folder, nothing trained (issue 37's Done-when)."""
    from otafl_sdr.cli.main import main
    page = Path("docs/results") / f"{name}.md"
    root, argv = Path.cwd(), _regenerate_command(page)
    (tmp_path / "docs" / "results").mkdir(parents=True)
    shutil.copyfile(page, tmp_path / page)
    shutil.copytree(page.parent / name, tmp_path / page.parent / name)
    (tmp_path / "sim_loopback").symlink_to(root / "sim_loopback")
    for made in [tmp_path / page, *(tmp_path / page.parent / name).glob("*.png")]:
        made.unlink()                                     # what the command must make again
    monkeypatch.chdir(tmp_path)
    rc = main(argv)
    text = (tmp_path / page).read_text(encoding="utf-8")
    # a cell its campaign could not run (the planner refused it) has no run data: the page keeps and prints its
    # refusal (cells/refused.json) and the command exits 1, still writing the same page; no cell is "not run"
    refused = page_data.read_refused(load_spec(argv[1], None), tmp_path / page)
    assert rc == 0 or (rc == 1 and refused and all(why in text for why in refused.values())), rc
    assert page_data.NOT_IN_DATA not in text
    assert not any((tmp_path / "results").rglob("config.toml"))          # read from the cells, nothing run
    assert (tmp_path / page).read_bytes() == (root / page).read_bytes()
    pngs = sorted((root / page.parent / name).glob("*.png"))
    assert pngs and all((tmp_path / p.relative_to(root)).read_bytes() == p.read_bytes() for p in pngs)
