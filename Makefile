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
.PHONY: install lock lint unit e2e test demo demo-jax
# The lock files: exact versions with hashes, for every platform, Python 3.11.
LOCK := $(PYTHON) -m uv pip compile --quiet --generate-hashes --universal --python-version 3.11
PIP := $(PYTHON) -m pip install --quiet --disable-pip-version-check

install: ## Install the locked development tools (hash-checked), then the package (editable, --no-deps)
	@$(PIP) --require-hashes -r requirements/dev.txt
	@$(PIP) --no-deps -e .

lock: ## Refresh requirements/*.txt from pyproject.toml (LOCK_FLAGS=--upgrade to take new releases)
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || { echo "no uv: run make install first" >&2; exit 1; }
	$(LOCK) $(LOCK_FLAGS) pyproject.toml --extra dev -o requirements/dev.txt
	$(LOCK) $(LOCK_FLAGS) pyproject.toml -c requirements/dev.txt -o requirements/runtime.txt
	$(LOCK) $(LOCK_FLAGS) requirements/build.in -o requirements/build.txt
	$(LOCK) $(LOCK_FLAGS) --no-deps requirements/trainer.in -o requirements/trainer.txt

lint: ## ruff, mypy --strict (operator, bench), the import-layer contracts, the chart's CRD copy
	ruff check operator tests e2e bench hack examples
	ruff format --check operator tests e2e bench hack examples
	mypy
	mypy bench
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

demo-jax: install ## The JAX example training on the real nodes through a stopped kubelet (root)
	@PYTHON=$(PYTHON) $(PYTHON) e2e/demo.py --jax

.PHONY: bench
bench: ## The offline benchmarks (fixed sizing, failure simulation); see bench/README.md
	$(PYTHON) bench/fixed_sizing.py
	$(PYTHON) bench/failure_sim.py
