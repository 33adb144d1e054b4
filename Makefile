# The README's two commands: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/strata serve --data-dir ./data

test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
