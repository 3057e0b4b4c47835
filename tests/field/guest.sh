#!/bin/bash
# Field tier, run INSIDE the Debian 13 guest by tests/field/run.sh (`tests/vm/vm.sh field`): a
# service of the guest's own systemd (PID 1), started once the system is up, in the checkout (seen
# read-only at /host/...). /run/xchg is the host's exchange directory: in/ holds what the host
# prepared (the .deb, the image), and results go next to it (logs, captured states, the journal).
#
# Installs the hook as a node administrator does (`apt install ./….deb`: the package enables and
# starts the reconcile service and the gc timer), then runs the parts, each a script of its own:
#   units   tests/field/units.sh: the shipped systemd units, right after the installation and with
#           the packaged config; at the end of the boot `apt remove` and `apt purge`
#   cri     tests/field/cri.py: containerd's CRI plugin wired by base_runtime_spec
#   nri     tests/field/nri.py: containerd with NRI on, the NRI unit as the only wiring
#   systemd-cgroup  tests/field/systemd_cgroup.py: kubelet's systemd cgroup driver (runc and crun
#           with SystemdCgroup = true), the NRI unit and one base_runtime_spec pod
#   podman  tests/field/podman.sh: podman with crun and with runc, the packaged hooks.d file
#   exec    tests/field/exec.sh: the exec window, with the follower unit
#   isolation  tests/field/isolation.py: co-run pairs (two tenants, one group, an exec'd process
#           against another tenant) through podman's hooks.d (rootful and rootless), containerd's base_runtime_spec and
#           NRI plugin, right after a follower restart and after a containerd restart
#   escape  tests/field/escape.py: containers whose hook failed open (the state lock held through
#           their createRuntime and poststart; an invalid config) seen by `audit`, counted by
#           `metrics` and healed by the follower unit, through podman's hooks.d and containerd's
#           NRI plugin under kubelet's systemd cgroup driver (the DaemonSet part runs the same on
#           its own pods and follower)
#   upgrade tests/field/upgrade.py: the previous release (in/previous.deb) installed on a node
#           without the package, pods of three groups on containerd's NRI with the systemd cgroup
#           driver and podman containers, then a hook of each version beside the services of the
#           other (skew), the upgrade to this .deb, the rollback and the upgrade again, with
#           containers created throughout; the package is purged afterwards
#   daemonset  tests/field/daemonset.py: packaging/kubernetes/daemonset.yaml run as kubelet would
#           (tests/field/kubelet.py), after everything else: it purges the package first; its
#           rolling update goes to the previous release's manifest and image
#           (in/previous-daemonset.yaml, in/previous-image.tar) and back
# containerd is Debian's containerd.service, (re)started by the parts once they have written its
# config; its log is its journal. After each part, `doctor` looks at the node as the part left it
# (doctor_shape). Prints TAP lines and "field: N passed, M failed".
# OCH_FIELD_PARTS (default: all of them) picks parts (for working on one; CI runs them all).
#
# Adding a part: a part_NAME function below (it may use containerd_with, phase, part) and NAME in
# PARTS_IN_ORDER.
set -uo pipefail
X=/run/xchg
IN=$X/in
export FIELD_CONFIG_BASE=$X/config.base.toml
RESULTS=$X/results.tap
: >"$RESULTS"
PARTS_IN_ORDER=(cri nri systemd-cgroup podman exec isolation escape) # between units.sh check and units.sh remove
PARTS=" ${OCH_FIELD_PARTS:-units ${PARTS_IN_ORDER[*]} upgrade daemonset} "
want() { [[ $PARTS == *" $1 "* ]]; }
EX=/usr/share/doc/oci-coresched-hook/examples/containerd
GEN=/tmp/cri-gen # CRI's api.proto compiled once per boot (cri.py), reused by nri.py and exec_cri.py
REC=oci-coresched-hook-reconcile.service

note() { echo "# $*" | tee -a "$RESULTS"; }
ok() { echo "ok - $*" | tee -a "$RESULTS"; }
bad() { echo "not ok - $*" | tee -a "$RESULTS"; }
phase() { mkdir -p /run/och-field && echo "$1" >/run/och-field/phase; }
# save_logs: the boot's journal and containerd's, for the host (kept there when the run fails)
save_logs() {
    journalctl -b --no-pager -o short-monotonic >"$X/journal.txt" 2>&1
    journalctl -b --no-pager -o short-monotonic -u containerd >"$X/containerd.log" 2>&1
}
summary() {
    local p f
    save_logs
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
# containerd_with TOML...: /etc/containerd/config.toml = the files concatenated, then (re)start
# containerd.service (Type=notify: systemctl returns once it serves) and check that its CRI plugin
# loaded in this run.
containerd_with() {
    cat "$@" >/etc/containerd/config.toml || return 1
    timed "systemctl restart containerd" systemctl restart containerd || {
        bad "containerd did not start: $(journalctl -b --no-pager -o cat -u containerd | tail -n 5)"
        return 1
    }
    if journalctl --no-pager -o cat _SYSTEMD_INVOCATION_ID="$(systemctl show -p InvocationID --value containerd)" |
        grep -q 'failed to load plugin io.containerd.grpc.v1.cri'; then
        bad "containerd's CRI plugin did not load: $(journalctl -b --no-pager -o cat -u containerd | grep 'io.containerd.grpc.v1.cri' | tail -n 2)"
        return 1
    fi
}
# doctor_shape LABEL [FACT...]: `doctor --json` on the node as a part left it (the package's
# binary, the routes that part wired and left on): every fact that is not ok as a note, then the
# facts that hold on every shape of this guest: the kernel supports core scheduling, SMT is on, no
# sched_ext, the config is valid, and the audit finds no violation and no escaped container; and
# each FACT named (the route the part wired) ok, or warning only that the file it names is this
# tier's capture wrapper (tests/field/capture-hook.sh), not the packaged binary.
doctor_shape() {
    local label=$1 out rc=0 f level
    shift
    out=$(/usr/bin/oci-coresched-hook doctor --json 2>"$X/doctor.err") || rc=$?
    if ! jq -e .facts >/dev/null 2>&1 <<<"$out"; then
        bad "doctor ($label): no report (exit $rc): $(tail -n 3 "$X/doctor.err")"
        return
    fi
    note "doctor ($label): $(jq -r .summary <<<"$out") (exit $rc)"
    jq -r '.facts[] | select(.level != "ok") | "#   \(.level) \(.name): \(.summary)"' <<<"$out" | tee -a "$RESULTS"
    case $(jq -r .verdict <<<"$out"):$rc in
    isolates:0 | nothing_to_isolate:0 | at_risk:1 | does_not_isolate:1) ok "doctor ($label): its exit status $rc matches its verdict" ;;
    *) bad "doctor ($label): exit status $rc with verdict $(jq -r .verdict <<<"$out")" ;;
    esac
    for f in kernel smt sched_ext config "$@"; do
        level=$(jq -r --arg n "$f" '[.facts[] | select(.name == $n)] | first
            | if .level == "warn" and (.summary | contains("another build than /usr/lib/och-field/")) then "wrapper" else .level end' <<<"$out")
        if [[ $level == ok ]] || [[ $level == wrapper && $# -gt 0 && " $* " == *" $f "* ]]; then
            ok "doctor ($label): $f ok$([[ $level == wrapper ]] && echo " (but for the capture wrapper at the path it names)")"
        else
            bad "doctor ($label): $f is not ok: $(jq -r --arg n "$f" '[.facts[] | select(.name == $n)] | first | tostring' <<<"$out")"
        fi
    done
    if [[ $(jq -r '[.facts[] | select(.name == "audit") | .level] | first' <<<"$out") != fail ]]; then
        ok "doctor ($label): the audit finds no violation and no escaped container"
    else
        bad "doctor ($label): the audit: $(jq -c '[.facts[] | select(.name == "audit")] | first' <<<"$out")"
    fi
}
# import_image: the pods' image into containerd's k8s.io namespace, once per boot
import_image() {
    ctr -n k8s.io images ls -q | grep -qx docker.io/local/field:1 && return 0
    timed "ctr images import" quiet "$X/ctr-import.log" ctr -n k8s.io images import --snapshotter native "$IN/image.tar"
}

# --- the boot -----------------------------------------------------------------------------------
state=$(systemctl is-system-running --wait 2>&1)
# shellcheck source=/dev/null
note "guest: $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), siblings $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list), PID 1 $(cat /proc/1/comm)"
note "boot: $(systemd-analyze time 2>&1 | head -n 1)"
note "versions: $(dpkg-query -W -f='${Package} ${Version}, ' systemd containerd runc crun podman util-linux-extra)"
if [[ $state == running ]]; then
    ok "the guest's systemd finished booting with no failed unit"
else
    bad "the guest's systemd is '$state': $(systemctl --failed --no-legend --plain | tr -s ' ' | tr '\n' ';')"
fi
coresched new -- coresched get >/dev/null 2>&1 || setup_failed "coresched cannot create a cookie on this kernel"

# --- the package, as users install it -----------------------------------------------------------
# The Debian 13 root keeps services from starting while it is built in a chroot (policy-rc.d);
# this guest is a node, where the package's maintainer scripts start its units.
rm -f /usr/sbin/policy-rc.d
# The package's directories are made first: the guest's root is an overlay without redirect_dir
# (tmpfs upper without xattrs), where dpkg's rename of a directory it unpacked fails with EXDEV;
# files are unpacked and renamed into place by dpkg as usual.
dpkg-deb -c "$IN/oci-coresched-hook.deb" | awk '$1 ~ /^d/ { print substr($6, 2) }' | xargs mkdir -p
cp "$IN/oci-coresched-hook.deb" /tmp/oci-coresched-hook.deb
timed "apt install ./oci-coresched-hook.deb" quiet "$X/apt-install.log" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -q /tmp/oci-coresched-hook.deb ||
    setup_failed "apt install failed: $(tail -n 5 "$X/apt-install.log")"
[[ -x /usr/bin/oci-coresched-hook ]] || setup_failed "the package installed no /usr/bin/oci-coresched-hook"
# The capture wrapper goes where the engines and the units run the hook; the running follower
# keeps the binary it started with.
mkdir -p /usr/lib/och-field
mv /usr/bin/oci-coresched-hook /usr/lib/och-field/oci-coresched-hook
install -m 0755 tests/field/capture-hook.sh /usr/bin/oci-coresched-hook
/usr/bin/oci-coresched-hook --version | sed 's/^/# /'
mkdir -p /etc/containerd
# The co-run recorder on the node (the isolation and DaemonSet parts), out of the 9p share.
install -m 0755 "$IN/corun" /tmp/corun || setup_failed "cannot install the co-run recorder from $IN/corun"

# --- the parts ----------------------------------------------------------------------------------
# units: with the packaged config (syslog = true, log_level info), right after the installation.
if want units; then
    phase units
    part "units (installed, sandboxed, restarted)" tests/field/units.sh check "$IN/rootfs.tar"
fi

# The other parts' config: the BE rule of the tests (core_expeller and sched_idle) and a debug log
# into the exchange directory. The services read their config at start: the follower restarts.
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
systemctl restart "$REC" || bad "systemctl restart $REC after the config change failed"

# cri: containerd's CRI plugin, wired as packaging/containerd/ tells users (the installed examples).
part_cri() {
    phase containerd-runc
    cp "$EX/base-runtime-spec.json" /etc/containerd/oci-coresched-hook-base-spec.json
    containerd_with "$EX/config-1.6-base-runtime-spec.toml" tests/field/containerd-test.toml || return
    import_image || { bad "ctr images import failed: $(tail -n 3 "$X/ctr-import.log")"; return; }
    part "containerd scenarios" python3 tests/field/cri.py "$GEN"
    doctor_shape "containerd CRI, base_runtime_spec" containerd routes
    systemctl stop containerd
}

# nri: containerd with NRI enabled and nothing else for the hook (the installed
# config-1.7-nri.toml): the packaged NRI unit is the only wiring. nri.py enables it before it
# starts containerd, and restarts and kills both.
part_nri() {
    phase containerd-nri
    containerd_with "$EX/config-1.7-nri.toml" tests/field/containerd-nri-test.toml || return
    import_image || { bad "ctr images import failed: $(tail -n 3 "$X/ctr-import.log")"; return; }
    systemctl stop containerd
    part "containerd NRI scenarios" python3 tests/field/nri.py "$GEN"
    doctor_shape "containerd with NRI"
}

# systemd-cgroup: containerd's runc and crun handlers with SystemdCgroup = true, pods under
# kubelet's systemd slices, the NRI unit as the wiring and one pod by base_runtime_spec.
part_systemd-cgroup() {
    phase containerd-systemd
    cp "$EX/base-runtime-spec.json" /etc/containerd/oci-coresched-hook-base-spec.json
    containerd_with "$EX/config-1.7-nri.toml" tests/field/containerd-systemd-test.toml || return
    import_image || { bad "ctr images import failed: $(tail -n 3 "$X/ctr-import.log")"; return; }
    part "containerd, systemd cgroup driver" python3 tests/field/systemd_cgroup.py "$GEN"
    doctor_shape "containerd, systemd cgroup driver"
    systemctl stop containerd
}

# podman: podman 5 with crun and with runc, through the hooks.d file the package installed (podman
# reads /usr/share/containers/oci/hooks.d by default; no --hooks-dir).
part_podman() {
    local rt
    for rt in crun runc; do
        phase "podman-$rt"
        part "podman scenarios ($rt)" tests/field/podman.sh "$rt" "$IN/rootfs.tar"
        doctor_shape "podman with $rt" hooks.d
    done
}

# exec: the exec window with the follower unit: runc/crun/podman exec and CRI ExecSync probes,
# forks, the follower killed and started again, a containerd restart, the follower in a
# DaemonSet-like container, and no host process with a cookie.
part_exec() {
    phase exec
    part "exec window" tests/field/exec.sh "$IN/rootfs.tar" "$GEN"
    doctor_shape "after the exec window"
}

# isolation: co-run recorders on the two siblings, containerd with kubelet's systemd cgroup driver
# (its runc-spec handler is the base_runtime_spec route, its runc handler the NRI plugin's).
part_isolation() {
    phase isolation
    cp "$EX/base-runtime-spec.json" /etc/containerd/oci-coresched-hook-base-spec.json
    containerd_with "$EX/config-1.7-nri.toml" tests/field/containerd-systemd-test.toml || return
    import_image || { bad "ctr images import failed: $(tail -n 3 "$X/ctr-import.log")"; return; }
    part "isolation (co-run pairs through the routes)" python3 tests/field/isolation.py "$GEN" /tmp/corun
    doctor_shape "after the isolation pairs"
    systemctl stop containerd
}

# escape: fail-open containers seen, counted and healed, through podman's hooks.d file and
# containerd's NRI plugin with kubelet's systemd cgroup driver (the follower: the reconcile unit).
part_escape() {
    phase escape
    cp "$EX/base-runtime-spec.json" /etc/containerd/oci-coresched-hook-base-spec.json
    containerd_with "$EX/config-1.7-nri.toml" tests/field/containerd-systemd-test.toml || return
    import_image || { bad "ctr images import failed: $(tail -n 3 "$X/ctr-import.log")"; return; }
    part "escape (failed open: seen, counted, healed)" python3 tests/field/escape.py "$GEN"
    doctor_shape "after the escapes, healed"
    systemctl stop containerd
}

for p in "${PARTS_IN_ORDER[@]}"; do
    if want "$p"; then "part_$p"; fi
done

note "hook log: $(grep -c 'decision' "$X/hook.log" 2>/dev/null) decisions, $(grep -ciE ' (warn|error) ' "$X/hook.log" 2>/dev/null) warnings/errors"
if want units; then
    phase units-remove
    part "units (apt remove, apt purge)" tests/field/units.sh remove
fi
# upgrade: on a node without the package (units.sh remove purged it; purged here when that part did
# not run), containerd on NRI with kubelet's systemd cgroup driver, as the upgrade test wants it.
part_upgrade() {
    phase upgrade
    local old_version new_version
    old_version=$(dpkg-deb -f "$IN/previous.deb" Version | sed 's/-[^-]*$//')
    new_version=$(dpkg-deb -f "$IN/oci-coresched-hook.deb" Version | sed 's/-[^-]*$//')
    if dpkg-query -W -f='${Status}' oci-coresched-hook 2>/dev/null | grep -q 'install ok'; then
        quiet "$X/upgrade-purge.log" env DEBIAN_FRONTEND=noninteractive apt-get purge -y oci-coresched-hook
    fi
    cp packaging/containerd/base-runtime-spec.json /etc/containerd/oci-coresched-hook-base-spec.json
    containerd_with packaging/containerd/config-1.7-nri.toml tests/field/containerd-systemd-test.toml || return
    import_image || { bad "ctr images import failed: $(tail -n 3 "$X/ctr-import.log")"; return; }
    part "upgrade $old_version -> $new_version, rollback, upgrade again" \
        python3 tests/field/upgrade.py "$GEN" "$IN/previous.deb" "$old_version" "$IN/oci-coresched-hook.deb" "$new_version" "$IN/rootfs.tar"
    doctor_shape "upgraded, NRI with the systemd cgroup driver"
    systemctl stop containerd
    timed "apt purge (after the upgrade part)" quiet "$X/upgrade-purge.log" \
        env DEBIAN_FRONTEND=noninteractive apt-get purge -y oci-coresched-hook ||
        bad "apt purge after the upgrade part failed: $(tail -n 5 "$X/upgrade-purge.log")"
}
if want upgrade; then
    part_upgrade
fi
if want daemonset; then
    phase daemonset
    part "DaemonSet (as kubelet would run it)" python3 tests/field/daemonset.py "$GEN" packaging/kubernetes/daemonset.yaml "$IN/oci-coresched-hook-image.tar" /tmp/corun \
        "$IN/previous-daemonset.yaml" "$IN/previous-image.tar"
fi
summary
