"""What a run computes, built once for every entry point (the in-process experiment, the testbed's server
and its nodes): data, trainer, algorithm, power policy, channels and CSI (``parts.build_run``), and the
workload that turns a round's local computation into a payload and a received aggregate into the next
model (``updates``: FL updates; ``distillation``: paper 003's OTA-FD); how the ledger books a plan's
mechanism (``booking``) and the privacy target solved over the run's planned rounds (``targeting``). No
radio, no network, no ledger file."""
