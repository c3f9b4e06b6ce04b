# tensorbatch: make test passes the tests, make bench runs the main job.
GO      ?= go
CC      ?= gcc
export CGO_ENABLED := 1
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all test race ctest vet lint bench bench-quick bench-peer soak deps clean

all: test

deps:
	scripts/install-deps.sh

# Everything CI checks: formatting and vet, the C core under sanitizers, the
# Go tests under the race detector.
test: deps lint ctest race

race:
	GODEBUG=cgocheck=1 $(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
	$(GO) build -tags hipcheck ./...
	$(CC) -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -DTB_NO_SIMD -fsyntax-only csrc/tb_kernels.c

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go mod tidy would change go.mod or go.sum (of the root module): run it"; exit 1; }

# C unit tests of csrc under AddressSanitizer and UndefinedBehaviorSanitizer.
CTEST_FLAGS = -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer -D_GNU_SOURCE
ctest: bin/ctest bin/libfakecudart.so
	TB_FAKE_CUDART=$(CURDIR)/bin/libfakecudart.so ASAN_OPTIONS=detect_leaks=1 bin/ctest

bin/ctest: csrc/ctest/ctest.c csrc/tb_runtime.c csrc/tb_runtime.h csrc/tb_kernels.c csrc/tb_kernels.h
	@mkdir -p bin
	$(CC) $(CTEST_FLAGS) -ffp-contract=off -Icsrc -o $@ csrc/ctest/ctest.c csrc/tb_runtime.c csrc/tb_kernels.c -ldl -lpthread -lm

bin/libfakecudart.so: csrc/fakecudart/fakecudart.c
	@mkdir -p bin
	$(CC) -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined -fno-sanitize-recover=all \
		-shared -fPIC -D_GNU_SOURCE -o $@ $< -lpthread

bench: deps
	$(GO) run ./bench

bench-quick: deps
	$(GO) run ./bench -quick

bench-peer: deps
	$(GO) run ./bench -peer=only

# Fault-injection soak of the engine (bench/soak): random configs, injected
# faults, every invariant checked; prints its figures, fails on a violation.
SOAK_DURATION ?= 60s
soak:
	$(GO) run ./bench/soak -duration $(SOAK_DURATION)

clean:
	rm -rf bin bench/results
