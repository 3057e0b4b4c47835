#!/bin/sh
# The VM tier's guest side (tests/vm/tier.sh boots the guest and runs this in it):
#   tests/vm/tier-guest.sh LIBTEST
# runs its eight parts in order, stops at the first that fails, and prints each part's wall time
# (TCG is slow and the tier runs under a timeout: the times say where it goes).
set -u
part() { # part LABEL CMD...
    label=$1
    shift
    echo "== $label"
    t0=$(date +%s)
    "$@"
    rc=$?
    echo "== $label: $(($(date +%s) - t0)) s, exit status $rc"
    [ "$rc" = 0 ] || exit "$rc"
}
part "scenario suite on the real kernel" "$1" --ignored --test-threads=2 scenarios::linux
part "end-to-end with runc and crun" tests/vm/e2e.sh
part "concurrency stress on the real kernel (200 hooks)" tests/vm/stress.sh
part "operations: reconcile and rebuild" tests/vm/e2e-ops.sh
part "audit: seeded violations found, a clean node clean" tests/vm/audit.sh
part "forced idle per group: flat alone, charged when contending" tests/vm/forced-idle.sh
part "isolation: who ran at once on the two SMT siblings (runc, crun)" tests/vm/isolation.sh
part "the node: doctor, the sched_ext guard, SMT off and on" tests/vm/node.sh
