#!/usr/bin/env bash
# Functions run through traps, `with_lock`, `setsid bash -c` and `declare -f` look unreachable:
# shellcheck disable=SC2317
# Real-kernel VM test harness for oci-coresched-hook (ARCHITECTURE.md §9, "Test tiers", tier 3).
#
# Builds (once, cached outside the repository) a small x86_64 kernel with CONFIG_SCHED_CORE=y from
# Debian's linux-source-6.12 and a busybox initramfs, then boots it under
# qemu-system-x86_64 -accel tcg with 2 SMT siblings and the host's root shared read-only over
# virtio-9p, and runs a command inside in the caller's working directory.
#
# Usage: see `vm.sh help` (or tests/vm/README.md).
set -euo pipefail

readonly PROG=vm.sh
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
readonly HERE
readonly FRAGMENT="$HERE/sched-core.config"
readonly KSRC_PKG=linux-source-6.12
readonly KSRC_TAR=/usr/src/linux-source-6.12.tar.xz
readonly BUSYBOX=/bin/busybox
readonly QEMU=qemu-system-x86_64

# Exit codes of the harness itself (a guest command's own status is passed through unchanged).
readonly EX_TIMEOUT=124 # the --timeout expired (like timeout(1))
readonly EX_HARNESS=125 # deps/build/boot failure, no exit marker from the guest, bad usage

usage() {
    cat <<'EOF'
Usage:
  vm.sh deps                 install missing Debian packages (apt-get, non-interactive)
  vm.sh kernel               build (once) and print the cached bzImage path
  vm.sh initramfs            build (once) and print the cached initramfs path
  vm.sh run [--timeout SECONDS] [--env K=V]... [--writable DIR]... [--mem MIB] -- CMD [ARGS...]
                             boot the guest and run CMD in the current directory; exits with
                             CMD's status (124: timeout, 125: harness/boot failure).
                             /tmp, /var/tmp, $HOME and each --writable DIR are RAM overlays.
  vm.sh field [same options as run] [--xchg DIR] -- CMD [ARGS...]
                             the same, with the Debian 13 root of the field tier as the guest's /
                             booted by its own systemd (RAM overlay; the host's / at /host; CMD
                             runs as a systemd service in /host$PWD, then the VM powers off);
                             --xchg DIR (also for run) shares DIR read-write at /run/xchg
  vm.sh rootfs               build (once) and print the cached Debian 13 root
  vm.sh selftest             boot the guest and check PR_SCHED_CORE, SMT topology and runc
  vm.sh prune                remove cache entries of other kernel/initramfs/Debian 13 root keys and old leftovers
  vm.sh help

Environment:
  OCH_VM_CACHE      cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/oci-coresched-hook/vm)
  OCH_VM_TIMEOUT    default timeout of `run` in seconds (default 600)
  OCH_VM_VERBOSE=1  show kernel messages and the full boot log
EOF
}

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit "$EX_HARNESS"
}

cache_root() {
    local home=${HOME:-}
    if [[ -z $home ]]; then
        home=$(getent passwd "$(id -u)" | cut -d: -f6) || true
    fi
    [[ -n ${OCH_VM_CACHE:-} || -n ${XDG_CACHE_HOME:-} || -n $home ]] ||
        die "cannot find a cache directory: set OCH_VM_CACHE"
    printf '%s\n' "${OCH_VM_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/oci-coresched-hook/vm}"
}
CACHE=$(cache_root)
readonly CACHE

# Things to undo when vm.sh exits for any reason (including SIGINT/SIGTERM).
CLEANUP_PIDS=()  # processes to kill
CLEANUP_PGRPS=() # process groups to kill (their leader's pid)
CLEANUP_PATHS=() # files/directories to remove
cleanup() {
    local p i
    for p in "${CLEANUP_PGRPS[@]}"; do
        kill -TERM -- "-$p" 2>/dev/null || true
    done
    for p in "${CLEANUP_PIDS[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    # Reap them (up to ~3 s, then SIGKILL) so no qemu/make outlives vm.sh.
    for p in "${CLEANUP_PGRPS[@]}" "${CLEANUP_PIDS[@]}"; do
        for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    for p in "${CLEANUP_PGRPS[@]}"; do
        kill -KILL -- "-$p" 2>/dev/null || true
    done
    for p in "${CLEANUP_PATHS[@]}"; do
        [[ -e $p ]] && rm -rf -- "$p"
    done
    return 0
}
forget_pid() { # forget_pid PID: drop PID from the cleanup lists once it has been reaped
    local p keep=()
    for p in "${CLEANUP_PIDS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    CLEANUP_PIDS=("${keep[@]}")
    keep=()
    for p in "${CLEANUP_PGRPS[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
    CLEANUP_PGRPS=("${keep[@]}")
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

# ---------------------------------------------------------------------------------------------
# deps

# package -> a file it provides, to tell "installed" from "missing" without trusting dpkg alone
readonly DEPS=(
    "$KSRC_PKG:$KSRC_TAR"
    "bc:/usr/bin/bc"
    "flex:/usr/bin/flex"
    "bison:/usr/bin/bison"
    "libelf-dev:/usr/include/libelf.h"
    "libssl-dev:/usr/include/openssl/ssl.h"
    "cpio:/bin/cpio"
    "make:/usr/bin/make"
    "gcc:/usr/bin/gcc"
    "libc6-dev:/usr/include/stdio.h"
    "xz-utils:/usr/bin/xz"
    "gzip:/bin/gzip"
    "util-linux:/usr/bin/flock"
    "coreutils:/usr/bin/realpath"
    "qemu-system-x86:/usr/bin/$QEMU"
    "busybox-static:$BUSYBOX"
    "runc:/usr/sbin/runc"
    "crun:/usr/bin/crun"
    "jq:/usr/bin/jq"
    "python3:/usr/bin/python3"
    "debootstrap:/usr/sbin/debootstrap"
)

missing_deps() {
    local entry pkg file
    for entry in "${DEPS[@]}"; do
        pkg=${entry%%:*}
        file=${entry#*:}
        if [[ ! -e $file ]] || ! dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
            printf '%s\n' "$pkg"
        fi
    done
}

cmd_deps() {
    local pkgs pkg sudo=()
    mapfile -t pkgs < <(missing_deps)
    if ((${#pkgs[@]} == 0)); then
        return 0
    fi
    command -v apt-get >/dev/null || die "missing packages (${pkgs[*]}) and no apt-get: this harness expects Debian 12"
    if ((EUID != 0)); then
        command -v sudo >/dev/null || die "missing packages (${pkgs[*]}); run as root: apt-get install ${pkgs[*]}"
        sudo=(sudo -n)
    fi
    log "installing missing packages: ${pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    local apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    # Install all at once; if that fails, retry one by one to name the package that fails.
    if ! "${sudo[@]}" apt-get install "${apt_opts[@]}" "${pkgs[@]}" </dev/null >&2; then
        log "apt-get install failed; running apt-get update and retrying package by package"
        "${sudo[@]}" apt-get update -q </dev/null >&2 || log "warning: apt-get update failed"
        for pkg in "${pkgs[@]}"; do
            "${sudo[@]}" apt-get install "${apt_opts[@]}" "$pkg" </dev/null >&2 ||
                die "could not install Debian package '$pkg' (apt-get install $pkg failed)"
        done
    fi
    mapfile -t pkgs < <(missing_deps)
    ((${#pkgs[@]} == 0)) || die "packages still missing after apt-get install: ${pkgs[*]}"
}

ensure_deps() {
    local pkgs
    mapfile -t pkgs < <(missing_deps)
    ((${#pkgs[@]} == 0)) || cmd_deps
}

# ---------------------------------------------------------------------------------------------
# shared cache helpers

pkg_version() {
    dpkg-query -W -f='${Version}' "$1" 2>/dev/null | tr -c 'A-Za-z0-9.+~_\n-' '_'
}

# with_lock NAME CMD...: run CMD holding an exclusive flock on $CACHE/.NAME.lock.
# (CMD is not run in a `||` list on purpose: that would switch off errexit inside it.)
with_lock() {
    local name=$1 fd
    shift
    mkdir -p "$CACHE"
    exec {fd}>"$CACHE/.$name.lock"
    if ! flock -n "$fd"; then
        log "waiting for another vm.sh holding $CACHE/.$name.lock"
        flock "$fd"
    fi
    "$@"
    exec {fd}>&-
}

# ---------------------------------------------------------------------------------------------
# the Debian 13 root of the field tier (ensure_trixie, cmd_rootfs)

# shellcheck source=tests/vm/trixie-root.sh
source "$HERE/trixie-root.sh"

# ---------------------------------------------------------------------------------------------
# kernel

# The build recipe. Its text (declare -f) is part of the cache key: editing it rebuilds.
# kernel_recipe SRC_TAR BUILD_DIR FRAGMENT OUT_DIR (all output goes to the caller's log)
kernel_recipe() {
    local src=$1 build=$2 fragment=$3 out=$4 line missing=0
    mkdir -p "$build"
    tar -xJf "$src" -C "$build" --strip-components=1
    cd "$build"
    export KBUILD_BUILD_USER=och KBUILD_BUILD_HOST=och-vm KBUILD_BUILD_TIMESTAMP='1970-01-01'
    make tinyconfig
    scripts/kconfig/merge_config.sh -m .config "$fragment"
    make olddefconfig
    while IFS= read -r line; do
        [[ $line =~ ^CONFIG_[A-Za-z0-9_]+= ]] || continue
        if ! grep -qxF -- "$line" .config; then
            echo "kernel config check: '$line' from the fragment did not end up in .config"
            missing=1
        fi
    done <"$fragment"
    for line in CONFIG_SCHED_CORE=y CONFIG_SCHED_SMT=y CONFIG_SMP=y CONFIG_9P_FS=y CONFIG_NET_9P=y \
        CONFIG_NET_9P_VIRTIO=y CONFIG_VIRTIO_PCI=y CONFIG_DEVTMPFS=y CONFIG_SERIAL_8250_CONSOLE=y \
        CONFIG_BLK_DEV_INITRD=y CONFIG_RD_GZIP=y CONFIG_CGROUPS=y; do
        if ! grep -qxF -- "$line" .config; then
            echo "kernel config check: required '$line' is not in .config"
            missing=1
        fi
    done
    if ((missing)); then
        echo "kernel config check FAILED"
        return 1
    fi
    echo "kernel config check: all fragment options present"
    make -j"$(nproc)" bzImage
    cp arch/x86/boot/bzImage "$out/bzImage"
    cp .config "$out/config"
}

kernel_key() {
    local ver hash
    ver=$(pkg_version "$KSRC_PKG")
    [[ -n $ver ]] || die "$KSRC_PKG is not installed (run: vm.sh deps)"
    hash=$({
        cat -- "$FRAGMENT"
        declare -f kernel_recipe
    } | sha256sum | cut -c1-12)
    printf 'kernel-%s-%s\n' "$ver" "$hash"
}

heartbeat() { # heartbeat WHAT LOGFILE: a line a minute so CI does not think the job hangs
    local what=$1 logf=$2 t=0 s=
    trap '[[ -n $s ]] && kill "$s" 2>/dev/null; exit 0' TERM
    while :; do
        sleep 60 &
        s=$!
        wait "$s"
        t=$((t + 60))
        log "... still $what (${t}s, log: $logf)"
    done
}

# run_recipe WHAT LOGFILE FUNC ARGS...: run the recipe FUNC (whose text is part of a cache key) in
# its own session, so that an interrupted vm.sh can stop all of it, with its output in LOGFILE and
# a heartbeat a minute; sets RECIPE_RC. (Not to be called in a `||` list: that switches off errexit.)
RECIPE_RC=0
run_recipe() {
    local what=$1 logf=$2 func=$3 hb bpid
    shift 3
    RECIPE_RC=0
    heartbeat "$what" "$logf" &
    hb=$!
    CLEANUP_PIDS+=("$hb")
    setsid bash -euo pipefail -c "$(declare -f "$func")"'; '"$func"' "$@"' "$func" "$@" >"$logf" 2>&1 </dev/null &
    bpid=$!
    CLEANUP_PGRPS+=("$bpid")
    wait "$bpid" || RECIPE_RC=$?
    forget_pid "$bpid"
    kill "$hb" 2>/dev/null || true
    wait "$hb" 2>/dev/null || true
    forget_pid "$hb"
}

build_kernel_locked() {
    local key=$1 entry="$CACHE/$1"
    [[ -f $entry/bzImage ]] && return 0
    local build="$CACHE/build-$key" tmp="$CACHE/.tmp-$key.$$" logf="$CACHE/build-$key.log"
    rm -rf -- "$build" "$tmp"
    mkdir -p -- "$tmp"
    log "building kernel $key (~5-10 min on 2 cores; log: $logf)"
    local start=$SECONDS rc
    CLEANUP_PATHS+=("$tmp")
    run_recipe "building the kernel" "$logf" kernel_recipe "$KSRC_TAR" "$build" "$FRAGMENT" "$tmp"
    rc=$RECIPE_RC
    if ((rc != 0)); then
        rm -rf -- "$tmp"
        log "kernel build FAILED (exit $rc); last lines of $logf:"
        tail -n 40 -- "$logf" >&2 || true
        die "kernel build failed; build tree kept for diagnosis in $build"
    fi
    echo "build time: $((SECONDS - start))s" >>"$logf"
    mv -- "$logf" "$tmp/build.log"
    cp -- "$FRAGMENT" "$tmp/sched-core.config"
    mv -T -- "$tmp" "$entry"
    rm -rf -- "$build"
    KERNEL_BUILT=1
    log "kernel built in $((SECONDS - start))s"
}

KERNEL= # set by ensure_kernel (not printed: a $(...) subshell would lose the cleanup trap)
KERNEL_BUILT=0
ensure_kernel() {
    ensure_deps
    [[ -f $FRAGMENT ]] || die "kernel config fragment $FRAGMENT is missing"
    local key
    key=$(kernel_key)
    if [[ ! -f $CACHE/$key/bzImage ]]; then
        with_lock "$key" build_kernel_locked "$key"
    fi
    KERNEL="$CACHE/$key/bzImage"
    [[ -f $KERNEL ]] || die "kernel image $KERNEL missing after build"
}

cmd_kernel() {
    ensure_kernel
    printf '%s\n' "$KERNEL"
}

# ---------------------------------------------------------------------------------------------
# initramfs

# /init of the guest (busybox sh). Its text is part of the initramfs cache key.
# Kernel command line parameters it reads:
#   och.run=DIR    host directory (seen through the 9p root share) holding guest.sh, nonce, epoch,
#                  writable (one directory per line that gets a RAM overlay)
#   och.msize=N    9p msize
#   och.root=field the command's root is the Debian 13 root (9p tag fieldroot, read-only) under a
#                  RAM overlay, with the host's / at /host, booted by its systemd (PID 1), which
#                  runs the command as och-guest.service; default: the host's / itself, the
#                  command run by this init in a chroot
#   och.xchg=1     mount the read-write 9p share xchg at /run/xchg
read -r -d '' INIT_SCRIPT <<'INIT_EOF' || true
#!/bin/busybox sh
# /init of the oci-coresched-hook test VM (generated by tests/vm/vm.sh)
/bin/busybox mkdir -p /bin /sbin /usr/bin /usr/sbin /proc /sys /dev /host /newroot /och/rw
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
stty -onlcr 2>/dev/null
mount -t proc proc /proc
mount -t sysfs sysfs /sys

halt_vm() {
    sync
    poweroff -f
    reboot -f
    echo o >/proc/sysrq-trigger
    sleep 1000
}
fail() {
    echo "och-init: FATAL: $*"
    halt_vm
}

# field_systemd_setup ROOT: the boot of the Debian 13 root under its own systemd, written into its
# RAM overlay: the guest command as och-guest.service (its output on the console between the
# markers vm.sh scans, then poweroff), and nothing a test node does not need at boot.
field_systemd_setup() {
    r=$1 u=$1/etc/systemd/system
    cat >$r/run/och/och-guest-service.sh <<EOF || fail "cannot write the guest service script"
#!/bin/sh
echo "@@OCH-VM-START-$nonce@@"
/bin/sh /run/och/guest.sh </dev/null
rc=\$?
sync
echo "@@OCH-VM-EXIT-$nonce=\$rc@@"
# let the console drain before the poweroff that ends this service
sleep 1
EOF
    cat >$u/och-guest.service <<'EOF' || fail "cannot write och-guest.service"
[Unit]
Description=The guest command of tests/vm/vm.sh field
# The default dependencies order it after basic.target (sockets, journald, the system bus).
# A boot that never gets here (a unit waiting forever) ends the VM after 10 minutes.
JobTimeoutSec=600
JobTimeoutAction=poweroff-immediate
# When the command ends (its exit status is in the marker), the VM powers off.
SuccessAction=poweroff-immediate
FailureAction=poweroff-immediate

[Service]
Type=simple
ExecStart=/bin/sh /run/och/och-guest-service.sh
StandardInput=null
StandardOutput=tty
StandardError=inherit
TTYPath=/dev/console
TTYReset=no
TTYVHangup=no
EOF
    ln -sf ../och-guest.service $u/multi-user.target.wants/och-guest.service
    # Not on a test node: logins on the consoles (a getty on ttyS0 would take the serial console),
    # maintenance timers, podman's DHCP proxy (the guest has no network), and module loading (the
    # kernel has no module support: both would fail at every boot).
    for unit in getty.target serial-getty@.service console-getty.service apt-daily.timer \
        apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer netavark-dhcp-proxy.socket \
        netavark-dhcp-proxy.service systemd-modules-load.service modprobe@.service; do
        ln -sf /dev/null $u/$unit
    done
    # containerd is started by the tests once they have written its config.
    rm -f $u/multi-user.target.wants/containerd.service
    # The root was built in a chroot and never booted: mark /etc and /var as up to date with /usr,
    # as its first boot would, so that ldconfig and the journal catalog are not rebuilt each boot.
    touch -r $r/usr $r/etc/.updated $r/var/.updated
    # Emergency or rescue mode (a failed mount or unit) prints why and powers off instead of
    # waiting for a root password on the console: vm.sh then reports the boot failure.
    for unit in emergency rescue; do
        mkdir -p $u/$unit.service.d
        cat >$u/$unit.service.d/och.conf <<'EOF'
[Service]
ExecStartPre=
ExecStart=
ExecStart=/bin/sh -c 'echo "och-init: FATAL: systemd entered %N mode"; systemctl --no-pager --failed; journalctl -b --no-pager -p warning | tail -n 30; sleep 2; systemctl poweroff -ff'
StandardInput=null
StandardOutput=tty
StandardError=inherit
TTYPath=/dev/console
EOF
    done
}

run= msize=262144 root=host xchg=
for arg in $(cat /proc/cmdline); do
    case $arg in
    och.run=*) run=${arg#och.run=} ;;
    och.msize=*) msize=${arg#och.msize=} ;;
    och.root=*) root=${arg#och.root=} ;;
    och.xchg=1) xchg=1 ;;
    esac
done
[ -n "$run" ] || fail "no och.run= on the kernel command line"

mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize="$msize" hostroot /host ||
    fail "cannot mount the host root over 9p (mount_tag hostroot)"
[ -f "/host$run/guest.sh" ] || fail "/host$run/guest.sh not found through the 9p share"
# Copy the run files now: the writable mounts below may hide the directory they live in.
mkdir -p /och/run
cp -R "/host$run/." /och/run/ || fail "cannot copy the run files from /host$run"
nonce=$(cat /och/run/nonce)
date -s "@$(cat /och/run/epoch)" >/dev/null 2>&1 || echo "och-init: warning: cannot set the clock"
hostname och-vm
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null || true

# R: the root the command runs in; H: where the host's / is seen in it.
if [ "$root" = field ]; then
    # The Debian 13 root, read-only over 9p, under a RAM overlay (every write vanishes at poweroff).
    mkdir -p /och/lower /och/rw/root
    mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize="$msize" fieldroot /och/lower ||
        fail "cannot mount the Debian 13 root over 9p (mount_tag fieldroot)"
    mount -t tmpfs -o mode=755 tmpfs /och/rw/root || fail "tmpfs for the root overlay"
    mkdir -p /och/rw/root/upper /och/rw/root/work
    chmod 755 /och/rw/root/upper
    mount -t overlay -o lowerdir=/och/lower,upperdir=/och/rw/root/upper,workdir=/och/rw/root/work \
        overlay /newroot || fail "overlay on the Debian 13 root"
    mkdir -p /newroot/host && mount -o bind /host /newroot/host || fail "bind the host root at /host"
    R=/newroot H=/newroot/host
else
    R=/host H=/host
fi
mount -t proc proc $R/proc || fail "mount $R/proc"
mount -t sysfs sysfs $R/sys || fail "mount $R/sys"
mount -t devtmpfs devtmpfs $R/dev || fail "mount $R/dev"
mkdir -p $R/dev/pts $R/dev/shm $R/dev/mqueue 2>/dev/null
mount -t devpts -o newinstance,gid=5,mode=620,ptmxmode=666 devpts $R/dev/pts || fail "mount $R/dev/pts"
[ -e $R/dev/ptmx ] || ln -s pts/ptmx $R/dev/ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $R/dev/shm || fail "mount $R/dev/shm"
mount -t mqueue mqueue $R/dev/mqueue 2>/dev/null || true
mount -t cgroup2 -o nsdelegate cgroup2 $R/sys/fs/cgroup || fail "mount cgroup2 on $R/sys/fs/cgroup"
# /run: empty, writable (runc keeps its state in /run/runc; the host's /run must not leak in).
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs $R/run || fail "mount $R/run"
mkdir -p $R/run/lock $R/run/och
if [ "$root" = field ]; then
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $R/tmp || fail "mount $R/tmp"
    # Plain tmpfs where image stores and snapshotters write (overlayfs is no upper for them).
    for d in var/lib/containerd var/lib/containers var/tmp; do
        mkdir -p $R/$d && mount -t tmpfs -o mode=711 tmpfs $R/$d || fail "tmpfs on /$d"
    done
fi
if [ -n "$xchg" ]; then
    mkdir -p $R/run/xchg
    mount -t 9p -o trans=virtio,version=9p2000.L,msize="$msize" xchg $R/run/xchg ||
        fail "cannot mount the exchange directory over 9p (mount_tag xchg)"
fi
# Writable directories: the host's content stays visible (overlayfs, lower = the 9p share),
# writes go to RAM and are gone after the run. Plain tmpfs if overlayfs refuses.
n=0
while IFS= read -r dir; do
    [ -n "$dir" ] || continue
    n=$((n + 1))
    if [ ! -d "/host$dir" ]; then
        echo "och-init: warning: writable dir $dir does not exist on the host; skipped"
        continue
    fi
    mkdir -p "/och/rw/$n" && mount -t tmpfs -o mode=755 tmpfs "/och/rw/$n" || fail "tmpfs for $dir"
    mkdir -p "/och/rw/$n/upper" "/och/rw/$n/work"
    # the overlay's root directory takes its owner and mode from upper
    chmod "$(stat -c %a "/host$dir")" "/och/rw/$n/upper" 2>/dev/null || chmod 1777 "/och/rw/$n/upper"
    chown "$(stat -c %u:%g "/host$dir")" "/och/rw/$n/upper" 2>/dev/null || true
    if ! mount -t overlay -o "lowerdir=/host$dir,upperdir=/och/rw/$n/upper,workdir=/och/rw/$n/work" overlay "$H$dir" 2>/dev/null; then
        echo "och-init: warning: overlayfs on $dir failed; using an empty tmpfs"
        mount -t tmpfs -o mode=1777 tmpfs "$H$dir" || fail "tmpfs on $dir"
    fi
done </och/run/writable
cp -R /och/run/. $R/run/och/ || fail "cannot copy the run files to /run/och"

if [ "$root" = field ]; then
    # Debian 13's systemd becomes PID 1: the guest command runs as a service once the system is
    # up, and the service powers the VM off when it ends.
    [ -x $R/lib/systemd/systemd ] || fail "the Debian 13 root has no /lib/systemd/systemd"
    field_systemd_setup $R
    # Move the Debian 13 root over / (what switch_root does), so that it is the root of the mount
    # namespace and not only of a chroot: setns(CLONE_NEWNS), as in `runc exec` / `crun exec`,
    # puts the joining process at that root. With a bare chroot an exec'd process would see this
    # initramfs instead of its container's root file system.
    cd $R && mount --move . / || fail "mount --move $R /"
    exec env -i TERM=dumb chroot . /lib/systemd/systemd
fi
echo "@@OCH-VM-START-$nonce@@"
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
    chroot $R /bin/sh /run/och/guest.sh </dev/null
rc=$?
echo "@@OCH-VM-EXIT-$nonce=$rc@@"
halt_vm
INIT_EOF
readonly INIT_SCRIPT

# initramfs_recipe OUT_FILE STAGING_DIR: busybox + /init as a gzip'ed newc cpio (part of the key)
initramfs_recipe() {
    local out=$1 root=$2
    mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/host" "$root/och/rw"
    cp "$BUSYBOX" "$root/bin/busybox"
    printf '%s\n' "$INIT_SCRIPT" >"$root/init"
    chmod 755 "$root/init" "$root/bin/busybox"
    # /dev/console lets the kernel give /init a console before devtmpfs is mounted (root only;
    # without it /init reopens /dev/console itself after mounting devtmpfs).
    mknod -m 600 "$root/dev/console" c 5 1 2>/dev/null || true
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -9n >"$out"
}

initramfs_key() {
    local ver hash
    ver=$(pkg_version busybox-static)
    [[ -n $ver ]] || die "busybox-static is not installed (run: vm.sh deps)"
    hash=$({
        printf '%s\n' "$INIT_SCRIPT"
        declare -f initramfs_recipe
    } | sha256sum | cut -c1-12)
    printf 'initramfs-%s-%s\n' "$ver" "$hash"
}

build_initramfs_locked() {
    local key=$1 entry="$CACHE/$1"
    [[ -f $entry/initramfs.cpio.gz ]] && return 0
    local tmp="$CACHE/.tmp-$key.$$"
    CLEANUP_PATHS+=("$tmp")
    rm -rf -- "$tmp"
    mkdir -p -- "$tmp"
    log "building initramfs $key"
    initramfs_recipe "$tmp/initramfs.cpio.gz" "$tmp/root"
    printf '%s\n' "$INIT_SCRIPT" >"$tmp/init"
    rm -rf -- "$tmp/root"
    mv -T -- "$tmp" "$entry"
}

INITRD= # set by ensure_initramfs
ensure_initramfs() {
    ensure_deps
    local key
    key=$(initramfs_key)
    if [[ ! -f $CACHE/$key/initramfs.cpio.gz ]]; then
        with_lock "$key" build_initramfs_locked "$key"
    fi
    INITRD="$CACHE/$key/initramfs.cpio.gz"
    [[ -f $INITRD ]] || die "initramfs $INITRD missing after build"
}

cmd_initramfs() {
    ensure_initramfs
    printf '%s\n' "$INITRD"
}

# ---------------------------------------------------------------------------------------------
# run

sq() { # sq STRING: quote STRING for a POSIX shell
    local q="'\\''"
    printf "'%s'" "${1//\'/$q}"
}

writable_ok() { # writable_ok DIR: can DIR (absolute, or relative to $PWD) get a RAM overlay?
    local d=$1
    [[ -n $d && $d != *[,:]* && $d != *$'\n'* ]] || return 1
    d=$(realpath -m -- "$d")
    [[ $d != / && $d != /run && $d != /run/* && $d != /proc && $d != /proc/* && $d != /sys &&
        $d != /sys/* && $d != /dev && $d != /dev/* ]]
}

# run_guest CMD [ARGS...]: boot the VM and run CMD; used by cmd_run and cmd_selftest.
# In:  RUN_ENV (NAME=VALUE...), RUN_WRITABLE (dirs), RUN_FILES (files copied to /run/och in the
#      guest), RUN_TIMEOUT, RUN_MEM, RUN_CWD, RUN_ROOT, RUN_XCHG.
# Out: VM_RC (CMD's exit status, or EX_TIMEOUT / EX_HARNESS), VM_BOOT_MS (qemu start to CMD
#      start), VM_CMD_MS (CMD start to its exit marker), VM_TOTAL_MS (qemu start to qemu exit).
# Always returns 0 (it must not be called in a `||` list: that would switch off errexit in it).
RUN_ENV=()
RUN_WRITABLE=()
RUN_FILES=()
RUN_TIMEOUT=${OCH_VM_TIMEOUT:-600}
RUN_MEM=
RUN_CWD=
RUN_ROOT=host # host: the host's / is the guest's root; field: the Debian 13 root (host's / at /host)
RUN_XCHG=     # a host directory shared read-write at /run/xchg
VM_RC=
VM_BOOT_MS=
VM_CMD_MS=
VM_TOTAL_MS=
scan_exit_marker() { # scan_exit_marker CONSOLE NONCE FLAGFILE
    local st
    st=$(grep -ao "@@OCH-VM-EXIT-$2=[0-9]*@@" -- "$1" 2>/dev/null | tail -n 1 |
        sed -n 's/.*=\([0-9][0-9]*\)@@$/\1/p') || true
    if [[ -n $st ]]; then
        printf '%s\n' "$st" >"$3"
    fi
}
now_ms() { local t=${EPOCHREALTIME/[.,]/}; printf '%s\n' "$((t / 1000))"; }
run_guest() {
    ensure_kernel
    ensure_initramfs
    local kernel=$KERNEL initrd=$INITRD prefix=
    if [[ $RUN_ROOT == field ]]; then
        ensure_trixie
        prefix=/host
    fi
    RUN_MEM=${RUN_MEM:-$([[ $RUN_ROOT == field ]] && echo 3072 || echo 1024)}
    command -v "$QEMU" >/dev/null || die "$QEMU not found (run: vm.sh deps)"
    if ! [[ $RUN_TIMEOUT =~ ^[0-9]+$ ]] || ((RUN_TIMEOUT == 0)); then
        die "bad --timeout '$RUN_TIMEOUT' (expected a positive number of seconds)"
    fi
    [[ $RUN_MEM =~ ^[0-9]+$ ]] || die "bad --mem '$RUN_MEM'"
    local cwd=${RUN_CWD:-$(pwd -P)}
    [[ $cwd == /* ]] || die "working directory must be absolute: $cwd"

    mkdir -p -- "$CACHE/runs"
    local rundir guestdir f
    rundir=$(mktemp -d "$CACHE/runs/run.XXXXXX")
    CLEANUP_PATHS+=("$rundir")
    [[ $rundir != *[[:space:]]* ]] || die "the cache path must not contain whitespace: $rundir"
    # guestdir: everything in it is copied to /run/och in the guest before CMD starts.
    guestdir=$rundir/guest
    mkdir -m 755 "$guestdir"
    for f in "${RUN_FILES[@]}"; do
        cp -- "$f" "$guestdir/"
    done

    local nonce
    nonce=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
    printf '%s\n' "$nonce" >"$guestdir/nonce"

    # Writable (RAM overlay) directories: /tmp, /var/tmp, $HOME and any --writable.
    local home=${HOME:-/root} d
    {
        for d in /tmp /var/tmp "$home" "${RUN_WRITABLE[@]}"; do
            if ! writable_ok "$d"; then
                # The defaults are best effort ($HOME may be / or odd); --writable must be valid.
                [[ $d == /tmp || $d == /var/tmp || $d == "$home" ]] && continue
                die "--writable $d: must be a directory other than /, not under /run /proc /sys /dev, without ',' ':' or newlines"
            fi
            realpath -m -- "$d"
        done
    } | awk '!seen[$0]++' >"$guestdir/writable"

    # The command script, run by the host's /bin/sh chroot'ed into the shared root.
    local kv
    {
        echo '#!/bin/sh'
        echo '# generated by tests/vm/vm.sh'
        if [[ $RUN_ROOT == field ]]; then
            echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
        else
            printf 'export PATH=%s\n' "$(sq "${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}")"
        fi
        printf 'export HOME=%s\n' "$(sq "$home")"
        echo 'export USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 OCH_IN_VM=1'
        for kv in "${RUN_ENV[@]}"; do
            [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "bad --env '$kv' (expected NAME=VALUE)"
            printf 'export %s=%s\n' "${kv%%=*}" "$(sq "${kv#*=}")"
        done
        printf 'cd -- %s || { echo "vm.sh (guest): cannot cd to %s" >&2; exit 125; }\n' "$(sq "$prefix$cwd")" "${cwd//[\"\$\`\\]/_}"
        printf 'exec'
        for kv in "$@"; do printf ' %s' "$(sq "$kv")"; done
        printf '\n'
    } >"$guestdir/guest.sh"

    local console="$rundir/console.log" qerr="$rundir/qemu.stderr" flag="$rundir/exit-status"
    local started="$rundir/started"
    local append="console=ttyS0 panic=-1 oops=panic och.run=$guestdir och.root=$RUN_ROOT"
    if [[ ${OCH_VM_VERBOSE:-0} != 1 ]]; then
        append="$append quiet"
        # systemd (field): no unit status lines on the console between the markers, only failures
        [[ $RUN_ROOT == field ]] && append="$append systemd.show_status=error"
    fi
    local shares=()
    if [[ $RUN_ROOT == field ]]; then
        shares+=(-virtfs "local,path=$TRIXIE_ROOT,mount_tag=fieldroot,security_model=none,readonly=on,multidevs=remap")
    fi
    if [[ -n $RUN_XCHG ]]; then
        [[ -d $RUN_XCHG && $RUN_XCHG != *,* ]] || die "--xchg $RUN_XCHG: not a directory (or has a comma)"
        shares+=(-virtfs "local,path=$(realpath -- "$RUN_XCHG"),mount_tag=xchg,security_model=none,multidevs=remap")
        append="$append och.xchg=1"
    fi
    # shellcheck disable=SC2054 # the commas are qemu's option syntax
    local qemu=(
        "$QEMU" -accel tcg -cpu max -m "$RUN_MEM" -smp 2,sockets=1,cores=1,threads=2
        -nographic -monitor none -serial stdio -no-reboot -nic none
        -kernel "$kernel" -initrd "$initrd" -append "$append"
        -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap
        "${shares[@]}"
    )
    date +%s >"$guestdir/epoch"
    local t0=$SECONDS t0_ms t_start_ms='' t_exit_ms=''
    t0_ms=$(now_ms)
    "${qemu[@]}" </dev/null >"$console" 2>"$qerr" &
    local qpid=$!
    CLEANUP_PIDS+=("$qpid")

    # Stream the guest command's output (between the start and exit markers) to stdout.
    # mawk (Debian's default awk) reads pipes in large blocks unless -W interactive.
    local awk_opts=()
    if awk -W version 2>&1 | grep -qi mawk; then
        awk_opts=(-W interactive)
    fi
    tail -n +1 -s 0.2 -f --pid="$qpid" -- "$console" | awk "${awk_opts[@]}" \
        -v start="@@OCH-VM-START-$nonce@@" -v exitm="@@OCH-VM-EXIT-$nonce=" -v flag="$flag" \
        -v startflag="$started" -v verbose="${OCH_VM_VERBOSE:-0}" '
        { sub(/\r+$/, "") }
        !started && index($0, start) {
            started = 1; print "1" > startflag; close(startflag)
            if (verbose != 1) next
        }
        (i = index($0, exitm)) && !done {
            rest = substr($0, i + length(exitm)); sub(/@@.*/, "", rest)
            print rest > flag; close(flag); done = 1
            if (i > 1 && verbose != 1) { printf "%s\n", substr($0, 1, i - 1); fflush() }
            if (verbose != 1) next
        }
        verbose == 1 || (started && !done) { print; fflush() }
    ' &
    local fpid=$!
    CLEANUP_PIDS+=("$fpid")

    local timed_out=0 marker_at=
    while kill -0 "$qpid" 2>/dev/null; do
        if [[ ! -s $flag ]] && ! kill -0 "$fpid" 2>/dev/null; then
            # the stream filter is gone (e.g. our stdout was closed): look for the marker ourselves
            scan_exit_marker "$console" "$nonce" "$flag"
        fi
        if [[ -z $t_start_ms && -s $started ]]; then
            t_start_ms=$(now_ms)
        fi
        if [[ -s $flag ]]; then
            t_exit_ms=${t_exit_ms:-$(now_ms)}
            # The guest reported; give poweroff a few seconds, then stop qemu ourselves.
            marker_at=${marker_at:-$SECONDS}
            if ((SECONDS - marker_at > 10)); then
                kill "$qpid" 2>/dev/null || true
                break
            fi
        elif ((SECONDS - t0 >= RUN_TIMEOUT)); then
            timed_out=1
            kill "$qpid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$qpid" 2>/dev/null || break
        sleep 0.5
        ((i < 10)) || kill -KILL "$qpid" 2>/dev/null || true
    done
    local qrc=0
    wait "$qpid" || qrc=$?
    forget_pid "$qpid"
    wait "$fpid" || true
    forget_pid "$fpid"
    local elapsed=$((SECONDS - t0)) t_end_ms
    t_end_ms=$(now_ms)
    VM_TOTAL_MS=$((t_end_ms - t0_ms))
    [[ -z $t_start_ms && -s $started ]] && t_start_ms=$t_end_ms
    [[ -z $t_exit_ms && -s $flag ]] && t_exit_ms=$t_end_ms
    VM_BOOT_MS=${t_start_ms:+$((t_start_ms - t0_ms))}
    VM_CMD_MS=
    [[ -n $t_start_ms && -n $t_exit_ms ]] && VM_CMD_MS=$((t_exit_ms - t_start_ms))

    [[ -s $flag ]] || scan_exit_marker "$console" "$nonce" "$flag"
    local rc=
    [[ -s $flag ]] && rc=$(<"$flag")
    if [[ $rc =~ ^[0-9]+$ ]]; then
        VM_RC=$rc
        return 0
    fi
    local why
    if ((timed_out)); then
        why="timed out after ${RUN_TIMEOUT}s (qemu killed)"
    else
        why="the guest did not report an exit status (qemu exited with status $qrc after ${elapsed}s): boot failure, kernel panic/oops, or qemu error"
    fi
    log "error: $why"
    if [[ -s $qerr ]]; then
        log "qemu stderr:"
        sed 's/^/  | /' "$qerr" >&2
    fi
    mkdir -p -- "$CACHE/logs"
    cp -- "$console" "$CACHE/logs/last-failed-console.log" 2>/dev/null || true
    log "last lines of the guest console (full log: $CACHE/logs/last-failed-console.log):"
    tail -n 40 -- "$console" | tr -d '\r' |
        sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e 's/^/  | /' >&2
    if ((timed_out)); then
        VM_RC=$EX_TIMEOUT
    else
        VM_RC=$EX_HARNESS
    fi
    return 0
}

cmd_run() {
    while (($#)); do
        case $1 in
        --timeout)
            (($# >= 2)) || die "--timeout needs a value"
            RUN_TIMEOUT=$2
            shift 2
            ;;
        --timeout=*)
            RUN_TIMEOUT=${1#*=}
            shift
            ;;
        --env)
            (($# >= 2)) || die "--env needs NAME=VALUE"
            RUN_ENV+=("$2")
            shift 2
            ;;
        --env=*)
            RUN_ENV+=("${1#*=}")
            shift
            ;;
        --writable)
            (($# >= 2)) || die "--writable needs a directory"
            RUN_WRITABLE+=("$2")
            shift 2
            ;;
        --writable=*)
            RUN_WRITABLE+=("${1#*=}")
            shift
            ;;
        --mem)
            (($# >= 2)) || die "--mem needs a value (MiB)"
            RUN_MEM=$2
            shift 2
            ;;
        --xchg)
            (($# >= 2)) || die "--xchg needs a directory"
            RUN_XCHG=$2
            shift 2
            ;;
        --)
            shift
            break
            ;;
        -*) die "unknown option '$1' (usage: vm.sh run [--timeout S] [--env K=V]... -- CMD ARGS...)" ;;
        *) break ;; # the command (the `--` is optional when CMD does not start with -)
        esac
    done
    (($# > 0)) || die "no command given (usage: vm.sh run [--timeout S] [--env K=V]... -- CMD ARGS...)"
    run_guest "$@"
    if [[ ${OCH_VM_VERBOSE:-0} == 1 || $VM_RC == "$EX_TIMEOUT" || $VM_RC == "$EX_HARNESS" || $RUN_ROOT == field ]]; then
        log "boot ${VM_BOOT_MS:-?} ms, command ${VM_CMD_MS:-?} ms, total ${VM_TOTAL_MS:-?} ms, exit status $VM_RC"
    fi
    return "$VM_RC"
}

# ---------------------------------------------------------------------------------------------
# selftest

# och-sched-core-check: `check` (CREATE a cookie for itself, GET it back, require != 0 and that a
# forked child inherits it), `get` (print its own cookie), `exec CMD...` (CREATE, then exec CMD).
read -r -d '' CHECK_C <<'C_EOF' || true
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define OCH_PR_SCHED_CORE 62
#define OCH_GET 0
#define OCH_CREATE 1
#define OCH_PIDTYPE_PID 0

static unsigned long get_cookie(pid_t pid) {
    unsigned long cookie = 0;
    if (prctl(OCH_PR_SCHED_CORE, OCH_GET, pid, OCH_PIDTYPE_PID, (unsigned long)&cookie) != 0) {
        fprintf(stderr, "prctl(PR_SCHED_CORE, GET): %s\n", strerror(errno));
        exit(2);
    }
    return cookie;
}

static void create_cookie(void) {
    if (prctl(OCH_PR_SCHED_CORE, OCH_CREATE, 0, OCH_PIDTYPE_PID, 0) != 0) {
        fprintf(stderr, "prctl(PR_SCHED_CORE, CREATE): %s\n", strerror(errno));
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "get") == 0) {
        printf("cookie=%#lx\n", get_cookie(0));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "exec") == 0) {
        create_cookie();
        fprintf(stderr, "och-sched-core-check: created cookie %#lx, exec %s\n", get_cookie(0), argv[2]);
        execvp(argv[2], argv + 2);
        fprintf(stderr, "exec %s: %s\n", argv[2], strerror(errno));
        return 127;
    }
    if (argc == 2 && strcmp(argv[1], "check") == 0) {
        unsigned long before = get_cookie(0), after;
        create_cookie();
        after = get_cookie(0);
        printf("cookie before=%#lx after CREATE=%#lx", before, after);
        if (after == 0 || after == before) {
            printf(" -> FAIL (no new cookie)\n");
            return 1;
        }
        fflush(stdout);
        pid_t child = fork();
        if (child < 0) { perror("fork"); return 2; }
        if (child == 0) _exit(get_cookie(0) == after ? 0 : 1);
        int st = 0;
        if (waitpid(child, &st, 0) < 0) { perror("waitpid"); return 2; }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            printf(" -> FAIL (forked child does not inherit it)\n");
            return 1;
        }
        printf(", inherited by fork\n");
        return 0;
    }
    fprintf(stderr, "usage: och-sched-core-check check|get|exec CMD...\n");
    return 64;
}
C_EOF
readonly CHECK_C

# Runs inside the guest as: sh selftest.sh (from /run/och, where the check binary also is).
read -r -d '' SELFTEST_SH <<'SELFTEST_EOF' || true
#!/bin/sh
set -u
fails=0
ok() { echo "selftest: ok   $*"; }
bad() { echo "selftest: FAIL $*"; fails=$((fails + 1)); }
check=/run/och/och-sched-core-check

echo "selftest: guest kernel $(uname -r), cwd $(pwd), HOME=$HOME, uid $(id -u)"
ncpu=$(ls -d /sys/devices/system/cpu/cpu[0-9]* | wc -l)
if [ "$ncpu" = 2 ]; then ok "2 CPUs"; else bad "expected 2 CPUs, found $ncpu"; fi
sib0=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>&1)
sib1=$(cat /sys/devices/system/cpu/cpu1/topology/thread_siblings_list 2>&1)
if [ "$sib0" = 0-1 ] && [ "$sib1" = 0-1 ]; then
    ok "cpu0 and cpu1 are SMT siblings (thread_siblings_list $sib0)"
else
    bad "thread_siblings_list: cpu0 '$sib0', cpu1 '$sib1' (expected 0-1)"
fi
if out=$("$check" check 2>&1); then ok "PR_SCHED_CORE: $out"; else bad "PR_SCHED_CORE: $out"; fi
if grep -q ' /sys/fs/cgroup cgroup2 ' /proc/mounts; then
    ok "cgroup2 at /sys/fs/cgroup (controllers: $(cat /sys/fs/cgroup/cgroup.controllers))"
else
    bad "no cgroup2 at /sys/fs/cgroup"
fi
for d in /run /tmp /var/tmp "$HOME"; do
    if t=$(mktemp -p "$d" 2>&1) && rm -f "$t"; then ok "$d is writable"; else bad "$d not writable: $t"; fi
done
if [ -c /dev/pts/ptmx ] && [ -e /dev/ptmx ]; then ok "/dev/pts mounted"; else bad "/dev/pts missing"; fi

if command -v runc >/dev/null 2>&1; then
    if v=$(runc --version 2>&1); then ok "runc --version: $(echo "$v" | head -n 1)"; else bad "runc --version: $v"; fi
    # A real container: busybox rootfs, the check binary as its process.
    b=$(mktemp -d /tmp/och-selftest-bundle.XXXXXX)
    mkdir -p "$b/rootfs/bin" "$b/rootfs/proc" "$b/rootfs/dev" "$b/rootfs/sys" "$b/rootfs/tmp"
    cp /bin/busybox "$check" "$b/rootfs/bin/"
    if (cd "$b" && runc spec) && python3 - "$b/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["process"]["terminal"] = False
c["process"]["args"] = ["/bin/och-sched-core-check", "get"]
c["root"]["readonly"] = True
json.dump(c, open(p, "w"), indent=1)
PY
    then
        if out=$(cd "$b" && runc run och-selftest-plain </dev/null 2>&1) && [ "$out" = cookie=0 ]; then
            ok "runc container without a cookie: $out"
        else
            bad "runc container without a cookie: $out"
        fi
        if out=$(cd "$b" && "$check" exec runc run och-selftest-cookie </dev/null 2>&1); then
            c=$(echo "$out" | sed -n 's/^cookie=//p')
            if [ -n "$c" ] && [ "$c" != 0 ]; then
                ok "runc container started under a cookie inherits it: cookie=$c"
            else
                bad "runc container under a cookie: $out"
            fi
        else
            bad "runc run under a cookie: $out"
        fi
    else
        bad "could not prepare a runc bundle"
    fi
    rm -rf "$b"
else
    echo "selftest: skip runc (not installed on the host)"
fi

if [ "$fails" = 0 ]; then
    echo "selftest: PASS"
else
    echo "selftest: $fails check(s) FAILED"
    exit 1
fi
SELFTEST_EOF
readonly SELFTEST_SH

cmd_selftest() {
    (($# == 0)) || die "selftest takes no arguments"
    local t_ms total0
    total0=$(now_ms)

    log "selftest: dependencies"
    ensure_deps
    t_ms=$(now_ms)
    ensure_kernel
    local kernel_ms=$(($(now_ms) - t_ms))
    t_ms=$(now_ms)
    ensure_initramfs
    local initrd_ms=$(($(now_ms) - t_ms))

    local work
    mkdir -p -- "$CACHE/runs"
    work=$(mktemp -d "$CACHE/runs/selftest.XXXXXX")
    CLEANUP_PATHS+=("$work")
    printf '%s\n' "$CHECK_C" >"$work/och-sched-core-check.c"
    printf '%s\n' "$SELFTEST_SH" >"$work/selftest.sh"
    # static: it also runs as the process of a container with a busybox-only rootfs
    gcc -O2 -Wall -static -o "$work/och-sched-core-check" "$work/och-sched-core-check.c" ||
        die "cannot compile the PR_SCHED_CORE check program"
    RUN_FILES=("$work/och-sched-core-check" "$work/selftest.sh")
    RUN_TIMEOUT=${OCH_VM_TIMEOUT:-600}

    log "selftest: booting the guest (kernel $KERNEL)"
    run_guest /bin/sh /run/och/selftest.sh
    local total_ms=$(($(now_ms) - total0))

    local kernel_note="cached"
    if ((KERNEL_BUILT)); then kernel_note="built now"; fi
    local build_line=
    build_line=$(grep -h '^build time:' "$(dirname -- "$KERNEL")/build.log" 2>/dev/null || true)
    ms() { printf '%d.%03d s' "$(($1 / 1000))" "$(($1 % 1000))"; }
    echo "selftest timings:"
    echo "  kernel:    $(ms "$kernel_ms") ($kernel_note; ${build_line:-build time unknown})"
    echo "  initramfs: $(ms "$initrd_ms")"
    echo "  boot:      ${VM_BOOT_MS:+$(ms "$VM_BOOT_MS")} (qemu start to guest command start)"
    echo "  guest cmd: ${VM_CMD_MS:+$(ms "$VM_CMD_MS")} (selftest.sh inside the guest)"
    echo "  qemu:      ${VM_TOTAL_MS:+$(ms "$VM_TOTAL_MS")} (qemu start to exit)"
    echo "  total:     $(ms "$total_ms")"
    if [[ $VM_RC != 0 ]]; then
        log "selftest FAILED (exit status $VM_RC)"
        return "$VM_RC"
    fi
    echo "selftest: OK"
}

# ---------------------------------------------------------------------------------------------
# prune

cmd_prune() {
    (($# == 0)) || die "prune takes no arguments"
    [[ -d $CACHE ]] || return 0
    local kkey ikey tkey e
    kkey=$(kernel_key)
    ikey=$(initramfs_key)
    tkey=$(trixie_key)
    for e in "$CACHE"/kernel-* "$CACHE"/initramfs-* "$CACHE"/trixie-*; do
        [[ -d $e ]] || continue
        case ${e##*/} in
        "$kkey" | "$ikey" | "$tkey") ;;
        *)
            log "removing stale cache entry $e"
            rm -rf -- "$e"
            rm -f -- "$CACHE/.${e##*/}.lock"
            ;;
        esac
    done
    # Leftovers of killed/failed builds and runs (older than a day: others may still be running).
    find "$CACHE" -mindepth 1 -maxdepth 1 \( -name 'build-*' -o -name '.tmp-*' \) -mmin +1440 \
        -exec rm -rf -- {} + -exec printf '%s: removed %s\n' "$PROG" {} \; 2>/dev/null || true
    if [[ -d $CACHE/runs ]]; then
        find "$CACHE/runs" -mindepth 1 -maxdepth 1 -mmin +1440 -exec rm -rf -- {} + 2>/dev/null || true
    fi
    du -sh -- "$CACHE" >&2
}

# ---------------------------------------------------------------------------------------------

main() {
    local sub=${1:-help}
    (($# == 0)) || shift
    case $sub in
    deps) cmd_deps "$@" ;;
    kernel) cmd_kernel "$@" ;;
    initramfs) cmd_initramfs "$@" ;;
    run) cmd_run "$@" ;;
    field)
        RUN_ROOT=field
        cmd_run "$@"
        ;;
    selftest) cmd_selftest "$@" ;;
    prune) cmd_prune "$@" ;;
    rootfs) cmd_rootfs "$@" ;;
    help | -h | --help) usage ;;
    *)
        usage >&2
        die "unknown subcommand '$sub'"
        ;;
    esac
}

main "$@"; exit $?
