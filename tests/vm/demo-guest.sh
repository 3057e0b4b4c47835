#!/usr/bin/env bash
# Inside the VM guest (started by tests/vm/demo.sh): three runc containers, then what the hook did.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
E2E_NAME=demo
# shellcheck source=tests/vm/containers.sh
. tests/vm/containers.sh

echo "kernel $(uname -r), CPUs $(nproc), SMT siblings of cpu0: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"
echo
for c in "web-1 tenant-a" "web-2 tenant-a" "web-3 tenant-b"; do
    set -- $c
    echo "\$ runc run -d $1   # annotations: oci-coresched-hook/group=web, io.kubernetes.pod.namespace=$2"
    start "$1" "{\"oci-coresched-hook/group\":\"web\",\"io.kubernetes.pod.namespace\":\"$2\"}" ||
        { cat "$WORK/$1.out"; exit 1; }
done
echo
echo "\$ oci-coresched-hook list"
"$BIN" --log-level off --state-dir "$STATE" list
echo
for id in web-1 web-2 web-3; do
    echo "\$ oci-coresched-hook inspect \$(runc state $id | jq .pid)"
    "$BIN" --log-level off --state-dir "$STATE" inspect "$(pid_of "$id")" | sed -n 1p
done
echo
echo "What each container read as its very first action (GET on itself):"
for id in web-1 web-2 web-3; do echo "  $id: $(self_cookie "$id")"; done
echo
a=$(cookie web-1) b=$(cookie web-2) c=$(cookie web-3)
if [[ $a != 0x0 && $a == "$b" && $c != "$a" && $c != 0x0 ]]; then
    echo "web-1 and web-2 (tenant-a/web) share cookie $a; web-3 (tenant-b/web) is isolated with $c."
else
    echo "unexpected cookies: web-1=$a web-2=$b web-3=$c" >&2
    exit 1
fi

# Isolation itself: a co-run recorder on each SMT sibling, as each container's own process.
CORUN=${OCH_CORUN:?the co-run recorder (OCH_CORUN)}
# The pipes and records live in the guest (the host's share has no named pipes); the records are
# copied to the host's exchange directory at the end, for the picture.
OUT_DIR=$WORK/x
mkdir -p "$OUT_DIR"
echo 1 >/proc/sys/kernel/sched_schedstats
# probe ID CPU NAMESPACE: a container of group web in NAMESPACE whose process is the recorder on
# CPU, waiting on $OUT_DIR/ID.go, writing $OUT_DIR/ID.txt.
probe() {
    local id=$1 cpu=$2 ns=$3 dir=$WORK/bundles/$1
    mkdir -p "$dir"
    rm -f "$OUT_DIR/$id.go"
    mkfifo "$OUT_DIR/$id.go"
    jq --arg bin "$BIN" --arg cfg "$WORK/config.toml" --arg state "$STATE" --arg corun "$CORUN" --arg x "$OUT_DIR" \
        --arg id "$id" --arg cpu "$cpu" --arg ns "$ns" '
        .process.args = ["/bin/sh", "-c", ("/corun run --cpu " + $cpu + " --seconds 4 --go /x/" + $id + ".go --out /x/"
                         + $id + ".txt; exec sleep 600")]
        | .mounts += [{destination: "/corun", type: "bind", source: $corun, options: ["bind", "ro"]},
                      {destination: "/x", type: "bind", source: $x, options: ["rbind", "rw"]}]
        | .annotations = {"oci-coresched-hook/group": "web", "io.kubernetes.pod.namespace": $ns}
        | .hooks = (reduce ("createRuntime", "poststart", "poststop") as $s ({};
            .[$s] = [{path: $bin, timeout: 30,
                      args: ["oci-coresched-hook", "--config", $cfg, "--state-dir", $state, "hook", "--stage", $s]}]))' \
        "$WORK/config.template.json" >"$dir/config.json"
    ids+=("$id")
    "${RUNC[@]}" run -d --bundle "$dir" "$id" </dev/null >"$WORK/$id.out" 2>&1 || { cat "$WORK/$id.out"; exit 1; }
}
# idle GROUP...: each group's forced idle, seconds, from one `metrics` (0 before it has a series).
idle() {
    local text g v
    text=$("$BIN" --log-level off --state-dir "$STATE" metrics)
    for g in "$@"; do
        v=$(sed -n "s|^oci_coresched_hook_group_force_idle_seconds_total{core_sched_group=\"$g\"} ||p" <<<"$text")
        echo "${v:-0}"
    done
}
# phase TITLE A NS_A B NS_B: both recorders start together and spin 4 s; forced idle is read before
# and after (the containers sleep on once their recorder is done, so their cgroups are still
# there; while two recorders keep both siblings busy, this shell hardly runs), then what they saw.
phase() {
    local title=$1 a=$2 na=$3 b=$4 nb=$5 t
    probe "$a" 0 "$na"
    probe "$b" 1 "$nb"
    local ba bb
    read -r ba bb <<<"$(idle "$na/web" "$nb/web" | tr '\n' ' ')"
    t=$("$CORUN" now-plus-ms 100)
    echo "$t" >"$OUT_DIR/$a.go" &
    echo "$t" >"$OUT_DIR/$b.go" &
    wait
    while [[ ! -s $OUT_DIR/$a.txt || ! -s $OUT_DIR/$b.txt ]]; do sleep 0.2; done
    local aa ab
    read -r aa ab <<<"$(idle "$na/web" "$nb/web" | tr '\n' ' ')"
    echo
    echo "$title: one CPU-bound container on each SMT sibling for 4 s"
    echo "  $("$CORUN" overlap "$OUT_DIR/$a.txt" "$OUT_DIR/$b.txt")"
    local da db
    da=$(awk -v a="$ba" -v b="$aa" 'BEGIN { printf "%.2f s", b - a }')
    db=$(awk -v a="$bb" -v b="$ab" 'BEGIN { printf "%.2f s", b - a }')
    if [[ $na == "$nb" ]]; then
        echo "  forced idle charged to $na/web while they ran: $da"
    else
        echo "  forced idle charged while they ran: $na/web $da, $nb/web $db"
    fi
}
phase "two tenants (tenant-a/web, tenant-b/web)" tenants-a tenant-a tenants-b tenant-b
phase "one group (tenant-a/web twice)" group-a tenant-a group-b tenant-a
echo 0 >/proc/sys/kernel/sched_schedstats
cp "$OUT_DIR"/*.txt /run/xchg/
echo
echo "Two tenants never ran at once; one group's containers ran side by side, sharing the core."
