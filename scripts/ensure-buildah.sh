#!/usr/bin/env bash
# ensure-buildah.sh — make sure buildah is there for `make image` and the
# image test (cmd/pushfan/image_test.go builds the image and runs pushfan
# from it with `buildah run --isolation chroot`).
#
# Idempotent and non-interactive. As root on Debian/Ubuntu it installs
# Debian's buildah package (apt-get) when it is missing; as any other user
# it only checks and says what to do. No daemon is needed: the Makefile and
# the test use vfs storage and chroot isolation.
set -euo pipefail

say() { printf 'ensure-buildah: %s\n' "$*" >&2; }

if command -v buildah >/dev/null 2>&1; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	say "ERROR: buildah is not installed; install it (Debian: sudo apt-get install buildah)"
	exit 1
fi
say "installing Debian's buildah (make image and the image test need it)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends buildah </dev/null; then
	apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends buildah </dev/null
fi
buildah --version >&2
