"""``python -m otafl_sdr.cli``: the same as the `otafl-sdr` command."""
from otafl_sdr.cli.main import main

raise SystemExit(main())
