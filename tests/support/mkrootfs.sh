#!/bin/sh
# mkrootfs.sh DIR — build a minimal busybox rootfs for OCI runtime tests.
#
# Creates DIR/bin/busybox (copied from busybox-static) plus applet symlinks,
# and the empty mount-point directories a bundle needs (proc dev sys tmp,
# also needed when root.readonly is true). Idempotent; DIR may already exist.
#
# Requires the statically linked busybox (Debian: apt-get install busybox-static).
set -eu

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 ROOTFS_DIR" >&2
    exit 2
fi
dir=$1

bb=""
for c in "${BUSYBOX:-}" /bin/busybox /usr/bin/busybox; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    # A dynamically linked busybox would need the host's libc in the rootfs.
    if command -v file >/dev/null 2>&1; then
        case "$(file -L "$c")" in *"statically linked"*|*"static-pie linked"*) ;; *) continue ;; esac
    elif command -v ldd >/dev/null 2>&1 && ldd "$c" >/dev/null 2>&1; then
        continue   # ldd succeeded => dynamic
    fi
    bb=$c
    break
done
if [ -z "$bb" ]; then
    echo "mkrootfs.sh: no statically linked busybox found (checked \$BUSYBOX, /bin/busybox, /usr/bin/busybox)." >&2
    echo "mkrootfs.sh: install it with: apt-get install busybox-static" >&2
    exit 1
fi

mkdir -p "$dir/bin" "$dir/proc" "$dir/dev" "$dir/sys" "$dir/tmp" "$dir/etc" "$dir/run"
chmod 1777 "$dir/tmp"
cp "$bb" "$dir/bin/busybox"
chmod 0755 "$dir/bin/busybox"
for applet in sh ash sleep cat true false echo ls ps id env mkdir rm touch \
              grep sed head tail wc date kill mount uname hostname printf test \
              readlink stat tee wait yes; do
    ln -sf busybox "$dir/bin/$applet"
done
# Minimal identity files so `id` and friends don't complain.
[ -e "$dir/etc/passwd" ] || echo 'root:x:0:0:root:/root:/bin/sh' > "$dir/etc/passwd"
[ -e "$dir/etc/group" ]  || echo 'root:x:0:' > "$dir/etc/group"
echo "mkrootfs.sh: rootfs ready in $dir" >&2
