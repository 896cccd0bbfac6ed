"""The run configuration's schema: the sections as dataclasses (schema, radio), TOML in and out, the
per-implementation option tables (options). Needs no registry: loading against the registered plugins,
validation and explanation live in :mod:`otafl_sdr.configure`."""
