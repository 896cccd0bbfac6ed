"""``run.mlflow = true`` (issue 36, item 4): what TensorBoard gets (results/tracking.py), logged to an MLflow
store with its client API: the rows' scalars as metrics at the client round, the hyperparameters as params,
the resolved config as the artifact ``config.toml``, each round's constellation as an image
(``link/constellation``, MLflow's step images).

The store: ``MLFLOW_TRACKING_URI`` where it is set (a lab's shared store or server; a new experiment in a local
``sqlite:///PATH`` keeps its artifacts in the folder beside PATH, never MLflow's default ./mlruns in the
working directory); else the run's own
``sqlite:///DIR/mlflow/mlflow.db`` with its artifacts in DIR/mlflow/artifacts (watch it with
``mlflow ui --backend-store-uri sqlite:///DIR/mlflow/mlflow.db``). The experiment is ``run.name``; the MLflow
run is named after DIR and tagged ``otafl.out`` (DIR) and ``otafl.session`` (new / resumed). Each session of
the run (a ``--resume``) is an MLflow run of its own holding every row of rounds.jsonl, the kept ones logged
again; it ends FINISHED, or KILLED when the run stopped early. A store that cannot be opened is refused in one
line (UserError) before round 1."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from otafl_sdr.errors import UserError
from otafl_sdr.results.constellation import CONSTELLATION_TAG, reference_image
from otafl_sdr.results.tracked_row import tracked

BATCH = 100        # MLflow's limit on params per log_batch call (metrics: 1000)


def store_uri(out: Path) -> tuple[str, str | None]:
    """(tracking URI, artifact location for a new experiment or None): the environment's, else DIR/mlflow."""
    env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if env.startswith("sqlite:///"):                # a local database: its artifacts beside it, not in the cwd
        return env, (Path(env[len("sqlite:///"):]).resolve().parent / "artifacts").as_uri()
    if env:
        return env, None
    folder = Path(out).resolve() / "mlflow"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


class MlflowWriter:
    """``w = MlflowWriter(out, cfg, kept_rows, resuming); w(row)`` for each row; ``w.close(stopped)``."""

    def __init__(self, out: Path, cfg, kept_rows: list[dict] = (), resuming: bool = False):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        from otafl_sdr.results.tracked_config import config_text, hparams
        out = Path(out)
        uri, artifacts = store_uri(out)
        logging.getLogger("mlflow").setLevel(logging.WARNING)      # not the store's table creation on stderr
        try:
            self.client = MlflowClient(tracking_uri=uri)
            exp = self.client.get_experiment_by_name(cfg.run.name)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(
                cfg.run.name, artifact_location=artifacts)
            run = self.client.create_run(exp_id, run_name=out.name, tags={
                "otafl.out": str(out.resolve()), "otafl.session": "resumed" if resuming else "new",
                "otafl.air": cfg.air.name})
        except Exception as e:  # noqa: BLE001 - MLflow's own errors: one line naming the store
            first = (str(e).splitlines() or [type(e).__name__])[0][:300]
            raise UserError(f"run.mlflow: cannot open the MLflow store '{uri}': {first}") from None
        self.run_id = run.info.run_id
        params = [Param(k, str(v)) for k, v in hparams(cfg).items()]
        for i in range(0, len(params), BATCH):
            self.client.log_batch(self.run_id, params=params[i:i + BATCH])
        self.client.log_text(self.run_id, config_text(cfg), "config.toml")
        for row in kept_rows:
            self(row)

    def __call__(self, row: dict) -> None:
        from mlflow.entities import Metric

        t = tracked(row)
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, t.step) for k, v in t.scalars.items()]
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + 1000])
        img = reference_image(t)
        if img is not None:
            self.client.log_image(self.run_id, img, key=CONSTELLATION_TAG, step=t.step)

    def close(self, stopped: str = "") -> None:
        status = "FINISHED" if not stopped or stopped == "completed" else "KILLED"
        self.client.set_terminated(self.run_id, status)


__all__ = ["MlflowWriter", "store_uri"]
