#!/usr/bin/env bash
# Installs what tensorbatch's tests, examples and bench use on a fresh
# Debian bookworm machine (as root, or with sudo). Go itself is expected at
# /usr/local/go or on PATH.
#
#   libamdhip64-dev       real HIP headers (prototype check) and runtime (no-device fallback)
#   libcudart11.0         real CUDA runtime, Debian non-free (no-driver fallback)
#   dataset-fashion-mnist a real dataset for the example
#   python3-torch         PyTorch's DataLoader, the peer in make bench (skip: TB_NO_TORCH=1)
#   util-linux            setpriv, to test mlock as an unprivileged user
#   libjpeg62-turbo       libjpeg-turbo, which vision loads at run time to decode JPEGs
#   libjpeg62-turbo-dev   jpeglib.h, to check vision's hand-declared libjpeg ABI (make vet)
#   libturbojpeg0         TurboJPEG: the encoder of shards write --resize, and the
#                         decode-only baseline of the image bench
#   mate-backgrounds      real photos: the ImageNet-like JPEG folder (scripts/make_imagenet_like.py)
#   python3-pil           Pillow: the image scripts, the goldens, the image peer
#   python3-torchvision   torchvision's transforms and ImageFolder, the image peer (skip: TB_NO_TORCH=1)
#   openmpi-bin           mpirun, which the launcher tests start ranks with (internal/launchtest)
#   nodejs, npm           node, and npm to install hyparquet and Azurite (below)
#   hyparquet             a JavaScript Parquet reader, the second reader the shards tests check
#                         their Parquet files with (npm, into .cache/npm of the repository)
#   azurite               Azure's Blob Storage emulator, for the shards tests of az:// URLs
#                         (npm, into .cache/npm of the repository)
#   js-tiktoken           a JavaScript tiktoken, the peer the corpus build tests check their
#                         tokens against, and the bench's peer loop (npm, into .cache/npm)
#   @huggingface/tokenizers  a JavaScript tokenizer.json reader, the peer for the corpus build
#                         tests of Hugging Face tokenizers (npm, into .cache/npm)
#   versitygw             a real S3 server for the shards tests and bench (go install, into $(go env GOPATH)/bin)
#   fake-gcs-server       a Google Cloud Storage emulator, for the shards tests of gs:// URLs
#                         (go install, into $(go env GOPATH)/bin)
#   gcc-mingw-w64-x86-64, wine64          Windows: cross-build with cgo, run the tests (make test-platforms)
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user
#                         linux/arm64: cross-build with cgo, run the tests under qemu-aarch64
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# libcudart11.0 lives in Debian's non-free component.
enable_non_free() {
	local f=/etc/apt/sources.list.d/debian.sources
	if [ -f "$f" ] && ! grep -q 'non-free' "$f"; then
		$SUDO sed -i 's/^Components: main$/Components: main contrib non-free/' "$f"
	elif [ -f /etc/apt/sources.list ] && ! grep -q 'non-free' /etc/apt/sources.list; then
		$SUDO sed -i -E 's/^(deb .* main)$/\1 contrib non-free/' /etc/apt/sources.list
	fi
}

pkgs=(gcc make libc6-dev util-linux libamdhip64-dev dataset-fashion-mnist libcudart11.0 openmpi-bin)
[ "${TB_NO_TORCH:-0}" = 1 ] || pkgs+=(python3-torch python3-torchvision)
pkgs+=(libjpeg62-turbo libjpeg62-turbo-dev libturbojpeg0 mate-backgrounds python3-pil) # vision
pkgs+=(nodejs) # shards: hyparquet, Azurite
pkgs+=(gcc-mingw-w64-x86-64 wine64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	enable_non_free
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	echo "install-deps: installed ${missing[*]}"
else
	echo "install-deps: all present"
fi
# Debian's nodejs comes without npm; NodeSource's has it.
if ! command -v npm >/dev/null 2>&1; then
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
	echo "install-deps: installed npm"
fi

# versitygw and fake-gcs-server: the S3 and GCS servers that internal/s3test
# and internal/objtest start for the shards tests and bench. The tests look
# for them on PATH, then in $GOBIN, $GOPATH/bin and ~/go/bin. Installing one
# compiles it: a minute or two, once.
VERSITYGW_VERSION=v1.8.0
FAKE_GCS_SERVER_VERSION=v1.56.1
export PATH="$PATH:/usr/local/go/bin"
gobin="$(go env GOBIN 2>/dev/null || true)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
go_install() { # name, package, version
	if command -v "$1" >/dev/null 2>&1 || [ -x "$gobin/$1" ]; then
		echo "install-deps: $1 present"
	else
		go install "$2@$3"
		echo "install-deps: installed $1 $3 into $gobin"
	fi
}
go_install versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
go_install fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_SERVER_VERSION"

# hyparquet: the JavaScript Parquet reader (no dependencies) that the shards
# tests read their Parquet files back with, as a second, independent
# reader; Azurite: the Azure Blob Storage emulator that internal/objtest
# starts; js-tiktoken and @huggingface/tokenizers: the JavaScript
# tokenizers that the corpus build tests (cmd/tensorbatch) compare their
# tokens with, and js-tiktoken the bench's peer (scripts/peer_tokenize.js).
# They go into .cache/npm of the repository, where the tests look,
# in one npm install: npm removes what an earlier --no-save install put
# there and a later one does not name.
HYPARQUET_VERSION=1.33.0
AZURITE_VERSION=3.37.0
JS_TIKTOKEN_VERSION=1.0.21
HF_TOKENIZERS_VERSION=0.2.0
npm_prefix="$(cd "$(dirname "$0")/.." && pwd)/.cache/npm"
npm_has() { grep -qs "\"version\": \"$2\"" "$npm_prefix/node_modules/$1/package.json"; }
if npm_has hyparquet "$HYPARQUET_VERSION" && npm_has azurite "$AZURITE_VERSION" &&
	npm_has js-tiktoken "$JS_TIKTOKEN_VERSION" && npm_has @huggingface/tokenizers "$HF_TOKENIZERS_VERSION"; then
	echo "install-deps: hyparquet, azurite, js-tiktoken and @huggingface/tokenizers present"
else
	npm install --prefix "$npm_prefix" --no-save --no-audit --no-fund --loglevel=error \
		"hyparquet@$HYPARQUET_VERSION" "azurite@$AZURITE_VERSION" \
		"js-tiktoken@$JS_TIKTOKEN_VERSION" "@huggingface/tokenizers@$HF_TOKENIZERS_VERSION" >/dev/null
	echo "install-deps: installed hyparquet $HYPARQUET_VERSION, azurite $AZURITE_VERSION," \
		"js-tiktoken $JS_TIKTOKEN_VERSION and @huggingface/tokenizers $HF_TOKENIZERS_VERSION into $npm_prefix"
fi
