"""`otafl-sdr audit`: an empirical lower bound on epsilon, measured through the air with canaries."""
