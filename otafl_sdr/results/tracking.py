"""Experiment tracking from the round hook (issue 27 item 6, issue 36 item 4): ``run.tensorboard = true``
writes event files into DIR/tensorboard (this module's :class:`TensorBoardWriter`), ``run.mlflow = true`` the
same to an MLflow store (results/mlflow_tracking.py); :class:`Trackers` is what the orchestrator calls.

What is written (results/tracked_row.py, tracked_config.py, constellation.py): each row's numbers as scalars
at the client round (a server-only iteration's under ``server_step/``), the uhd air's link health
(``link/...``, per client ``link/client_<i>/...``), the received reference's constellation as an image per
round (``link/constellation``), the config's hyperparameters (TensorBoard's hparams plugin) and the resolved
config as text (``config``). A live view of a running lab: ``tensorboard --logdir DIR`` (docs/lab.md).

Resume: TensorBoard's new event file purges the steps from the last client round the kept rows reached on
(what the crashed session wrote past its checkpoint), and those rows are written again, so each client round
shows once with the final rows' values; MLflow gets a new run per session, every kept row logged again."""
from __future__ import annotations

from pathlib import Path

from otafl_sdr.results.constellation import CONSTELLATION_TAG, reference_image
from otafl_sdr.results.tracked_row import tracked

CONFIG_TAG = "config"


class TensorBoardWriter:
    """``w = TensorBoardWriter(out, cfg, kept_rows, resuming); w(row)`` for each row; ``w.close()``."""

    def __init__(self, out: Path, cfg, kept_rows: list[dict] = (), resuming: bool = False):
        from torch.utils.tensorboard import SummaryWriter
        kept = [tracked(r) for r in kept_rows]
        purge = (max(t.step for t in kept) if kept else 1) if resuming else None
        self.writer = SummaryWriter(log_dir=str(Path(out) / "tensorboard"), purge_step=purge)
        if not resuming:
            self._config(cfg)
        for row, t in zip(kept_rows, kept):
            if purge is not None and t.step >= purge:
                self(row)

    def _config(self, cfg) -> None:
        from torch.utils.tensorboard.summary import hparams as hparams_summaries

        from otafl_sdr.results.tracked_config import config_text, hparam_metrics, hparams
        exp, ssi, sei = hparams_summaries(hparams(cfg), {m: 0.0 for m in hparam_metrics(cfg)})
        for s in (exp, ssi, sei):
            self.writer.file_writer.add_summary(s, 0)
        text = config_text(cfg)
        self.writer.add_text(CONFIG_TAG, "    " + text.replace("\n", "\n    "), 0)   # markdown: preformatted
        self.writer.flush()

    def __call__(self, row: dict) -> None:
        t = tracked(row)
        for tag, v in t.scalars.items():
            self.writer.add_scalar(tag, v, t.step)
        img = reference_image(t)
        if img is not None:
            self.writer.add_image(CONSTELLATION_TAG, img, t.step, dataformats="HWC")
        self.writer.flush()

    def close(self, stopped: str = "") -> None:
        self.writer.close()


class Trackers:
    """Every tracker the config asks for: ``t(row)`` after each row is written, ``t.close(stopped)``."""

    def __init__(self, cfg, out: Path, kept_rows: list[dict] = (), resuming: bool = False):
        self.writers: list = []
        try:
            if cfg.run.tensorboard:
                self.writers.append(TensorBoardWriter(out, cfg, kept_rows, resuming))
            if cfg.run.mlflow:
                from otafl_sdr.results.mlflow_tracking import MlflowWriter
                self.writers.append(MlflowWriter(out, cfg, kept_rows, resuming))
        except BaseException:
            self.close("failed")
            raise

    def __call__(self, row: dict) -> None:
        for w in self.writers:
            w(row)

    def close(self, stopped: str = "") -> None:
        for w in self.writers:
            w.close(stopped)
        self.writers = []


__all__ = ["CONFIG_TAG", "TensorBoardWriter", "Trackers"]
