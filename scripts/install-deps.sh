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

pkgs=(gcc make libc6-dev util-linux libamdhip64-dev dataset-fashion-mnist libcudart11.0)
[ "${TB_NO_TORCH:-0}" = 1 ] || pkgs+=(python3-torch)

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
