# tensorbatch: make test passes the tests, make bench runs the main job.
GO      ?= go
CC      ?= gcc
CSRC    := internal/csrc
export CGO_ENABLED := 1
export PATH := $(PATH):/usr/local/go/bin

.PHONY: all test race ctest vet lint bench bench-quick bench-peer soak deps clean

all: test

deps:
	scripts/install-deps.sh

# Everything CI checks: formatting and vet, the C core under sanitizers, the
# Go tests under the race detector.
test: deps lint ctest race test-adapters test-platforms-quick

race:
	GODEBUG=cgocheck=1 $(GO) test -race -count=1 ./...

# The adapters are modules of their own, so that the core never depends on a
# framework: vet, the tests under the race detector, the tests again without
# it (GoMLX's kernels run about 50x slower under -race, so the accuracy test
# of the GoMLX example runs only there), and go mod tidy.
.PHONY: test-adapters
test-adapters:
	cd adapters/gomlx && $(GO) vet ./... && \
		GODEBUG=cgocheck=1 $(GO) test -race -count=1 ./... && \
		$(GO) test -count=1 ./... && \
		$(GO) mod tidy -diff
	cd adapters/promstats && $(GO) vet ./... && GODEBUG=cgocheck=1 $(GO) test -race -count=1 ./... && $(GO) mod tidy -diff

vet:
	$(GO) vet ./...
	$(GO) build -tags hipcheck ./...
	$(GO) build -tags jpegcheck ./internal/csrc/
	$(CC) -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -DTB_NO_SIMD -fsyntax-only $(addprefix $(CSRC)/,tb_kernels.c $(IMAGE_SRC))

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change: $$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go mod tidy would change go.mod or go.sum (of the root module): run it"; exit 1; }

# C unit tests of internal/csrc under AddressSanitizer and UndefinedBehaviorSanitizer.
CTEST_FLAGS = -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=address,undefined \
	-fno-sanitize-recover=all -fno-omit-frame-pointer -D_GNU_SOURCE
ctest: bin/ctest bin/libfakecudart.so bin/ctest-image
	TB_FAKE_CUDART=$(CURDIR)/bin/libfakecudart.so ASAN_OPTIONS=detect_leaks=1 bin/ctest
	TB_TESTDATA=$(CURDIR)/vision/testdata ASAN_OPTIONS=detect_leaks=1 bin/ctest-image

# The image kernels (vision's C side) with the real libjpeg-turbo, the
# TurboJPEG encoder (shards write --resize), and the bench's TurboJPEG
# loader (bench/tb_turbo.c).
IMAGE_SRC = tb_jpeg_decode.c tb_jpeg_encode.c tb_resample_exact.c tb_resample_fast.c
IMAGE_C = $(addprefix $(CSRC)/,$(IMAGE_SRC) tb_dl.c tb_kernels.c) bench/tb_turbo.c
IMAGE_H = $(addprefix $(CSRC)/,tb_image.h tb_image_internal.h tb_jpeg.h tb_jpeg_encode.h tb_dl.h tb_kernels.h tb_simd.h) bench/tb_turbo.h
bin/ctest-image: $(CSRC)/ctest/image_ctest.c $(CSRC)/ctest/check.h $(IMAGE_C) $(IMAGE_H)
	@mkdir -p bin
	$(CC) $(CTEST_FLAGS) -ffp-contract=off -I$(CSRC) -Ibench -o $@ $(CSRC)/ctest/image_ctest.c $(IMAGE_C) -ldl -lm

bin/ctest: $(CSRC)/ctest/ctest.c $(CSRC)/ctest/check.h $(addprefix $(CSRC)/,tb_runtime.c tb_runtime.h tb_dl.c tb_dl.h tb_kernels.c tb_kernels.h tb_simd.h)
	@mkdir -p bin
	$(CC) $(CTEST_FLAGS) -ffp-contract=off -I$(CSRC) -o $@ $(CSRC)/ctest/ctest.c $(addprefix $(CSRC)/,tb_runtime.c tb_dl.c tb_kernels.c) -ldl -lpthread -lm

bin/libfakecudart.so: $(CSRC)/fakecudart/fakecudart.c
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

# Fuzzing: every fuzz target of the module (func FuzzX in a _test.go
# file, found by scripts/fuzz.sh), one at a time, FUZZTIME each with
# FUZZPARALLEL workers, each input found minimized for at most
# FUZZMINIMIZETIME (go test's default, 60 s per input, spends a short
# budget minimizing). The 13 targets of this writing take about 4
# minutes at 14s each, builds included. A failure prints its input's path
# (PKG/testdata/fuzz/FuzzX/ID): commit it with the fix, and it runs as an
# ordinary test from then on.
FUZZTIME ?= 14s
FUZZMINIMIZETIME ?= 200x
FUZZPARALLEL ?= 2
.PHONY: fuzz
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) FUZZPARALLEL=$(FUZZPARALLEL) scripts/fuzz.sh

# Other platforms, from this linux/amd64 machine (README, Platforms):
# CGO_ENABLED=0 builds and tests the whole module; macOS builds and vets
# with cgo off (no macOS cross toolchain here); Windows (mingw-w64, wine64)
# and linux/arm64 (gcc-aarch64-linux-gnu, qemu-user) run the test binaries
# of PLATFORM_PKGS emulated (scripts/platforms.sh). make test runs the quick
# set: no-cgo tests but the bench harness's, the core vetted for macOS, and
# the platform digests plus a fake-GPU loader test under wine and qemu, and
# vision's kernels and goldens there.
PLATFORM_PKGS = ./internal/csrc ./collate ./pinned ./engine
# vision runs on both too; under wine without the tests whose t.TempDir
# holds files: Go's os.RemoveAll asks for FileDispositionInformationEx,
# which wine 8 does not implement ("Invalid function"), where Windows 10
# and later do.
VISION_WINE_SKIP = TestFashionPNGFolder|TestImageFolderFollowsTorchvision|TestImageFolderErrors|TestBadFilesAreSampleErrors|TestPixelLimitBeforeAllocation|TestFileList|TestBatchesIdenticalForAnyWorkers
PLATFORM_QUICK = TestPlatformDigests|TestDeviceCopiesMatchTheHostBatch
VISION_QUICK = TestKernelsMatchGoReference|TestGolden
.PHONY: test-platforms test-platforms-quick test-nocgo test-darwin test-windows test-arm64
test-platforms: test-nocgo test-darwin test-windows test-arm64

test-platforms-quick:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) test -count=1 $$(CGO_ENABLED=0 $(GO) list ./... | grep -v /bench)
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(PLATFORM_PKGS)
	scripts/platforms.sh windows -run '$(PLATFORM_QUICK)' ./engine
	scripts/platforms.sh arm64 -run '$(PLATFORM_QUICK)' ./engine
	scripts/platforms.sh windows -run '$(VISION_QUICK)' ./vision
	scripts/platforms.sh arm64 -run '$(VISION_QUICK)' ./vision

test-nocgo:
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./...

test-darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...
	GOOS=darwin GOARCH=amd64 CGO_ENABLED=0 $(GO) build ./...

test-windows:
	GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc $(GO) vet ./...
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) build ./...
	scripts/platforms.sh windows $(PLATFORM_PKGS)
	scripts/platforms.sh windows -skip '$(VISION_WINE_SKIP)' ./vision

test-arm64:
	scripts/platforms.sh arm64 $(PLATFORM_PKGS) ./vision ./shards

clean:
	rm -rf bin bench/results
