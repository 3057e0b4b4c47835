#!/usr/bin/env bash
# Issue 14: the hook's share of a whole `runc run -d`, and of the `runc delete` where poststop runs,
# on the real kernel (CONFIG_SCHED_CORE). Runs INSIDE the VM guest: benches/vm-share.sh starts it
# after the process bench; alone: tests/vm/vm.sh run -- benches/vm-runc.sh HOOK [PAIRS].
#
# One busybox bundle (tests/support/mkrootfs.sh, config from `runc spec`, like tests/vm/e2e.sh),
# in two configs that differ only in the hooks: "hooked" wires HOOK the way the shipped
# hooks.d/oci-coresched-hook.json does (its stages, env and timeout; args with --state-dir and
# --config inserted before `hook`), "plain" has no hooks. A "keeper" container of the same group
# stays up the whole time, so every timed hooked container takes the share path (join a live
# group), the path a pod's second and later containers take.
#
# PAIRS (default $OCH_BENCH_RUNC_RUNS or 20) interleaved pairs, which arm goes first alternating per
# pair, after one untimed warm-up pair (runc and the hook come over 9p: the first exec of each is
# a cold page cache). Each unit: `runc run -d` timed alone; untimed: check the cookie, SIGKILL the
# init and wait until it is gone; then `runc delete` timed alone. Not `delete -f`: runc's forced
# delete polls in 100 ms steps for the kill to land, which would quantize the very number we want.
#
# Fails (exit 1) when any runc call fails, a hooked container's init does not carry its group's
# non-zero cookie (read back with the hook's `inspect`, the kernel's PR_SCHED_CORE GET), or the
# cache is not back to the keeper alone afterwards (poststop ran for every timed container).
set -euo pipefail
# EPOCHREALTIME and awk's printf use the locale's decimal point: make it a point.
export LC_ALL=C
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."

die() {
    echo "vm-runc.sh: error: $*" >&2
    exit 1
}

(($# >= 1 && $# <= 2)) || die "usage: benches/vm-runc.sh HOOK [PAIRS]   (inside the VM guest)"
hook=$1
pairs=${2:-${OCH_BENCH_RUNC_RUNS:-20}}
[[ $pairs =~ ^[1-9][0-9]*$ ]] || die "PAIRS (OCH_BENCH_RUNC_RUNS) must be a positive integer, got '$pairs'"
# The host has no CONFIG_SCHED_CORE, and this starts real containers as root.
[[ ${OCH_IN_VM:-} == 1 ]] ||
    die "run me inside the VM guest (benches/vm-share.sh, or tests/vm/vm.sh run -- benches/vm-runc.sh HOOK): I need root, runc and a CONFIG_SCHED_CORE kernel"
[[ -x $hook ]] || die "the hook binary $hook is missing or not executable"
command -v runc >/dev/null || die "runc is not installed (apt-get install runc; tests/vm/vm.sh deps installs it)"
# jq, not python3: under TCG a python3 start costs seconds (more through a pyenv shim), jq < 1 s.
command -v jq >/dev/null || die "jq is not installed (apt-get install jq)"
shipped=hooks.d/oci-coresched-hook.json
[[ -r $shipped ]] || die "$shipped is missing: it says how the hook is wired"
# EPOCHREALTIME (bash >= 5) times without forking date(1), which costs milliseconds under TCG.
[[ -n ${EPOCHREALTIME:-} ]] || die "bash ${BASH_VERSION} has no EPOCHREALTIME (bash >= 5 needed)"

# Everything under /run: tmpfs, where runtimes keep their bundles and state (and the hook its cache).
work=$(mktemp -d /run/och-bench-runc.XXXXXX)
state=$work/state
config=$work/config.toml
RUNC=(runc --root "$work/runc")
group=bench
declare -A live=() # container id -> 1 while runc knows it (the EXIT trap deletes those)

cleanup() {
    local id
    for id in "${!live[@]}"; do "${RUNC[@]}" delete -f "$id" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# runc_failed WHAT ID: runc's own output, then fail.
runc_failed() {
    echo "vm-runc.sh: runc $1 of container $2 failed; its output:" >&2
    sed 's/^/    /' "$work/$2.log" >&2
    exit 1
}

# The config of the measured hook: the benchmarks' settings (no syslog, warnings only).
printf 'syslog = false\nlog_level = "warn"\n' >"$config"

tests/support/mkrootfs.sh "$work/rootfs" 2>"$work/mkrootfs.log" ||
    { sed 's/^/    /' "$work/mkrootfs.log" >&2; die "tests/support/mkrootfs.sh failed (above)"; }
mkdir -p "$work/plain" "$work/hooked"
runc spec --bundle "$work/plain" || die "runc spec failed"
# Both arms share the read-only rootfs and everything but the hooks. No cgroupsPath: runc picks
# /<id>, one per container. The annotation is in both so their config.json differ only in hooks.
jq --arg rootfs "$work/rootfs" --arg group "$group" '
    .root = {path: $rootfs, readonly: true}
    | .process.terminal = false
    | .process.args = ["sleep", "86400"]
    | .annotations = {"oci-coresched-hook/group": $group}
    | del(.linux.cgroupsPath)' "$work/plain/config.json" >"$work/plain.json" ||
    die "could not edit the runc spec config.json"
mv "$work/plain.json" "$work/plain/config.json"
jq --arg hook "$hook" --arg state "$state" --arg config "$config" --slurpfile shipped "$shipped" '
    $shipped[0] as $d
    | ($d.hook
        | .path = $hook
        | .args = [.args[0], "--state-dir", $state, "--config", $config] + .args[1:]) as $h
    | .hooks = (reduce $d.stages[] as $s ({}; .[$s] = [$h]))' "$work/plain/config.json" \
    >"$work/hooked/config.json" || die "could not wire the hook from $shipped into config.json"
wired=$(jq -c '.hooks | to_entries | map(.key) | sort' "$work/hooked/config.json")
[[ $wired == '["createRuntime","poststart","poststop"]' ]] ||
    die "$shipped wires the stages $wired; this benchmark describes createRuntime, poststart, poststop"

# inspect PID: sets i_cookie, i_id, i_group, i_uniform from the hook's `inspect PID --json`: the
# cookie the kernel reports (PR_SCHED_CORE GET) and the cached container and group of that pid.
# Not through a pipe or a process substitution: a failure must stop the script (and the guest's
# /dev has no /dev/fd).
inspect() {
    local json tsv
    json=$("$hook" --log-level off --state-dir "$state" inspect "$1" --json) ||
        die "\`$hook inspect $1\` failed (exit $?)"
    tsv=$(jq -r '[.cookie, (.container.id // "-"), (.container.group // "-"), (.uniform | tostring)] | @tsv' <<<"$json") ||
        die "\`$hook inspect $1 --json\` printed no JSON I can read: $json"
    IFS=$'\t' read -r i_cookie i_id i_group i_uniform <<<"$tsv"
    [[ $i_cookie == 0x* ]] || die "\`$hook inspect $1 --json\` printed no cookie: '$json'"
}

# gone PID: wait until the killed init is dead (a zombie counts: runc calls that "stopped" too).
gone() {
    local st i
    for ((i = 0; i < 500; i++)); do
        st=
        { read -r _ _ st _ </proc/"$1"/stat; } 2>/dev/null || return 0
        [[ $st == [ZX] ]] && return 0
        sleep 0.02
    done
    die "pid $1 still alive 10 s after SIGKILL"
}

# The baseline needs a runc without a cookie: plain containers inherit whatever runc has.
inspect $$
[[ $i_cookie == 0x0 ]] || die "this shell already has cookie $i_cookie: the containers without the hook would inherit it"

live[keeper]=1
"${RUNC[@]}" run -d --pid-file "$work/keeper.pid" --bundle "$work/hooked" keeper </dev/null >"$work/keeper.log" 2>&1 ||
    runc_failed "run -d" keeper
keeper_pid=$(<"$work/keeper.pid")
inspect "$keeper_pid"
gcookie=$i_cookie gkey=$i_group
[[ $gcookie != 0x0 && $i_id == keeper && $i_uniform == true ]] ||
    die "the keeper (pid $keeper_pid) has cookie $gcookie, cached as '$i_id', uniform $i_uniform: expected a non-zero cookie of container keeper"
echo "keeper: pid $keeper_pid, group $gkey, cookie $gcookie"

run_us_hooked=() run_us_plain=() del_us_hooked=() del_us_plain=()
# unit ARM ID [timed]: one container of ARM (hooked|plain) from start to delete.
unit() {
    local arm=$1 id=$2 pid t0 t1 t2 t3
    live[$id]=1
    t0=$EPOCHREALTIME
    "${RUNC[@]}" run -d --pid-file "$work/$id.pid" --bundle "$work/$arm" "$id" </dev/null >"$work/$id.log" 2>&1 ||
        runc_failed "run -d" "$id"
    t1=$EPOCHREALTIME
    pid=$(<"$work/$id.pid")
    if [[ $arm == hooked ]]; then
        inspect "$pid"
        [[ $i_cookie == "$gcookie" && $i_id == "$id" && $i_group == "$gkey" && $i_uniform == true ]] ||
            die "container $id (pid $pid): cookie $i_cookie, cached as '$i_id' in group '$i_group', uniform $i_uniform; expected its group $gkey's cookie $gcookie"
    fi
    kill -KILL "$pid" || die "could not SIGKILL container $id's init (pid $pid): did it die on its own?"
    gone "$pid"
    t2=$EPOCHREALTIME
    "${RUNC[@]}" delete "$id" >>"$work/$id.log" 2>&1 || runc_failed delete "$id"
    t3=$EPOCHREALTIME
    unset "live[$id]"
    [[ ${3:-} == timed ]] || return 0
    # EPOCHREALTIME is seconds.microseconds (6 digits): drop the point for integer microseconds.
    local -n runs=run_us_$arm dels=del_us_$arm
    runs+=($((${t1/./} - ${t0/./})))
    dels+=($((${t3/./} - ${t2/./})))
}

echo "warm-up pair (untimed)"
unit hooked warm-hooked
unit plain warm-plain
start_s=$SECONDS
for ((i = 1; i <= pairs; i++)); do
    if ((i % 2)); then
        unit hooked "h$i" timed
        unit plain "p$i" timed
    else
        unit plain "p$i" timed
        unit hooked "h$i" timed
    fi
done
echo "$pairs pairs in $((SECONDS - start_s)) s; every hooked container had cookie $gcookie"

# poststop ran for each deleted container: the cache holds the keeper alone, and no ensure failed.
cache=$("$hook" --log-level off --state-dir "$state" list --json |
    jq -r '([.[].members[].id] | join(" ")), ([.[].failed] | add // 0)' | paste -sd ' ') ||
    die "\`$hook list --json\` failed, or printed no JSON I can read"
[[ $cache == "keeper 0" ]] ||
    die "after the runs the cache should hold the keeper alone with 0 failed ensures; it holds (members, failed): $cache"

median_us() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
row() { # row NAME WITH_US WITHOUT_US
    awk -v n="$1" -v w="$2" -v wo="$3" 'BEGIN {
        printf "| %s | %.1f | %.1f | %.1f | %.1f%% |\n", n, w / 1000, wo / 1000, (w - wo) / 1000, (w - wo) / w * 100 }'
}
echo
echo "### runc with and without the hook, real kernel ($(uname -r), $(nproc) CPUs, TCG guest): medians of $pairs interleaved pairs"
echo
echo "| step | with the hook (ms) | without (ms) | difference (ms) | hook's share |"
echo "|---|---|---|---|---|"
row "\`runc run -d\` (createRuntime + poststart)" "$(median_us "${run_us_hooked[@]}")" "$(median_us "${run_us_plain[@]}")"
row "\`runc delete\` of the stopped container (poststop)" "$(median_us "${del_us_hooked[@]}")" "$(median_us "${del_us_plain[@]}")"
echo
echo "hook's share = (with - without) / with. runc $(runc --version | sed -n 's/^runc version //p'); the hook joins a group with one live member (the keeper); config: syslog = false, log_level = \"warn\"."
