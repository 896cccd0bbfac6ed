# otafl-sdr: two commands.  `make run` (set-up if needed, then the default hardware-free experiment)
# and `make test` (set-up if needed, then the whole test suite).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := gnuradio python3-uhd uhd-host python3-venv python3-zmq python3-pip python3-systemd python3-dev gcc libc6-dev
STAMP := $(VENV)/.setup-done
SIM_VENV := .venv-uhdsim
SIM_STAMP := $(SIM_VENV)/.setup-done
OUT ?=
CONFIG ?= sim_loopback/default.toml
PYTEST_ARGS ?=

.PHONY: setup run test test-fast bench clean system-packages

setup: $(STAMP) $(SIM_STAMP)

# UHD's device simulator (a simulated E320) runs in its own venv: the radio tests drive real UHD against it
$(SIM_STAMP): scripts/setup_uhd_sim.sh
	@$(MAKE) --no-print-directory system-packages
	@bash scripts/setup_uhd_sim.sh $(SIM_VENV)
	@touch $(SIM_STAMP)

system-packages:
	@if ! /usr/bin/python3 -c "import gnuradio.gr, gnuradio.uhd, gnuradio.zeromq, venv, systemd, sysconfig, os; \
	  assert os.path.exists(sysconfig.get_paths()['include'] + '/Python.h')" 2>/dev/null || ! command -v gcc >/dev/null; then \
	  echo "[setup] installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES) >/dev/null; \
	fi

$(STAMP): pyproject.toml scripts/constraints.sh
	@$(MAKE) --no-print-directory system-packages
	@[ -x $(PY) ] || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	@bash scripts/constraints.sh > $(VENV)/constraints.txt
	@echo "[setup] pip install (torch==2.13.0 CPU, system numpy kept)"
	@$(PY) -m pip install -q --upgrade "pip>=23" -c $(VENV)/constraints.txt
	@$(PY) -m pip install -q "torch==2.13.0" -c $(VENV)/constraints.txt
	@$(PY) -m pip install -q -e ".[test]" -c $(VENV)/constraints.txt
	@touch $(STAMP)
	@echo "[setup] done: $(VENV)"

# a results folder is never overwritten: without OUT=DIR each run gets results/NAME-TIMESTAMP
run: setup
	$(VENV)/bin/otafl-sdr run --config $(CONFIG) $(if $(OUT),--out $(OUT))

# the tiers (docs/testing.md) on every core (pytest-xdist); UHD simulator tests share one worker (xdist_group),
# the others at the lowest priority (tests/conftest.py). One worker per core: a third worker on two cores
# (the simulator group waits on its real-time simulators half its time) was 13 % faster here but starved the
# simulated lab in CI (capture overflows, unusable soundings: 4 failures in one run). The 30 slowest tests
# are listed at the end (where the 25 minutes go, in every CI log)
TEST_WORKERS ?= auto
FULL_WORKERS ?= $(shell nproc)
UNIT_TIER := not gnuradio and not uhd_sim and not net and not experiment and not slow

test: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -n $(FULL_WORKERS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

# the unit tier: no whole experiment, no GNU Radio flowgraph, no UHD simulator, no node process
test-fast: setup
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "$(UNIT_TIER)" $(PYTEST_ARGS)

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(SIM_VENV) results .pytest_cache
