"""`otafl-sdr audit`: an empirical lower bound on epsilon, measured through the air with canaries."""

DEFAULT_CANARIES = 8192      # trials (at most the model's dimension d)
