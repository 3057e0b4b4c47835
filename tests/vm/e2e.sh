#!/usr/bin/env bash
# End-to-end on a real CONFIG_SCHED_CORE kernel, run INSIDE the VM guest (tests/vm/tier.sh starts
# it through vm.sh): real runc (and crun) run containers whose config.json names the hook at
# createRuntime / poststart / poststop; the containers keep running while their init pids are read
# back with PR_SCHED_CORE GET (`oci-coresched-hook inspect`). The container rootfs is busybox with
# the host's /usr bind-mounted read-only and the hook binary bound at /och, so a container can run
# the hook binary to read its own cookie as its very first action.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
# shellcheck source=tests/vm/containers.sh
source tests/vm/containers.sh

web_a='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-a"}'
db_a='{"oci-coresched-hook/group":"db","io.kubernetes.pod.namespace":"tenant-a"}'
web_b='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-b"}'

echo "# e2e on $(uname -r), $(nproc) cpus, siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"

started "runc starts a1 (tenant-a/web)" a1 "$web_a"
started "runc starts a2 (tenant-a/web)" a2 "$web_a"
started "runc starts b1 (tenant-a/db)" b1 "$db_a"
started "runc starts t1 (tenant-b/web)" t1 "$web_b"
a1=$(cookie a1); a2=$(cookie a2); b1=$(cookie b1); t1=$(cookie t1)
echo "# cookies: a1=$a1 a2=$a2 b1=$b1 t1=$t1"
check "a1 has a cookie" test "$a1" != 0x0
check "a1 and a2 (one group) share one cookie" test "$a1" = "$a2"
check "b1 (another group) has another cookie" test "$b1" != "$a1" -a "$b1" != 0x0
check "t1 (same group name, other namespace) has another cookie" test "$t1" != "$a1" -a "$t1" != "$b1" -a "$t1" != 0x0

# A reader we did not write: util-linux coresched (Debian 13's; Debian 12's util-linux has none),
# run from the field tier's Debian 13 root, must agree with inspect on every container.
if [[ -x ${OCH_TRIXIE_ROOT:-}/usr/bin/coresched ]]; then
    for id in a1 a2 b1 t1; do
        theirs=$(chroot "$OCH_TRIXIE_ROOT" /usr/bin/coresched get -s "$(pid_of "$id")" 2>&1)
        check "coresched agrees with inspect on $id ($theirs)" test "${theirs##* is }" = "${!id}"
    done
else
    bad "util-linux coresched not found in the Debian 13 root (OCH_TRIXIE_ROOT=${OCH_TRIXIE_ROOT:-unset})"
fi

s1=$(self_cookie a1); s2=$(self_cookie a2)
check "a1's first action saw its cookie already set ($s1)" test "$s1" = "$a1"
check "a2's first action saw its group's cookie ($s2)" test "$s2" = "$a1"

started "runc starts n1 (policy none)" n1 '{"oci-coresched-hook/group":"web","oci-coresched-hook/policy":"none","io.kubernetes.pod.namespace":"tenant-a"}'
check "n1 (policy none) has cookie 0" test "$(cookie n1)" = 0x0
started "runc starts x1 (policy exclusive naming group web)" x1 '{"oci-coresched-hook/group":"web","oci-coresched-hook/policy":"exclusive","io.kubernetes.pod.namespace":"tenant-a"}'
x1=$(cookie x1)
check "x1 (exclusive) has a unique cookie" test "$x1" != 0x0 -a "$x1" != "$a1" -a "$x1" != "$b1" -a "$x1" != "$t1"

if command -v crun >/dev/null && start c1 "$web_a" crun; then
    ok "crun starts c1 (tenant-a/web)"
    check "c1 under crun joins runc's a1/a2 cookie" test "$(cookie c1)" = "$a1"
    check "c1's first action saw the group's cookie" test "$(self_cookie c1)" = "$a1"
    stop c1
    check "crun poststop removed c1 from the cache" bash -c "! grep -qw c1 <<<'$(cached_ids)'"
else
    bad "crun starts c1 (tenant-a/web): $(cat "$WORK/c1.out" 2>/dev/null)"
fi

stop a1
check "poststop removed a1 from the cache" bash -c "! grep -qw a1 <<<'$(cached_ids)'"
started "runc starts a3 after the first member left" a3 "$web_a"
check "a3 joined the surviving member a2's cookie" test "$(cookie a3)" = "$a2"
stop a2
stop a3
check "all tenant-a/web members gone from the cache" bash -c "! grep -qwE 'a2|a3' <<<'$(cached_ids)'"
started "runc starts a4 into the empty group" a4 "$web_a"
a4=$(cookie a4)
check "a4 got a fresh non-zero cookie, not a live group's" test "$a4" != 0x0 -a "$a4" != "$b1" -a "$a4" != "$t1" -a "$a4" != "$x1"

# fail_closed with a broken state dir: runc must refuse the container before it runs.
: >"$WORK/not-a-dir"
write_config "$WORK/closed.toml" "fail_closed = true"
if start f1 "$web_a" runc "$WORK/closed.toml" "$WORK/not-a-dir"; then
    bad "runc refused f1 with fail_closed and a broken state dir (it started)"
else
    ok "runc refused f1 with fail_closed and a broken state dir"
fi
check "f1's process never ran" test ! -e "$OUT/f1/self.json"
check "runc's error names the state dir problem" grep -q "state dir" "$WORK/f1.out"

# sched_idle where cpu.idle cannot be written, after the cookie was set: the container keeps its
# cookie and its cache row, so the next member shares the cookie (issue 15). On cgroup v2 a cgroup
# has cpu.idle only when its parent enables the cpu controller in cgroup.subtree_control. runc
# enables every controller along the path it is given (and cpu, a threaded controller, even in a
# parent that holds processes), so i1 and i2 run under crun with --cgroup-manager=disabled,
# started from a shell moved into $nocpu/leaf, whose parent enables nothing: their inits live in
# a cgroup without cpu.idle. i0 (runc, below the root) is the control: its cpu.idle is written.
be_batch='{"oci-coresched-hook/group":"batch","io.kubernetes.pod.namespace":"tenant-a","koordinator.sh/qosClass":"BE"}'
write_config "$WORK/idle.toml" $'[qos.BE]\nsched_idle = true'
write_config "$WORK/idle-closed.toml" $'fail_closed = true\n[qos.BE]\nsched_idle = true'
nocpu=/sys/fs/cgroup/och-e2e-nocpu
mkdir -p "$nocpu/leaf"
idle_cleanup() {
    cleanup
    rmdir "$nocpu/leaf" "$nocpu" /sys/fs/cgroup/och-e2e-i0 2>/dev/null || true
}
trap idle_cleanup EXIT
# start_nocpu ID CONFIG: crun, no cgroup manager, run from $nocpu/leaf; 0 when it started.
start_nocpu() {
    ids+=("$1")
    RT[$1]=crun
    bundle "$1" crun "$2" "$STATE" "$be_batch"
    (echo "$BASHPID" >"$nocpu/leaf/cgroup.procs" &&
        exec "${CRUN[@]}" --cgroup-manager=disabled run -d --pid-file "$WORK/$1.pid" --bundle "$WORK/bundles/$1" "$1") \
        </dev/null >"$WORK/$1.out" 2>&1
}
idle_failures() {
    "$BIN" --log-level off --state-dir "$STATE" metrics |
        sed -n 's/^oci_coresched_hook_failures_total{reason="cgroup"} //p' | grep . || echo 0
}
started "runc starts i0 (BE, sched_idle) below the root" i0 "$be_batch" runc "$WORK/idle.toml" "$STATE" /och-e2e-i0
check "i0's cpu.idle was written" test "$(cat /sys/fs/cgroup/och-e2e-i0/cpu.idle 2>&1)" = 1
stop i0
before=$(idle_failures)
if start_nocpu i1 "$WORK/idle.toml"; then ok "crun starts i1 (BE, sched_idle) in a cgroup without cpu.idle"; else
    bad "crun starts i1 (BE, sched_idle) in a cgroup without cpu.idle"; sed 's/^/#   /' "$WORK/i1.out"; fi
check "i1's init is in $nocpu/leaf, which has no cpu.idle" bash -c \
    "grep -qx '0::/och-e2e-nocpu/leaf' /proc/$(pid_of i1)/cgroup && test ! -e $nocpu/leaf/cpu.idle"
check "the hook logged i1's cpu.idle failure" \
    grep -q "WARN oci-coresched-hook\[[0-9]*\]: container i1: failed to set cpu.idle" "$WORK/hook.log"
i1=$(cookie i1)
check "i1 has a cookie ($i1)" test "$i1" != 0x0
check "i1 stays in the cache after its cpu.idle failure" bash -c "grep -qw i1 <<<'$(cached_ids)'"
if start_nocpu i2 "$WORK/idle.toml"; then ok "crun starts i2 (BE, sched_idle) in a cgroup without cpu.idle"; else
    bad "crun starts i2 (BE, sched_idle) in a cgroup without cpu.idle"; sed 's/^/#   /' "$WORK/i2.out"; fi
check "i2 shares i1's cookie instead of creating a second one" test "$(cookie i2)" = "$i1"
check "i2's first action saw i1's cookie" test "$(self_cookie i2)" = "$i1"
check "list shows i1 and i2 live in tenant-a/batch" bash -c "'$BIN' --log-level off --state-dir '$STATE' list |
    grep -E '^tenant-a/batch +(i1|i2) ' | grep -c ' yes ' | grep -qx 2"
after=$(idle_failures)
check "metrics counted 4 cpu.idle failures (createRuntime + poststart of i1, i2): $before -> $after" \
    test "$((after - before))" = 4
if start_nocpu i3 "$WORK/idle-closed.toml"; then
    bad "crun refused i3 with fail_closed and no cpu.idle (it started)"
else
    ok "crun refused i3 with fail_closed and no cpu.idle"
fi
check "i3's process never ran" test ! -e "$OUT/i3/self.json"
check "the hook logged i3's cpu.idle failure as an error" \
    grep -q "ERROR oci-coresched-hook\[[0-9]*\]: container i3: failed to set cpu.idle" "$WORK/hook.log"
stop i1
stop i2

echo "# hook log: $(grep -c decision "$WORK/hook.log") decisions, $(grep -ciE ' (warn|error) ' "$WORK/hook.log") warnings/errors"
if ((fail)); then
    echo "# hook log tail:"; tail -n 30 "$WORK/hook.log" | sed 's/^/#   /'
fi
echo "e2e: $pass passed, $fail failed"
((fail == 0))
