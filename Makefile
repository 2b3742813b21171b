# Tally: `make run` starts everything locally, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
AWS_PORT ?= 5000
# Longest SQS batching window locally, in seconds (AWS uses the configured one, up to 60 s).
BATCHING_WINDOW ?= 5

.PHONY: run test check unit functional e2e bench trigger package clean vendor

$(BIN)/.installed: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(BIN)/.installed vendor
	$(BIN)/python -m tools.local_stack --port $(PORT) --aws-port $(AWS_PORT) --max-batching-window $(BATCHING_WINDOW)

test: check $(BIN)/.installed vendor
	$(BIN)/python -m pytest

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

bench: $(BIN)/.installed
	$(BIN)/python -m bench

# Run every scheduled handler of a running `make run` now.
trigger:
	kill -USR1 $$(cat .local-stack.pid)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# -- AWS: provision and deploy a stage, or package it for CloudFormation (README: Deploy to AWS)
STAGE ?= dev
.PHONY: deploy destroy

deploy: $(BIN)/.installed vendor
	$(BIN)/python -m tools.provision --stage $(STAGE)

destroy: $(BIN)/.installed
	$(BIN)/python -m tools.provision --stage $(STAGE) --delete

package: $(BIN)/.installed vendor
	$(BIN)/python -m tools.iam_policy --stage $(STAGE) $(if $(ACCOUNT),--account $(ACCOUNT))
	$(BIN)/python -m tools.cfn_template --stage $(STAGE) --output build/resources-$(STAGE).json
	AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(BIN)/chalice package --stage $(STAGE) \
		--merge-template build/resources-$(STAGE).json build/package-$(STAGE)
