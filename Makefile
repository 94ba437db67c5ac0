# The two commands: `make demo` and `make test`. Everything runs from .venv, made on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: demo test test-unit test-zones lint format bench bench-link soak screenshots clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "lockconsole needs Python 3.11 or newer (set PYTHON=python3.x)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lockconsole demo $(ARGS)

# The whole suite on three pytest-xdist workers, a test file per worker at a time
# (tests/conftest.py orders and groups the files: the longest first, the connection-heavy ones
# as one unit): about twice as fast as one process on two cores. TEST_WORKERS=0 runs it in this
# one process.
TEST_WORKERS ?= 3
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The unit tier: tests/unit, pure code, no server (tests/unit/conftest.py refuses every server
# fixture), on two pytest-xdist workers a test at a time (they share nothing), under a minute.
UNIT_WORKERS ?= 2
test-unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit -n $(UNIT_WORKERS) --dist load $(PYTEST_ARGS)

# The ledger, time and schedule tests again in a zone far from UTC (+13:45, with DST): a time
# stored or compared in local time instead of UTC passes under TZ=UTC and fails here.
ZONE_TESTS = tests/integration/test_ledger.py tests/unit/text/test_times.py tests/unit/model/test_slots.py \
             tests/integration/test_dst.py tests/unit/model/test_cron.py
test-zones: $(STAMP)
	TZ=Pacific/Chatham $(BIN)/python -m pytest $(ZONE_TESTS) -k 'not long_messages' $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check lockconsole tests tools $(wildcard bench)
	$(BIN)/ruff format --check lockconsole tests tools $(wildcard bench)
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff format lockconsole tests tools bench
	$(BIN)/ruff check --fix lockconsole tests tools bench

bench: $(STAMP)
	$(BIN)/python -m bench

# run_once against the naive four over a link of about 1 ms round trip (LINK_DELAY_MS each way)
LINK_DELAY_MS ?= 0.35
bench-link: $(STAMP)
	$(BIN)/python -m bench --link $(LINK_DELAY_MS)

soak: $(STAMP)
	LOCKCONSOLE_SOAK=long $(BIN)/python -m pytest tests/faults -k soak -s

screenshots: $(STAMP)
	$(BIN)/python -m tools.screenshots screenshots
	$(BIN)/lockconsole demo --screenshot screenshots/demo.svg --for 30

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
