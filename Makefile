# Ranch: the two set-up commands are `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
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
	touch $(STAMP)

test: $(STAMP)
	$(COMPILE)
	$(BIN)/ruff check .
	$(BIN)/mypy ranch
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .

demo: $(STAMP)
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
