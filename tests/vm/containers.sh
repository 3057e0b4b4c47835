# Shared by the VM end-to-end scripts (tests/vm/e2e.sh, tests/vm/e2e-ops.sh); sourced, never run.
# The caller has `cd`'d to the repository root and set `set -euo pipefail`; E2E_NAME (default
# `e2e`) prefixes error messages and the work directory /tmp/och-$E2E_NAME.XXXXXX.
#
# Defines: BIN WORK ROOTFS STATE OUT RUNC CRUN, the pass/fail counters, ok bad started check,
# write_config bundle start pid_of cookie_of_pid cookie self_cookie stop cached_ids, an EXIT trap
# that deletes every container started, and $WORK/config.toml (debug log to $WORK/hook.log).
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

cleanup() {
    for id in "${ids[@]}"; do
        "${RUNC[@]}" delete -f "$id" >/dev/null 2>&1 || true
        "${CRUN[@]}" delete -f "$id" >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT

write_config() { # write_config FILE [EXTRA_TOML]
    printf 'log_level = "debug"\nsyslog = false\nlog_file = "%s"\n%s\n' "$WORK/hook.log" "${2:-}" >"$1"
}
write_config "$WORK/config.toml"

# bundle ID RUNTIME CONFIG STATEDIR ANNOTATIONS_JSON [CGROUPS_PATH]: a bundle whose init first
# reads its own cookie; without CGROUPS_PATH the runtime picks the container's cgroup.
bundle() {
    local id=$1 cfg=$3 state=$4 ann=$5 cgpath=${6:-} dir=$WORK/bundles/$1
    mkdir -p "$dir"
    (cd "$dir" && runc spec)
    python3 - "$dir/config.json" "$id" "$BIN" "$cfg" "$state" "$ann" "$OUT" "$ROOTFS" "$cgpath" <<'PY'
import json, sys
path, cid, binary, cfg, state, ann, out, rootfs, cgpath = sys.argv[1:]
c = json.load(open(path))
c["root"] = {"path": rootfs, "readonly": True}
c["process"]["terminal"] = False
# The first thing the container does: read its own cookie (pid 1 in its pid namespace).
c["process"]["args"] = ["/bin/sh", "-c", "/och --log-level off inspect 1 --json > /tmp/self.json; exec sleep 86400"]
c["mounts"] += [
    {"destination": "/tmp", "type": "bind", "source": f"{out}/{cid}", "options": ["rbind", "rw"]},
    {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]},
    {"destination": "/och", "type": "bind", "source": binary, "options": ["bind", "ro"]},
]
c["annotations"] = json.loads(ann)
hook = lambda stage: [{"path": binary, "args": ["oci-coresched-hook", "--config", cfg, "--state-dir", state, "hook", "--stage", stage], "timeout": 30}]
c["hooks"] = {s: hook(s) for s in ("createRuntime", "poststart", "poststop")}
c["linux"].pop("cgroupsPath", None)
if cgpath:
    c["linux"]["cgroupsPath"] = cgpath
json.dump(c, open(path, "w"), indent=1)
PY
    mkdir -p "$OUT/$id"
}

# start ID ANNOTATIONS_JSON [runc|crun] [CONFIG] [STATEDIR] [CGROUPS_PATH]: run detached; 0 when
# it started.
start() {
    local id=$1 ann=$2 rt=${3:-runc} cfg=${4:-$WORK/config.toml} state=${5:-$STATE} cgpath=${6:-}
    ids+=("$id")
    bundle "$id" "$rt" "$cfg" "$state" "$ann" "$cgpath"
    if [[ $rt == crun ]]; then
        "${CRUN[@]}" run -d --bundle "$WORK/bundles/$id" "$id" </dev/null >"$WORK/$id.out" 2>&1
    else
        "${RUNC[@]}" run -d --bundle "$WORK/bundles/$id" "$id" </dev/null >"$WORK/$id.out" 2>&1
    fi
}

pid_of() { # pid_of ID [runc|crun]
    local rt=${2:-runc}
    if [[ $rt == crun ]]; then "${CRUN[@]}" state "$1"; else "${RUNC[@]}" state "$1"; fi |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])'
}

cookie_of_pid() { "$BIN" --log-level off --state-dir "$STATE" inspect "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cookie"])'; }
cookie() { cookie_of_pid "$(pid_of "$@")"; }

self_cookie() { # the cookie the container read as its first action
    local f=$OUT/$1/self.json
    for _ in $(seq 100); do [[ -s $f ]] && break; sleep 0.1; done
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cookie"])' "$f" 2>/dev/null || echo missing
}

stop() { # stop ID [runc|crun]: kill, wait, delete (poststop runs at delete)
    local rt=${2:-runc}
    local -a R=("${RUNC[@]}"); [[ $rt == crun ]] && R=("${CRUN[@]}")
    "${R[@]}" kill "$1" KILL >/dev/null 2>&1 || true
    for _ in $(seq 50); do "${R[@]}" state "$1" 2>/dev/null | grep -q '"stopped"' && break; sleep 0.1; done
    "${R[@]}" delete "$1" >/dev/null 2>&1
}

cached_ids() { "$BIN" --log-level off --state-dir "$STATE" list --json | python3 -c '
import json,sys
print(" ".join(sorted(m["id"] for g in json.load(sys.stdin) for m in g["members"])))'; }
