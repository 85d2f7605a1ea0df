#!/usr/bin/env bash
# Build the release bundle: target/dist/emq-VERSION-x86_64-linux.tar.gz
#
#   emq-VERSION-x86_64-linux/
#     bin/                            emq-router emq-jobmanager emq-sender
#                                     emq-cli emq-receiver emq-pubsub (stripped)
#     systemd/emq-router.service      Type=notify, user emq, restart on failure
#     systemd/emq-jobmanager@.service one job manager per instance name
#     sysusers.d/emq.conf             the dedicated user (systemd-sysusers)
#     eventmq.conf                    example /etc/eventmq.conf, every setting
#                                     commented (scripts/gen-config.py)
#     jobmanager.env.example          example /etc/emq/jobmanager-NAME.env
#     LICENSE CHANGELOG.md README.md INSTALL.md
#
#   scripts/release.sh               # cargo build --release, then the bundle
#   scripts/release.sh --no-build    # bundle what target/release has
#   scripts/release.sh --debug --no-build --out DIR
#                                    # from the debug binaries (the test)
#
# Options: --release (default) | --debug; --no-build; --bin-dir DIR (default
# target/release or target/debug); --out DIR (default target/dist).
#
# The units are checked with `systemd-analyze verify` when the machine has
# it (against the bundle's binaries: a copy of each unit whose ExecStart
# points into the staging directory); without it the script says so.
# Install steps: docs/INSTALL.md.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build=1
profile=release
dist=""
bin_dir=""
while (($#)); do
    case "$1" in
        --no-build) build=0 ;;
        --release) profile=release ;;
        --debug) profile=debug ;;
        --out) dist="$2"; shift ;;
        --bin-dir) bin_dir="$2"; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "release: unknown option $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "release: $*" >&2; exit 1; }

bins=(emq-router emq-jobmanager emq-sender emq-cli emq-receiver emq-pubsub)
version="$(awk '/^\[workspace.package\]/ { p = 1; next } /^\[/ { p = 0 } p && /^version *=/ { gsub(/[" ]/, "", $0); sub(/^version=/, ""); print; exit }' Cargo.toml)"
[[ -n "$version" ]] || die "no version in Cargo.toml's [workspace.package]"
target="${CARGO_TARGET_DIR:-$repo/target}"

if ((build)); then
    bash scripts/ensure-deps.sh
    pkgs=()
    for b in "${bins[@]}"; do pkgs+=(-p "$b"); done
    flags=()
    [[ $profile == release ]] && flags+=(--release)
    cargo build "${flags[@]}" "${pkgs[@]}" --bins
fi

name="emq-$version-x86_64-linux"
[[ -n "$dist" ]] || dist="$target/dist"
[[ -n "$bin_dir" ]] || bin_dir="$target/$profile"
mkdir -p "$dist"
stage="$dist/$name"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/systemd" "$stage/sysusers.d"
for b in "${bins[@]}"; do
    [[ -x "$bin_dir/$b" ]] || die "$bin_dir/$b is missing (drop --no-build)"
    strip -o "$stage/bin/$b" "$bin_dir/$b"
    chmod 755 "$stage/bin/$b"
done
cp deploy/systemd/emq-router.service deploy/systemd/emq-jobmanager@.service "$stage/systemd/"
cp deploy/systemd/emq.sysusers.conf "$stage/sysusers.d/emq.conf"
cp deploy/systemd/jobmanager.env.example "$stage/"
python3 scripts/gen-config.py "$stage/bin" >"$stage/eventmq.conf"
cp LICENSE CHANGELOG.md README.md docs/INSTALL.md "$stage/"

# The units, as systemd reads them. ExecStart must name an executable that
# exists, so the check runs on copies pointing at the staged binaries.
if command -v systemd-analyze >/dev/null 2>&1; then
    check="$(mktemp -d)"
    for unit in "$stage"/systemd/*.service; do
        sed "s|/usr/local/bin/|$stage/bin/|g" "$unit" >"$check/$(basename "$unit")"
    done
    # An instance of the template, as `systemctl enable emq-jobmanager@default` makes it.
    cp "$check/emq-jobmanager@.service" "$check/emq-jobmanager@default.service"
    if ! out="$(cd "$check" && systemd-analyze verify --man=no ./emq-router.service ./emq-jobmanager@default.service 2>&1)"; then
        rm -rf "$check"
        die "systemd-analyze verify failed: $out"
    fi
    # It reports problems it does not fail on (unknown keys, bad values) as text.
    if grep -v -e 'Failed to put bus name' -e 'Failed to connect to bus' -e 'Unit .* not found' <<<"$out" | grep -q .; then
        echo "$out" >&2
        rm -rf "$check"
        die "systemd-analyze verify reported the lines above"
    fi
    rm -rf "$check"
    echo "release: units verified with $(systemd-analyze --version | head -1)"
else
    echo "release: systemd-analyze not found: the units were not verified"
fi

# The user, as systemd-sysusers reads it (into a scratch root: nothing on
# this machine changes).
if command -v systemd-sysusers >/dev/null 2>&1; then
    root="$(mktemp -d)"
    mkdir -p "$root/etc"
    if ! out="$(systemd-sysusers --root="$root" "$stage/sysusers.d/emq.conf" 2>&1)" ||
        ! grep -q '^emq:' "$root/etc/passwd"; then
        rm -rf "$root"
        die "systemd-sysusers did not make the user emq from sysusers.d/emq.conf: $out"
    fi
    rm -rf "$root"
    echo "release: sysusers.d/emq.conf makes the user emq (systemd-sysusers --root)"
fi

tar -C "$dist" -czf "$dist/$name.tar.gz" "$name"
rm -rf "$stage"
echo "release: $dist/$name.tar.gz ($(du -h "$dist/$name.tar.gz" | cut -f1))"
