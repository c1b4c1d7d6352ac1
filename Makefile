# Phased: common commands. `make help` lists them.
# (Add targets in the section that fits; keep each one a line of help.)

SHELL := bash
.DEFAULT_GOAL := help
PYTHON ?= python3

##@ Help
.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} \
	  /^##@/ {printf "\n%s\n", substr($$0, 5); next} \
	  /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Local test cluster (e2e/cluster; see e2e/README.md)
.PHONY: cluster cluster-down cluster-status
cluster: ## Start the local cluster (builds binaries on the first run)
	@PYTHON=$(PYTHON) bash e2e/cluster/up.sh

cluster-down: ## Stop the local cluster; fails if a process or port is left
	@bash e2e/cluster/down.sh

cluster-status: ## Show the local cluster's processes, nodes and kubeconfig
	@bash e2e/cluster/status.sh

##@ Development
.PHONY: install lint unit e2e test demo
install: ## Install the package and its development tools (pip install -e '.[dev]')
	@$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[dev]'

lint: ## ruff, mypy --strict, the import-layer contracts, the chart's CRD copy
	ruff check operator tests e2e bench hack
	ruff format --check operator
	mypy
	lint-imports
	$(PYTHON) hack/sync-chart-crds.py --check

unit: ## The fast tests: no cluster
	$(PYTHON) -m pytest tests -q

e2e: ## The end-to-end suite on the running local cluster (make cluster first)
	PHASED_E2E=1 $(PYTHON) -m pytest e2e -q -p no:cacheprovider

test: install lint unit ## Everything CI runs: lint, unit tests, then e2e on a fresh local cluster
	@PHASED_CLUSTER_RECREATE=1 PYTHON=$(PYTHON) bash e2e/cluster/up.sh
	@status=0; PHASED_E2E=1 $(PYTHON) -m pytest e2e -q -p no:cacheprovider || status=$$?; \
	  bash e2e/cluster/down.sh || status=$${status:-1}; exit $$status

demo: install ## A local cluster, the operator, and a four-phase job to watch (with a node failure)
	@PYTHON=$(PYTHON) $(PYTHON) e2e/demo.py

.PHONY: bench
bench: ## The offline benchmarks (fixed sizing, failure simulation); see bench/README.md
	$(PYTHON) bench/fixed_sizing.py
	$(PYTHON) bench/failure_sim.py
