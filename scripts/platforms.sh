#!/usr/bin/env bash
# Runs the tests of some packages as another platform, on this linux/amd64
# machine, with cgo on:
#
#   scripts/platforms.sh windows|arm64 [-run REGEXP] [-skip REGEXP] PKG...
#
#   windows  built with mingw-w64 (gcc-mingw-w64-x86-64), run under wine64
#   arm64    built with gcc-aarch64-linux-gnu, run under qemu-aarch64
#
# The fake CUDA runtime (internal/csrc/fakecudart) is built for the target
# too and named by TB_FAKE_CUDART, so the GPU path's tests run through
# LoadLibrary (Windows) and dlopen (arm64) as well. Binaries, the fake and the Wine
# prefix live in bin/<target>/. Each package's time is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

target=${1:?usage: $0 windows|arm64 [-run REGEXP] [-skip REGEXP] PKG...}
shift
run=. skip=
if [ "${1:-}" = -run ]; then
	run=$2
	shift 2
fi
if [ "${1:-}" = -skip ]; then
	skip=$2
	shift 2
fi
out=$PWD/bin/$target
mkdir -p "$out"
FAKE_FLAGS=(-std=c11 -O1 -Wall -Wextra -Werror -shared -D_GNU_SOURCE)

case $target in
windows)
	export GOOS=windows GOARCH=amd64 CGO_ENABLED=1 CC=x86_64-w64-mingw32-gcc
	# winpthreads linked in, so the DLL needs nothing beyond the system's.
	x86_64-w64-mingw32-gcc-posix "${FAKE_FLAGS[@]}" -static-libgcc -o "$out/fakecudart.dll" \
		internal/csrc/fakecudart/fakecudart.c -Wl,-Bstatic -lpthread
	fake="Z:$(echo "$out" | tr / '\\')\\fakecudart.dll"
	export WINEPREFIX=$out/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
	if [ ! -d "$WINEPREFIX/drive_c/windows/system32" ]; then
		/usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1 || true
	fi
	# Wine 8 has no bcryptprimitives.dll, which Go >= 1.22 needs at start.
	x86_64-w64-mingw32-gcc -O2 -Wall -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
		scripts/wine-bcryptprimitives.c -ladvapi32
	runner=(/usr/lib/wine/wine64)
	ext=.exe
	;;
arm64)
	export GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
	aarch64-linux-gnu-gcc "${FAKE_FLAGS[@]}" -fPIC -o "$out/libfakecudart.so" internal/csrc/fakecudart/fakecudart.c -lpthread
	fake=$out/libfakecudart.so
	runner=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
	ext=
	;;
*)
	echo "platforms: unknown target $target (windows or arm64)" >&2
	exit 2
	;;
esac

start=$SECONDS
for pkg in "$@"; do
	go test -c -o "$out/$(basename "$pkg").test$ext" "$pkg"
done
echo "platforms: $target: built ${*} in $((SECONDS - start))s"

status=0
for pkg in "$@"; do
	name=$(basename "$pkg")
	start=$SECONDS
	# A test binary runs in its package's folder, as go test runs it.
	# timeout: a binary that hangs at exit under emulation still ends.
	if (cd "$pkg" && TB_FAKE_CUDART=$fake timeout -k 10 600 "${runner[@]}" "$out/$name.test$ext" -test.run "$run" -test.skip "$skip" -test.timeout 9m); then
		echo "platforms: $target: ok   $name ($((SECONDS - start))s)"
	else
		echo "platforms: $target: FAIL $name ($((SECONDS - start))s)"
		status=1
	fi
done
if [ "$target" = windows ]; then
	/usr/lib/wine/wineserver -k 2>/dev/null || true
fi
exit $status
