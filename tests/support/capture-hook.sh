#!/bin/sh
# capture-hook.sh CAPDIR STAGE — an OCI hook that records what it is given.
#
# Copies the OCI state JSON from stdin, byte for byte, to CAPDIR/STAGE.json.
# At createRuntime it also copies the bundle's config.json to CAPDIR/config.json
# (the bundle path is read from the state), so a runtime's own bundle (podman's)
# is captured before it is deleted. Writes CAPDIR/STAGE.ctx with where it ran
# (mount namespace, pid, cwd) — useful to tell host-side from in-container hooks.
#
# Only needs /bin/sh, cat, sed, cp, readlink: busybox provides them all, so the
# same script also works for startContainer, which runs inside the container
# (CAPDIR must then be bind-mounted into the container at the same path).
set -u
capdir=$1
stage=$2
cat > "$capdir/$stage.json"
{
    echo "stage=$stage"
    echo "mntns=$(readlink /proc/self/ns/mnt 2>/dev/null)"
    echo "pidns=$(readlink /proc/self/ns/pid 2>/dev/null)"
    echo "hookpid=$$"
    echo "cwd=$(pwd)"
    echo "argv0=$0"
} > "$capdir/$stage.ctx"
if [ "$stage" = createRuntime ]; then
    bundle=$(sed -n 's/.*"bundle"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$capdir/$stage.json" | head -n1)
    if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
        cp "$bundle/config.json" "$capdir/config.json"
    fi
fi
exit 0
