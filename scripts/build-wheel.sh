#!/usr/bin/env bash
# Build the Python wheels that install emq without Rust:
#
#   OUT/emq-VERSION-py3-none-manylinux_2_N_x86_64.whl   the six binaries
#       (emq-router, emq-jobmanager, emq-sender, emq-cli, emq-receiver,
#       emq-pubsub), installed by pip into the environment's bin/;
#       depends on emq-client==VERSION
#   OUT/emq_client-VERSION-py3-none-any.whl             the Python client
#
#   scripts/build-wheel.sh                # cargo build --release, then both wheels
#   scripts/build-wheel.sh --debug        # from a debug build (faster to compile)
#   scripts/build-wheel.sh --no-build --bin-dir target/debug --out DIR
#                                         # package binaries already built (the test)
#
# Options: --release (default) | --debug; --no-build (use what BIN_DIR
# has); --bin-dir DIR (default target/release or target/debug); --out DIR
# (default target/wheels).
#
# How: the binaries come from six crates of the workspace, and maturin's
# `bin` bindings package one crate's binaries per wheel (rebuilding them
# with its own flags), so this script packs them itself, the way maturin
# lays out a `bin` wheel: each binary, stripped, in emq-VERSION.data/scripts/
# (pip installs those into bin/ as they are), METADATA and WHEEL in
# emq-VERSION.dist-info/, and pypa's `wheel pack` writes RECORD (the
# hashes) and the zip. Before packing it checks that no binary needs a
# shared library beyond glibc, libstdc++ and libgcc (readelf -d), and the
# platform tag is manylinux_2_N for N the newest glibc symbol version any
# binary uses (readelf -V), so pip refuses the wheel where glibc is older.
# The client's wheel is pip's build of python/ (setuptools, no isolation).
#
# Needs: readelf and strip (binutils), and a Python with pypa's `wheel`,
# setuptools and pip: $EMQ_PYTHON, else <repo>/.venv (scripts/setup-python.sh
# installs them there), else python3.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

profile=release
build=1
bin_dir=""
out="$repo/target/wheels"
while (($#)); do
    case "$1" in
        --release) profile=release ;;
        --debug) profile=debug ;;
        --no-build) build=0 ;;
        --bin-dir) bin_dir="$2"; shift ;;
        --out) out="$2"; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "build-wheel: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "build-wheel: $*" >&2; exit 1; }

bins=(emq-router emq-jobmanager emq-sender emq-cli emq-receiver emq-pubsub)
# What a binary may need at run time: glibc's libraries, libstdc++ and
# libgcc (libzmq is C++), nothing else (libzmq and libsodium are linked in).
allowed_libs=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1 "

version="$(awk '/^\[workspace.package\]/ { p = 1; next } /^\[/ { p = 0 } p && /^version *=/ { gsub(/[" ]/, "", $0); sub(/^version=/, ""); print; exit }' Cargo.toml)"
[[ -n "$version" ]] || die "no version in Cargo.toml's [workspace.package]"
py_version="$(awk -F'"' '/^version *=/ { print $2; exit }' python/pyproject.toml)"
[[ "$py_version" == "$version" ]] ||
    die "python/pyproject.toml says version $py_version, Cargo.toml $version: they must match"

python="${EMQ_PYTHON:-}"
if [[ -z "$python" ]]; then
    for p in "$repo/.venv/bin/python" python3; do
        if "$p" -c 'import wheel, setuptools, pip' >/dev/null 2>&1; then python="$p"; break; fi
    done
fi
[[ -n "$python" ]] && "$python" -c 'import wheel, setuptools, pip' >/dev/null 2>&1 ||
    die "needs a Python with pypa's wheel, setuptools and pip (scripts/setup-python.sh installs them into .venv; or pip install wheel setuptools; or set EMQ_PYTHON)"
for tool in readelf strip; do
    command -v "$tool" >/dev/null || die "needs $tool (Debian: binutils)"
done

if ((build)); then
    flags=()
    [[ $profile == release ]] && flags+=(--release)
    bash scripts/ensure-deps.sh
    pkgs=()
    for b in "${bins[@]}"; do pkgs+=(-p "$b"); done
    echo "build-wheel: cargo build ${flags[*]} ${pkgs[*]}"
    cargo build "${flags[@]}" "${pkgs[@]}" --bins
fi
[[ -n "$bin_dir" ]] || bin_dir="${CARGO_TARGET_DIR:-$repo/target}/$profile"

stage="$(mktemp -d "${TMPDIR:-/tmp}/emq-wheel.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
root="$stage/emq-$version"
scripts="$root/emq-$version.data/scripts"
info="$root/emq-$version.dist-info"
mkdir -p "$scripts" "$info"

glibc_minor=17
for b in "${bins[@]}"; do
    src="$bin_dir/$b"
    [[ -x "$src" ]] || die "$src is missing (build it, or drop --no-build)"
    strip -o "$scripts/$b" "$src"
    chmod 755 "$scripts/$b"
    while read -r lib; do
        [[ "$allowed_libs" == *" $lib "* ]] ||
            die "$b needs $lib, which a machine without a build toolchain may lack (allowed: $allowed_libs)"
    done < <(readelf -d "$scripts/$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    while read -r minor; do
        ((minor > glibc_minor)) && glibc_minor=$minor
    done < <(readelf -V -W "$scripts/$b" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_2\.//' | sort -un)
done
tag="py3-none-manylinux_2_${glibc_minor}_x86_64"

cp LICENSE "$info/LICENSE"
cat >"$info/WHEEL" <<EOF
Wheel-Version: 1.0
Generator: emq scripts/build-wheel.sh
Root-Is-Purelib: false
Tag: $tag
EOF
{
    cat <<EOF
Metadata-Version: 2.1
Name: emq
Version: $version
Summary: emq, EventMQ (eMQP/1.0) in Rust: the router, job manager, sender, receiver, pub/sub and operator CLI as binaries
License: MIT
Requires-Python: >=3.9
Requires-Dist: emq-client==$version
Classifier: Programming Language :: Rust
Classifier: Operating System :: POSIX :: Linux
Classifier: License :: OSI Approved :: MIT License
Description-Content-Type: text/markdown

EOF
    cat README.md
} >"$info/METADATA"

mkdir -p "$out"
rm -f "$out"/emq-"$version"-*.whl "$out"/emq_client-"$version"-*.whl
"$python" -m wheel pack --dest-dir "$out" "$root" >/dev/null
"$python" -m pip --disable-pip-version-check --no-input wheel --quiet --no-deps \
    --no-build-isolation --wheel-dir "$out" "$repo/python"
rm -rf "$repo/python/build"

echo "build-wheel: binaries from $bin_dir, glibc >= 2.$glibc_minor"
for w in "$out"/emq-"$version"-"$tag".whl "$out"/emq_client-"$version"-*.whl; do
    [[ -f "$w" ]] || die "expected wheel $w was not written"
    echo "build-wheel: $w ($(du -h "$w" | cut -f1))"
done
