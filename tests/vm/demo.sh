#!/usr/bin/env bash
# The main job, shown: on a real CONFIG_SCHED_CORE kernel (built once and booted under QEMU by
# tests/vm/vm.sh), real runc starts three containers with the hook wired in config.json. The two
# of group tenant-a/web share one cookie; the third, tenant-b/web, is isolated. Run: `make demo`.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
tests/vm/vm.sh deps
cargo build --locked
exec tests/vm/vm.sh run --timeout 600 -- tests/vm/demo-guest.sh
