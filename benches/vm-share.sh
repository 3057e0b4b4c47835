#!/usr/bin/env bash
# The VM rows of `make bench` (issues 6 and 14) against the REAL kernel (CONFIG_SCHED_CORE) in the
# VM tier (tests/vm/vm.sh). TCG inflates CPU-bound work far more than process start, so only the
# in-guest ratios mean anything. In the guest:
#   1. the process bench (benches/process.rs, OCH_BENCH_REAL=1) with the scenarios share, create,
#      lifecycle and floor: the hook against /bin/true and against the floors, spawned alike;
#   2. benches/vm-runc.sh: the hook's share of a whole `runc run -d` and `runc delete`.
#
# Host side (default): builds the timing harness, then the release hook WITHOUT the fake-kernel
# feature (static-pie, the flags of scripts/package.sh) and the floors (benches/floor/) with the
# same flags and target, then boots the VM and runs this script inside with --guest.
# Usage: benches/vm-share.sh [RUNS]      (`make bench-vm`; `make bench` runs it last)
#        benches/vm-share.sh --check     (only: can the VM run here? what is missing?)
# Environment: OCH_BENCH_RUNS (RUNS, default 30), OCH_BENCH_RUNC_RUNS (runc pairs, default 20),
# OCH_BENCH_VM_TIMEOUT (seconds for the whole guest run, default 3600).
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
    echo "vm-share.sh: error: $*" >&2
    exit 1
}
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer, got '$2'"; }

if [[ ${1:-} == --guest ]]; then
    (($# == 5)) || die "--guest HOOK HARNESS RUNS PAIRS (benches/vm-share.sh passes them)"
    hook=$2 harness=$3 runs=$4 pairs=$5
    echo "guest: $(uname -r), $(nproc) CPUs, SMT siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)"
    mkdir -p /run/och-bench
    # Both parts run even when the first fails: a boot under TCG is too slow to waste a result.
    failed=()
    echo "== process bench on the real kernel: share, create, lifecycle, floor (benches/process.rs) =="
    # The harness finds the floors in <dir of the hook>/examples/, where the host built them.
    OCH_BENCH_REAL=1 OCH_BENCH_HOOK=$hook OCH_BENCH_RUNS=$runs OCH_BENCH_ONLY=share,create,lifecycle,floor \
        OCH_BENCH_DIR=/run/och-bench "$harness" || failed+=("the process bench (exit $?)")
    echo "== runc run -d / runc delete with and without the hook (benches/vm-runc.sh) =="
    benches/vm-runc.sh "$hook" "$pairs" || failed+=("benches/vm-runc.sh (exit $?)")
    ((${#failed[@]} == 0)) || die "in the guest, failed: ${failed[*]}"
    exit 0
fi

# Everything the VM run needs on this host, before minutes of building. vm.sh deps names the
# packages it misses (and installs them when it can: root or passwordless sudo).
check() {
    local hint="or skip the VM rows of \`make bench\` with OCH_BENCH_SKIP_VM=1"
    tests/vm/vm.sh deps ||
        die "the VM cannot run here: \`tests/vm/vm.sh deps\` failed (the message above names the missing packages); install them (as root: tests/vm/vm.sh deps), $hint"
    # The guest sees the host's / read-only: benches/vm-runc.sh uses the host's jq.
    command -v jq >/dev/null ||
        die "jq is missing (benches/vm-runc.sh reads runc's and the hook's JSON with it in the guest): apt-get install jq, $hint"
}
if [[ ${1:-} == --check ]]; then
    check
    exit 0
fi

(($# <= 1)) || die "usage: benches/vm-share.sh [RUNS] | --check"
runs=${1:-${OCH_BENCH_RUNS:-30}}
pairs=${OCH_BENCH_RUNC_RUNS:-20}
timeout=${OCH_BENCH_VM_TIMEOUT:-3600}
posint RUNS "$runs"
posint OCH_BENCH_RUNC_RUNS "$pairs"
posint OCH_BENCH_VM_TIMEOUT "$timeout"
command -v cargo >/dev/null || die "cargo is not installed (rustup.rs)"
check

triple=$(rustc -vV | sed -n 's/^host: //p')
# The flags of the shipped build (scripts/package.sh).
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
# A target directory of its own. In a shared one, every build of the bench harness (the library and
# the hook with fake-kernel) re-links target/<triple>/release/oci-coresched-hook, the very path a
# host `cargo bench --bench process` (scripts/bench.sh) times: building here while a host bench runs
# would swap the hook under it, and a host bench run during the VM run would swap the hook under
# the guest (it reads the host's files live over 9p).
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/vm-bench"
log=$CARGO_TARGET_DIR/build-harness.log
mkdir -p "$CARGO_TARGET_DIR"
# The harness first: it links the library with the fake kernel for its host checks (in the guest it
# only spawns the hook below and /bin/true, and the hook talks to prctl), and building it re-links
# the hook binary WITH fake-kernel at the path below, so the hook build has to come after it.
echo "vm-share.sh: building the harness (log: $log)" >&2
cargo bench --locked --features fake-kernel --target "$triple" --bench process --no-run \
    --message-format=json-render-diagnostics >"$log.json" 2>"$log" || { tail -n 30 "$log" >&2; die "could not build the harness (log: $log)"; }
harness=$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "process" and .executable != null) | .executable' \
    "$log.json" | tail -n 1)
[[ -x $harness ]] || die "cargo built no executable for benches/process.rs (log: $log, $log.json)"
# The hook as shipped (release, no fake kernel) and the floors (benches/floor/) with the same flags
# and target: they land in $CARGO_TARGET_DIR/<triple>/release/examples/, where the harness looks.
cargo build --release --locked --target "$triple" --bin oci-coresched-hook --example floor-empty --example floor-sqlite ||
    die "could not build the release hook and the floors"
out=$CARGO_TARGET_DIR/$triple/release
hook=$out/oci-coresched-hook
for f in "$hook" "$out/examples/floor-empty" "$out/examples/floor-sqlite"; do
    [[ -x $f ]] || die "$f is missing after the build"
done
# The fake kernel is read from OCH_FAKE_KERNEL; a binary naming it was built with fake-kernel.
! grep -qa OCH_FAKE_KERNEL "$hook" || die "$hook was built with the fake-kernel feature: the VM rows must time the shipped hook"

echo "vm-share.sh: booting the VM: process bench ($runs runs per scenario), then $pairs runc pairs (timeout ${timeout} s)" >&2
exec tests/vm/vm.sh run --timeout "$timeout" -- "$PWD/benches/vm-share.sh" --guest "$hook" "$harness" "$runs" "$pairs"
