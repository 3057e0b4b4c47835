#!/usr/bin/env bash
# `make bench`: the whole-process table (benches/process.rs) and the criterion in-process benches
# (benches/inproc.rs), over the fake kernel (this host has no CONFIG_SCHED_CORE). No root needed:
# containers are `sleep` processes of the caller, state lives in /dev/shm (tmpfs, like /run).
# Then the VM rows, on the real kernel (benches/vm-share.sh, minutes under TCG): the process bench's
# share, create, lifecycle and floor scenarios, and the hook's share of `runc run -d` and `runc
# delete`. They need the VM tier (tests/vm/vm.sh deps: its packages, root to install them); when it
# cannot run, this fails at the start, naming what is missing. OCH_BENCH_SKIP_VM=1 skips them.
#
# The hook is built static-pie (`-C target-feature=+crt-static`, explicit --target so build scripts
# and proc macros stay dynamic): that is the release build BENCHMARKS.md recommends. The build
# goes to target/<triple>/, so it never disturbs `cargo build` / `cargo test` in target/.
#
# Environment: OCH_BENCH_DYNAMIC=1 (default dynamic linking instead, for the before/after row),
# OCH_BENCH_RUNS, OCH_BENCH_BURST_ROUNDS, OCH_BENCH_ONLY, OCH_BENCH_HOOK (see benches/process.rs),
# OCH_BENCH_SKIP_CRITERION=1 (no criterion), OCH_BENCH_SKIP_VM=1 (no VM rows), OCH_BENCH_RUNC_RUNS
# and OCH_BENCH_VM_TIMEOUT (see benches/vm-share.sh; OCH_BENCH_RUNS applies there too).
set -euo pipefail
cd "$(dirname "$0")/.."
# vm-share.sh adds the shipped flags itself: it must see RUSTFLAGS as the caller set them, or its
# cached build (RUSTFLAGS are part of cargo's fingerprint) would differ from `make bench-vm`'s.
rustflags_in=${RUSTFLAGS:-}

command -v cargo >/dev/null || { echo "bench.sh: cargo is not installed (rustup.rs)" >&2; exit 2; }
command -v sleep >/dev/null || { echo "bench.sh: sleep(1) missing" >&2; exit 2; }
[[ -x /usr/bin/time ]] || echo "bench.sh: note: /usr/bin/time missing (apt-get install time); peak RSS falls back to wait4" >&2
skip_vm=${OCH_BENCH_SKIP_VM:-0}
[[ $skip_vm == [01] ]] || { echo "bench.sh: OCH_BENCH_SKIP_VM must be 0 or 1, got '$skip_vm'" >&2; exit 2; }
# Whether the VM can run at all, before the host benches: not only at their end, minutes later.
if [[ $skip_vm != 1 ]] && ! benches/vm-share.sh --check; then
    echo "bench.sh: the VM rows cannot run here (above: what is missing); OCH_BENCH_SKIP_VM=1 make bench runs the rest" >&2
    exit 2
fi

args=(--features fake-kernel)
# `make bench-breakdown`: a hook with the phase marks (src/timing.rs) and a table of its phases.
[[ ${OCH_BENCH_TIMING:-0} == 1 ]] && args=(--features fake-kernel,phase-timing)
if [[ ${OCH_BENCH_DYNAMIC:-0} != 1 ]]; then
    triple=$(rustc -vV | sed -n 's/^host: //p')
    # The flags of the shipped build (scripts/package.sh): static-pie, packed relative relocations.
    export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs"
    args+=(--target "$triple")
fi

# The floors (benches/floor/), built like the hook; the process bench finds them next to it.
cargo build --release "${args[@]}" --example floor-empty --example floor-sqlite

echo "== whole-process timing (benches/process.rs) ==" >&2
cargo bench "${args[@]}" --bench process
if [[ ${OCH_BENCH_SKIP_CRITERION:-0} != 1 ]]; then
    echo "== in-process parts (criterion, benches/inproc.rs) ==" >&2
    cargo bench "${args[@]}" --bench inproc
fi
if [[ $skip_vm == 1 ]]; then
    echo "bench.sh: VM rows skipped (OCH_BENCH_SKIP_VM=1)" >&2
else
    echo "== real kernel in the VM: process bench and runc (benches/vm-share.sh) ==" >&2
    RUSTFLAGS=$rustflags_in benches/vm-share.sh ||
        { echo "bench.sh: the VM rows failed (above: why); OCH_BENCH_SKIP_VM=1 make bench runs the rest" >&2; exit 1; }
fi
