#!/usr/bin/env bash
# Isolation itself, on the real CONFIG_SCHED_CORE kernel, run INSIDE the VM guest (tests/vm/tier.sh
# through tier-guest.sh): not cookie values but whether two tasks ran on the two SMT siblings of the
# core at the same time. Each side of a pair is the co-run recorder (examples/corun.rs, built
# static), pinned to one sibling: as a runc or crun container's own process, wired with the hook
# in its config.json, or as a plain host process. Both wait on a named pipe (no CPU), get the same
# start time, spin for OCH_ISO_SECONDS (default 3) and write when they ran; `corun overlap` says
# for how much of the shorter run time both ran.
#
# Judged (the table of the isolation tests, ARCHITECTURE.md "Test tiers"):
#   one group's containers                         >= 50% of its control's share
#   two tenants naming the same group              <= 1%
#   two groups of one tenant                       <= 1%
#   a member against an uncookied host process     <= 1%
#   a policy=none container against a host process >= 50% of its control's share
# Every pair runs right after a control pair of two uncookied host processes. Other load on the
# host can hold a vCPU off its core, and then nothing runs at once, isolated or not: a verdict
# needs its control to have co-run (>= OCH_ISO_CONTROL_MIN, default 20%); a pair whose control did
# not is measured again (up to 3 times), then fails saying so. runc runs the full set, crun three
# pairs. Prints TAP lines and one "# pair" line per measurement (the figures: also the table of
# `make bench-isolation`).
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
E2E_NAME=isolation
# shellcheck source=tests/vm/containers.sh
source tests/vm/containers.sh

CORUN=${OCH_CORUN:-}
[[ -x $CORUN ]] || { echo "isolation: the co-run recorder is missing (OCH_CORUN=${CORUN:-unset})" >&2; exit 2; }
SECONDS_=${OCH_ISO_SECONDS:-3}
CONTROL_MIN=${OCH_ISO_CONTROL_MIN:-0.20}
X=$WORK/x
mkdir -p "$X"
TABLE=${OCH_ISO_TABLE:-$WORK/table.txt}
: >"$TABLE"

# probe_bundle ID CPU ANNOTATIONS_JSON: a container whose own process is the recorder on CPU,
# waiting on $X/ID.go, writing $X/ID.txt.
probe_bundle() {
    local id=$1 cpu=$2 ann=$3 dir=$WORK/bundles/$1
    mkdir -p "$dir"
    jq --argjson ann "$ann" --arg bin "$BIN" --arg cfg "$WORK/config.toml" --arg state "$STATE" \
        --arg corun "$CORUN" --arg x "$X" --arg id "$id" --arg cpu "$cpu" --arg secs "$SECONDS_" '
        .process.args = ["/corun", "run", "--cpu", $cpu, "--seconds", $secs, "--go", ("/x/" + $id + ".go"),
                         "--out", ("/x/" + $id + ".txt")]
        | .mounts += [{destination: "/corun", type: "bind", source: $corun, options: ["bind", "ro"]},
                      {destination: "/x", type: "bind", source: $x, options: ["rbind", "rw"]}]
        | .annotations = $ann
        | .hooks = (reduce ("createRuntime", "poststart", "poststop") as $s ({};
            .[$s] = [{path: $bin, timeout: 30,
                      args: ["oci-coresched-hook", "--config", $cfg, "--state-dir", $state, "hook", "--stage", $s]}]))' \
        "$WORK/config.template.json" >"$dir/config.json"
}

# side KIND ID CPU [ANNOTATIONS_JSON]: one side of a pair, waiting for its start. KIND: runc or
# crun (a container wired with the hook) or host (a plain process of this shell, cookie 0).
side() {
    local kind=$1 id=$2 cpu=$3 ann=${4:-'{}'}
    rm -f "$X/$id.go" "$X/$id.txt"
    mkfifo "$X/$id.go"
    case $kind in
    host) "$CORUN" run --cpu "$cpu" --seconds "$SECONDS_" --go "$X/$id.go" --out "$X/$id.txt" & ;;
    runc | crun)
        ids+=("$id")
        RT[$id]=$kind
        probe_bundle "$id" "$cpu" "$ann"
        rt "$id" run -d --bundle "$WORK/bundles/$id" "$id" </dev/null >"$WORK/$id.out" 2>&1 ||
            { sed 's/^/#   /' "$WORK/$id.out"; return 1; } ;;
    esac
}

# go A B: both sides start at the same instant, 300 ms from now on CLOCK_MONOTONIC (the
# recorder's clock, which `corun now-plus-ms` reads); waits for both records.
go() {
    local t
    t=$("$CORUN" now-plus-ms 300)
    echo "$t" >"$X/$1.go" &
    echo "$t" >"$X/$2.go" &
    wait
    local end=$((SECONDS + SECONDS_ + 30))
    while [[ ! -s $X/$1.txt || ! -s $X/$2.txt ]]; do
        ((SECONDS < end)) || return 1
        sleep 0.5
    done
}

# share A B: the share of the shorter run time in which A and B both ran (a decimal fraction).
share() {
    local line
    line=$("$CORUN" overlap "$X/$1.txt" "$X/$2.txt")
    [[ $line =~ share=([0-9.]+) ]] && echo "${BASH_REMATCH[1]}"
}

ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
pct() { awk -v a="$1" 'BEGIN { printf "%.2f%%", a * 100 }'; }

# pair ROUTE LABEL WANT KIND_A ANN_A KIND_B ANN_B: a control pair of two host processes, then the
# pair (A on CPU 0, B on CPU 1), judged by WANT: "together" (>= 50% of the control's share) or
# "apart" (<= 1%).
pair() {
    local route=$1 label=$2 want=$3 ka=$4 aa=$5 kb=$6 ab=$7 try c s verdict=""
    for try in 1 2 3; do
        side host ctl-a 0 && side host ctl-b 1 && go ctl-a ctl-b || { bad "$route: $label: the control pair did not run"; return; }
        c=$(share ctl-a ctl-b)
        local a=p$RANDOM-a b=p$RANDOM-b
        if ! side "$ka" "$a" 0 "$aa" || ! side "$kb" "$b" 1 "$ab"; then
            bad "$route: $label: a side did not start"
            return
        fi
        go "$a" "$b" || { bad "$route: $label: a side wrote no record"; return; }
        s=$(share "$a" "$b")
        local cookies
        cookies=$("$CORUN" overlap "$X/$a.txt" "$X/$b.txt" | grep -o 'a_ran_ns=.*')
        for id in "$a" "$b"; do [[ ${RT[$id]:-} ]] && rt "$id" delete -f "$id" >/dev/null 2>&1 || true; done
        echo "# pair $route | $label | both ran $(pct "$s") | control $(pct "$c") | try $try | $cookies"
        echo "$route|$label|$want|$s|$c|$try" >>"$TABLE"
        if ge "$c" "$CONTROL_MIN"; then
            verdict=judged
            break
        fi
        echo "# $route: $label: the control co-ran $(pct "$c") only (under $(pct "$CONTROL_MIN")): the host held a vCPU off; measuring again"
    done
    if [[ -z $verdict ]]; then
        bad "$route: $label: no verdict: the control pair never co-ran (last $(pct "$c")); the host was too busy"
        return
    fi
    case $want in
    together) check "$route: $label: both ran $(pct "$s") of the time, >= 50% of the control's $(pct "$c")" \
        ge "$s" "$(awk -v c="$c" 'BEGIN { print c / 2 }')" ;;
    apart) check "$route: $label: both ran $(pct "$s") of the time (<= 1%; control $(pct "$c"))" ge 0.01 "$s" ;;
    esac
}

web_a='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-a"}'
db_a='{"oci-coresched-hook/group":"db","io.kubernetes.pod.namespace":"tenant-a"}'
web_b='{"oci-coresched-hook/group":"web","io.kubernetes.pod.namespace":"tenant-b"}'
none_a='{"oci-coresched-hook/group":"web","oci-coresched-hook/policy":"none","io.kubernetes.pod.namespace":"tenant-a"}'

echo "# isolation on $(uname -r), siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list), ${SECONDS_} s per measurement"
pair "runc" "one group's containers (tenant-a/web, tenant-a/web)" together runc "$web_a" runc "$web_a"
pair "runc" "two tenants naming the same group (tenant-a/web, tenant-b/web)" apart runc "$web_a" runc "$web_b"
pair "runc" "two groups of one tenant (tenant-a/web, tenant-a/db)" apart runc "$web_a" runc "$db_a"
pair "runc" "a member against an uncookied host process" apart runc "$web_a" host '{}'
pair "runc" "a policy=none container against a host process" together runc "$none_a" host '{}'
pair "crun" "one group's containers" together crun "$web_a" crun "$web_a"
pair "crun" "two tenants naming the same group" apart crun "$web_a" crun "$web_b"
pair "crun" "a member against an uncookied host process" apart crun "$web_a" host '{}'
echo "isolation: $pass passed, $fail failed"
((fail == 0))
