"""What the trackers (results/tracking.py) record of a run's config (issue 36, item 4): its hyperparameters
(every key of the resolved config, dotted, as TensorBoard's hparams plugin and MLflow's params take them:
bool, int, float or str; a list or table as its JSON text) and the resolved config as text (config.toml as the
run wrote it, config/schema.to_toml). ``HPARAM_METRICS``: the scalar tags the hparams table shows."""
from __future__ import annotations

import json

HPARAM_METRICS = ("test_accuracy", "test_loss", "train_loss", "sigma_eff")


def hparams(cfg) -> dict:
    """{dotted key: bool | int | float | str} of every key of ``cfg`` (a Config)."""
    from otafl_sdr.config.schema import to_dict

    out: dict = {}

    def walk(d: dict, prefix: str) -> None:
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v and prefix.count(".") < 1:
                walk(v, key + ".")
            elif isinstance(v, (bool, int, float, str)):
                out[key] = v
            else:
                out[key] = json.dumps(v, sort_keys=True, default=str)
    walk(to_dict(cfg), "")
    return out


def hparam_metrics(cfg) -> list[str]:
    """The scalar tags beside the hyperparameters: the accuracy and losses and every reported epsilon."""
    eps = [f"eps_{a}" for a in dict.fromkeys([cfg.privacy.accountant, *cfg.privacy.report])]
    return [*HPARAM_METRICS, *eps]


def config_text(cfg) -> str:
    """The resolved config as TOML."""
    from otafl_sdr.config.schema import to_toml
    return to_toml(cfg)


__all__ = ["HPARAM_METRICS", "config_text", "hparam_metrics", "hparams"]
