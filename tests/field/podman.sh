#!/bin/bash
# Field tier, inside the Debian 13 guest under its systemd (tests/field/guest.sh): podman 5 with
# one OCI runtime, cgroup v2, through the hooks.d file the package installed (podman's default
# hooks_dir; no --hooks-dir). Cookies are read with util-linux `coresched get -s PID` and cross-checked with the
# hook's `inspect`.
#   podman.sh RUNTIME ROOTFS_TAR        RUNTIME: crun or runc; prints TAP lines
set -uo pipefail
rt=$1
rootfs=/tmp/podman-rootfs
if ! { rm -rf "$rootfs" && mkdir -p "$rootfs" && tar -xf "$2" -C "$rootfs"; }; then
    echo "not ok - podman/$rt: cannot unpack the rootfs"
    exit 1
fi
HOOK=/usr/bin/oci-coresched-hook
PO=(podman --cgroup-manager cgroupfs --events-backend file --storage-driver vfs --runtime "$rt")
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - podman/$rt: $*"; }
bad() { fail=$((fail + 1)); echo "not ok - podman/$rt: $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# cookie PID: coresched's reading, which must agree with the hook's inspect (else 'disagree').
cookie() {
    local line c mine
    line=$(coresched get -s "$1" 2>&1) || { echo "error:$line"; return; }
    c=${line##* is }
    mine=$("$HOOK" inspect "$1" --json 2>/dev/null | jq -r .cookie)
    if [[ $mine != 0x* || $c != 0x* ]] || (( mine != c )); then
        echo "disagree:coresched=$c,inspect=$mine"
        return
    fi
    echo "$c"
}
pid_of() { "${PO[@]}" inspect -f '{{.State.Pid}}' "$1"; }
id_of() { "${PO[@]}" inspect -f '{{.Id}}' "$1"; }
cached_ids() { "$HOOK" list --json | jq -r '.[].members[].id'; }
# start NAME NAMESPACE GROUP: a detached container; --rootfs DIR must come after every option.
start() {
    local out
    if out=$("${PO[@]}" run -d --name "$1" --network none --annotation "oci-coresched-hook/group=$3" \
        --annotation "io.kubernetes.pod.namespace=$2" --rootfs "$rootfs" /bin/sleep 3600 2>&1); then
        ok "podman run -d $1 ($2/$3)"
    else
        bad "podman run -d $1 ($2/$3)"
        printf '%s\n' "$out" | tail -n 5 | sed 's/^/#   /'
    fi
}

echo "# podman $("${PO[@]}" version -f '{{.Client.Version}}' 2>&1), $rt $("$rt" --version | head -n 1)"
# Which hooks.d directories podman reads with the distribution's default config: a probe hook in
# /etc/containers/oci/hooks.d leaves a mark if podman ran it.
probe=/run/och-field/etc-hooks-d-read
rm -f "$probe"
mkdir -p /etc/containers/oci/hooks.d
printf '{"version":"1.0.0","hook":{"path":"/bin/sh","args":["sh","-c","touch %s"]},"when":{"always":true},"stages":["createRuntime"]}\n' \
    "$probe" >/etc/containers/oci/hooks.d/zz-och-probe.json
start "$rt-a1" tenant-a web
check "podman's default config reads no hooks from /etc/containers/oci/hooks.d (only /usr/share/...)" test ! -e "$probe"
rm -f /etc/containers/oci/hooks.d/zz-och-probe.json
start "$rt-a2" tenant-a web
start "$rt-b1" tenant-b web
a1=$(cookie "$(pid_of "$rt-a1")")
a2=$(cookie "$(pid_of "$rt-a2")")
b1=$(cookie "$(pid_of "$rt-b1")")
echo "# cookies: a1=$a1 a2=$a2 b1=$b1"
check "a1 has a cookie" test "${a1:0:2}" = 0x -a "$a1" != 0x0
check "two containers of one group share a cookie" test "$a1" = "$a2"
check "the same group name in another namespace is another cookie" test "${b1:0:2}" = 0x -a "$b1" != 0x0 -a "$b1" != "$a1"

# podman exec: no hook runs; reconcile gives the process its container's cookie. The follower
# unit (which would give it the cookie first) is stopped meanwhile, so that reconcile is what does.
REC=oci-coresched-hook-reconcile.service
systemctl stop "$REC" || bad "systemctl stop $REC"
"${PO[@]}" exec -d "$rt-a1" /bin/sleep 3601 >/dev/null 2>&1 || bad "podman exec -d $rt-a1"
epid=
for _ in $(seq 1 30); do
    epid=$(pgrep -f '^/bin/sleep 3601$' | head -n 1) && [[ -n $epid ]] && break
    sleep 1
done
if [[ -n $epid ]]; then
    before=$(cookie "$epid")
    echo "# exec'd pid $epid has $before before reconcile"
    check "with no follower running, the podman exec'd process has cookie 0x0" test "$before" = 0x0
    "$HOOK" reconcile >/dev/null 2>&1 || bad "reconcile exited non-zero"
    check "podman exec'd process gets the container's cookie from reconcile" test "$(cookie "$epid")" = "$a1"
else
    bad "podman exec'd process not found"
fi
systemctl start "$REC" || bad "systemctl start $REC"

# stop: podman itself runs poststop (its cleanup process), which forgets the container.
id=$(id_of "$rt-a1")
"${PO[@]}" stop -t 0 "$rt-a1" >/dev/null 2>&1 || bad "podman stop $rt-a1"
gone() { ! cached_ids | grep -qx "$id"; }
for _ in $(seq 1 60); do gone && break; sleep 1; done
check "poststop (run by podman) made the cache forget a1" gone
check "a2 keeps the group's cookie" test "$(cookie "$(pid_of "$rt-a2")")" = "$a1"
"${PO[@]}" rm -f -t 0 "$rt-a1" "$rt-a2" "$rt-b1" >/dev/null 2>&1 || bad "podman rm -f"
echo "podman/$rt: $pass passed, $fail failed"
((fail == 0))
