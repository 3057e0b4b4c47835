#!/usr/bin/env bash
# Tier 4, the field tier: the engines users run, on the real CONFIG_SCHED_CORE kernel. Boots the
# VM tier's kernel with the Debian 13 root and its own systemd as PID 1 (`tests/vm/vm.sh field`;
# the root is built once by debootstrap and cached, keyed by tests/vm/trixie-packages.txt) and runs
# tests/field/guest.sh in it as a service: the .deb installed with apt and its systemd units,
# containerd 1.7 CRI pods wired by base_runtime_spec as packaging/containerd/ documents and by the
# NRI unit, podman 5 with crun and runc through the packaged hooks.d file, the exec window with the
# follower unit, containers whose hook failed open seen by `audit`, counted and healed by the
# follower (tests/field/escape.py, also on the DaemonSet), an upgrade from the previous release
# (tests/field/previous-release.sh builds its .deb from this repository's history, cached by
# commit), its rollback and the upgrade again.
# Cookies are read by util-linux coresched.
#
#   tests/field/run.sh [--update-fixtures]
#
# Builds the .deb and the DaemonSet's installer image (scripts/package.sh deb image) and the pods'
# image from the Debian 13 root on the host.
# --update-fixtures copies the states the engines sent into tests/fixtures/field/ (tests/field/fixtures.py).
# The exec-window probe (examples/exec-window.rs) is built static like the shipped binary and put
# into the image as /usr/bin/exec-window (tests/field/exec.sh runs it in containers); the fork
# storm (examples/fork-storm.rs), built the same way, goes to the guest as in/fork-storm (exec.sh
# runs it on the node, outside every container). The co-run recorder (examples/corun.rs), built the
# same way, is /usr/bin/corun in the image and in/corun on the node (tests/field/isolation.py).
# Env passed to the guest: OCH_FIELD_PARTS (default: all parts, in guest.sh's order), OCH_EXEC_N,
# OCH_EXEC_N_{RUNC,CRUN,PODMAN,NSENTER,CRI,CRI_EXEC}, OCH_EXEC_FORKS, OCH_EXEC_COST_N
# (tests/field/exec.sh), OCH_ISO_SECONDS, OCH_ISO_CONTROL_MIN (tests/field/isolation.py). OCH_FIELD_TIMEOUT: the guest's timeout in seconds (default 3600).
# OCH_FIELD_KEEP=1 keeps the exchange directory (logs) after a passing run too.
# The exchange directory (logs, captured states) is kept when the run fails, and its path printed.
# The exec part's table (exec/exec-table.md in the exchange directory) is also copied to
# target/field/exec-table.md, passing or failing; so are the escape scenarios' heal times
# (escape/latency.txt, from the escape and DaemonSet parts) to target/field/escape-latency.txt.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."

update=0
case ${1:-} in
--update-fixtures) update=1 ;;
"") ;;
*) echo "usage: tests/field/run.sh [--update-fixtures]" >&2; exit 2 ;;
esac

log() { printf 'field: %s\n' "$*" >&2; }

tests/vm/vm.sh deps
ROOT=$(tests/vm/vm.sh rootfs)
rm -f target/packaging/oci-coresched-hook-image.tar # never a stale one: built below, or missing
scripts/package.sh deb image >/dev/null
DEB=$(find target/debian -maxdepth 1 -name 'oci-coresched-hook_*_amd64.deb' -printf '%T@ %p\n' | sort -rn | head -n 1 | cut -d' ' -f2-)
[[ -f $DEB ]] || { log "no .deb under target/debian after scripts/package.sh deb"; exit 1; }
# The probe, with scripts/package.sh's static flags and target (the same build cache).
TRIPLE=x86_64-unknown-linux-gnu
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps --offline | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
t0=$(date +%s)
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs" \
    cargo build --quiet --release --locked --target "$TRIPLE" --example exec-window --example fork-storm --example corun
PROBE=$TARGET_DIR/$TRIPLE/release/examples/exec-window
STORM=$TARGET_DIR/$TRIPLE/release/examples/fork-storm
CORUN=$TARGET_DIR/$TRIPLE/release/examples/corun
for b in "$PROBE" "$STORM" "$CORUN"; do
    file "$b" | grep -q 'static-pie linked' || { log "$b is not static-pie: $(file "$b")"; exit 1; }
done
log "exec-window probe, fork storm and co-run recorder built in $(($(date +%s) - t0)) s"

# The previous release's .deb, node installer image and DaemonSet manifest, for the upgrade part
# and the DaemonSet part's rolling update between releases (built from this repository's history
# once, cached by commit).
PREV=$(tests/field/previous-release.sh)

X=$(mktemp -d "${TMPDIR:-/tmp}/och-field.XXXXXX")
chmod 755 "$X"
mkdir -p "$X/in" "$X/states"
cp -- "$DEB" "$X/in/oci-coresched-hook.deb"
cp -- "$PREV/oci-coresched-hook.deb" "$X/in/previous.deb"
cp -- "$PREV/oci-coresched-hook-image.tar" "$X/in/previous-image.tar"
cp -- "$PREV/daemonset.yaml" "$X/in/previous-daemonset.yaml"
cp -- "$STORM" "$X/in/fork-storm"
cp -- "$CORUN" "$X/in/corun"
python3 tests/field/mkimage.py "$ROOT" "$X/in" docker.io/local/field:1 "$PROBE=usr/bin/exec-window" "$CORUN=usr/bin/corun"
# The DaemonSet part's node installer image, as `make package` builds it (the part fails without it).
if [[ -f target/packaging/oci-coresched-hook-image.tar ]]; then cp -- target/packaging/oci-coresched-hook-image.tar "$X/in/"; fi

# Under CI every part runs: a left-over OCH_FIELD_PARTS must not quietly drop one.
if [[ -n ${CI:-} && -n ${OCH_FIELD_PARTS:-} ]]; then
    log "OCH_FIELD_PARTS=$OCH_FIELD_PARTS is set under CI: the field tier runs all of its parts there"
    exit 1
fi
rm -f target/field/exec-table.md target/field/isolation-table.txt target/field/escape-latency.txt # never stale: copied from this run's guest below, or missing
start=$(date +%s)
rc=0
genv=()
for v in OCH_FIELD_PARTS OCH_EXEC_N OCH_EXEC_N_RUNC OCH_EXEC_N_CRUN OCH_EXEC_N_PODMAN OCH_EXEC_N_NSENTER OCH_EXEC_N_CRI \
    OCH_EXEC_N_CRI_EXEC OCH_EXEC_FORKS OCH_EXEC_COST_N OCH_ISO_SECONDS OCH_ISO_CONTROL_MIN; do
    [[ -n ${!v:-} ]] && genv+=(--env "$v=${!v}")
done
# The guest runs the scripts of a copy taken now (tests/field/ and packaging/, all the parts read):
# bash reads a script as it runs it, so an edit to the checkout during the guest's run would
# change what the running guest executes.
S=$X/src
mkdir -p "$S/tests" && cp -a tests/field "$S/tests/" && cp -a packaging "$S/"
REPO=$PWD
(cd "$S" && "$REPO/tests/vm/vm.sh" field --xchg "$X" --timeout "${OCH_FIELD_TIMEOUT:-3600}" "${genv[@]}" -- tests/field/guest.sh) || rc=$?
log "guest run: $(($(date +%s) - start)) s, exit status $rc"
if [[ -f $X/exec/exec-table.md ]]; then
    mkdir -p target/field && cp -- "$X/exec/exec-table.md" target/field/exec-table.md
    log "exec window table: target/field/exec-table.md"
fi
if [[ -f $X/isolation/table.txt ]]; then
    mkdir -p target/field && cp -- "$X/isolation/table.txt" target/field/isolation-table.txt
    log "co-run pairs through the routes (route|pair|wanted|share|control|try): target/field/isolation-table.txt"
fi
if [[ -f $X/escape/latency.txt ]]; then
    mkdir -p target/field && cp -- "$X/escape/latency.txt" target/field/escape-latency.txt
    log "fail-open containers healed, seconds from the cause's end (route|scenario|cause|seconds|reads|exec): target/field/escape-latency.txt"
fi
# The pages the DaemonSet part scraped as Prometheus does, checked by promtool (a reader this
# project did not write) here on the host: the guest root has no promtool.
if [[ -z ${OCH_FIELD_PARTS:-} || " $OCH_FIELD_PARTS " == *" daemonset "* ]]; then
    if ! compgen -G "$X/daemonset/scrapes/*.prom" >/dev/null; then
        log "FAILED: the DaemonSet part saved no scraped page ($X/daemonset/scrapes)"
        rc=1
    elif ! command -v promtool >/dev/null; then
        log "promtool is missing (apt-get install prometheus): the DaemonSet's scraped pages are not checked"
        [[ -n ${CI:-} ]] && rc=1
    else
        for page in "$X"/daemonset/scrapes/*.prom; do
            st=0
            out=$(promtool check metrics <"$page" 2>&1) || st=$?
            if ((st == 0)); then
                log "promtool check metrics accepts the scraped page $(basename "$page") ($(wc -l <"$page") lines)"
            else
                log "FAILED: promtool check metrics rejects the scraped page $page (exit $st): $out"
                rc=1
            fi
        done
    fi
fi
if ((update)); then
    python3 tests/field/fixtures.py "$X/states" tests/fixtures/field
fi
if ((rc != 0)); then
    log "FAILED; logs and captured states kept in $X (results.tap, journal.txt, containerd.log, hook.log, states/)"
    exit "$rc"
fi
if [[ ${OCH_FIELD_KEEP:-0} == 1 ]]; then
    log "passed; logs kept in $X (OCH_FIELD_KEEP=1)"
else
    rm -rf -- "$X"
fi
