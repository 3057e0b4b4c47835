#!/usr/bin/env bash
# `make bench-footprint`: the memory and CPU of the DaemonSet's two long-running containers on a
# node at kubelet's default pod limit (110 pods) while pods come and go, natively on this host, to
# size their requests and limits (packaging/kubernetes/daemonset.yaml, BENCHMARKS.md).
#
# What runs, over the shared fake kernel (`--features fake-kernel`, `OCH_FAKE_KERNEL`: this host
# has no CONFIG_SCHED_CORE), each with `--listen` as in the DaemonSet:
#   follow  `reconcile --follow` over 110 member containers (a `sleep` each, in a cgroup of its own
#           in the host's cgroup2 tree, recorded by the hook's createRuntime as a runtime runs it,
#           and in a runc-style runtime root the follower is given, as a node's runc keeps them:
#           `state.json` and the bundle's `config.json` running the hook at createRuntime, so its
#           escape scan reads every container every 2 s and finds none escaped), while every second
#           one pod is replaced (its init killed, its state dir removed, its poststop run, a new one
#           created) and 22 processes a second enter member cgroups (the liveness and readiness
#           probes of 110 pods every 10 s), its /metrics scraped every 15 s;
#   nri     the NRI plugin against examples/nri-churn.rs (the runtime's end): registration, a
#           Synchronize of the 110 running containers (the catch-up), then CreateContainer and
#           StartContainer at OCH_BENCH_RATE containers a second, its /metrics scraped every 15 s.
# At the end, from /proc: each one's peak resident memory (VmHWM), its resident memory then
# (VmRSS) and its CPU time over the run (utime + stime) as an average in millicores.
#
# Needs root (the proc connector, the cgroups). Environment: OCH_BENCH_PODS (default 110),
# OCH_BENCH_SECONDS (default 120), OCH_BENCH_RATE (NRI containers created a second, default 1),
# OCH_BENCH_DIR (default /dev/shm), OCH_BENCH_HOOK (the follower's binary, e.g. another commit's
# for an A/B; default the one built here: the hooks and the plugin are always this tree's).
set -euo pipefail
cd "$(dirname "$0")/.."

pods=${OCH_BENCH_PODS:-110}
seconds=${OCH_BENCH_SECONDS:-120}
rate=${OCH_BENCH_RATE:-1}
base=${OCH_BENCH_DIR:-/dev/shm}
[[ $pods =~ ^[1-9][0-9]*$ && $seconds =~ ^[1-9][0-9]*$ ]] ||
    { echo "bench-footprint.sh: OCH_BENCH_PODS and OCH_BENCH_SECONDS must be whole numbers" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "bench-footprint.sh: needs root (the proc connector, cgroups in the host's tree)" >&2; exit 2; }
command -v curl >/dev/null || { echo "bench-footprint.sh: curl is not installed" >&2; exit 2; }
v2=
for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [[ $(stat -f -c %T "$d" 2>/dev/null) == cgroup2fs ]]; then v2=$d; break; fi
done
[[ -n $v2 ]] || { echo "bench-footprint.sh: no cgroup2 hierarchy" >&2; exit 2; }

cargo build --release --locked --features fake-kernel --bin oci-coresched-hook --example nri-churn
hook=target/release/oci-coresched-hook
churn=target/release/examples/nri-churn
follower_bin=${OCH_BENCH_HOOK:-$hook}

top="$v2/och-bench-footprint-$$"
work=$(mktemp -d "$base/och-bench-footprint.XXXXXX")
pids_to_kill=()
cleanup() {
    for p in "${pids_to_kill[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    if [[ -d $top ]]; then
        for cg in "$top"/*/; do
            for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        done
        sleep 0.5
        for cg in "$top"/*/; do rmdir "$cg" 2>/dev/null || true; done
        rmdir "$top" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir "$top"
mkdir -p "$work/cgroup" "$work/runc" "$work/bundles"
ln -s "$v2" "$work/cgroup/unified"
printf 'syslog = false\nlog_level = "info"\n' >"$work/config.toml"
export OCH_FAKE_KERNEL="$work/fake-kernel.json" OCH_FAKE_CGROUP_ROOT="$work/cgroup"
och=("$hook" --config "$work/config.toml" --state-dir "$work/state")

# `pod N NAMESPACE`: a member container: a sleep in cgroup podN, recorded by createRuntime, then
# its runc-style state (written with builtins: no process more than before for the follower to see).
pod() {
    mkdir -p "$top/pod$1" "$work/runc/c$1" "$work/bundles/c$1"
    # A child of this shell, which reaps it as soon as it is killed (as a runtime's shim does); disowned,
    # so that its kill is not reported. (Started from a subshell it was an orphan, and this host's
    # PID 1 reaps orphans 1-2 s late: each unpod waited for that, and the loop ran at half its pace.)
    local init
    sleep 3600 </dev/null >/dev/null 2>&1 &
    init=$!
    disown "$init"
    echo "$init" >"$top/pod$1/cgroup.procs"
    printf '{"ociVersion":"1.0.2","id":"c%s","status":"creating","pid":%s,"annotations":{"io.kubernetes.pod.namespace":"%s","io.kubernetes.pod.name":"pod%s","oci-coresched-hook/group":"web"}}' \
        "$1" "$init" "$2" "$1" | "${och[@]}" hook 2>>"$work/hook.log" ||
        { echo "bench-footprint.sh: createRuntime of pod $1 failed:" >&2; tail -5 "$work/hook.log" >&2; exit 1; }
    echo "c$1 $init $2" >>"$work/pods"
    echo "$init" >"$work/init.$1"
    local ann stat
    printf -v ann '"io.kubernetes.pod.namespace":"%s","io.kubernetes.pod.name":"pod%s","oci-coresched-hook/group":"web"' "$2" "$1"
    printf '{"ociVersion":"1.0.2","annotations":{%s},"hooks":{"createRuntime":[{"path":"/usr/bin/oci-coresched-hook","args":["oci-coresched-hook","hook"]}]}}' \
        "$ann" >"$work/bundles/c$1/config.json"
    read -r -a stat <"/proc/$init/stat"
    printf '{"id":"c%s","init_process_pid":%s,"init_process_start":%s,"config":{"labels":["bundle=%s","io.kubernetes.pod.namespace=%s","io.kubernetes.pod.name=pod%s","oci-coresched-hook/group=web"]}}' \
        "$1" "$init" "${stat[21]}" "$work/bundles/c$1" "$2" "$1" >"$work/runc/c$1/state.json"
}
# `unpod N`: the pod's init killed and its poststop run.
unpod() {
    local init
    init=$(cat "$work/init.$1")
    kill -9 "$init" 2>/dev/null || true
    while kill -0 "$init" 2>/dev/null; do sleep 0.01; done
    rm -rf "$work/runc/c$1" "$work/bundles/c$1"
    printf '{"ociVersion":"1.0.2","id":"c%s","status":"stopped","pid":%s,"annotations":{}}' "$1" "$init" |
        "${och[@]}" hook --stage poststop 2>>"$work/hook.log" || true
    rmdir "$top/pod$1" 2>/dev/null || true
}
for i in $(seq "$pods"); do pod "$i" "tenant-$((i % 10))"; done
echo "bench-footprint: $pods member pods recorded; $seconds s of churn, $(nproc) CPUs, kernel $(uname -r)" >&2

# `served LOG`: the address a command's endpoint logged.
served() {
    for _ in $(seq 100); do
        a=$(sed -n 's|.*/readyz on http://\(.*\)$|\1|p' "$1" | head -1)
        [[ -n $a ]] && { echo "$a"; return; }
        sleep 0.1
    done
    echo "bench-footprint.sh: no endpoint address in $1:" >&2; cat "$1" >&2; exit 1
}
OCH_FAKE_RUNTIME_ROOTS="runc:$work/runc" "$follower_bin" --config "$work/config.toml" --state-dir "$work/state" \
    reconcile --follow --listen 127.0.0.1:0 2>"$work/follow.log" &
follow=$!
pids_to_kill+=("$follow")
"$churn" "$work/nri.sock" --pids "$work/pods" --rate "$rate" --seconds "$seconds" >"$work/churn.out" 2>"$work/churn.err" &
runtime=$!
pids_to_kill+=("$runtime")
for _ in $(seq 100); do [[ -S $work/nri.sock ]] && break; sleep 0.05; done
"${och[@]}" nri --socket "$work/nri.sock" --hook-path /usr/bin/oci-coresched-hook --listen 127.0.0.1:0 2>"$work/nri.log" &
nri=$!
pids_to_kill+=("$nri")
follow_at=$(served "$work/follow.log")
nri_at=$(served "$work/nri.log")
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
t0=$(date +%s.%N)
c0_follow=$(cpu "$follow")
c0_nri=$(cpu "$nri")

next=$((pods + 1))
start_ns=$(date +%s%N)
tick=0
while ((tick < seconds)); do
    # One pod replaced a second.
    old=$((next - pods))
    unpod "$old"
    pod "$next" "tenant-$((next % 10))"
    next=$((next + 1))
    # 22 probe processes a second into live member cgroups.
    for k in $(seq 22); do
        n=$((old + 1 + (tick * 22 + k) % (pods - 1)))
        [[ -d $top/pod$n ]] && sh -c "echo \$\$ > $top/pod$n/cgroup.procs 2>/dev/null; exec true" || true
    done
    if ((tick % 15 == 0)); then
        curl -sf "http://$follow_at/metrics" >"$work/follow.page" || { echo "bench-footprint.sh: scrape of follow failed" >&2; exit 1; }
        curl -sf "http://$nri_at/metrics" >"$work/nri.page" || { echo "bench-footprint.sh: scrape of nri failed" >&2; exit 1; }
    fi
    tick=$((tick + 1))
    # The next second's work starts on the second, whatever this one's took.
    left=$((start_ns + tick * 1000000000 - $(date +%s%N)))
    ((left > 0)) && sleep "$(printf '0.%09d' "$left")"
done
late=$(( ($(date +%s%N) - start_ns) / 1000000 - seconds * 1000 ))
((late < 2000)) || echo "bench-footprint.sh: the churn loop ended $((late / 1000)) s late: the machine was too busy for its pace" >&2
wait "$runtime" || { echo "bench-footprint.sh: the NRI runtime failed:" >&2; cat "$work/churn.err" "$work/nri.log" >&2; exit 1; }
t1=$(date +%s.%N)
hz=$(getconf CLK_TCK)
report() { # name pid cpu0
    local hwm rss ms
    hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$2/status")
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$2/status")
    ms=$(echo "scale=1; ($(cpu "$2") - $3) * 1000 / $hz / ($t1 - $t0)" | bc -l)
    printf '%-7s %10.1f %10.1f %12s\n' "$1" "$(echo "$hwm / 1024" | bc -l)" "$(echo "$rss / 1024" | bc -l)" "$ms"
}
printf '%-7s %10s %10s %12s\n' container 'peak MiB' 'RSS MiB' 'millicores'
report follow "$follow" "$c0_follow"
report nri "$nri" "$c0_nri"
# One more scrape, after the CPU was read: the view and the escape scan's figures at the end.
curl -sf "http://$follow_at/metrics" >"$work/follow.page" || { echo "bench-footprint.sh: scrape of follow failed" >&2; exit 1; }
members=$(awk '$1 == "oci_coresched_hook_follow_members" { print $2 }' "$work/follow.page")
# The escape scan's figures (a follower that has one): none escaped, none healed.
scan=$(awk '$1 == "oci_coresched_hook_escaped_containers" { e = $2 } $1 == "oci_coresched_hook_follow_escape_scans_total" { s = $2 }
    $1 == "oci_coresched_hook_follow_escapes_healed_total" { h = $2 } END { if (s != "") printf ", %s escaped (%s escape scans, %s healed)", e, s, h }' "$work/follow.page")
echo "runtime: $(cat "$work/churn.out"); follower view: $members members$scan; pods replaced: $((next - pods - 1)); probe processes: $((tick * 22))"
grep -q 'oci_coresched_hook_nri_ready 1' "$work/nri.page" || { echo "bench-footprint.sh: the plugin was not ready" >&2; exit 1; }
