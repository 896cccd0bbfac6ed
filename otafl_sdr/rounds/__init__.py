"""The round, written once: plan -> account -> record -> release -> step -> row (``pipeline``), the
release rule (``accounting``) and the in-process transport over an air (``in_process``)."""
