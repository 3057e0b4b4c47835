#!/usr/bin/env bash
# End-to-end of the operator commands on a real CONFIG_SCHED_CORE kernel, run INSIDE the VM guest
# (`tests/vm/vm.sh run -- tests/vm/e2e-ops.sh`), with the same containers as tests/vm/e2e.sh
# (tests/vm/containers.sh):
#   (a) reconcile: a process added with `runc exec` never passes a hook and keeps runc's cookie 0;
#       `reconcile --dry-run` reports it and changes nothing, `reconcile` gives it the group's
#       cookie and leaves the other groups alone;
#   (b) rebuild: after the cache is deleted, `rebuild --runc-root <this test's runc root>` finds
#       the running containers with their cookies and groups (`list --json`), skips a policy-none
#       one, and a container started afterwards joins the rebuilt group's cookie.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
E2E_NAME=e2e-ops
# shellcheck source=tests/vm/containers.sh
source tests/vm/containers.sh

och() { "$BIN" --log-level off --state-dir "$STATE" "$@"; }

# cgroup_pids PID: every process in the (v2) cgroup of PID.
cgroup_pids() {
    local cg
    cg=$(sed -n 's/^0:://p' "/proc/$1/cgroup")
    cat "/sys/fs/cgroup${cg%/}/cgroup.procs"
}

# exec_pid ID INIT: the pid of the `sleep 1000` that `runc exec` added next to the init.
exec_pid() {
    local p
    for _ in $(seq 100); do
        for p in $(cgroup_pids "$2"); do
            [[ $p != "$2" ]] && [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == "sleep 1000 " ]] && {
                echo "$p"
                return 0
            }
        done
        sleep 0.1
    done
    return 1
}

# member_field ID FIELD: a member's field (or its group, for FIELD=group) from the `list --json`
# saved in $WORK/list.json (one listing for many checks: every binary start is slow under TCG).
member_field() {
    jq -r --arg id "$1" --arg field "$2" '[.[] | .group as $g | .members[] | select(.id == $id)
        | if $field == "group" then $g else .[$field] end] | if length > 0 then .[0] | tostring else "absent" end' \
        "$WORK/list.json"
}

web_a='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-a"}'
db_a='{"oci-coresched-hook/group":"db","io.kubernetes.pod.namespace":"tenant-a"}'
none_a='{"oci-coresched-hook/group":"web","oci-coresched-hook/policy":"none","io.kubernetes.pod.namespace":"tenant-a"}'

echo "# e2e-ops on $(uname -r), $(nproc) cpus, siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"

started "runc starts a1 (tenant-a/web)" a1 "$web_a"
started "runc starts a2 (tenant-a/web)" a2 "$web_a"
started "runc starts b1 (tenant-a/db)" b1 "$db_a"
started "runc starts n1 (policy none)" n1 "$none_a"
a1=$(cookie a1); a2=$(cookie a2); b1=$(cookie b1)
echo "# cookies: a1=$a1 a2=$a2 b1=$b1 n1=$(cookie n1)"
check "a1 has a cookie" test "$a1" != 0x0
check "a1 and a2 (one group) share one cookie" test "$a1" = "$a2"
check "b1 (another group) has another cookie" test "$b1" != "$a1" -a "$b1" != 0x0

# (a) reconcile
init=$(pid_of a1)
"${RUNC[@]}" exec -d a1 sleep 1000 </dev/null >"$WORK/exec.out" 2>&1 || { bad "runc exec -d a1"; sed 's/^/#   /' "$WORK/exec.out"; }
if e=$(exec_pid a1 "$init"); then
    ok "runc exec added pid $e to a1's cgroup"
    check "the exec'd process has cookie 0 (no hook ran)" test "$(cookie_of_pid "$e")" = 0x0
    rc=0; och reconcile --dry-run >"$WORK/dry.out" 2>&1 || rc=$?
    check "reconcile --dry-run exits 0 (got $rc)" test "$rc" = 0
    check "reconcile --dry-run names pid $e" grep -qw "$e" "$WORK/dry.out"
    check "reconcile --dry-run changed nothing" test "$(cookie_of_pid "$e")" = 0x0
    if och reconcile >"$WORK/reconcile.out" 2>&1; then ok "reconcile exits 0"; else bad "reconcile exits 0"; fi
    sed 's/^/#   /' "$WORK/reconcile.out"
    check "reconcile gave the exec'd process a1's group cookie" test "$(cookie_of_pid "$e")" = "$a1"
    check "a1's init kept its cookie" test "$(cookie a1)" = "$a1"
    check "b1 (another group) kept its cookie" test "$(cookie b1)" = "$b1"
    check "n1 (policy none, not cached) kept cookie 0" test "$(cookie n1)" = 0x0
    och reconcile --dry-run >"$WORK/dry2.out" 2>&1 || true
    check "a second reconcile has nothing left to fix" bash -c "! grep -qw '$e' '$WORK/dry2.out'"
else
    bad "runc exec added a process to a1's cgroup"
fi

# (b) rebuild
rm -f "$STATE"/cache.db "$STATE"/cache.db-wal "$STATE"/cache.db-shm
check "the cache is gone" test ! -e "$STATE/cache.db"
if och rebuild --runc-root "$WORK/runc-root" >"$WORK/rebuild.out" 2>&1; then ok "rebuild exits 0"; else bad "rebuild exits 0"; fi
sed 's/^/#   /' "$WORK/rebuild.out"
check "rebuild found a1, a2, b1 and skipped n1" test "$(cached_ids)" = "a1 a2 b1"
och list --json >"$WORK/list.json"
check "a1 is in tenant-a/web" test "$(member_field a1 group)" = tenant-a/web
check "a2 is in tenant-a/web" test "$(member_field a2 group)" = tenant-a/web
check "b1 is in tenant-a/db" test "$(member_field b1 group)" = tenant-a/db
check "a1's cached cookie is its cookie" test "$(member_field a1 cookie_cached)" = "$a1"
check "a2's cached cookie is its cookie" test "$(member_field a2 cookie_cached)" = "$a2"
check "b1's cached cookie is its cookie" test "$(member_field b1 cookie_cached)" = "$b1"
check "a1's pid is its init" test "$(member_field a1 pid)" = "$init"
check "rebuild names n1 as skipped" grep -qw n1 "$WORK/rebuild.out"
check "rebuild changed no cookie" test "$(cookie a1)/$(cookie b1)/$(cookie n1)" = "$a1/$b1/0x0"
started "runc starts a5 after the rebuild" a5 "$web_a"
check "a5 joined the rebuilt group's cookie" test "$(cookie a5)" = "$a1"

if ((fail)); then
    echo "# hook log tail:"; tail -n 30 "$WORK/hook.log" | sed 's/^/#   /'
fi
echo "$E2E_NAME: $pass passed, $fail failed"
((fail == 0))
