# The two commands of the README: `make up` starts a cluster, `make test` runs every test.
# Both bootstrap what they need on a fresh machine: a venv in .venv and Debian's etcd-server.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.skiff-installed

.PHONY: up down test lint bench etcd bytecode compose-up compose-down

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Skiff needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

etcd:
	@command -v etcd >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian etcd-server"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; \
	  else \
	    echo "etcd is not installed: run 'sudo apt-get install etcd-server' and try again" >&2; exit 1; \
	  fi; }

# Where PYTHONDONTWRITEBYTECODE is set (as on this project's development machine) Python
# writes no bytecode, and every process a cluster or a test starts would compile Skiff's
# ~350 modules from source again (~0.4 s of CPU each); compiled here once, each start reads
# them.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 shared services >/dev/null

up: $(STAMP) etcd bytecode
	$(BIN)/skiff up $(ARGS)

down: $(STAMP)
	$(BIN)/skiff down

lint: $(STAMP)
	$(BIN)/ruff check .
	tools/typetree.sh
	$(BIN)/mypy

# Most tests wait on real processes, so they run in parallel (pytest-xdist) even on 2 cores;
# TEST_WORKERS=0 runs them one by one.
TEST_WORKERS ?= 4

test: $(STAMP) etcd lint bytecode
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --durations=25

compose-up: $(STAMP)
	PYTHON=$(BIN)/python deploy/compose/cluster.sh up --offline

compose-down:
	deploy/compose/cluster.sh down

bench: $(STAMP) etcd
	$(BIN)/python bench/apiserver.py
