# The README's two commands: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# hadoop-aws for Spark's s3a, extracted from a PyPI sdist (no Maven here): see pipeline/jars.py.
JARS_DIR := $(CURDIR)/.cache/jars
JARS := $(JARS_DIR)/hadoop-aws-3.3.1.jar
export STRATA_SPARK_JARS_DIR := $(JARS_DIR)

.PHONY: run test check install clean jars demo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

$(JARS): | $(STAMP)
	$(BIN)/python -m pipeline.jars $(JARS_DIR)

jars: $(JARS)

run: $(STAMP)
	$(BIN)/strata serve --data-dir ./data

demo: $(STAMP) $(JARS)
	$(BIN)/strata demo

test: $(STAMP) $(JARS)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
