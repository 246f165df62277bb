# keel: `make run` (embedded default: SQLite + filesystem broker) and `make test` (Postgres + Redis + Chromium).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
OIDC_PROVIDER := tests/support/oidc_provider
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/keel
# make test runs pytest in TEST_PROCESSES processes (pytest-xdist; 0: one, in make's own),
# each with a Redis database of its own: TEST_BROKER_URL lists at least that many,
# comma-separated. The suite mostly waits (timeouts, backoffs, leases), so three overlap
# it better than two even on two cores (docs/testing.md, Time).
TEST_PROCESSES ?= 3
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15,redis://127.0.0.1:6379/14,redis://127.0.0.1:6379/13

# Bytecode is written (__pycache__/, ignored by git) even where the environment says not to:
# the suite starts ~500 Python processes, and without it each one compiles keel's modules
# again (~0.2 s of CPU a process) and each pytest process re-rewrites every test module.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run run-web run-worker run-beat run-sandbox prepare test test-fast lint install install-test services bench bench-peers chaos fuzz clean

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test $(OIDC_PROVIDER)/node_modules/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The OpenID provider the single sign-on tests run (node-oidc-provider, tests/support/oidc_provider/):
# installed from its lock file again only when that changes.
$(OIDC_PROVIDER)/node_modules/.installed: $(OIDC_PROVIDER)/package-lock.json
	npm ci --prefix $(OIDC_PROVIDER) --no-audit --no-fund --loglevel=error
	touch $@

# The ports (make run PORT=8400 SANDBOX_PORT=8766): the Procfile reads them; the worker is
# pointed at that sandbox unless SANDBOX_URL says otherwise, and every process links to the
# dashboard on PORT in what it mails unless KEEL_BASE_URL says otherwise (issue 39, item 4).
PORT ?= 8000
SANDBOX_PORT ?= 8765
SANDBOX_URL ?= http://127.0.0.1:$(SANDBOX_PORT)
KEEL_BASE_URL ?= http://127.0.0.1:$(PORT)
PROCS = PATH="$(CURDIR)/$(BIN):$$PATH" WEB_PORT=$(PORT) SANDBOX_PORT=$(SANDBOX_PORT) SANDBOX_URL=$(SANDBOX_URL) \
	KEEL_BASE_URL=$(KEEL_BASE_URL) $(BIN)/honcho start -f Procfile

run: prepare
	@echo "Dashboard: http://127.0.0.1:$(PORT)/  (log in as manager to approve the demo report; sandbox on $(SANDBOX_URL))"
	$(PROCS)

# Each process alone, in a terminal of its own: stopping one leaves the others running
# (under `make run`, honcho stops them all when one exits).
run-web run-worker run-beat run-sandbox: run-%: prepare
	$(PROCS) $*

# seed_demo creates what is missing and changes nothing else (issue 39, item 5): a second
# `make run-worker` keeps everyone's password and session (var/demo-credentials.txt holds them).
prepare: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/python manage.py seed_demo

services:
	scripts/ensure-services

# The house rules, checked by tools: formatting and lint (ruff), the layers (import-linter).
lint: install-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# Everything: lint, then every test on real processes, a file per pytest process at a time (docs/testing.md).
test: install-test lint services
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The inner loop: every test that starts no process (no stack, no sandbox, no Chromium; one
# that tries is refused by KEEL_NO_PROCESSES and must be marked `processes`), test by test
# over FAST_PROCESSES pytest processes, on test databases kept between runs (--reuse-db;
# new migrations still apply), with 3 fuzz examples per operation instead of 10.
FAST_PROCESSES ?= 2
FAST_FUZZ_EXAMPLES ?= 3
test-fast: install-test services
	KEEL_NO_PROCESSES=1 KEEL_FUZZ_EXAMPLES=$(FAST_FUZZ_EXAMPLES) DATABASE_URL=$(TEST_DATABASE_URL) \
		CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/python -m pytest -m "not processes and not browser" \
		-n $(FAST_PROCESSES) --dist load --reuse-db $(PYTEST_ARGS)

# Into docs/BENCHMARKS.md: keel side by side with the peers (bench-peers, first, while the
# machine is quiet; skipped with a sentence when the peers' venv is missing, or with
# BENCH_PEERS=0), the hot-path profile, keel's own tables, the metrics endpoints and the
# triage console at 1M executions.
BENCH_PEERS ?= 1
bench: install-test services
	@if [ "$(BENCH_PEERS)" != 0 ] && [ -x "$(PEERS_PY)" ]; then $(MAKE) bench-peers; \
	else echo "bench: side by side skipped (BENCH_PEERS=0, or no peers venv at $(PEERS_PY): see docs/BENCHMARKS.md)"; fi
	$(BIN)/python bench/hotpath.py
	$(BIN)/python bench/tracing.py
	$(BIN)/python bench/access.py
	$(BIN)/python bench/anchors.py
	$(BIN)/python bench/run.py
	$(BIN)/python bench/metrics_scale.py
	$(BIN)/python bench/triage_scale.py
	$(BIN)/python bench/children.py
	$(BIN)/python bench/retention_scale.py
	$(BIN)/python bench/partitions.py
	$(BIN)/python bench/scaleout.py

# keel next to DBOS, LangGraph, a bare Celery chain and pgbench, in one run (docs/BENCHMARKS.md
# "Side by side"). Needs the peers' venv outside the repository (PEERS_PY), see docs/BENCHMARKS.md.
PEERS_DIR ?= ../shared/bench-peers
PEERS_PY ?= /tmp/peers-venv/bin/python
PEERS_RESULTS ?= /tmp/keel-bench-peers
PEERS_N ?= 1000
bench-peers: install-test services
	@test -x "$(PEERS_PY)" || { echo "bench-peers: no peers venv at $(PEERS_PY); make one outside the repository: python3 -m venv /tmp/peers-venv && /tmp/peers-venv/bin/pip install dbos 'celery[redis]' langgraph langgraph-checkpoint-postgres 'psycopg[binary,pool]' (or set PEERS_PY)" >&2; exit 1; }
	@test -x "$(PEERS_DIR)/run_all.sh" || { echo "bench-peers: no $(PEERS_DIR)/run_all.sh (set PEERS_DIR)" >&2; exit 1; }
	mkdir -p "$(PEERS_RESULTS)"
	PEERS_PY="$(PEERS_PY)" RESULTS_DIR="$(PEERS_RESULTS)" N=$(PEERS_N) OURS_CMD="$(BIN)/python bench/peers_row.py" "$(PEERS_DIR)/run_all.sh"
	$(BIN)/python bench/side_by_side.py "$(PEERS_RESULTS)"

# Kill workers, restart Redis, crash and restart PostgreSQL (a server of its own), duplicate
# messages under N executions (CHAOS_ARGS="--executions 500 --seed 1"; CHAOS_PG=… uses a shared server, not restarted).
chaos: install-test services
	$(BIN)/python scripts/chaos.py $(CHAOS_ARGS)

# The workflow fuzzer (S60; docs/testing.md, "The workflow fuzzer"): seed after seed from FUZZ_SEED,
# FUZZ_EXAMPLES generated workflows each, for FUZZ_SECONDS, on real processes; a failing case is shrunk
# and printed as its workflow module (and kept under var/fuzz/). `make test` runs one seed of it.
FUZZ_SECONDS ?= 600
FUZZ_SEED ?= 1
FUZZ_EXAMPLES ?= 10
fuzz: install-test services
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_SEED=$(FUZZ_SEED) FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) DATABASE_URL=$(TEST_DATABASE_URL) \
		CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/python -m pytest -n 0 -s -q -p no:cacheprovider \
		tests/scenarios/test_fuzz.py $(PYTEST_ARGS)

clean:
	rm -rf var .pytest_cache
