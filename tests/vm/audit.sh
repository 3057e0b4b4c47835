#!/usr/bin/env bash
# `audit` on the real CONFIG_SCHED_CORE kernel, run INSIDE the VM guest (tests/vm/tier.sh through
# tier-guest.sh): runc containers of two groups wired with the hook, then each kind of violation
# made behind the hook's back with util-linux coresched (Debian 13's, from the field tier's root:
# a reader and writer we did not write), found by `audit` at the thread that carries it (exit 1,
# one line each), then undone: a clean node is exit 0 with no line.
#   1. a thread of a member given a cookie of its own      (coresched new -t pid -d TID)
#   2. a host process joined to a tenant's cookie           (coresched copy -s INIT -d PID)
#   3. two groups on one cookie                             (coresched copy -s INIT_A -d INIT_B)
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
E2E_NAME=audit
# shellcheck source=tests/vm/containers.sh
source tests/vm/containers.sh

CS=(chroot "${OCH_TRIXIE_ROOT:-/nonexistent}" /usr/bin/coresched)
[[ -x ${OCH_TRIXIE_ROOT:-}/usr/bin/coresched ]] || { bad "util-linux coresched not found in the Debian 13 root"; exit 1; }

web_a='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-a"}'
db_a='{"oci-coresched-hook/group":"db","io.kubernetes.pod.namespace":"tenant-a"}'
started "runc starts a1 (tenant-a/web)" a1 "$web_a"
started "runc starts a2 (tenant-a/web)" a2 "$web_a"
started "runc starts b1 (tenant-a/db)" b1 "$db_a"
a1=$(pid_of a1) b1=$(pid_of b1)
sleep 1000 &
host=$!

# audit_out: runs audit, its status into $rc and its output into $out.
audit_run() {
    rc=0
    out=$("$BIN" --log-level off --config "$WORK/config.toml" --state-dir "$STATE" audit 2>&1) || rc=$?
}
audit_run
check "audit of the clean node: exit 0, no violation ($(tail -n 1 <<<"$out"))" test "$rc" = 0 -a "$(grep -c ' pid ' <<<"$out")" = 0

# 1. The thread of a2's init (a single-threaded shell: the one thread `-t pid` targets) gets a
# cookie of its own behind the hook's back. a1 is the group's oldest member: its cookie is the
# group's, so a2 is the one off it.
a2=$(pid_of a2)
"${CS[@]}" new -t pid -d "$a2"
audit_run
check "a thread given another cookie: exit 1" test "$rc" = 1
check "a thread given another cookie: found as a split of tenant-a/web at pid $a2" \
    grep -Eq "^split +pid $a2 tid $a2 .* group tenant-a/web: want 0x" <<<"$out"
sed 's/^/# audit: /' <<<"$out"
# Undo: back to the group's cookie.
"${CS[@]}" copy -s "$a1" -d "$a2" -t pid

# 2. A host process joined to tenant-a/web's cookie.
"${CS[@]}" copy -s "$a1" -d "$host"
audit_run
check "a host process on a tenant's cookie: exit 1" test "$rc" = 1
check "a host process on a tenant's cookie: found outside every member, pid $host" \
    grep -Eq "^outside +pid $host tid $host \(sleep\) container - group tenant-a/web: want 0x0" <<<"$out"
sed 's/^/# audit: /' <<<"$out"
kill "$host"
wait "$host" 2>/dev/null || true

# 3. b1 (tenant-a/db) joined to tenant-a/web's cookie: two groups on one cookie.
"${CS[@]}" copy -s "$a1" -d "$b1"
audit_run
check "two groups on one cookie: exit 1" test "$rc" = 1
check "two groups on one cookie: found at b1's init" grep -Eq "^(shared|split) +pid $b1 " <<<"$out"
sed 's/^/# audit: /' <<<"$out"
"${CS[@]}" new -d "$b1"
"$BIN" --log-level off --config "$WORK/config.toml" --state-dir "$STATE" reconcile >/dev/null 2>&1 || true
stop a1; stop a2; stop b1
audit_run
check "after the containers stopped: exit 0 ($(tail -n 1 <<<"$out"))" test "$rc" = 0
[[ $rc == 0 ]] || sed 's/^/#   /' <<<"$out"
echo "audit: $pass passed, $fail failed"
((fail == 0))
