"""The `otafl-sdr` command line: ``main`` (the parser and the exit statuses) and one module per command
family (run / report, node, calibrate). Nothing below imports this package."""
