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
