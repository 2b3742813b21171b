# Tally: `make run` starts everything locally, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
AWS_PORT ?= 5000
# Longest SQS batching window locally, in seconds (AWS uses the configured one, up to 60 s).
BATCHING_WINDOW ?= 5

.PHONY: run test check unit functional e2e in-process bench trigger package clean vendor fuzz

# chalice 1.34 (its packager) requires pip < 26.3.
$(BIN)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip<26.3"
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# Data is kept across runs in .local-stack/$(PORT)/ (docs/local-stack.md); FRESH=1 starts empty.
# The API is under the stage's path, http://127.0.0.1:$(PORT)/api/; BASE_PATH=/ serves it at the
# root, as a custom domain mapped at its root does. The tracker's function URL is served at
# http://127.0.0.1:$(PORT)/beacon-url/ (docs/local-stack.md).
run: $(BIN)/.installed vendor
	$(BIN)/python -m tools.local_stack --port $(PORT) --aws-port $(AWS_PORT) --max-batching-window $(BATCHING_WINDOW) $(if $(FRESH),--fresh) $(if $(BASE_PATH),--base-path $(BASE_PATH))

# The checks, the end-to-end tests and every other test side by side (pytest-xdist is not a
# dependency): the end-to-end tests mostly wait on their stacks and browsers while the others
# keep a core busy. The others run niced, so the stacks' timed work (Lambda timeouts, polls)
# gets the CPU first, as in a run of their own. Each part's output is printed whole when it
# ends; any failure fails the run.
test: $(BIN)/.installed vendor
	$(MAKE) --no-print-directory -j3 --output-sync=target check e2e in-process IN_PROCESS_NICE="nice -n 15"

# Lint, format, types and the import contracts (pyproject.toml): part of `make test`.
# The dashboard's pinned browser libraries (tools/vendor.json), fetched and checked; a no-op when
# already in place. Shipped inside the Lambda package (chalicelib/dashboard/vendor/).
vendor: $(BIN)/.installed
	$(BIN)/python -m tools.vendor

check: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(BIN)/.installed
	$(BIN)/python -m pytest tests/unit

functional: $(BIN)/.installed
	$(BIN)/python -m pytest tests/functional

e2e: $(BIN)/.installed vendor
	$(BIN)/python -m pytest tests/e2e

# Every test but the end-to-end ones: unit, functional, deploy (and any later directory).
in-process: $(BIN)/.installed
	$(IN_PROCESS_NICE) $(BIN)/python -m pytest --ignore=tests/e2e

# Schemathesis over the whole API on a fresh local stack, longer than `make test`'s run
# (tests/e2e/test_openapi_e2e.py): EXAMPLES generated requests per operation, SEED to vary it.
EXAMPLES ?= 300
SEED ?= 2
fuzz: $(BIN)/.installed vendor
	TALLY_SCHEMATHESIS_EXAMPLES=$(EXAMPLES) TALLY_SCHEMATHESIS_SEED=$(SEED) TALLY_SCHEMATHESIS_TIMEOUT=3600 \
		$(BIN)/python -m pytest tests/e2e/test_openapi_e2e.py -s -k schemathesis

bench: $(BIN)/.installed
	$(BIN)/python -m bench

# Run every scheduled handler of the `make run` serving PORT now.
trigger:
	@$(BIN)/python -m tools.local_stack --trigger --port $(PORT)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# -- AWS: provision and deploy a stage, or package it for CloudFormation (docs/deploy.md)
STAGE ?= dev
.PHONY: deploy destroy admin-key

deploy: $(BIN)/.installed vendor
	$(BIN)/python -m tools.provision --stage $(STAGE)

# One more admin key for a stage, printed once (docs/access.md).
admin-key: $(BIN)/.installed
	$(BIN)/python -m tools.keys create --stage $(STAGE) --scopes admin --note "admin key (make admin-key)"

destroy: $(BIN)/.installed
	$(BIN)/python -m tools.provision --stage $(STAGE) --delete

# Both refuse a stage whose names are still placeholders (REPORTS_BUCKET=...-change-me).
package: $(BIN)/.installed vendor
	$(BIN)/python -m tools.cfn_template --stage $(STAGE) --output build/resources-$(STAGE).json
	$(BIN)/python -m tools.iam_policy --stage $(STAGE) $(if $(ACCOUNT),--account $(ACCOUNT))
	AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(BIN)/chalice package --stage $(STAGE) \
		--merge-template build/resources-$(STAGE).json build/package-$(STAGE)
