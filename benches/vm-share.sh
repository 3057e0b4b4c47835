#!/usr/bin/env bash
# Issue 6, item 3: the share path against the REAL kernel (CONFIG_SCHED_CORE) in the VM tier,
# as a ratio to /bin/true spawned the same way in the guest. TCG inflates CPU-bound work far more
# than process start, so only the in-guest ratio means anything.
#
# Host side (default): builds the release hook WITHOUT the fake-kernel feature (static-pie) and the
# timing harness, then boots the VM (tests/vm/vm.sh) and runs this script inside with --guest.
# Usage: benches/vm-share.sh [RUNS]      (`make bench-vm`)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-${OCH_BENCH_RUNS:-30}}

if [[ ${1:-} == --guest ]]; then
    hook=$2 harness=$3 runs=$4
    echo "guest: $(uname -r), $(nproc) CPUs, SMT siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)"
    mkdir -p /run/och-bench
    OCH_BENCH_REAL=1 OCH_BENCH_HOOK=$hook OCH_BENCH_RUNS=$runs OCH_BENCH_ONLY=share,create \
        OCH_BENCH_DIR=/run/och-bench "$harness"
    exit
fi

triple=$(rustc -vV | sed -n 's/^host: //p')
# The flags of the shipped build (scripts/package.sh).
export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
# The hook as shipped: release, no fake kernel.
cargo build --release --locked --target "$triple" --bin oci-coresched-hook
hook=target/$triple/release/oci-coresched-hook
# The harness (it links the library with the fake kernel for its host checks; in the guest it
# only spawns the hook above and /bin/true, and the hook talks to prctl).
harness=$(cargo bench --features fake-kernel --target "$triple" --bench process --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*\/process-[^"]*\)".*/\1/p' | tail -1)
[[ -x $harness ]] || { echo "vm-share.sh: could not build the harness" >&2; exit 125; }
exec tests/vm/vm.sh run --timeout 600 -- "$PWD/benches/vm-share.sh" --guest "$PWD/$hook" "$harness" "$runs"
