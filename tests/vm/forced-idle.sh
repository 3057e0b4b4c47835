#!/usr/bin/env bash
# The cost of isolation per group, on the real CONFIG_SCHED_CORE kernel, run INSIDE the VM guest
# (tests/vm/tier.sh through tier-guest.sh). With kernel.sched_schedstats = 1, CPU-bound co-run
# recorders (examples/corun.rs) as runc containers' own processes, pinned to the two SMT siblings:
#   - a group that runs alone (tenant-c/solo on one sibling, nothing on the other): its counter
#     oci_coresched_hook_group_force_idle_seconds_total stays flat (under 0.25 s over its 5 s: what
#     the kernel's own threads and this shell's few steps cost it);
#   - two tenants that contend (tenant-a/web and tenant-b/web, one on each sibling): each counter
#     is positive and rises from before they contend to after.
# Also the price of counting: a pipe ping-pong between two threads on one CPU (two context
# switches a round trip), with kernel.sched_schedstats 0 and 1, three rounds each (printed).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
E2E_NAME=forced-idle
# shellcheck source=tests/vm/containers.sh
source tests/vm/containers.sh

CORUN=${OCH_CORUN:-}
[[ -x $CORUN ]] || { echo "forced-idle: the co-run recorder is missing (OCH_CORUN=${CORUN:-unset})" >&2; exit 2; }
SCHEDSTATS=/proc/sys/kernel/sched_schedstats
X=$WORK/x
mkdir -p "$X"
[[ -w $SCHEDSTATS ]] || { bad "no writable $SCHEDSTATS (CONFIG_SCHEDSTATS)"; exit 1; }

# busy ID CPU SECONDS ANNOTATIONS_JSON: a runc container that runs the recorder, waiting on
# $X/ID.go, spinning on CPU for SECONDS, then sleeping, so that its cgroup (and its forced idle)
# is still there to be read once the spinning is over: while two recorders keep both siblings
# busy this shell hardly runs at all, so readings are taken before and after. Container starts
# take seconds under TCG: the pipe starts the contenders together, once both are up.
busy() {
    local id=$1 cpu=$2 secs=$3 ann=$4 dir=$WORK/bundles/$1
    mkdir -p "$dir"
    rm -f "$X/$id.go" "$X/$id.end"
    mkfifo "$X/$id.go" "$X/$id.end"
    jq --argjson ann "$ann" --arg bin "$BIN" --arg cfg "$WORK/config.toml" --arg state "$STATE" \
        --arg corun "$CORUN" --arg cpu "$cpu" --arg secs "$secs" --arg x "$X" --arg id "$id" '
        .process.args = ["/bin/sh", "-c", ("/corun run --cpu " + $cpu + " --seconds " + $secs + " --go /x/" + $id
                         + ".go --out /x/" + $id + ".txt; echo done > /x/" + $id + ".end; exec sleep 600")]
        | .mounts += [{destination: "/corun", type: "bind", source: $corun, options: ["bind", "ro"]},
                      {destination: "/x", type: "bind", source: $x, options: ["rbind", "rw"]}]
        | .annotations = $ann
        | .hooks = (reduce ("createRuntime", "poststart", "poststop") as $s ({};
            .[$s] = [{path: $bin, timeout: 30,
                      args: ["oci-coresched-hook", "--config", $cfg, "--state-dir", $state, "hook", "--stage", $s]}]))' \
        "$WORK/config.template.json" >"$dir/config.json"
    ids+=("$id")
    "${RUNC[@]}" run -d --bundle "$dir" "$id" </dev/null >"$WORK/$id.out" 2>&1 || { sed 's/^/#   /' "$WORK/$id.out"; return 1; }
}

# go ID...: the recorders of the containers start now.
go() {
    local t id
    t=$("$CORUN" now-plus-ms 100)
    for id in "$@"; do echo "$t" >"$X/$id.go" & done
    wait
}

# idle GROUP: the group's forced idle in seconds, from `metrics` (0 when it has no series yet).
idle() {
    local v
    v=$("$BIN" --log-level off --config "$WORK/config.toml" --state-dir "$STATE" metrics |
        sed -n "s|^oci_coresched_hook_group_force_idle_seconds_total{core_sched_group=\"$1\"} ||p")
    echo "${v:-0}"
}
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# wait_record ID: until the recorder of container ID is done spinning: a blocking read of the
# pipe its shell writes then (a polling loop would itself run on a sibling and hold the recorder
# idle, which is forced idle too).
wait_record() {
    read -r _ <"$X/$1.end" || bad "the recorder of $1 did not say it was done"
}
# ran ID: the seconds the recorder of container ID ran (its record's ran_ns).
ran() {
    sed -n '1s/.* ran_ns=\([0-9]*\).*/\1/p' "$X/$1.txt" | awk '{ printf "%.3f", $1 / 1e9 }'
}

echo 1 >"$SCHEDSTATS"
check "metrics says forced idle is counted (schedstats 1)" \
    bash -c "'$BIN' --log-level off --state-dir '$STATE' metrics | grep -qx 'oci_coresched_hook_schedstats_enabled 1'"

busy solo 0 5 '{"oci-coresched-hook/group":"solo","io.kubernetes.pod.namespace":"tenant-c"}' || bad "solo did not start"
s1=$(idle tenant-c/solo)
go solo
wait_record solo
s2=$(idle tenant-c/solo)
echo "# forced idle of tenant-c/solo, which ran $(ran solo) s alone: $s1 s before, $s2 s after"
check "a group that runs alone: its forced idle stays flat ($s1 -> $s2 s)" lt "$(awk -v a="$s1" -v b="$s2" 'BEGIN { print b - a }')" 0.25

busy web-a 0 8 '{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-a"}' || bad "web-a did not start"
busy web-b 1 8 '{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-b"}' || bad "web-b did not start"
a1=$(idle tenant-a/web) b1=$(idle tenant-b/web)
go web-a web-b
wait_record web-a
wait_record web-b
a2=$(idle tenant-a/web) b2=$(idle tenant-b/web)
ra=$(ran web-a) rb=$(ran web-b)
echo "# forced idle while tenant-a/web and tenant-b/web contend: tenant-a/web $a1 -> $a2 s (it ran $ra s of 8), tenant-b/web $b1 -> $b2 s (it ran $rb s of 8), before and after"
check "two tenants contending: their forced idle rises ($a1 + $b1 -> $a2 + $b2 s)" \
    lt "$(awk -v a="$a1" -v b="$b1" 'BEGIN { print a + b }')" "$(awk -v a="$a2" -v b="$b2" 'BEGIN { print a + b }')"
check "two tenants contending: each is charged (tenant-a/web $a2 s, tenant-b/web $b2 s)" bash -c "$(declare -f lt); lt 0 '$a2' && lt 0 '$b2'"
sleep 4

# The price of counting: scheduler cost per context switch, schedstats off and on, alternating.
for round in 1 2 3; do
    for on in 0 1; do
        echo "$on" >"$SCHEDSTATS"
        echo "# schedstats=$on round $round: $("$CORUN" pingpong --loops 20000 --cpu 1)"
    done
done
echo 0 >"$SCHEDSTATS"
echo "forced-idle: $pass passed, $fail failed"
((fail == 0))
