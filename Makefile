# housekeeper — see README.md. `make run` and `make test` set up everything they need.
SHELL := /usr/bin/env bash
GO    ?= go
STATICCHECK_VERSION ?= v0.8.2
GOIMPORTS_VERSION   ?= v0.51.0
FUZZTIME ?= 1m

.DEFAULT_GOAL := help
.PHONY: help run test fuzz bench faults lint crds apis registry images release tools controlplane azurite s3 gcs swift etcdbr nats node docker

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

run: tools ## run the whole local stack (no Docker); NATS_NODES=3 runs NATS as a 3-node JetStream cluster
	$(GO) run ./scripts/cmd/localstack $(if $(NATS_NODES),-nats-nodes $(NATS_NODES))

# -p 4: most integration packages wait on servers, pods and timers; at -p 2 the run kept the two
# cores less than half busy (23 CPU minutes in 24.7). go test starts packages in the order it is
# given them: the longest suites first, so that none of them runs alone at the end.
TEST_FIRST := ./test/seed ./test/compose ./functions/entry ./test/conformance ./scripts/faults ./test/etcdbr ./test/autoscaling ./infra
# The fuzzing is bounded by a count of inputs, not a time: a -fuzztime duration is a context
# deadline, which a loaded machine can see expire in the middle of a worker's exchange with the
# coordinator, and go test then fails the run with "context deadline exceeded" (no input at fault).
test: tools ## unit and integration tests against the real components, then the event decoder fuzzed on 150,000 inputs
	@GO=$(GO) scripts/disk-room.sh
	$(GO) test -race -count=1 -p 4 -timeout 45m $(TEST_FIRST) ./...
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 150000x ./events/
	GO=$(GO) scripts/test-knative.sh
	GO=$(GO) scripts/test-monitoring.sh

fuzz: ## fuzz the event decoder for FUZZTIME (default 1m); a failing input lands in events/testdata/fuzz
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./events/

faults: tools ## the fault suite, full form: faults injected, time to converge, invariants
	$(GO) run ./scripts/cmd/faults $(if $(CLUSTER),-cluster)

bench: tools ## benchmarks, printed as tables
	$(GO) test -run '^$$' -bench . -benchmem -timeout 120m ./...

lint: ## gofmt, goimports (housekeeper's imports grouped last), go vet, staticcheck, and what the documents name (scripts/doclint)
	@out=$$(gofmt -l $$(git ls-files '*.go')); [[ -z "$$out" ]] || { echo "gofmt would change: $$out"; exit 1; }
	@out=$$($(GO) run golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION) -local github.com/housekeeper-dev/housekeeper -l $$(git ls-files '*.go' ':!:*zz_generated*')); \
	  [[ -z "$$out" ]] || { echo "goimports -local github.com/housekeeper-dev/housekeeper would change: $$out"; exit 1; }
	$(GO) vet ./...
	cd test/keda && $(GO) vet ./...
	cd test/knative && $(GO) vet ./...
	cd test/monitoring && $(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run ./scripts/cmd/doclint

crds: ## copy the BackupBucket/BackupEntry CRDs from the pinned Gardener module into infra/crds
	scripts/generate-crds.sh

apis: ## generate deepcopy and the backup.housekeeper.dev CRDs (infra/chart/files/crds) from functions/apis with controller-gen
	scripts/generate-apis.sh

registry: ## write what each function needs where it is deployed (infra/chart/files/functions.json), what the bridge watches (bridge.json) and the schema's lists of the functions (values.schema.json)
	$(GO) run ./scripts/cmd/registry

# The images' registry (the chart's, infra/chart/values.yaml; empty: bare names as docker
# compose uses) and tag (empty: v<appVersion> of infra/chart/Chart.yaml, the chart's default).
REGISTRY   ?= ghcr.io/housekeeper-dev
TAG        ?=
IMAGES_TAR ?= .local/images.tar

images: ## build every image (no Docker, nothing pulled) into IMAGES_TAR (.local/images.tar) for ctr/docker load, or PUSH=1 to REGISTRY/<name>:TAG; ONLY=a,b ARCH=arm64
	$(GO) run ./scripts/cmd/images -registry '$(REGISTRY)' $(if $(TAG),-tag '$(TAG)') $(if $(PUSH),-push,-o '$(IMAGES_TAR)') $(if $(ONLY),-only '$(ONLY)') $(if $(ARCH),-arch '$(ARCH)')

# make release: VERSION must be the tree's (infra/chart/Chart.yaml, functions/version); the images go
# to REGISTRY (as for images), the chart to CHART_REPOSITORY (default REGISTRY/charts), the Gardener
# registrations and the chart's .tgz into RELEASE_DIR.
RELEASE_DIR ?= .local/release
release: ## push VERSION's images and chart (as helm push does) to REGISTRY and write its Gardener registration into RELEASE_DIR (.local/release); CHART_REPOSITORY, ONLY, ARCH, ALLOW_DIRTY=1
	$(GO) run ./scripts/cmd/release -version '$(VERSION)' -registry '$(REGISTRY)' -o '$(RELEASE_DIR)' $(if $(CHART_REPOSITORY),-chart-repository '$(CHART_REPOSITORY)') $(if $(ONLY),-only '$(ONLY)') $(if $(ARCH),-arch '$(ARCH)') $(if $(ALLOW_DIRTY),-allow-dirty)

tools: ## build/install kube-apiserver, etcd, etcdbrctl with its etcd, Azurite, the S3 server (versitygw), the GCS server (fake-gcs-server), Swift with Keystone (Debian packages), nats-server, KEDA's operator and scaler and the test node (containerd, runc, CNI plugins, iptables, nftables from Debian; kubelet, kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS, kube-network-policies), Docker Engine (Debian) with Docker Compose v2, kubectl and etcdctl built from their modules into the cache (once), side by side
	@GO=$(GO) scripts/install-tools.sh

controlplane:
	@scripts/install-controlplane.sh >/dev/null

azurite:
	@scripts/install-azurite.sh >/dev/null

s3:
	@scripts/install-s3.sh >/dev/null

gcs:
	@scripts/install-gcs.sh >/dev/null

swift:
	@scripts/install-swift.sh >/dev/null

etcdbr:
	@scripts/install-etcdbr.sh >/dev/null

nats:
	@scripts/install-nats.sh >/dev/null

node:
	@scripts/install-node.sh >/dev/null

docker:
	@scripts/install-docker.sh >/dev/null
