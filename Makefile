# The commands the README gives, by name. `make ci` runs what CI runs.
#
#   make test    the tests (the README's test command, then the test-hook
#                builds: the store's lookups closed or dropped mid-read and
#                catalog faults, the catalog's evictions after a failed commit)
#   make race    every package under the race detector (-short)
#   make fuzz    every fuzz target for FUZZTIME each (default 10s)
#   make crash   the long simulated power-loss and SIGKILL runs
#   make bench   the filter benchmarks
#   make compare filterstore vs peer libraries (bench/, its own module)
#   make lint    gofmt, go vet, staticcheck (pinned)
#   make demo    the quick-start job
#   make ci      .ci/run: lint, test, race, crash (shorter), fuzz, demo

CRASH_SEQS ?= 20000
CRASH_CYCLES ?= 1000
BENCH_PKGS ?= ./bloom/ ./cuckoo/
COMPARE_N ?= 1e6,1e7
COMPARE_ROUNDS ?= 3

.PHONY: test race fuzz crash bench compare lint demo ci

test:
	go test ./...
	go test -tags filterstore_testhooks -run 'TestLookupsRecheckAfterRead|TestCountAfterCloseReadsReusedRange|TestLanded' ./store/
	go test -tags filterstore_testhooks -run 'TestEvict' ./internal/catalog/

race:
	GORACE="atexit_sleep_ms=0 $$GORACE" go test -race -short ./...

fuzz:
	bash .ci/fuzz

crash:
	go test -count=1 -timeout 120m ./store/ -run SimulatedPowerLoss -crash.seqs=$(CRASH_SEQS)
	FILTERSTORE_CRASH_CYCLES=$(CRASH_CYCLES) go test -count=1 -timeout 60m -run TestRealCrashSIGKILL ./store/

bench:
	go test -run '^$$' -bench . $(BENCH_PKGS)

compare:
	cd bench && go run ./cmd/compare -n $(COMPARE_N) -rounds $(COMPARE_ROUNDS)

lint:
	bash .ci/lint

demo:
	go run ./cmd/demo

ci:
	bash .ci/run
