#!/usr/bin/env bash
# The GPU check of tensorbatch in two halves, for a GPU machine that has the
# CUDA (or ROCm) runtime but no Go toolchain:
#
#   scripts/gpu-run.sh build        # here: builds out/gpu (test binaries, bench)
#   scripts/gpu-run.sh run [cuda]   # there: smoke test + bench with device copies
#
# With the workplace's device tool: build here, then run
#   bash scripts/gpu-run.sh run cuda      with carry ["out/gpu"]
# Results go to $OUT (or out/gpu/results). The binaries are stripped so that
# out/gpu fits the device tool's carry limit (64 MiB). The run half skips the
# image and shard rows (their data, photos and S3 server live on the build
# machine, and they measure the CPU side) and runs PyTorch's DataLoader
# beside it under /usr/bin/python3, or under the python3 on PATH when only
# that one has torch (TB_PYTHON overrides both).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
kind=${2:-cuda}
case "$mode" in
build)
	export CGO_ENABLED=1 PATH="$PATH:/usr/local/go/bin"
	mkdir -p out/gpu
	go test -c -ldflags='-s -w' -o out/gpu/engine.test ./engine
	go test -c -ldflags='-s -w' -o out/gpu/csrc.test ./internal/csrc
	go build -ldflags='-s -w' -o out/gpu/bench ./bench
	echo "built: $(ls out/gpu)"
	;;
run)
	out=${OUT:-out/gpu/results}
	mkdir -p "$out"
	if [ -z "${TB_PYTHON:-}" ] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null &&
		python3 -c 'import torch' 2>/dev/null; then
		export TB_PYTHON=$(command -v python3)
	fi
	{
		echo "== machine"; nvidia-smi 2>/dev/null || rocm-smi 2>/dev/null || echo "no smi tool"
		echo "== smoke test ($kind)"
		TB_REAL_GPU=$kind out/gpu/engine.test -test.run '^TestRealGPUSmoke$' -test.v -test.count=1
		echo "== bench ($kind)"
		out/gpu/bench -backend "$kind" -no-images -no-shards -no-plots -out "$out"
	} 2>&1 | tee "$out/gpu-run.log"
	;;
*)
	echo "usage: $0 build | run [cuda|hip]" >&2
	exit 2
	;;
esac
