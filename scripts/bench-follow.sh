#!/usr/bin/env bash
# `make bench-follow`: the CPU the exec follower (`reconcile --follow`) spends per process event,
# natively on this host, under the load most of a node's events are: a fork storm outside every
# member cgroup (`examples/fork-storm.rs`, children that exit at once). The follower runs over the
# shared fake kernel (`--features fake-kernel`, `OCH_FAKE_KERNEL`: this host has no
# CONFIG_SCHED_CORE) with one live member, a `sleep` in a cgroup of its own in the host's cgroup2
# tree, so its view is not empty (an empty view skips every event); the storm stays in this
# script's cgroup, which is not inside the member's. Kernel calls are the fake's, but an event
# outside every member cgroup makes none: what is measured is the real proc connector, `/proc`
# and the follower's own loop.
#
# Each run: a fresh state dir (in /dev/shm, a tmpfs like /run) and member, the follower started,
# its first `follow.prom` (written 10 s after the start) read as the baseline, the storm, 1 s for
# the follower to drain, SIGTERM (it writes `follow.prom` once more). From the two files: events
# handled (fork + exec), the follower's CPU (utime + stime, `cpu_seconds_total`), CPU per event,
# and the CPU as a share of one core over the storm's length. Printed per run, then the medians.
#
# Needs root: the proc connector takes CAP_NET_ADMIN, and the member's cgroup is made (and removed)
# in the host's cgroup2 hierarchy. The binaries are the plain release build (target/release); a
# long-running process's CPU per event does not depend on static linking.
#
# Environment: OCH_BENCH_RATE (forks per second, default 10000; 0 = as fast as one process forks),
# OCH_BENCH_SECONDS (storm length, default 10), OCH_BENCH_RUNS (default 5), OCH_BENCH_HOOK (the
# binary to measure; default the one built here), OCH_BENCH_DIR (default /dev/shm).
set -euo pipefail
cd "$(dirname "$0")/.."

rate=${OCH_BENCH_RATE:-10000}
seconds=${OCH_BENCH_SECONDS:-10}
runs=${OCH_BENCH_RUNS:-5}
base=${OCH_BENCH_DIR:-/dev/shm}
[[ $rate =~ ^[0-9]+$ && $runs =~ ^[1-9][0-9]*$ ]] ||
    { echo "bench-follow.sh: OCH_BENCH_RATE and OCH_BENCH_RUNS must be whole numbers" >&2; exit 2; }
[[ $(id -u) == 0 ]] ||
    { echo "bench-follow.sh: needs root (the proc connector wants CAP_NET_ADMIN; the member's cgroup is made in the host's cgroup2 tree)" >&2; exit 2; }
command -v cargo >/dev/null || { echo "bench-follow.sh: cargo is not installed (rustup.rs)" >&2; exit 2; }

# The cgroup2 hierarchy: the unified mount of a hybrid layout, or the whole tree.
v2=
for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [[ $(stat -f -c %T "$d" 2>/dev/null) == cgroup2fs ]]; then v2=$d; break; fi
done
[[ -n $v2 ]] || { echo "bench-follow.sh: no cgroup2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup" >&2; exit 2; }

cargo build --release --locked --features fake-kernel --bin oci-coresched-hook --example fork-storm
hook=${OCH_BENCH_HOOK:-target/release/oci-coresched-hook}
storm=target/release/examples/fork-storm

cg="$v2/och-bench-follow-$$"
work=$(mktemp -d "$base/och-bench-follow.XXXXXX")
follower=
cleanup() {
    [[ -n $follower ]] && kill -9 "$follower" 2>/dev/null
    if [[ -d $cg ]]; then
        for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$cg"

# `prom FILE NAME`: the value of the sample NAME (with its labels) in a Prometheus text file.
prom() { awk -v n="$2" '$1 == n { print $2; found = 1 } END { if (!found) exit 1 }' "$1"; }
events() { echo "$(prom "$1" 'oci_coresched_hook_follow_events_total{kind="fork"}') + $(prom "$1" 'oci_coresched_hook_follow_events_total{kind="exec"}')" | bc; }

echo "bench-follow: follower $hook, storm $rate forks/s for $seconds s outside the member's cgroup ${cg#"$v2"}, $runs runs, $(nproc) CPUs, kernel $(uname -r)" >&2
printf '%-4s %10s %9s %9s %9s %9s %8s %6s\n' run forks 'rate/s' events cpu_ms 'us/event' '%core' lost
results=()
for run in $(seq "$runs"); do
    dir="$work/$run"
    mkdir -p "$dir/cgroup"
    ln -s "$v2" "$dir/cgroup/unified"
    printf 'syslog = false\nlog_level = "info"\n' >"$dir/config.toml"
    export OCH_FAKE_KERNEL="$dir/fake-kernel.json" OCH_FAKE_CGROUP_ROOT="$dir/cgroup"
    och=("$hook" --config "$dir/config.toml" --state-dir "$dir/state")
    sleep 600 </dev/null >/dev/null 2>&1 &
    init=$!
    echo "$init" >"$cg/cgroup.procs"
    printf '{"ociVersion":"1.0.2","id":"bench-%s","status":"creating","pid":%s,"annotations":{"io.kubernetes.pod.namespace":"bench","oci-coresched-hook/group":"web"}}' \
        "$run" "$init" | "${och[@]}" hook 2>"$dir/hook.log" ||
        { echo "bench-follow.sh: the member's createRuntime hook failed:" >&2; cat "$dir/hook.log" >&2; exit 1; }
    "${och[@]}" reconcile --follow --interval 3600 2>"$dir/follow.log" &
    follower=$!
    prom_file="$dir/state/follow.prom"
    for _ in $(seq 300); do [[ -s $prom_file ]] && break; sleep 0.1; done
    [[ -s $prom_file ]] || { echo "bench-follow.sh: the follower wrote no follow.prom in 30 s:" >&2; cat "$dir/follow.log" >&2; exit 1; }
    grep -q 'following process events' "$dir/follow.log" ||
        { echo "bench-follow.sh: the follower has no process events:" >&2; cat "$dir/follow.log" >&2; exit 1; }
    [[ $(prom "$prom_file" oci_coresched_hook_follow_members) == 1 ]] ||
        { echo "bench-follow.sh: the follower's view does not hold the member:" >&2; cat "$dir/follow.log" "$prom_file" >&2; exit 1; }
    cp "$prom_file" "$dir/before.prom"
    out=$("$storm" --rate "$rate" --seconds "$seconds")
    sleep 1
    kill -TERM "$follower"
    wait "$follower" || { echo "bench-follow.sh: the follower failed:" >&2; cat "$dir/follow.log" >&2; exit 1; }
    follower=
    kill -9 "$init" 2>/dev/null || true
    wait "$init" 2>/dev/null || true
    forks=$(sed -n 's/.*forks=\([0-9]*\).*/\1/p' <<<"$out")
    secs=$(sed -n 's/.*seconds=\([0-9.]*\).*/\1/p' <<<"$out")
    achieved=$(sed -n 's/.*rate=\([0-9]*\).*/\1/p' <<<"$out")
    ev=$(echo "$(events "$prom_file") - $(events "$dir/before.prom")" | bc)
    cpu=$(echo "$(prom "$prom_file" oci_coresched_hook_follow_cpu_seconds_total) - $(prom "$dir/before.prom" oci_coresched_hook_follow_cpu_seconds_total)" | bc -l)
    lost=$(echo "$(prom "$prom_file" oci_coresched_hook_follow_events_lost_total) - $(prom "$dir/before.prom" oci_coresched_hook_follow_events_lost_total)" | bc)
    us=$(echo "scale=3; $cpu * 1000000 / $ev" | bc -l)
    core=$(echo "scale=2; $cpu * 100 / $secs" | bc -l)
    printf '%-4s %10s %9s %9s %9.0f %9.2f %8.2f %6s\n' "$run" "$forks" "$achieved" "$ev" "$(echo "$cpu * 1000" | bc -l)" "$us" "$core" "$lost"
    results+=("$achieved $ev $us $core")
done
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { printf '%s\n' "${results[@]}" | awk -v c="$1" '{ print $c }' | median; }
printf 'median: rate %s forks/s, %s events, %s us/event, %s%% of one core (%s runs)\n' "$(col 1)" "$(col 2)" "$(col 3)" "$(col 4)" "$runs"
