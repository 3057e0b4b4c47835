#!/usr/bin/env bash
# The node's own state on the real CONFIG_SCHED_CORE kernel, run INSIDE the VM guest (tests/vm/tier.sh
# through tier-guest.sh): what `doctor` says, and the sched_ext guard with real runc.
#   (a) doctor on a node that isolates (SMT on, core scheduling supported): its kernel, SMT and
#       sched_ext facts from the kernel itself;
#   (b) the sched_ext guard. The VM kernel has no CONFIG_SCHED_CLASS_EXT (it needs BPF JIT and BTF),
#       so in a mount namespace of its own this script mounts a tmpfs over /sys/kernel holding the
#       kernel's own interface (sched_ext/state, sched_ext/root/ops) as a loaded scheduler shows it;
#       the hook runc runs reads it there. While `enabled`: a container starts at cookie 0, the hook
#       says why, the fail-open ledger counts reason sched_ext; with fail_closed runc refuses it; doctor
#       names the scheduler and exits 1. Once `disabled`: a container gets its cookie;
#   (c) doctor with SMT turned off (/sys/devices/system/cpu/smt/control), then on again.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
if [[ ${OCH_NODE_INNER:-} != 1 ]]; then
    OCH_NODE_INNER=1 exec unshare --mount --propagation private "$0" "$@"
fi
E2E_NAME=node
# shellcheck source=tests/vm/containers.sh
source tests/vm/containers.sh

och() { "$BIN" --log-level off --config "$WORK/config.toml" --state-dir "$STATE" "$@"; }
# doctor_run [ARGS]: doctor --json, its status into $rc, its output into $out.
doctor_run() {
    rc=0
    out=$(och doctor --json "$@" 2>"$WORK/doctor.err") || rc=$?
}
# fact NAME FIELD: a field of doctor's fact NAME in $out.
fact() { jq -r --arg n "$1" --arg f "$2" '[.facts[] | select(.name == $n) | .[$f]] | first // "absent"' <<<"$out"; }

web_a='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-a"}'
echo "# node on $(uname -r): smt $(cat /sys/devices/system/cpu/smt/control)/$(cat /sys/devices/system/cpu/smt/active)"

# (a) The kernel as it is.
doctor_run
echo "# doctor (exit $rc):"; jq -r '.facts[] | "#   \(.level) \(.name): \(.summary)"' <<<"$out" || cat "$WORK/doctor.err"
check "doctor: core scheduling supported by the kernel" test "$(fact kernel level)" = ok
check "doctor: SMT on and active" grep -q '^ok$' <<<"$(fact smt level)"
check "doctor: no sched_ext in this kernel" test "$(fact sched_ext level)" = ok

# (b) A scheduler loaded, as /sys/kernel/sched_ext shows one.
mount -t tmpfs -o mode=0755 och-sysfs-kernel /sys/kernel
mkdir -p /sys/kernel/sched_ext/root
echo enabled >/sys/kernel/sched_ext/state
echo simple >/sys/kernel/sched_ext/root/ops
echo 1 >/sys/kernel/sched_ext/enable_seq
started "runc starts g1 while a sched_ext scheduler is enabled (the hook fails open)" g1 "$web_a"
check "g1 read cookie 0x0 as its first action" test "$(self_cookie g1)" = 0x0
check "g1's init holds cookie 0x0" test "$(cookie g1)" = 0x0
check "the hook said why: held off, naming the scheduler" grep -q 'held off: the sched_ext scheduler "simple" is enabled' "$WORK/hook.log"
ledger=$STATE/fail-open/sched_ext
check "the fail-open ledger counts reason sched_ext" test -s "$ledger"
check "metrics: oci_coresched_hook_fail_open_total{reason=\"sched_ext\"} counted" \
    grep -Eq '^oci_coresched_hook_fail_open_total\{reason="sched_ext"\} [1-9]' <<<"$(och metrics)"
write_config "$WORK/closed.toml" "fail_closed = true"
if start g2 "$web_a" runc "$WORK/closed.toml"; then
    bad "runc refused g2 with fail_closed while a sched_ext scheduler is enabled (it started)"
else
    ok "runc refused g2 with fail_closed while a sched_ext scheduler is enabled"
fi
och reconcile >/dev/null 2>&1 || true
check "reconcile made no cookie meanwhile: g1 still 0x0" test "$(cookie g1)" = 0x0
doctor_run
check "doctor exits 1 while a scheduler is enabled" test "$rc" = 1
check "doctor's sched_ext fact fails and names the scheduler" \
    test "$(fact sched_ext level)" = fail -a "$(grep -c simple <<<"$(fact sched_ext summary)")" = 1
echo "#   $(fact sched_ext summary)"

echo disabled >/sys/kernel/sched_ext/state
rm -r /sys/kernel/sched_ext/root
started "runc starts g3 once the scheduler is disabled" g3 "$web_a"
g3=$(cookie g3)
check "g3 got a cookie of its own ($g3)" test "$g3" != 0x0 -a -n "$g3"
doctor_run
check "doctor: sched_ext disabled is ok" test "$(fact sched_ext level)" = ok
umount /sys/kernel
stop g1; stop g3

# (c) SMT off, then on again.
if echo off >/sys/devices/system/cpu/smt/control 2>"$WORK/smt.err"; then
    doctor_run
    echo "# doctor with SMT off (exit $rc):"; jq -r '.facts[] | "#   \(.level) \(.name): \(.summary)"' <<<"$out"
    check "SMT off: active 0" test "$(cat /sys/devices/system/cpu/smt/active)" = 0
    check "doctor with SMT off: the smt fact says off" grep -q 'off' <<<"$(fact smt summary)"
    check "doctor with SMT off: not a failure of the kernel (nothing shares a core)" test "$(fact kernel level)" != fail
    echo on >/sys/devices/system/cpu/smt/control
    check "SMT on again: active 1" test "$(cat /sys/devices/system/cpu/smt/active)" = 1
else
    bad "the guest refused SMT control: $(cat "$WORK/smt.err")"
fi
echo "node: $pass passed, $fail failed"
((fail == 0))
