#!/usr/bin/env bash
# Install the Debian packages emq's build needs when they are missing: a C++
# compiler for the vendored libzmq, and libsodium-dev, whose library gives
# libzmq CURVE (encryption; linked statically, so the binaries need nothing
# at run time). scripts/demo.sh, test.sh, bench.sh and local-cluster.sh run
# it before building; quick when everything is there.
#
#   scripts/ensure-deps.sh
#
# As root it runs apt-get (update, then install --no-install-recommends);
# otherwise, or without apt-get, it says what to install and exits 1.
set -euo pipefail

missing=()
command -v g++ >/dev/null 2>&1 || missing+=(g++)
# libsodium-dev: the header libzmq's CURVE code includes, and libsodium.a.
static_lib=no
for f in /usr/lib/*/libsodium.a /usr/lib/libsodium.a; do
    [[ -e $f ]] && static_lib=yes
done
if [[ ! -e /usr/include/sodium.h || $static_lib == no ]]; then
    missing+=(libsodium-dev)
fi
((${#missing[@]})) || exit 0

if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-deps: missing ${missing[*]}: install them (Debian: sudo apt-get install ${missing[*]})" >&2
    exit 1
fi
echo "ensure-deps: apt-get install ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
