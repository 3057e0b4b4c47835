#!/bin/sh
# mkbundle.sh BUNDLE_DIR — write an OCI bundle (rootfs + config.json) for runtime tests.
#
# The config is `runc spec` (runc 1.1.5) output with: process.terminal=false, a
# busybox rootfs (tests/support/mkrootfs.sh), Kubernetes-pod-like annotations and
# a kubelet-like cgroupfs cgroupsPath. Needs jq (apt-get install jq).
#
# Environment knobs (all optional):
#   ID            container id used in cgroupsPath/annotations   (default: basename of BUNDLE_DIR)
#   CAPDIR        if set: install tests/support/capture-hook.sh as a hook for STAGES,
#                 writing to CAPDIR, and bind-mount CAPDIR into the container at the
#                 same path (startContainer hooks run inside the container)
#   STAGES        hook stages to wire (default: all six)
#   READONLY      root.readonly (default: false)
#   CGROUPS_PATH  linux.cgroupsPath; "none" omits it
#                 (default: /kubepods/burstable/pod<uid>/<ID>)
#   ARGS_JSON     process.args as a JSON array (default: sh -c 'echo hello; sleep 1')
#   EXTRA_JQ      an extra jq filter applied last, e.g.
#                 '.hooks.createRuntime = [{"path":"/x/fail-hook.sh","args":["fail-hook.sh"]}]'
set -eu
[ $# -eq 1 ] || { echo "usage: $0 BUNDLE_DIR" >&2; exit 2; }
command -v jq >/dev/null 2>&1 || { echo "mkbundle.sh: jq is required (apt-get install jq)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
bundle=$1
mkdir -p "$bundle"
bundle=$(cd "$bundle" && pwd)
ID=${ID:-$(basename "$bundle")}
STAGES=${STAGES:-"prestart createRuntime createContainer startContainer poststart poststop"}
READONLY=${READONLY:-false}
POD_UID=${POD_UID:-3f2b7c1e-5d4a-4e8b-9c6d-1a2b3c4d5e6f}
SANDBOX_ID=${SANDBOX_ID:-5f1c0e7d9a8b6c4d2e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d}
CGROUPS_PATH=${CGROUPS_PATH:-/kubepods/burstable/pod$POD_UID/$ID}
ARGS_JSON=${ARGS_JSON:-'["sh","-c","echo hello from container; sleep 1"]'}
EXTRA_JQ=${EXTRA_JQ:-.}

sh "$here/mkrootfs.sh" "$bundle/rootfs" 2>/dev/null

hooks='{}'
mounts_extra='[]'
if [ -n "${CAPDIR:-}" ]; then
    mkdir -p "$CAPDIR"
    CAPDIR=$(cd "$CAPDIR" && pwd)
    cp "$here/capture-hook.sh" "$CAPDIR/capture-hook.sh"
    chmod 0755 "$CAPDIR/capture-hook.sh"
    for s in $STAGES; do
        hooks=$(printf '%s' "$hooks" | jq --arg s "$s" --arg c "$CAPDIR" \
            '.[$s] = [{"path": ($c + "/capture-hook.sh"), "args": ["capture-hook.sh", $c, $s], "timeout": 10}]')
    done
    mounts_extra=$(jq -n --arg c "$CAPDIR" '[{"destination": $c, "type": "bind", "source": $c, "options": ["rbind", "rw"]}]')
fi

cat > "$bundle/config.json.base" <<'JSON'
{
	"ociVersion": "1.0.2-dev",
	"process": {
		"terminal": false,
		"user": {"uid": 0, "gid": 0},
		"args": ["sh"],
		"env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"],
		"cwd": "/",
		"capabilities": {
			"bounding": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
			"effective": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
			"permitted": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
			"ambient": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]
		},
		"rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
		"noNewPrivileges": true
	},
	"root": {"path": "rootfs", "readonly": true},
	"hostname": "runc",
	"mounts": [
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
		{"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
		{"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
		{"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
		{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
		{"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}
	],
	"linux": {
		"resources": {"devices": [{"allow": false, "access": "rwm"}]},
		"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
		"maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
		"readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
	}
}
JSON

jq --argjson ro "$READONLY" \
   --argjson args "$ARGS_JSON" \
   --argjson hooks "$hooks" \
   --argjson mx "$mounts_extra" \
   --arg cg "$CGROUPS_PATH" \
   --arg id "$ID" --arg uid "$POD_UID" --arg sb "$SANDBOX_ID" '
  .root.readonly = $ro
  | .process.args = $args
  | .mounts += $mx
  | (if $hooks == {} then . else .hooks = $hooks end)
  | (if $cg == "none" then . else .linux.cgroupsPath = $cg end)
  | .annotations = {
      "io.kubernetes.cri.container-type": "container",
      "io.kubernetes.cri.container-name": "web",
      "io.kubernetes.cri.image-name": "docker.io/library/busybox:1.36",
      "io.kubernetes.cri.sandbox-id": $sb,
      "io.kubernetes.cri.sandbox-name": "web-0",
      "io.kubernetes.cri.sandbox-namespace": "default",
      "io.kubernetes.cri.sandbox-uid": $uid,
      "io.kubernetes.pod.namespace": "default",
      "io.kubernetes.pod.name": "web-0",
      "io.kubernetes.pod.uid": $uid,
      "io.kubernetes.container.name": "web",
      "oci-coresched-hook/group": "web",
      "koordinator.sh/qosClass": "LS"
    }
  | '"$EXTRA_JQ" "$bundle/config.json.base" > "$bundle/config.json"
rm -f "$bundle/config.json.base"
echo "mkbundle.sh: bundle ready in $bundle (id $ID)" >&2
