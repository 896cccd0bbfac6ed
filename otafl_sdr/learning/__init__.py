"""Data sets, partitions, models, local training and FL algorithms (torch). Importing registers them."""
