"""Data sets, partitions, models, local training and FL algorithms (torch). Importing registers them."""
from otafl_sdr.learning import datasets, partitions, models  # noqa: F401  (register DATASETS, PARTITIONS, MODELS)
from otafl_sdr.learning import idx_files, cifar_files, model_zoo  # noqa: F401  (mnist, fashion_mnist, cifar10/100; papers' models)
from otafl_sdr.learning.federated_data import FederatedData, load_federated  # noqa: F401
from otafl_sdr.learning.models import build_model  # noqa: F401
from otafl_sdr.learning.trainer import LocalTrainer, TrainResult  # noqa: F401
from otafl_sdr.learning import algorithms  # noqa: F401,E402
from otafl_sdr.learning import noisy_fedavg  # noqa: F401,E402  (registers noisy_fedavg, noisy_fedprox; paper 002)
from otafl_sdr.learning import partition_mix  # noqa: F401,E402  (registers iid_noniid_mix; paper 004)
from otafl_sdr.learning import otafd, partition_dominant  # noqa: F401,E402  (registers otafd, dominant_class; paper 003)
