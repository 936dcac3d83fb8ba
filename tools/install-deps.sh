#!/usr/bin/env bash
# Installs the Debian packages ring3 needs, only those missing; idempotent.
# Usage: tools/install-deps.sh PACKAGE...   (names may carry :i386)
set -euo pipefail

missing=()
for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$pkg")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
for pkg in "${missing[@]}"; do
    case "$pkg" in
    *:i386)
        if ! dpkg --print-foreign-architectures | grep -qx i386; then
            $sudo dpkg --add-architecture i386
            rm -f build/.apt-updated
        fi ;;
    esac
done
# One 'apt-get update' per machine, redone when the architecture list changed.
mkdir -p build
if [ ! -e build/.apt-updated ] || ! apt-cache policy "${missing[0]}" | grep -q Candidate; then
    # A mirror caught mid-sync fails one index; the install below is the real test.
    $sudo apt-get update -qq || echo "install-deps: apt-get update reported errors; trying the install anyway" >&2
    touch build/.apt-updated
fi
echo "install-deps: installing ${missing[*]}"
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
