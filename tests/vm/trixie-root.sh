# shellcheck shell=bash
# Sourced by tests/vm/vm.sh (never run): the Debian 13 (trixie) guest root of the field tier.
#
# Built once with debootstrap (minbase) plus `apt-get install` of tests/vm/trixie-packages.txt in a
# chroot (debootstrap's own resolver cannot take that list: it pulls both of two conflicting
# protobuf alternatives), cached as $CACHE/trixie-<sha256[:12] of the package list + recipe>/root,
# built in a .tmp directory and renamed into place. The mirror is the host's own Debian mirror
# (its apt sources), or $OCH_DEBIAN_MIRROR.

readonly TRIXIE_PACKAGES="$HERE/trixie-packages.txt"

# trixie_packages: the package names of the list, comments and blank lines dropped.
trixie_packages() {
    sed -e 's/#.*//' -e 's/[[:space:]]//g' -- "$TRIXIE_PACKAGES" | grep -v '^$'
}

# host_debian_mirror: the first Debian archive URI of the host's apt sources.
host_debian_mirror() {
    if [[ -n ${OCH_DEBIAN_MIRROR:-} ]]; then
        printf '%s\n' "$OCH_DEBIAN_MIRROR"
        return 0
    fi
    local f uri
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] || continue
        uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' "$f")
        [[ -n $uri ]] && { printf '%s\n' "$uri"; return 0; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f $f ]] || continue
        uri=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:\/\/.*\/debian\/?$/) { print $i; exit } }' "$f")
        [[ -n $uri ]] && { printf '%s\n' "$uri"; return 0; }
    done
    return 1
}

# The build recipe; its text (declare -f) is part of the cache key.
# trixie_recipe OUT_ROOT MIRROR PACKAGES... (all output goes to the caller's log)
trixie_recipe() {
    local root=$1 mirror=$2
    shift 2
    debootstrap --variant=minbase trixie "$root" "$mirror"
    # No service starts inside the chroot.
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    # shellcheck disable=SC2016 # expanded by the inner sh
    unshare -m -- sh -euc '
        root=$1; shift
        mount -t proc proc "$root/proc"
        chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
            sh -euc "apt-get update -q && apt-get install -y -q --no-install-recommends \"\$@\" && apt-get clean" \
            apt-install "$@"' trixie-root "$root" "$@"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
    # Mount points of the guest's read-only root: the host's / and the exchange directory.
    mkdir -p "$root/host" "$root/xchg"
    # shellcheck disable=SC2016 # dpkg-query's format
    chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' >"$root/../packages.txt"
}

trixie_key() {
    local hash
    hash=$({
        trixie_packages
        declare -f trixie_recipe
    } | sha256sum | cut -c1-12)
    printf 'trixie-%s\n' "$hash"
}

build_trixie_locked() {
    local key=$1 entry="$CACHE/$1"
    [[ -f $entry/packages.txt ]] && return 0
    command -v debootstrap >/dev/null || die "debootstrap is missing (run: vm.sh deps)"
    ((EUID == 0)) || die "building the Debian 13 root needs root (debootstrap, chroot)"
    local mirror
    mirror=$(host_debian_mirror) || die "no Debian mirror in the host's apt sources: set OCH_DEBIAN_MIRROR"
    local tmp="$CACHE/.tmp-$key.$$" logf="$CACHE/build-$key.log"
    rm -rf -- "$tmp"
    mkdir -p -- "$tmp"
    CLEANUP_PATHS+=("$tmp")
    local pkgs
    mapfile -t pkgs < <(trixie_packages)
    log "building the Debian 13 root $key (~3 min, ~1 GB; log: $logf)"
    local start=$SECONDS rc
    run_recipe "building the Debian 13 root" "$logf" trixie_recipe "$tmp/root" "$mirror" "${pkgs[@]}"
    rc=$RECIPE_RC
    if ((rc != 0)); then
        log "Debian 13 root build FAILED (exit $rc); last lines of $logf:"
        tail -n 40 -- "$logf" >&2 || true
        die "Debian 13 root build failed (log kept: $logf)"
    fi
    local p
    for p in "${pkgs[@]}"; do
        grep -q "^$p " "$tmp/packages.txt" || die "package $p is not installed in the Debian 13 root"
    done
    echo "build time: $((SECONDS - start))s" >>"$logf"
    mv -- "$logf" "$tmp/build.log"
    mv -T -- "$tmp" "$entry"
    log "Debian 13 root built in $((SECONDS - start))s ($(du -sxh "$entry/root" | cut -f1))"
}

TRIXIE_ROOT= # set by ensure_trixie
ensure_trixie() {
    ensure_deps
    [[ -f $TRIXIE_PACKAGES ]] || die "package list $TRIXIE_PACKAGES is missing"
    local key
    key=$(trixie_key)
    if [[ ! -f $CACHE/$key/packages.txt ]]; then
        with_lock "$key" build_trixie_locked "$key"
    fi
    TRIXIE_ROOT="$CACHE/$key/root"
    [[ -d $TRIXIE_ROOT/usr/bin ]] || die "Debian 13 root $TRIXIE_ROOT missing after build"
}

cmd_rootfs() {
    (($# == 0)) || die "rootfs takes no arguments"
    ensure_trixie
    printf '%s\n' "$TRIXIE_ROOT"
}
