import os

import pytest
import torch

os.environ.setdefault("MPLBACKEND", "Agg")
torch.set_num_threads(1)


@pytest.fixture
def small_cfg():
    """A tiny, fast config (digits, few clients, few rounds) for end-to-end tests."""
    from otafl_sdr.config import load_config
    return load_config(None, [
        "run.rounds=3", "run.progress=false", "data.dataset=digits", "data.clients=5",
        "model.hidden=16", "train.local_epochs=1", "train.batch_size=32", "run.torch_threads=1",
    ])
