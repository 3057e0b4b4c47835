#!/bin/bash
# Field tier, run INSIDE the Debian 13 guest by tests/field/run.sh (`tests/vm/vm.sh field`), in
# the checkout (seen read-only at /host/...). /run/xchg is the host's exchange directory: in/ holds
# what the host prepared (the .deb, the image), and results go next to it (logs, captured states).
#
# Installs the hook as a node administrator does (dpkg -i, the documented containerd files), then
# runs the containerd CRI scenarios (tests/field/cri.py: base_runtime_spec; tests/field/nri.py: the
# NRI plugin, nothing else) and the podman scenarios
# (tests/field/podman.sh, crun and runc), then the exec window with the follower (tests/field/exec.sh).
# Prints TAP lines and "field: N passed, M failed". OCH_FIELD_PARTS (default "cri nri podman exec")
# picks the parts after the installation (for working on one part; CI runs them all).
set -uo pipefail
X=/run/xchg
IN=$X/in
export FIELD_CONFIG_BASE=$X/config.base.toml
RESULTS=$X/results.tap
: >"$RESULTS"
PARTS=" ${OCH_FIELD_PARTS:-cri nri podman exec} "
want() { [[ $PARTS == *" $1 "* ]]; }

note() { echo "# $*" | tee -a "$RESULTS"; }
ok() { echo "ok - $*" | tee -a "$RESULTS"; }
bad() { echo "not ok - $*" | tee -a "$RESULTS"; }
phase() { mkdir -p /run/och-field && echo "$1" >/run/och-field/phase; }
summary() {
    local p f
    p=$(grep -c '^ok ' "$RESULTS")
    f=$(grep -c '^not ok ' "$RESULTS")
    echo "field: $p passed, $f failed"
    ((f == 0 && p > 0))
}
setup_failed() {
    bad "setup: $*"
    summary
    exit 1
}
# part LABEL CMD...: run one scenario script, its output to the console and the results; a
# non-zero exit is a failure of its own (a script that dies early has printed no "not ok").
part() {
    local label=$1 t0=$SECONDS rc
    shift
    "$@" 2>&1 | tee -a "$RESULTS"
    rc=${PIPESTATUS[0]}
    note "$label: $((SECONDS - t0)) s, exit status $rc"
    ((rc == 0)) || bad "$label exited with status $rc"
}
# quiet LOG CMD...: run CMD with its output into LOG
quiet() {
    local logf=$1
    shift
    "$@" >"$logf" 2>&1
}
# timed LABEL CMD...: run CMD, note its wall time
timed() {
    local label=$1 t0=$SECONDS rc=0
    shift
    "$@" || rc=$?
    note "$label: $((SECONDS - t0)) s"
    return $rc
}

note "guest: $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"
note "versions: $(dpkg-query -W -f='${Package} ${Version}, ' containerd runc crun podman util-linux-extra)"
coresched new -- coresched get >/dev/null 2>&1 || setup_failed "coresched cannot create a cookie on this kernel"

# 1. The package, as users install it. Its directories are made first: the guest's root is an
# overlay without redirect_dir (tmpfs upper without xattrs), where dpkg's rename of a directory it
# unpacked fails with EXDEV; files are unpacked and renamed into place by dpkg as usual.
dpkg-deb -c "$IN/oci-coresched-hook.deb" | awk '$1 ~ /^d/ { print substr($6, 2) }' | xargs mkdir -p
timed "dpkg -i" quiet "$X/dpkg.log" dpkg -i "$IN/oci-coresched-hook.deb" || setup_failed "dpkg -i failed: $(tail -n 5 "$X/dpkg.log")"
[[ -x /usr/bin/oci-coresched-hook ]] || setup_failed "the package installed no /usr/bin/oci-coresched-hook"
mkdir -p /usr/lib/och-field
mv /usr/bin/oci-coresched-hook /usr/lib/och-field/oci-coresched-hook
install -m 0755 tests/field/capture-hook.sh /usr/bin/oci-coresched-hook
# The BE rule of the test: core_expeller and sched_idle. Debug log into the exchange directory.
cat >/etc/oci-coresched-hook/config.toml <<EOF
fail_closed = false
log_level = "debug"
syslog = false
log_file = "$X/hook.log"

[qos.BE]
enable = true
core_expeller = true
sched_idle = true
EOF
cp /etc/oci-coresched-hook/config.toml "$FIELD_CONFIG_BASE"
/usr/bin/oci-coresched-hook --version | sed 's/^/# /'

# 2. containerd's CRI plugin, wired as packaging/containerd/ tells users: the installed examples.
EX=/usr/share/doc/oci-coresched-hook/examples/containerd
phase containerd-runc
mkdir -p /etc/containerd
cp "$EX/base-runtime-spec.json" /etc/containerd/oci-coresched-hook-base-spec.json
cat "$EX/config-1.6-base-runtime-spec.toml" tests/field/containerd-test.toml >/etc/containerd/config.toml
containerd >"$X/containerd.log" 2>&1 &
cpid=$!
t0=$SECONDS
until [[ -S /run/containerd/containerd.sock ]] && ctr version >/dev/null 2>&1; do
    kill -0 "$cpid" 2>/dev/null || setup_failed "containerd exited: $(tail -n 5 "$X/containerd.log")"
    ((SECONDS - t0 < 120)) || setup_failed "containerd socket not up after 120 s"
    sleep 1
done
note "containerd up in $((SECONDS - t0)) s"
if grep -q 'failed to load plugin io.containerd.grpc.v1.cri' "$X/containerd.log"; then
    setup_failed "containerd's CRI plugin did not load: $(grep 'io.containerd.grpc.v1.cri' "$X/containerd.log" | tail -n 2)"
fi
timed "ctr images import" quiet "$X/ctr-import.log" ctr -n k8s.io images import --snapshotter native "$IN/image.tar" ||
    setup_failed "ctr images import failed"
want cri && part "containerd scenarios" python3 tests/field/cri.py /tmp/cri-gen
kill "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null

# 3. containerd with NRI enabled and nothing else for the hook (the installed
# config-1.7-nri.toml): the packaged NRI plugin service is the only wiring. nri.py starts the
# plugin (the unit's ExecStart) and containerd itself, so that it can kill and restart both.
phase containerd-nri
cat "$EX/config-1.7-nri.toml" tests/field/containerd-nri-test.toml >/etc/containerd/config.toml
want nri && part "containerd NRI scenarios" python3 tests/field/nri.py /tmp/cri-gen

# 4. podman 5 with crun and with runc, through the hooks.d file the package installed (podman
# reads /usr/share/containers/oci/hooks.d by default; no --hooks-dir).
for rt in crun runc; do
    want podman || break
    phase "podman-$rt"
    part "podman scenarios ($rt)" tests/field/podman.sh "$rt" "$IN/rootfs.tar"
done

# 5. The exec window (issue 13): runc/crun/podman exec and CRI ExecSync probes with the follower
# (the reconcile unit's ExecStart), forks, the follower killed and restarted, a containerd
# restart, the follower in a DaemonSet-like container, and no host process with a cookie.
if want exec; then
    phase exec
    part "exec window" tests/field/exec.sh "$IN/rootfs.tar" /tmp/cri-gen
fi

note "hook log: $(grep -c 'decision' "$X/hook.log" 2>/dev/null) decisions, $(grep -ciE ' (warn|error) ' "$X/hook.log" 2>/dev/null) warnings/errors"
summary
