"""Experiment tracking from the round hook: ``run.tensorboard = true`` writes each round's numeric row
fields as TensorBoard scalars (step = the iteration) into DIR/tensorboard. Needs the tensorboard package
(config validation refuses the key in one line where it is not installed). A resumed run appends a new event
file that purges the steps from its first iteration on, so the rows redone after the last checkpoint are not
shown twice."""
from __future__ import annotations

import math
from pathlib import Path


class TensorBoardWriter:
    """``w = TensorBoardWriter(out); w(row)`` for each row; ``w.close()`` at the end."""

    def __init__(self, out: Path, purge_from: int | None = None):
        from torch.utils.tensorboard import SummaryWriter
        self.writer = SummaryWriter(log_dir=str(Path(out) / "tensorboard"), purge_step=purge_from)

    def __call__(self, row: dict) -> None:
        step = int(row.get("round", 0))
        for k, v in row.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and k != "round":
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
