#!/usr/bin/env bash
# Prints the path of the previous release's .deb (tests/field/previous-release.txt names its
# version and commit), building it first when it is not cached: the commit's tree is taken from
# this repository's history (`git archive`) and packaged by that commit's own
# `scripts/package.sh deb`, exactly as it was released. The .deb is cached by commit under
# ${OCH_VM_CACHE:-~/.cache/oci-coresched-hook/vm}/../releases/<commit>/; the build tree is removed
# afterwards (a release build is ~2 GB).
#
#   tests/field/previous-release.sh        prints the .deb's path on stdout; progress on stderr
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."

log() { printf 'previous-release: %s\n' "$*" >&2; }
die() { printf 'previous-release: error: %s\n' "$*" >&2; exit 1; }

read -r VERSION COMMIT < <(grep -v '^#' tests/field/previous-release.txt | head -n 1)
[[ $COMMIT =~ ^[0-9a-f]{40}$ && -n $VERSION ]] || die "tests/field/previous-release.txt: expected 'VERSION COMMIT'"
home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
VM_CACHE=${OCH_VM_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/oci-coresched-hook/vm}
# The recipe's own version is part of the key: a change to how it builds rebuilds.
ENTRY=$(dirname -- "$VM_CACHE")/releases/$COMMIT-r1
DEB=$ENTRY/oci-coresched-hook_${VERSION}-1_amd64.deb
if [[ -f $DEB ]]; then
    printf '%s\n' "$DEB"
    exit 0
fi
git cat-file -e "$COMMIT^{commit}" 2>/dev/null ||
    die "commit $COMMIT (release $VERSION) is not in this clone: a shallow clone? run 'git fetch --unshallow'"
mkdir -p "$(dirname -- "$ENTRY")"
exec {lockfd}>"$ENTRY.lock"
flock "$lockfd"
if [[ -f $DEB ]]; then
    printf '%s\n' "$DEB"
    exit 0
fi
BUILD=$ENTRY.build
rm -rf -- "$BUILD"
mkdir -p "$BUILD"
trap 'rm -rf -- "$BUILD"' EXIT
log "building release $VERSION (commit ${COMMIT:0:12}) with its own scripts/package.sh; once per commit, a few minutes"
git archive --format=tar "$COMMIT" | tar -x -C "$BUILD"
t0=$(date +%s)
(cd "$BUILD" && env -u CARGO_TARGET_DIR scripts/package.sh deb) >"$ENTRY.log" 2>&1 ||
    die "the build of $VERSION failed (log: $ENTRY.log): $(tail -n 5 "$ENTRY.log")"
built=$(find "$BUILD/target/debian" -maxdepth 1 -name "oci-coresched-hook_${VERSION}-1_amd64.deb" | head -n 1)
[[ -f $built ]] || die "the build of $VERSION left no oci-coresched-hook_${VERSION}-1_amd64.deb (log: $ENTRY.log)"
mkdir -p "$ENTRY"
cp -- "$built" "$DEB.tmp" && mv -- "$DEB.tmp" "$DEB"
log "built in $(($(date +%s) - t0)) s: $DEB"
printf '%s\n' "$DEB"
