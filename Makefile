# keel: `make run` (embedded default: SQLite + filesystem broker) and `make test` (Postgres + Redis + Chromium).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/keel
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: run test lint install install-test services bench chaos clean

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -q -e '.[test]'
	touch $@

run: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0
	$(BIN)/python manage.py seed_demo
	@echo "Dashboard: http://127.0.0.1:8000/  (log in as manager to approve the demo report)"
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start -f Procfile

services:
	scripts/ensure-services

# The house rules, checked by tools: formatting and lint (ruff).
lint: install-test
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

test: install-test lint services
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install-test services
	$(BIN)/python bench/run.py

# Kill workers, restart Redis, duplicate messages under N executions (CHAOS_ARGS="--executions 500 --seed 1").
chaos: install-test services
	$(BIN)/python scripts/chaos.py $(CHAOS_ARGS)

clean:
	rm -rf var .pytest_cache
