# ddptui developer targets. `make help` lists them.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help install demo test check lint format bench screenshot clean

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@echo "ddptui: creating $(VENV) and installing ddptui with its test tools and the CPU torch 2.13.0 wheel (a minute or two)"
	python3 -m venv $(VENV)
	$(PY) -m pip install -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)  ## Create .venv and install ddptui with the dev/test extras (CPU torch 2.13.0)

demo: install  ## Run the bundled 4-rank CPU DDP demo in the app
	@# status 1 = quit while ranks were still paused: how a demo normally ends, not an error
	$(VENV)/bin/ddptui --demo || [ $$? -eq 1 ]

test: install  ## Run the test suite (real ranks, real ptys, real gloo)
	$(PY) -m pytest

lint: install  ## ruff format --check, ruff check, mypy, import contracts
	$(VENV)/bin/ruff format --check src tests bench examples docs
	$(VENV)/bin/ruff check src tests bench examples docs
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: install  ## Reformat and autofix
	$(VENV)/bin/ruff format src tests bench examples
	$(VENV)/bin/ruff check --fix src tests bench examples

check: lint test  ## Lint, types, import contracts and tests (what CI runs)

bench: install  ## Benchmarks: every speed goal in one table (bench/all.py; BENCH_ARGS=--quick for a smoke run)
	$(PY) bench/all.py $(BENCH_ARGS)

screenshot: install  ## Regenerate docs/screenshot.svg from the demo
	$(PY) docs/screenshot.py

clean:  ## Remove the venv and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache src/*.egg-info
