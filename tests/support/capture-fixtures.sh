#!/bin/sh
# capture-fixtures.sh [FIXTURES_DIR] — regenerate tests/fixtures/states and
# tests/fixtures/runtime-state from real runc, crun and podman runs.
#
# Needs root, runc, crun, podman, busybox-static, jq (Debian 12:
#   apt-get install runc crun podman busybox-static jq).
# crun is run inside a private mount namespace with cgroup2 mounted at
# /sys/fs/cgroup and --cgroup-manager=disabled (crun 1.8.1 refuses this host's
# hybrid cgroup layout). Podman uses runc (podman + crun fails on hybrid cgroups).
#
# Work files go to $WORK (default /tmp/oci-coresched-fixtures): bundle and
# capture paths in the fixtures are under it, so keep the default for stable diffs.
# The state files are copied byte for byte as the hooks received them.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../fixtures}
mkdir -p "$out"
out=$(cd "$out" && pwd)
WORK=${WORK:-/tmp/oci-coresched-fixtures}
STAGES="prestart createRuntime createContainer startContainer poststart poststop"
states=$out/states
rstate=$out/runtime-state
mkdir -p "$states" "$rstate"
for t in runc crun podman jq busybox; do
    command -v $t >/dev/null 2>&1 || { echo "capture-fixtures.sh: $t missing" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "capture-fixtures.sh: must run as root" >&2; exit 1; }

rm -rf "$WORK"
mkdir -p "$WORK"
hexid() { printf '%s' "$1" | sha256sum | cut -c1-64; }

# save RUNTIME_PREFIX CAPDIR: copy captured states (raw) and the bundle config.
save() {
    for s in $STAGES; do
        if [ -f "$2/$s.json" ]; then cp "$2/$s.json" "$states/$1-$s.json"; else
            echo "capture-fixtures.sh: $1: no $s state captured" >&2; fi
    done
    [ -f "$2/config.json" ] && cp "$2/config.json" "$states/$1-config.json"
    return 0
}
CRUN_NS='umount -R /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup &&'
POD_UID=3f2b7c1e-5d4a-4e8b-9c6d-1a2b3c4d5e6f
cleanup_cgroups() {
    for c in /sys/fs/cgroup/*/kubepods/burstable/pod$POD_UID; do
        [ -d "$c" ] || continue
        rmdir "$c"/* 2>/dev/null || true
        rmdir "$c" "$(dirname "$c")" "$(dirname "$(dirname "$c")")" 2>/dev/null || true
    done
}

# ---- runc, attached (`runc run`) ------------------------------------------
id=$(hexid runc-fixture)
ID=$id CAPDIR=$WORK/cap-runc sh "$here/mkbundle.sh" "$WORK/bundle-runc"
(cd "$WORK/bundle-runc" && runc --root "$WORK/runc-root" run "$id" </dev/null)
save runc "$WORK/cap-runc"

# ---- runc, detached (`runc create` + `runc start`), default root /run/runc --
id=$(hexid runc-detached-fixture)
ID=$id CAPDIR=$WORK/cap-runc-detached ARGS_JSON='["sleep","30"]' \
    sh "$here/mkbundle.sh" "$WORK/bundle-runc-detached"
(cd "$WORK/bundle-runc-detached" && runc create "$id" </dev/null >/dev/null 2>&1)
ls /run/runc/"$id" > "$WORK/runc-statedir-created.txt"   # state.json + exec.fifo
runc state "$id" > "$rstate/runc-cli-state-created.json"
runc start "$id"
cp /run/runc/"$id"/state.json "$rstate/runc-state.json"   # same bytes as while "created"
ls /run/runc/"$id" > "$WORK/runc-statedir-running.txt"   # exec.fifo gone
runc state "$id" > "$rstate/runc-cli-state-running.json"
runc kill "$id" KILL
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(runc state "$id" | jq -r .status)" = stopped ] && break; sleep 0.2
done
runc state "$id" > "$rstate/runc-cli-state-stopped.json"
runc delete "$id"
save runc-detached "$WORK/cap-runc-detached"
cleanup_cgroups

# ---- crun, attached, in a private mount namespace --------------------------
id=$(hexid crun-fixture)
ID=$id CAPDIR=$WORK/cap-crun sh "$here/mkbundle.sh" "$WORK/bundle-crun"
(cd "$WORK/bundle-crun" && unshare -m sh -c "$CRUN_NS crun --cgroup-manager=disabled run $id" </dev/null)
save crun "$WORK/cap-crun"

# ---- crun, detached (create in the namespace; start/kill/delete from the host)
id=$(hexid crun-detached-fixture)
ID=$id CAPDIR=$WORK/cap-crun-detached ARGS_JSON='["sleep","30"]' \
    sh "$here/mkbundle.sh" "$WORK/bundle-crun-detached"
(cd "$WORK/bundle-crun-detached" && unshare -m sh -c "$CRUN_NS crun --cgroup-manager=disabled create $id" </dev/null >/dev/null 2>&1)
ls /run/crun/"$id" > "$WORK/crun-statedir-created.txt"
crun state "$id" > "$rstate/crun-cli-state-created.json"
crun start "$id"
cp /run/crun/"$id"/status "$rstate/crun-status.json"   # same bytes as while "created"
ls /run/crun/"$id" > "$WORK/crun-statedir-running.txt"
crun state "$id" > "$rstate/crun-cli-state-running.json"
crun kill "$id" KILL
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(crun state "$id" | jq -r .status)" = stopped ] && break; sleep 0.2
done
crun state "$id" > "$rstate/crun-cli-state-stopped.json"
crun delete "$id"
save crun-detached "$WORK/cap-crun-detached"

# ---- podman 4.3.1 + runc, hooks from a hooks.d directory --------------------
cap=$WORK/cap-podman
mkdir -p "$cap" "$WORK/hooks.d"
cp "$here/capture-hook.sh" "$cap/capture-hook.sh"
sh "$here/mkrootfs.sh" "$WORK/rootfs-podman" 2>/dev/null
for s in $STAGES; do
    jq -n --arg s "$s" --arg c "$cap" '{
        version: "1.0.0",
        hook: {path: ($c + "/capture-hook.sh"), args: ["capture-hook.sh", $c, $s], timeout: 10},
        when: {always: true},
        stages: [$s]}' > "$WORK/hooks.d/50-capture-$s.json"
done
podman --runtime runc --storage-driver vfs --cgroup-manager cgroupfs --events-backend file \
    --hooks-dir "$WORK/hooks.d" \
    run --rm --net=none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
    --annotation oci-coresched-hook/group=web --annotation koordinator.sh/qosClass=LS \
    -v "$cap:$cap" --rootfs "$WORK/rootfs-podman" sh -c 'echo hello from podman; sleep 1' </dev/null
save podman "$cap"
cp "$WORK/hooks.d/50-capture-createRuntime.json" "$states/podman-hooks.d-example.json"

chmod 0644 "$states"/*.json "$rstate"/*.json
echo "capture-fixtures.sh: fixtures written to $states and $rstate" >&2
