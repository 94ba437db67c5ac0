# The two commands: `make demo` and `make test`. Everything runs from .venv, made on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: demo test test-unit lint format bench soak screenshots clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "lockconsole needs Python 3.11 or newer (set PYTHON=python3.x)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lockconsole demo $(ARGS)

# The whole suite on TEST_WORKERS pytest-xdist workers, a test file per worker at a time (a
# module's fixtures are built once); most tests wait on servers, processes and timers, so three
# workers pay on two cores. TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= 3
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The unit tier: pure tests, no server (the `unit` mark, set by tests/conftest.py), under a minute.
test-unit: $(STAMP)
	$(BIN)/python -m pytest -m unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check lockconsole tests $(wildcard bench)
	$(BIN)/ruff format --check lockconsole tests $(wildcard bench)
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format lockconsole tests bench
	$(BIN)/ruff check --fix lockconsole tests bench

bench: $(STAMP)
	$(BIN)/python -m bench

soak: $(STAMP)
	LOCKCONSOLE_SOAK=long $(BIN)/python -m pytest tests/faults -k soak -s

screenshots: $(STAMP)
	$(BIN)/python -m lockconsole.tui.screenshots screenshots
	$(BIN)/lockconsole demo --screenshot screenshots/demo.svg --for 30

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
