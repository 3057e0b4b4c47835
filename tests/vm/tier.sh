#!/usr/bin/env bash
# Tier 3: the real-kernel VM. Builds the hook and the library's test binary on the host, boots the
# CONFIG_SCHED_CORE guest (tests/vm/vm.sh, kernel cached outside the clone) and runs inside it
# (tests/vm/tier-guest.sh, which prints the time of each part):
#   1. the cookie scenario suite against prctl (src/scenarios, the `linux` half, --ignored here);
#   2. tests/vm/e2e.sh: real runc and crun containers with the hook, cookies read back with GET;
#   3. tests/vm/stress.sh: 200 concurrent hooks over 10 groups against the real kernel;
#   4. tests/vm/e2e-ops.sh: reconcile of a `runc exec`'d process and rebuild of a lost cache;
#   5. tests/vm/audit.sh: `audit` finds each violation seeded with coresched, and none on a clean node;
#      tests/vm/forced-idle.sh: forced idle per group, flat for a group alone, charged to two
#      tenants that contend;
#   6. tests/vm/isolation.sh: whether containers of two groups ever ran on the two SMT siblings at
#      once, and whether one group's did (the co-run recorder, examples/corun.rs).
#   7. tests/vm/node.sh: `doctor` on the node, the sched_ext guard with real runc (a tmpfs over
#      /sys/kernel showing a loaded scheduler), `doctor` with SMT turned off and on again.
# Any guest failure, panic or timeout fails this script.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."

tests/vm/vm.sh deps
# The Debian 13 root of the field tier: its util-linux coresched cross-checks the e2e cookies.
TRIXIE_ROOT=$(tests/vm/vm.sh rootfs)
# The hook as shipped (scripts/package.sh: release, static-pie; the packaging step before this one
# has built it, so this is a cache hit): the guest runs it under TCG hundreds of times, and a debug
# build with SQLite at -O0 costs several times as much there.
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C link-arg=-Wl,-z,pack-relative-relocs" \
    cargo build --release --locked --target "$TRIPLE" --bin oci-coresched-hook --example corun
HOOK=$PWD/target/$TRIPLE/release/oci-coresched-hook
# The co-run recorder (examples/corun.rs), static like the hook: the isolation part runs it as a
# container's own process.
CORUN=$PWD/target/$TRIPLE/release/examples/corun
LIBTEST=$(cargo test --locked --lib --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"]:
        print(m["executable"])')
[[ -x $LIBTEST ]] || { echo "tier.sh: could not find the library test binary" >&2; exit 1; }

start=$(date +%s)
tests/vm/vm.sh run --timeout "${OCH_VM_TIER_TIMEOUT:-1800}" --env "OCH_TRIXIE_ROOT=$TRIXIE_ROOT" \
    --env "OCH_BIN=$HOOK" --env "OCH_CORUN=$CORUN" -- tests/vm/tier-guest.sh "$LIBTEST"
echo "tier.sh: VM tier passed in $(($(date +%s) - start)) s"
