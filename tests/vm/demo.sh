#!/usr/bin/env bash
# The main job, shown: on a real CONFIG_SCHED_CORE kernel (built once and booted under QEMU by
# tests/vm/vm.sh), real runc starts three containers with the hook wired in config.json. The two
# of group tenant-a/web share one cookie; the third, tenant-b/web, is isolated. Then isolation
# itself: CPU-bound co-run recorders (examples/corun.rs), one on each SMT sibling, first of two
# tenants, then of one group; how much of the time both ran at once, and the forced idle each
# group was charged. The picture of who ran when, coloured by group:
# target/demo/isolation.svg (drawn by tests/vm/demo-svg.py). Run: `make demo`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
. scripts/need-cargo.sh
tests/vm/vm.sh deps
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
# The hook as the packages ship it (a debug build's SQLite is slow under TCG) and the recorder.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs" \
    cargo build --release --locked --target "$TRIPLE" --bin oci-coresched-hook --example corun
X=$(mktemp -d "${TMPDIR:-/tmp}/och-demo.XXXXXX")
trap 'rm -rf -- "$X"' EXIT
tests/vm/vm.sh run --timeout 900 --xchg "$X" --env "OCH_BIN=$PWD/target/$TRIPLE/release/oci-coresched-hook" \
    --env "OCH_CORUN=$PWD/target/$TRIPLE/release/examples/corun" -- tests/vm/demo-guest.sh
mkdir -p target/demo
cp -- "$X"/*.txt target/demo/
/usr/bin/python3 tests/vm/demo-svg.py target/demo/isolation.svg \
    "two tenants (tenant-a/web, tenant-b/web):tenant-a/web=$X/tenants-a.txt,tenant-b/web=$X/tenants-b.txt" \
    "the same, 60 ms of it@2000+60:tenant-a/web=$X/tenants-a.txt,tenant-b/web=$X/tenants-b.txt" \
    "one group (tenant-a/web twice):tenant-a/web=$X/group-a.txt,tenant-a/web=$X/group-b.txt"
echo
echo "the picture of who ran when: target/demo/isolation.svg"
