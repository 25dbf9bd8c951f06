# Ranch: the two set-up commands are `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make demo` installs ranch alone (~45 MB of venv); `make test` adds the [test] extra on top
# (~200 MB: mypy, ruff, hypothesis...). Each has its own stamp; test's install is a superset, so
# it stamps demo's too, and a demo after a test installs nothing.
DEMO_STAMP := $(VENV)/.installed-demo
# The packages whose bytecode the commands load. These machines set PYTHONDONTWRITEBYTECODE=1, so
# with the editable install nothing would ever write it and every command would compile the
# modules it imports on every call (rbatch: ~15 ms of CPU); compileall only rewrites what changed.
PKGS := ranch
COMPILE := $(BIN)/python -m compileall -q -j 0 $(PKGS)

.PHONY: demo test lint bench clean man

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(DEMO_STAMP)

# The suite runs on TEST_WORKERS pytest-xdist workers: most of its time is spent waiting on
# daemons (real Slurm, rctld, rnoded), which overlaps well even on 2 cores. --dist loadgroup with
# the groups tests/conftest.py gives: the namespace labs on one worker, a module's tests (its
# cluster fixture) on one worker. TEST_WORKERS=0 runs it in one process. The options go through
# PYTEST_ADDOPTS so the command line stays the one `pgrep` finds a full run by; --durations
# leaves what the time went to at the end of every run's output (CI's included).
TEST_WORKERS ?= 2

test: $(STAMP)
	$(COMPILE)
	$(BIN)/ruff check .
	$(BIN)/mypy ranch
	PYTEST_ADDOPTS="-n $(TEST_WORKERS) --dist loadgroup --durations=40 $$PYTEST_ADDOPTS" \
		$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .

# Runs as any user: everything it writes while it runs is in its temp directory (./demo-run).
demo: $(DEMO_STAMP)
	$(COMPILE)
	$(BIN)/python examples/demo.py

# The man pages, from the programs' own option tables (commit them: they install with the package).
man: $(STAMP)
	$(BIN)/python man/generate.py

bench: $(STAMP)
	$(COMPILE)
	$(BIN)/python bench/run_all.py
	$(BIN)/python bench/http_bench.py

clean:
	rm -rf $(VENV) build *.egg-info
	find $(PKGS) -name __pycache__ -prune -exec rm -rf {} +
