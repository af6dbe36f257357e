# provider-canary: two commands matter: `make demo` (main job) and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# Python 3.12 (lingua 2.2 needs it): a pyenv version if there is one, else python3.12 on PATH.
PYTHON312 := $(shell PYENV_VERSION=$$(pyenv latest 3.12 2>/dev/null) pyenv which python3.12 2>/dev/null || command -v python3.12)

.PHONY: setup test lint typecheck pytest fleet demo ui-check bench scale-test postgresql clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON312)" || { echo "python3.12 not found (install it, or a pyenv 3.12 version)"; exit 1; }
	@test -x $(PY) || $(PYTHON312) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: setup
	$(VENV)/bin/mypy

# Two pytest-xdist workers, one per core (tests/conftest.py). A module's tests stay on one
# worker (`loadscope`), so a module-scoped fixture is built once; modules are handed out in
# collection order (the flow modules, the longest, early), not largest first. PYTEST_WORKERS=0
# runs the suite in one process.
PYTEST_WORKERS ?= 2
pytest: setup
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder

test: lint typecheck pytest

demo: setup
	$(VENV)/bin/canary demo

# The analyst's pages in headless Chromium (Debian's `chromium` package): block, status and
# round artifacts, the failing verdict task run, the report. Screenshots in $(UI_CHECK_DIR).
UI_CHECK_DIR ?= /tmp/ui-check
ui-check: setup
	@test -x /usr/bin/chromium || { echo "ui-check needs Debian's chromium: apt-get install -y chromium"; exit 1; }
	UI_CHECK_DIR=$(UI_CHECK_DIR) $(VENV)/bin/pytest -m browser tests/flows/test_ui_browser.py -p no:cacheprovider
	@echo "screenshots: $(UI_CHECK_DIR)"

fleet: setup
	$(VENV)/bin/canary fleet serve --scenario seed-incidents --host 127.0.0.1 --port 8600

bench: setup
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# Scale-out that has run (README "Scale-out"): a throwaway PostgreSQL cluster backing the
# Prefect server and the ledger, a process work pool, two workers, one round deployment per
# model, one scheduled slot of 20 models x 21 endpoints, then its per-round costs. Not part
# of `make test` (~3-4 min). The catalogue in miniature (docs/SCALE.md):
#   make scale-test SCALE_ARGS="--models 100 --endpoints 2-7"
scale-test: $(VENV)/.scale-installed postgresql
	$(PY) -m scale.slot_test $(SCALE_ARGS)

$(VENV)/.scale-installed: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[dev,scale]'
	@touch $@

# Debian's PostgreSQL server binaries (the scale test runs its own cluster with them).
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { \
	  test "$$(id -u)" = 0 || { echo "install PostgreSQL's server (apt-get install postgresql) or run as root"; exit 1; }; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
