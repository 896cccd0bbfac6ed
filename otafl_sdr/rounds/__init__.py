"""The round, written once: plan -> account -> record -> release -> step -> row (``pipeline``), the
ledger's restatement of a plan and the release rule (``accounting``), the in-process transport over an
air (``in_process``), and privacy targeting over the run's planned rounds (``targeting``)."""
