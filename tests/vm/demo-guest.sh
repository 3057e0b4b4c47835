#!/usr/bin/env bash
# Inside the VM guest (started by tests/vm/demo.sh): three runc containers, then what the hook did.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.."
E2E_NAME=demo
# shellcheck source=tests/vm/containers.sh
. tests/vm/containers.sh

echo "kernel $(uname -r), CPUs $(nproc), SMT siblings of cpu0: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"
echo
for c in "web-1 tenant-a" "web-2 tenant-a" "web-3 tenant-b"; do
    set -- $c
    echo "\$ runc run -d $1   # annotations: oci-coresched-hook/group=web, io.kubernetes.pod.namespace=$2"
    start "$1" "{\"oci-coresched-hook/group\":\"web\",\"io.kubernetes.pod.namespace\":\"$2\"}" ||
        { cat "$WORK/$1.out"; exit 1; }
done
echo
echo "\$ oci-coresched-hook list"
"$BIN" --log-level off --state-dir "$STATE" list
echo
for id in web-1 web-2 web-3; do
    echo "\$ oci-coresched-hook inspect \$(runc state $id | jq .pid)"
    "$BIN" --log-level off --state-dir "$STATE" inspect "$(pid_of "$id")" | sed -n 1p
done
echo
echo "What each container read as its very first action (GET on itself):"
for id in web-1 web-2 web-3; do echo "  $id: $(self_cookie "$id")"; done
echo
a=$(cookie web-1) b=$(cookie web-2) c=$(cookie web-3)
if [[ $a != 0x0 && $a == "$b" && $c != "$a" && $c != 0x0 ]]; then
    echo "web-1 and web-2 (tenant-a/web) share cookie $a; web-3 (tenant-b/web) is isolated with $c."
else
    echo "unexpected cookies: web-1=$a web-2=$b web-3=$c" >&2
    exit 1
fi
