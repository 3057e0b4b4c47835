#!/usr/bin/env bash
# Prints the directory holding the previous release's artifacts (tests/field/previous-release.txt
# names its version and commit), building them first when they are not cached: the commit's tree
# is taken from this repository's history (`git archive`) and packaged by that commit's own
# `scripts/package.sh deb rpm image`, exactly as it was released. The directory holds
#   oci-coresched-hook.deb          the .deb (the field tier's upgrade part)
#   oci-coresched-hook.rpm          the .rpm (tests/packaging/run.sh: rpm -U between the releases
#                                   in a scratch root)
#   oci-coresched-hook-image.tar    the DaemonSet's node installer image (the DaemonSet part's
#                                   rolling update between releases)
#   daemonset.yaml                  that commit's packaging/kubernetes/daemonset.yaml
#   version                         the release's version
# It is cached by commit under ${OCH_VM_CACHE:-~/.cache/oci-coresched-hook/vm}/../releases/<commit>-r2/;
# the build tree is removed afterwards (a release build is ~2 GB).
#
#   tests/field/previous-release.sh        prints the directory on stdout; progress on stderr
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."

log() { printf 'previous-release: %s\n' "$*" >&2; }
die() { printf 'previous-release: error: %s\n' "$*" >&2; exit 1; }

read -r VERSION COMMIT < <(grep -v '^#' tests/field/previous-release.txt | head -n 1)
[[ $COMMIT =~ ^[0-9a-f]{40}$ && -n $VERSION ]] || die "tests/field/previous-release.txt: expected 'VERSION COMMIT'"
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
VM_CACHE=${OCH_VM_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/oci-coresched-hook/vm}
# The recipe's own version is part of the key: a change to how it builds rebuilds.
ENTRY=$(dirname -- "$VM_CACHE")/releases/$COMMIT-r2
if [[ -f $ENTRY/version ]]; then
    printf '%s\n' "$ENTRY"
    exit 0
fi
git cat-file -e "$COMMIT^{commit}" 2>/dev/null ||
    die "commit $COMMIT (release $VERSION) is not in this clone: a shallow clone? run 'git fetch --unshallow'"
mkdir -p "$(dirname -- "$ENTRY")"
exec {lockfd}>"$ENTRY.lock"
flock "$lockfd"
if [[ -f $ENTRY/version ]]; then
    printf '%s\n' "$ENTRY"
    exit 0
fi
BUILD=$ENTRY.build
rm -rf -- "$BUILD" "$ENTRY"
mkdir -p "$BUILD"
trap 'rm -rf -- "$BUILD" "$ENTRY.tmp"' EXIT
log "building release $VERSION (commit ${COMMIT:0:12}) with its own scripts/package.sh deb rpm image; once per commit, a few minutes"
git archive --format=tar "$COMMIT" | tar -x -C "$BUILD"
t0=$(date +%s)
(cd "$BUILD" && env -u CARGO_TARGET_DIR scripts/package.sh deb rpm image) >"$ENTRY.log" 2>&1 ||
    die "the build of $VERSION failed (log: $ENTRY.log): $(tail -n 5 "$ENTRY.log")"
deb=$BUILD/target/debian/oci-coresched-hook_${VERSION}-1_amd64.deb
rpm=$BUILD/target/generate-rpm/oci-coresched-hook-${VERSION}-1.x86_64.rpm
image=$BUILD/target/packaging/oci-coresched-hook-image.tar
[[ -f $deb ]] || die "the build of $VERSION left no $(basename -- "$deb") (log: $ENTRY.log)"
[[ -f $rpm ]] || die "the build of $VERSION left no $(basename -- "$rpm") (log: $ENTRY.log)"
[[ -f $image ]] || die "the build of $VERSION left no node installer image $image (log: $ENTRY.log)"
rm -rf -- "$ENTRY.tmp"
mkdir -p "$ENTRY.tmp"
cp -- "$deb" "$ENTRY.tmp/oci-coresched-hook.deb"
cp -- "$rpm" "$ENTRY.tmp/oci-coresched-hook.rpm"
cp -- "$image" "$ENTRY.tmp/oci-coresched-hook-image.tar"
cp -- "$BUILD/packaging/kubernetes/daemonset.yaml" "$ENTRY.tmp/daemonset.yaml"
printf '%s\n' "$VERSION" >"$ENTRY.tmp/version"
mv -- "$ENTRY.tmp" "$ENTRY"
log "built in $(($(date +%s) - t0)) s: $ENTRY"
printf '%s\n' "$ENTRY"
