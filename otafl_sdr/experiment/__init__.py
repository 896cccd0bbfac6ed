"""One experiment end to end: the run loop (orchestrator), its plan before anything runs (dry_run), the
offline check of a finished folder (verify) and the offline demodulation of a recorded round (replay)."""
