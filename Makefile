# spillway — the two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
ARGS   ?=

.PHONY: run test lint typecheck unit bench clean java setup properties browser readme kafka-jars

UI_STAMP := spillway/ui/static/vendor/.bundled

setup: $(STAMP) java kafka-jars $(UI_STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) scripts/check_python.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

java:
	@sh scripts/check_java.sh

# The dashboard's chart library, bundled from web/package-lock.json (never fetched at run time).
$(UI_STAMP): web/package.json web/package-lock.json scripts/bundle_ui.sh
	@sh scripts/bundle_ui.sh
	@touch $@

# Debian's Chromium for the dashboard's browser test (installed with apt-get when missing).
browser:
	@sh scripts/check_browser.sh

# The pinned Kafka broker and Spark Kafka-connector jars, from Maven Central into
# ~/.cache/spillway (outside the repo); a no-op once there. See spillway/kafka/jars.py.
kafka-jars: $(STAMP)
	@$(BIN)/spillway kafka fetch

run: setup
	$(BIN)/spillway run $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check spillway tests
	$(BIN)/ruff format --check spillway tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: setup browser
	$(BIN)/python -m pytest -q -m "not slow" --timeout=900 --durations=30

test: lint typecheck unit

# The whole property suite (32 seeded configs, each a short Spark run; about 25 min); make test
# runs its first 8. One line per config in runs/properties/summary.jsonl.
properties: setup
	rm -rf runs/properties
	SPILLWAY_PROPERTY_CONFIGS=32 SPILLWAY_PROPERTY_OUT=runs/properties \
		$(BIN)/python -m pytest -q tests/properties --timeout=3600

# The README's and examples' runs, shortened, the example node as shipped among them (a few
# minutes; make test runs the quick commands).
readme: setup
	$(BIN)/python -m pytest -q -m readme tests/cli/test_readme_commands.py --timeout=3600

bench: setup
	$(BIN)/spillway bench --quick --out runs/bench

clean:
	rm -rf $(VENV) runs spark-warehouse .pytest_cache .mypy_cache .ruff_cache web/node_modules \
		spillway/ui/static/vendor
