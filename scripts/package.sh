#!/usr/bin/env bash
# Builds the installable artifacts of oci-coresched-hook (`make package`):
#   target/debian/oci-coresched-hook_<version>-1_amd64.deb     (cargo-deb)
#   target/generate-rpm/oci-coresched-hook-<version>-1.x86_64.rpm (cargo-generate-rpm)
#   target/packaging/oci-coresched-hook-image.tar             node installer image (podman, FROM scratch)
# from the [package.metadata.deb] / [package.metadata.generate-rpm] sections of Cargo.toml.
#
#   scripts/package.sh [deb] [rpm] [image]     (default: all three)
#
# Installs cargo-deb and cargo-generate-rpm with `cargo install --locked` when missing (about 4.5
# minutes, once per machine). The image needs podman and busybox-static; without them it is
# skipped with a message (an error when CI is set). Env: OCH_IMAGE (image name, default
# localhost/oci-coresched-hook:<version>), PODMAN_ARGS (extra global podman flags, e.g. --root).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

log() { printf '\n==> %s\n' "$*"; }
die() { printf 'package.sh: error: %s\n' "$*" >&2; exit 1; }

want_deb=0 want_rpm=0 want_image=0
(($#)) || set -- deb rpm image
for a in "$@"; do
    case $a in
    deb) want_deb=1 ;;
    rpm) want_rpm=1 ;;
    image) want_image=1 ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument '$a' (expected deb, rpm, image)" ;;
    esac
done

# Generated files live under target/packaging (the paths Cargo.toml's assets name), whatever
# CARGO_TARGET_DIR says; cargo-deb maps target/release/ itself.
OUT=$ROOT/target/packaging
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[[ -n $VERSION ]] || die "cannot read the package version from Cargo.toml"
TRIPLE=x86_64-unknown-linux-gnu
# Cargo's target dir (CARGO_TARGET_DIR or build.target-dir may move it).
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps --offline 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])') || TARGET_DIR=$ROOT/target
# One build serves the .deb, the .rpm and the image: static-pie (no dynamic loader or libc lookups
# at each container start, about 0.9 ms less per hook; PIE keeps the binary's ASLR) with packed
# relative relocations (DT_RELR: a 3 KB table instead of 280 KB to walk at startup). BENCHMARKS.md
# has the measurements. The explicit --target keeps build scripts and proc macros dynamic.
STATIC_RUSTFLAGS="-C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
BIN=$TARGET_DIR/$TRIPLE/release/oci-coresched-hook

static_build() { # once per run
    [[ -n ${static_built:-} ]] && return 0
    log "static release build ($TRIPLE, crt-static, packed relocations)"
    timed static-build env RUSTFLAGS="${RUSTFLAGS:-} $STATIC_RUSTFLAGS" cargo build --release --locked --target "$TRIPLE"
    [[ -x $BIN ]] || die "no binary at $BIN after the build"
    file "$BIN" | grep -Eq 'static-pie linked' || die "$BIN is not a static-pie binary: $(file "$BIN")"
    static_built=1
}

timed() { # timed LABEL CMD...: runs CMD, records "LABEL SECONDS" in $OUT/times
    local label=$1 start rc=0
    shift
    start=$(date +%s)
    "$@" || rc=$?
    echo "$label $(($(date +%s) - start))" >>"$OUT/times"
    return $rc
}

mkdir -p "$OUT"
: >"$OUT/times"

# ---------------------------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------------------------
tools=()
((want_deb)) && ! cargo deb --version >/dev/null 2>&1 && tools+=(cargo-deb)
((want_rpm)) && ! cargo generate-rpm --version >/dev/null 2>&1 && tools+=(cargo-generate-rpm)
if ((${#tools[@]})); then
    log "installing ${tools[*]} (cargo install --locked; a few minutes, once per machine)"
    timed tools-install cargo install --locked "${tools[@]}"
fi

# ---------------------------------------------------------------------------------------------
# Binary, man pages, completions
# ---------------------------------------------------------------------------------------------
if ((want_deb || want_rpm)); then
    static_build

    log "man pages and completions into $OUT"
    rm -rf "$OUT/man" "$OUT/completions" "$OUT/rpm"
    mkdir -p "$OUT/man" "$OUT/completions" "$OUT/rpm"
    "$BIN" man --out-dir "$OUT/man" >/dev/null
    gzip -9n "$OUT"/man/*.1
    "$BIN" completions bash >"$OUT/completions/oci-coresched-hook.bash"
    "$BIN" completions zsh >"$OUT/completions/_oci-coresched-hook"
    "$BIN" completions fish >"$OUT/completions/oci-coresched-hook.fish"
    ls "$OUT"/man "$OUT"/completions
fi

if ((want_deb)); then
    log "cargo deb"
    # --target maps the asset path target/release/ to target/$TRIPLE/release/.
    timed deb cargo deb --no-build --locked --target "$TRIPLE" --output target/debian/
    ls -l target/debian/*.deb
fi

if ((want_rpm)); then
    log "cargo generate-rpm"
    # cargo-generate-rpm packages the file as is: give it a stripped copy.
    strip -o "$OUT/rpm/oci-coresched-hook" "$BIN"
    rm -f target/generate-rpm/oci-coresched-hook-*.rpm
    timed rpm cargo generate-rpm
    ls -l target/generate-rpm/*.rpm
fi

# ---------------------------------------------------------------------------------------------
# Node installer image (Kubernetes DaemonSet)
# ---------------------------------------------------------------------------------------------
if ((want_image)); then
    missing=()
    command -v podman >/dev/null || missing+=("podman (apt-get install podman)")
    BUSYBOX=""
    for c in ${OCH_BUSYBOX:-} /bin/busybox /usr/bin/busybox; do
        if [[ -x $c ]] && file -L "$c" | grep -Eq 'statically linked|static-pie linked'; then
            BUSYBOX=$c
            break
        fi
    done
    [[ -n $BUSYBOX ]] || missing+=("a static busybox (apt-get install busybox-static)")
    rustup target list --installed 2>/dev/null | grep -qx "$TRIPLE" || missing+=("rust target $TRIPLE (rustup target add $TRIPLE)")
    if ((${#missing[@]})); then
        [[ -n ${CI:-} ]] && die "cannot build the image, missing: ${missing[*]}"
        log "SKIPPED the node installer image: missing ${missing[*]}"
    else
        static_build
        SBIN=$BIN

        CTX=$OUT/image
        rm -rf "$CTX"
        mkdir -p "$CTX"
        strip -o "$CTX/oci-coresched-hook" "$SBIN"
        cp "$BUSYBOX" "$CTX/busybox"
        cp packaging/kubernetes/Containerfile packaging/kubernetes/install.sh packaging/kubernetes/probe-state.json \
            packaging/config.toml hooks.d/oci-coresched-hook.json "$CTX/"
        IMAGE=${OCH_IMAGE:-localhost/oci-coresched-hook:$VERSION}
        log "podman build $IMAGE"
        # shellcheck disable=SC2086 # PODMAN_ARGS is a list of flags
        timed image podman ${PODMAN_ARGS:-} build --pull=never -f "$CTX/Containerfile" -t "$IMAGE" "$CTX"
        rm -f "$OUT/oci-coresched-hook-image.tar"
        # shellcheck disable=SC2086
        podman ${PODMAN_ARGS:-} save --format oci-archive -o "$OUT/oci-coresched-hook-image.tar" "$IMAGE"
        echo "$IMAGE" >"$OUT/image-name"
        ls -l "$OUT/oci-coresched-hook-image.tar"
    fi
fi

log "done; seconds per step:"
cat "$OUT/times"
