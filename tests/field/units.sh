#!/bin/bash
# Functions run through `bash -c` and wait_for look unreachable:
# shellcheck disable=SC2317
# Field tier, inside the Debian 13 guest booted by its own systemd (tests/field/guest.sh): the
# shipped systemd units as the .deb installs them (`apt install`, postinst enables and starts the
# reconcile service and the gc timer), under their sandboxing, with the packaged config
# (syslog = true). Cookies are read with util-linux `coresched get -s PID` and cross-checked with
# the hook's `inspect`. The NRI unit is run by tests/field/nri.py, where containerd has NRI on.
#
#   units.sh check ROOTFS_TAR   right after the installation: the units are enabled and running;
#                               the follower hears the proc connector and gives exec'd processes
#                               (root and uid 1000) their cookie from the event; the hook's
#                               decisions reach journald; `systemctl kill -s KILL` of the follower
#                               is followed by systemd's restart with every cookie unchanged; the
#                               gc service, run by hand, drops a container whose poststop never
#                               ran; `doctor` and `status` on the node as installed; a config that
#                               does not parse stops the follower with one line (no restart loop),
#                               named by check-config and doctor; `systemd-analyze security` of each
#                               service as `#` lines.
#   units.sh remove             at the end of the boot: `apt remove` stops the units and removes
#                               them (config kept), `apt purge` removes the config, the state dir
#                               and the units' enablement state.
# Prints TAP lines and "units: N passed, M failed".
set -uo pipefail
PKG=oci-coresched-hook
HOOK=/usr/bin/$PKG
STATE=/run/$PKG
PROM=$STATE/follow.prom
REC=$PKG-reconcile.service
GC=$PKG-gc.service
GCT=$PKG-gc.timer
NRI=$PKG-nri.service
X=/run/xchg
PROBE=/usr/bin/exec-window
PO=(podman --cgroup-manager cgroupfs --events-backend file --storage-driver vfs --runtime crun)

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - units: $*"; }
bad() { fail=$((fail + 1)); echo "not ok - units: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
note() { echo "# $*"; }
finish() {
    echo "units: $pass passed, $fail failed"
    ((fail == 0))
    exit
}
prop() { systemctl show -p "$2" --value "$1"; }
# is UNIT VERB WANT: `systemctl VERB UNIT` prints WANT (is-active, is-enabled)
is() {
    local got
    got=$(systemctl "$2" "$1" 2>&1)
    [[ $got == "$3" ]] && return 0
    note "systemctl $2 $1: '$got', want '$3'"
    return 1
}
export -f is note
# cookie PID: coresched's reading, which must agree with the hook's inspect (else 'disagree:...').
cookie() {
    local line c mine
    line=$(coresched get -s "$1" 2>&1) || { echo "error:$line"; return; }
    c=${line##* is }
    mine=$("$HOOK" inspect "$1" --json 2>/dev/null | jq -r .cookie)
    if [[ $mine != 0x* || $c != 0x* ]] || ((mine != c)); then
        echo "disagree:coresched=$c,inspect=$mine"
        return
    fi
    echo "$c"
}
# prom SAMPLE: the value of one sample line of follow.prom (the metric with its labels), else "absent"
prom() { awk -v s="$1" '$1 == s { print $2; f = 1 } END { if (!f) print "absent" }' "$PROM" 2>/dev/null || echo absent; }
FIXED_EVENT='oci_coresched_hook_follow_processes_fixed_total{via="event"}'
FIX_FAILED=oci_coresched_hook_follow_fix_failures_total
# prom_fresh: wait (up to 15 s) for the follower to rewrite follow.prom (every 10 s)
prom_fresh() {
    local m0 t0=$SECONDS
    m0=$(stat -c %Y.%y "$PROM" 2>/dev/null)
    while [[ $(stat -c %Y.%y "$PROM" 2>/dev/null) == "$m0" ]] && ((SECONDS - t0 < 15)); do sleep 0.5; done
}
# wait_for SECONDS CMD...: poll CMD every 0.5 s until it succeeds
wait_for() {
    local t0=$SECONDS limit=$1
    shift
    until "$@"; do
        ((SECONDS - t0 < limit)) || return 1
        sleep 0.5
    done
}
# pid_by_cmd PATTERN: the first process whose full command line matches PATTERN (pgrep -f)
pid_by_cmd() {
    local p
    wait_for 15 pgrep -f "$1" >/dev/null || return 1
    p=$(pgrep -f "$1" | head -n 1)
    echo "$p"
}
# invocation_log UNIT: the journal of the unit's current (or last) run
invocation_log() { journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID="$(prop "$1" InvocationID)"; }

check_units() {
    local rootfs=/tmp/units-rootfs
    if ! { rm -rf "$rootfs" && mkdir -p "$rootfs" && tar -xf "$1" -C "$rootfs"; }; then
        bad "cannot unpack the rootfs"
        finish
    fi
    note "units as installed: $(systemctl list-unit-files --no-legend "$PKG*" | tr -s ' ' | tr '\n' ';')"

    # 1. What the package starts (postinst): the follower and the gc timer, enabled and running;
    # the NRI plugin installed, not enabled.
    local u
    for u in "$REC" "$GCT"; do
        check "$u is enabled and active after apt install" bash -c "is $u is-enabled enabled && is $u is-active active"
    done
    check "$NRI is installed, not enabled and not running (the package leaves it to containerd and CRI-O nodes)" \
        bash -c "is $NRI is-enabled disabled && is $NRI is-active inactive"
    # The follower's sandbox lets it open the proc connector: AF_NETLINK, CAP_NET_ADMIN, and the
    # host's network namespace (the connector exists only there).
    wait_for 20 grep -q '^oci_coresched_hook_follow_events_enabled 1$' "$PROM"
    local rlog
    rlog=$(invocation_log "$REC")
    check "$REC follows the proc connector under its sandbox (its journal; follow.prom events_enabled 1)" \
        bash -c "grep -q 'following process events (proc connector, fork and exec only)' <<<\"\$1\" && grep -q '^oci_coresched_hook_follow_events_enabled 1\$' $PROM" _ "$rlog"
    grep -iE 'warn|error' <<<"$rlog" | head -n 5 | sed 's/^/#   /'

    # 2. Two containers of one group: one runs as root, one as uid 1000 (another user's
    # processes: prctl on them needs CAP_SYS_PTRACE, the only other capability the units keep).
    local name t0 out
    for name in u-root u-user; do
        t0=$SECONDS
        local user=()
        [[ $name == u-user ]] && user=(--user 1000:1000)
        if out=$("${PO[@]}" run -d --name "$name" --network none "${user[@]}" --annotation oci-coresched-hook/group=units \
            --annotation io.kubernetes.pod.namespace=tenant-a --rootfs "$rootfs" /bin/sleep 3600 2>&1); then
            note "podman run -d $name: $((SECONDS - t0)) s"
        else
            bad "podman run -d $name: $(tail -n 3 <<<"$out")"
            finish
        fi
    done
    local root_id root_init user_init want
    root_id=$("${PO[@]}" inspect -f '{{.Id}}' u-root)
    root_init=$("${PO[@]}" inspect -f '{{.State.Pid}}' u-root)
    user_init=$("${PO[@]}" inspect -f '{{.State.Pid}}' u-user)
    want=$(cookie "$root_init")
    note "group cookie $want (u-root init $root_init, u-user init $user_init, uid $(stat -c %u "/proc/$user_init"))"
    check "two containers of one group share a cookie (one runs as uid 1000)" \
        test "${want:0:2}" = 0x -a "$want" != 0x0 -a "$(cookie "$user_init")" = "$want" -a "$(stat -c %u "/proc/$user_init")" = 1000

    # 3. The hook's log reaches journald (the packaged config's syslog = true): its decision for
    # the container, under its syslog identifier.
    wait_for 15 bash -c "journalctl --no-pager -o cat -t $PKG | grep -q 'decision {.*\"container_id\":\"$root_id\"'"
    local dline
    dline=$(journalctl --no-pager -o cat -t "$PKG" | grep -m 1 "decision {.*\"container_id\":\"$root_id\"")
    check "journalctl -t $PKG shows the hook's decision for u-root: ${dline:0:140}..." test -n "$dline"

    # 4. exec'd processes get the cookie from the follower's proc connector event: the probe reads
    # its own cookie for at most 2 s (the sweep runs every 60 s), and follow.prom counts each fix
    # under via="event".
    prom_fresh
    local ev0 ev1 fl0 fl1 line_root line_user
    ev0=$(prom "$FIXED_EVENT") fl0=$(prom "$FIX_FAILED")
    line_root=$("${PO[@]}" exec u-root "$PROBE" 2>&1)
    line_user=$("${PO[@]}" exec --user 1000:1000 u-user "$PROBE" 2>&1)
    note "probe exec'd as root: $line_root; as uid 1000: $line_user"
    "${PO[@]}" exec -d u-root /bin/sleep 3605 >/dev/null 2>&1 || bad "podman exec -d u-root sleep 3605"
    "${PO[@]}" exec -d --user 1000:1000 u-user /bin/sleep 3606 >/dev/null 2>&1 || bad "podman exec -d u-user sleep 3606"
    local s_root s_user
    s_root=$(pid_by_cmd '^/bin/sleep 3605$') s_user=$(pid_by_cmd '^/bin/sleep 3606$')
    sleep 1
    prom_fresh
    ev1=$(prom "$FIXED_EVENT") fl1=$(prom "$FIX_FAILED")
    note "follow.prom: fixed via event $ev0 -> $ev1, fix failures $fl0 -> $fl1"
    check "a process exec'd into a member container gets the group's cookie within the probe's 2 s" \
        test "${line_root##* cookie=}" = "$want" -a "${line_root%% *}" != window_ns=timeout
    check "a process exec'd as uid 1000 gets it too (prctl on another user's process under the unit's sandbox)" \
        test "${line_user##* cookie=}" = "$want" -a "${line_user%% *}" != window_ns=timeout
    # Usually one fix per exec'd process (4 here), but a runtime helper fixed on its fork passes
    # its cookie on to what it spawns, so fewer fixes can cover them all: the coverage itself is
    # the probes' and the sleepers' cookies, checked around this.
    check "the follower fixed them from proc connector events (processes_fixed_total{via=\"event\"} $ev0 -> $ev1, no fix failures)" \
        awk -v a="$ev0" -v b="$ev1" -v f0="$fl0" -v f1="$fl1" 'BEGIN { exit !(a != "absent" && b - a >= 1 && f0 == f1) }'
    check "exec'd sleepers (root pid $s_root, uid 1000 pid $s_user) have the cookie" \
        test "$(cookie "${s_root:-0}")" = "$want" -a "$(cookie "${s_user:-0}")" = "$want"

    # 5. systemctl kill -s KILL: systemd restarts the follower (Restart=always); no cookie moves,
    # and the new follower hears events again.
    local main0 n0 main1
    main0=$(prop "$REC" MainPID) n0=$(prop "$REC" NRestarts)
    systemctl kill -s KILL "$REC"
    t0=$SECONDS
    restarted() {
        local m
        m=$(prop "$REC" MainPID)
        [[ $(prop "$REC" NRestarts) == $((n0 + 1)) && $(prop "$REC" ActiveState) == active && $m != 0 && $m != "$main0" ]]
    }
    wait_for 30 restarted
    main1=$(prop "$REC" MainPID)
    check "systemctl kill -s KILL $REC: systemd restarted it (NRestarts $n0 -> $(prop "$REC" NRestarts), pid $main0 -> $main1, $((SECONDS - t0)) s)" restarted
    check "the killed follower (pid $main0) is gone" test ! -d "/proc/$main0"
    check "through the follower's kill and restart, both inits and both exec'd sleepers keep the group's cookie" \
        test "$(cookie "$root_init")" = "$want" -a "$(cookie "$user_init")" = "$want" -a \
        "$(cookie "${s_root:-0}")" = "$want" -a "$(cookie "${s_user:-0}")" = "$want"
    wait_for 20 grep -q '^oci_coresched_hook_follow_events_enabled 1$' "$PROM"
    local line
    line=$("${PO[@]}" exec --user 1000:1000 u-user "$PROBE" 2>&1)
    check "after the restart a process exec'd as uid 1000 gets the cookie ($line)" test "${line##* cookie=}" = "$want"
    check "the follower process itself has cookie 0x0" test "$(cookie "$main1")" = 0x0

    # 6. The gc timer's service, run by hand: it drops a container whose poststop never ran. Its
    # runtime is killed first (conmon, -9), then its processes: podman never runs the poststop.
    # The follower is stopped meanwhile: within 10 s of an init's death it removes the member
    # itself, and this check is about gc.
    local user_id conmon
    user_id=$("${PO[@]}" inspect -f '{{.Id}}' u-user)
    conmon=$("${PO[@]}" inspect -f '{{.State.ConmonPid}}' u-user)
    systemctl stop "$REC"
    kill -9 "$conmon"
    kill -9 "$user_init" "${s_user:-}" 2>/dev/null
    wait_for 15 test ! -d "/proc/$user_init"
    local before after
    before=$("$HOOK" list --json | jq -r --arg id "$user_id" '.[].members[] | select(.id == $id) | .live')
    note "u-user (conmon $conmon and init $user_init killed): cached with live=$before"
    systemctl start "$GC"
    after=$("$HOOK" list --json | jq -r '.[].members[].id')
    check "$GC run by hand exits 0 (Result $(prop "$GC" Result), status $(prop "$GC" ExecMainStatus))" \
        test "$(prop "$GC" Result)" = success -a "$(prop "$GC" ExecMainStatus)" = 0
    check "gc dropped the container whose poststop never ran and kept the live one" \
        test "$before" = false -a -n "$after" -a "$(grep -c "$user_id" <<<"$after")" = 0 -a "$(grep -c "$root_id" <<<"$after")" = 1
    invocation_log "$GC" | grep -iE 'warn|error' | head -n 5 | sed 's/^/#   gc: /'
    systemctl start "$REC"
    check "$REC runs again after the gc check" systemctl is-active --quiet "$REC"

    # 8. doctor on the node as the package installed it: core scheduling supported, SMT on, no
    # sched_ext, the packaged config, the follower running this build, a clean audit, podman wired
    # by the hooks.d file. The guest's containerd runs too, and nothing wires it yet (the later
    # parts do): doctor must say so, as the one failing fact, the route it leaves uncovered. The
    # field tier's capture wrapper stands at the hooks.d file's path (another file than the packaged
    # binary), so hooks.d may warn.
    local dout drc=0 bad_facts
    dout=$("$HOOK" doctor --json 2>"$X/doctor.err") || drc=$?
    "$HOOK" doctor 2>&1 | sed 's/^/#   doctor: /'
    bad_facts=$(jq -r '[.facts[] | select(.level == "fail" or .level == "warn") | .name] | sort | join(" ")' <<<"$dout" 2>/dev/null || echo "no report")
    check "doctor on the systemd node: exit 1, verdict does_not_isolate, containerd unwired is the failing fact (exit $drc; not ok: $bad_facts)" \
        bash -c "[[ $drc == 1 && \$(jq -r .verdict <<<\"\$1\") == does_not_isolate && ( '$bad_facts' == 'containerd routes' || '$bad_facts' == 'containerd hooks.d routes' ) ]]" _ "$dout"
    check "doctor on the systemd node: its routes fact names podman's hooks.d and the unwired containerd" \
        bash -c "jq -e '[.facts[] | select(.name == \"routes\")] | first | .summary | contains(\"podman (hooks.d)\") and contains(\"containerd\")' <<<\"\$1\" >/dev/null" _ "$dout"
    for f in kernel smt sched_ext config follower audit; do
        check "doctor on the systemd node: $f ok" test "$(jq -r --arg n "$f" '[.facts[] | select(.name == $n) | .level] | first' <<<"$dout")" = ok
    done
    local sout src=0
    sout=$("$HOOK" status 2>&1) || src=$?
    check "status, doctor's short form, agrees on the exit status ($src) and says the verdict first ($(head -n 1 <<<"$sout"))" \
        test "$src" = "$drc" -a -n "$sout"

    # 9. A config that does not parse: the follower stops with one line saying which key, and
    # stays stopped (no restart every 2 s); check-config and doctor name the key. Then fixed.
    cp /etc/$PKG/config.toml "$X/config.units.bak"
    echo 'fail_closd = true' >>/etc/$PKG/config.toml
    local nr0
    nr0=$(prop "$REC" NRestarts)
    systemctl restart "$REC" 2>/dev/null
    stopped() { [[ $(prop "$REC" ActiveState) == failed || $(prop "$REC" ActiveState) == inactive ]]; }
    wait_for 15 stopped
    sleep 5
    check "a bad config: $REC stopped ($(prop "$REC" ActiveState), status $(prop "$REC" ExecMainStatus)) and stays stopped (NRestarts $nr0 -> $(prop "$REC" NRestarts))" \
        bash -c "[[ \$(systemctl show -p ActiveState --value $REC) != active && \$(systemctl show -p ExecMainStatus --value $REC) == 2 && \$(systemctl show -p NRestarts --value $REC) == $nr0 ]]"
    check "systemctl status $REC shows the line naming the key" bash -c "systemctl status --no-pager -l $REC 2>&1 | grep -q 'fail_closd'"
    local cc=0
    "$HOOK" check-config >"$X/check-config.out" 2>&1 || cc=$?
    check "check-config: exit 1 naming the key ($(grep -o 'unknown field `fail_closd`' "$X/check-config.out"))" \
        bash -c "[[ $cc == 1 ]] && grep -q fail_closd $X/check-config.out"
    drc=0
    dout=$("$HOOK" doctor --json 2>/dev/null) || drc=$?
    check "doctor with the bad config: exit 1, its config fact fails naming the key" \
        bash -c "[[ $drc == 1 ]] && jq -e '[.facts[] | select(.name == \"config\" and .level == \"fail\")] | first | .summary | contains(\"fail_closd\")' <<<\"\$1\" >/dev/null" _ "$dout"
    cp "$X/config.units.bak" /etc/$PKG/config.toml
    systemctl reset-failed "$REC" "$GC" 2>/dev/null
    systemctl start "$REC"
    check "config fixed: $REC runs again" systemctl is-active --quiet "$REC"

    # 10. Exposure scores (reported, not asserted).
    local score
    for u in "$REC" "$GC" "$NRI"; do
        systemd-analyze security --no-pager "$u" >"$X/security-$u.txt" 2>&1
        score=$(grep -o 'Overall exposure level for .*' "$X/security-$u.txt" | sed 's/Overall exposure level for //')
        note "systemd-analyze security: ${score:-$(tail -n 1 "$X/security-$u.txt")}"
    done

    out=$("${PO[@]}" rm -f -t 0 u-root 2>&1) || note "podman rm -f u-root: $(tail -n 1 <<<"$out")"
    # Nothing of u-user runs; podman keeps its record when it can no longer ask the killed conmon.
    out=$("${PO[@]}" rm -f -t 0 u-user 2>&1) || note "podman rm -f u-user (its conmon was killed): $(tail -n 1 <<<"$out")"
    finish
}

remove_units() {
    local t0=$SECONDS f u
    check "apt-get remove $PKG" bash -c "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q $PKG >$X/apt-remove.log 2>&1"
    note "apt-get remove: $((SECONDS - t0)) s"
    for u in "$REC" "$GCT" "$GC" "$NRI"; do
        check "after apt remove: $u is stopped" is "$u" is-active inactive
    done
    check "after apt remove: no follower or NRI plugin process is left" \
        bash -c "! pgrep -f '$PKG (reconcile|nri)' >/dev/null"
    local left=
    for f in "$HOOK" /usr/share/containers/oci/hooks.d/$PKG.json /lib/systemd/system/$REC /lib/systemd/system/$GC \
        /lib/systemd/system/$GCT /lib/systemd/system/$NRI; do
        [[ -e $f ]] && left="$left $f"
    done
    check "after apt remove: the program, the hooks.d file and the units are gone${left:+ (left:$left)}" test -z "$left"
    check "after apt remove: the reconcile service and the gc timer are masked (until a reinstall or purge)" \
        bash -c "[[ \$(readlink /etc/systemd/system/$REC) == /dev/null && \$(readlink /etc/systemd/system/$GCT) == /dev/null ]]"
    check "after apt remove: /etc/$PKG/config.toml is kept" test -f /etc/$PKG/config.toml

    t0=$SECONDS
    check "apt-get purge $PKG" bash -c "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $PKG >$X/apt-purge.log 2>&1"
    note "apt-get purge: $((SECONDS - t0)) s"
    check "after apt purge: /etc/$PKG is gone" test ! -e /etc/$PKG
    check "after apt purge: $STATE is gone" test ! -e "$STATE"
    left=$(find /etc/systemd/system /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
        -name "*$PKG*" 2>/dev/null | tr '\n' ' ')
    check "after apt purge: no unit links, masks or deb-systemd-helper state left${left:+ ($left)}" test -z "$left"
    check "after apt purge: systemd has no $PKG unit file" bash -c "[[ -z \$(systemctl list-unit-files --no-legend '$PKG*') ]]"
    check "after apt purge: dpkg no longer knows $PKG" bash -c "! dpkg-query -W -f='\${Status}' $PKG 2>/dev/null | grep -q 'installed\|config-files'"
    finish
}

case ${1:-} in
check) check_units "$2" ;;
remove) remove_units ;;
*)
    echo "usage: units.sh check ROOTFS_TAR | units.sh remove" >&2
    exit 2
    ;;
esac
