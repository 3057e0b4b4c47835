# Shared by the VM end-to-end scripts (tests/vm/e2e.sh, tests/vm/e2e-ops.sh); sourced, never run.
# The caller has `cd`'d to the repository root and set `set -euo pipefail`; E2E_NAME (default
# `e2e`) prefixes error messages and the work directory /tmp/och-$E2E_NAME.XXXXXX.
#
# Defines: BIN WORK ROOTFS STATE OUT RUNC CRUN, RT (id -> the runtime that started it), the
# pass/fail counters, ok bad started check, rt write_config bundle json_str start pid_of
# cookie_of_pid cookie self_cookie stop cached_ids, an EXIT trap that deletes every container
# started, and $WORK/config.toml (debug log to $WORK/hook.log).
# shellcheck shell=bash disable=SC2034
E2E_NAME=${E2E_NAME:-e2e}
BIN=${OCH_BIN:-$PWD/target/debug/oci-coresched-hook}
[[ -x $BIN ]] || { echo "$E2E_NAME: $BIN is missing: build it first" >&2; exit 2; }
command -v runc >/dev/null || { echo "$E2E_NAME: runc is not installed (apt-get install runc)" >&2; exit 2; }

WORK=$(mktemp -d "/tmp/och-$E2E_NAME.XXXXXX")
ROOTFS=$WORK/rootfs
tests/support/mkrootfs.sh "$ROOTFS" >/dev/null
ln -s usr/lib "$ROOTFS/lib"
ln -s usr/lib64 "$ROOTFS/lib64"
STATE=$WORK/state
OUT=$WORK/out
mkdir -p "$OUT"
RUNC=(runc --root "$WORK/runc-root")
CRUN=(crun --root "$WORK/crun-root")
pass=0
fail=0
ids=()

ok() { pass=$((pass + 1)); echo "ok - $*"; }
bad() { fail=$((fail + 1)); echo "not ok - $*"; }
# started DESCRIPTION ID ARGS...: start a container, showing the runtime's output when it fails.
started() {
    local what=$1 id=$2; shift 2
    if start "$id" "$@"; then ok "$what"; else bad "$what"; sed 's/^/#   /' "$WORK/$id.out"; fi
}
check() { # check DESCRIPTION COMMAND...
    local what=$1; shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}

declare -A RT # id -> the runtime that started it
# rt ID ARGS...: the runtime that started container ID (runc unless RT says crun), with ARGS.
rt() {
    local id=$1
    shift
    if [[ ${RT[$id]:-runc} == crun ]]; then "${CRUN[@]}" "$@"; else "${RUNC[@]}" "$@"; fi
}
cleanup() {
    local id
    for id in "${ids[@]}"; do rt "$id" delete -f "$id" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

write_config() { # write_config FILE [EXTRA_TOML]
    printf 'log_level = "debug"\nsyslog = false\nlog_file = "%s"\n%s\n' "$WORK/hook.log" "${2:-}" >"$1"
}
write_config "$WORK/config.toml"

# Every process start is slow under TCG (a python3 start costs seconds there), so the helpers
# below start as few as they can: one `runc spec` and one jq for the template here, one jq per
# bundle, JSON fields read with bash's own regex matching.
mkdir -p "$WORK/template"
(cd "$WORK/template" && runc spec)
# The first thing the container does: read its own cookie (pid 1 in its pid namespace).
jq --arg rootfs "$ROOTFS" --arg bin "$BIN" '
    .root = {path: $rootfs, readonly: true}
    | .process.terminal = false
    | .process.args = ["/bin/sh", "-c", "/och --log-level off inspect 1 --json > /tmp/self.json; exec sleep 86400"]
    | .mounts += [
        {destination: "/usr", type: "bind", source: "/usr", options: ["rbind", "ro"]},
        {destination: "/och", type: "bind", source: $bin, options: ["bind", "ro"]}]
    | del(.linux.cgroupsPath)' "$WORK/template/config.json" >"$WORK/config.template.json"

# bundle ID RUNTIME CONFIG STATEDIR ANNOTATIONS_JSON [CGROUPS_PATH]: a bundle whose init first
# reads its own cookie; without CGROUPS_PATH the runtime picks the container's cgroup.
bundle() {
    local id=$1 cfg=$3 state=$4 ann=$5 cgpath=${6:-} dir=$WORK/bundles/$1
    mkdir -p "$dir" "$OUT/$id"
    jq --arg out "$OUT/$id" --argjson ann "$ann" --arg bin "$BIN" --arg cfg "$cfg" --arg state "$state" \
        --arg cgpath "$cgpath" '
        .mounts += [{destination: "/tmp", type: "bind", source: $out, options: ["rbind", "rw"]}]
        | .annotations = $ann
        | .hooks = (reduce ("createRuntime", "poststart", "poststop") as $s ({};
            .[$s] = [{path: $bin, timeout: 30,
                      args: ["oci-coresched-hook", "--config", $cfg, "--state-dir", $state, "hook", "--stage", $s]}]))
        | if $cgpath != "" then .linux.cgroupsPath = $cgpath else . end' \
        "$WORK/config.template.json" >"$dir/config.json"
}

# json_str KEY JSON: the first string value of "KEY" in JSON (enough for the flat fields read here).
json_str() {
    [[ $2 =~ \"$1\":[[:space:]]*\"([^\"]*)\" ]] && echo "${BASH_REMATCH[1]}"
}

# start ID ANNOTATIONS_JSON [runc|crun] [CONFIG] [STATEDIR] [CGROUPS_PATH]: run detached, the init's
# pid into $WORK/ID.pid; 0 when it started.
start() {
    local id=$1 ann=$2 runtime=${3:-runc} cfg=${4:-$WORK/config.toml} state=${5:-$STATE} cgpath=${6:-}
    ids+=("$id")
    RT[$id]=$runtime
    bundle "$id" "$runtime" "$cfg" "$state" "$ann" "$cgpath"
    rt "$id" run -d --pid-file "$WORK/$id.pid" --bundle "$WORK/bundles/$id" "$id" </dev/null >"$WORK/$id.out" 2>&1
}

pid_of() { # pid_of ID: the init's pid, from the --pid-file the runtime wrote at start (no newline)
    local p
    p=$(<"$WORK/$1.pid") && echo "$p"
}

cookie_of_pid() { json_str cookie "$("$BIN" --log-level off --state-dir "$STATE" inspect "$1" --json)"; }
cookie() { cookie_of_pid "$(pid_of "$1")"; }

self_cookie() { # the cookie the container read as its first action
    local f=$OUT/$1/self.json
    for _ in $(seq 100); do [[ -s $f ]] && break; sleep 0.1; done
    json_str cookie "$(cat "$f" 2>/dev/null)" || echo missing
}

stop() { # stop ID: kill, wait, delete (poststop runs at delete), with the runtime that started it
    rt "$1" kill "$1" KILL >/dev/null 2>&1 || true
    for _ in $(seq 50); do rt "$1" state "$1" 2>/dev/null | grep -q '"stopped"' && break; sleep 0.1; done
    rt "$1" delete "$1" >/dev/null 2>&1
}

cached_ids() {
    "$BIN" --log-level off --state-dir "$STATE" list --json | jq -r '[.[].members[].id] | sort | join(" ")'
}
