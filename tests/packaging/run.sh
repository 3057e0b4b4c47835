#!/usr/bin/env bash
# Packaging tests of oci-coresched-hook (issue 5). Run as root on Debian 12:
#
#   tests/packaging/run.sh          (make test-packaging)
#
#  1. build:       scripts/package.sh builds the .deb, the .rpm and the node installer image
#                  (set OCH_PACKAGING_NO_BUILD=1 to test the artifacts already in target/)
#  2. config:      the shipped config parses with the binary, equals the defaults, names every key;
#                  it and the DaemonSet's ConfigMap parse with the previous release's binary
#  3. deb/rpm:     dpkg-deb -c / rpm -qlp list every file with its mode and owner; config marked;
#                  the .rpm's scriptlets run by rpm in a scratch root (install, upgrade, erase),
#                  and between the previous release and this one (rpm -U, rpm -U --oldpackage)
#  4. install:     dpkg -i here; real podman with --hooks-dir /usr/share/containers/oci/hooks.d and
#                  runc with containerd's base runtime spec run containers and the installed hook
#                  logs a `decision {...}` line naming them (the kernel has no CONFIG_SCHED_CORE, so
#                  it fails open); man -l renders, completions load; dpkg -r keeps the edited
#                  conffile, dpkg --purge removes it. The package is purged on exit, even on failure.
#  5. containerd:  the example files parse (tomllib, JSON) and name the installed paths
#  6. kubernetes:  the manifest validates (kubernetes-validate --strict); the image's installer,
#                  run with the manifest's mounts of a fake host root, writes binary, config and
#                  the hooks.d file into the engines' default dir and every configured hooks_dir
#                  (containers.conf, crio.conf drop-ins), falls back to /etc with one advice line
#                  where /usr is read-only, refuses a bad config or an unmounted hooks_dir, writes
#                  no hooks.d file with HOOKS_DIR=none (also without the hooks.d mounts), and
#                  uninstall removes every copy it installed
#
# A missing tool fails the run when CI is set; otherwise the section prints SKIPPED and what is
# missing. OCH_KEEP_TEMP=1 keeps the temp dir.
set -uo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/../.." || exit 2
ROOT=$PWD
PKG=oci-coresched-hook

T=$(mktemp -d /tmp/och-packaging.XXXXXX)
chmod 0755 "$T"
FAILS=0
SKIPS=0
INSTALLED_BY_US=0
PODMAN_CONTAINERS=()

log() { printf '\n==> %s\n' "$*"; }
ok() { printf '  ok   %s\n' "$*"; }
bad() {
    printf '  FAIL %s\n' "$*"
    FAILS=$((FAILS + 1))
}
# check DESCRIPTION CMD...: runs CMD quietly, ok/FAIL by its status (output shown on failure)
check() {
    local what=$1 out
    shift
    if out=$("$@" 2>&1); then ok "$what"; else
        bad "$what"
        printf '%s\n' "$out" | sed 's/^/       | /' | head -40
    fi
}

# need SECTION "tool|how to get it"...: true when everything is there.
need() {
    local section=$1 missing=() spec tool
    shift
    for spec in "$@"; do
        tool=${spec%%|*}
        case $tool in
        root) [[ $(id -u) -eq 0 ]] || missing+=("root (run as root)") ;;
        py:*) python3 -c "import ${tool#py:}" 2>/dev/null || missing+=("${spec#*|}") ;;
        *) command -v "$tool" >/dev/null 2>&1 || missing+=("${spec#*|}") ;;
        esac
    done
    ((${#missing[@]} == 0)) && return 0
    if [[ -n ${CI:-} ]]; then
        bad "$section: missing ${missing[*]} (CI is set, so a missing tool is a failure)"
    else
        printf '  SKIPPED %s: missing %s\n' "$section" "$(IFS=,; echo "${missing[*]}")"
        SKIPS=$((SKIPS + 1))
    fi
    return 1
}

PODMAN_ARGS="--root $T/podman-storage --runroot $T/podman-run --tmpdir $T/podman-tmp --storage-driver vfs"
PODMAN_ARGS+=" --cgroup-manager cgroupfs --events-backend file --runtime runc --runtime-flag root=$T/runc-root"
podman_() {
    # shellcheck disable=SC2086 # PODMAN_ARGS is a list of flags
    podman $PODMAN_ARGS "$@" </dev/null
}

cleanup() {
    local rc=$?
    for c in "${PODMAN_CONTAINERS[@]}"; do podman_ rm -f -t 0 "$c" >/dev/null 2>&1; done
    if command -v runc >/dev/null 2>&1; then
        runc --root "$T/runc-root" delete -f "och-basespec-$$" >/dev/null 2>&1
        rmdir /sys/fs/cgroup/*/"och-basespec-$$" /sys/fs/cgroup/"och-basespec-$$" 2>/dev/null
    fi
    if ((INSTALLED_BY_US)) && dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -qv 'not-installed'; then
        echo "cleanup: dpkg --purge $PKG"
        dpkg --purge "$PKG" >/dev/null 2>&1 || echo "cleanup: dpkg --purge $PKG FAILED: purge it by hand" >&2
    fi
    if [[ -d $T/podman-storage ]]; then
        # vfs layers may hold read-only dirs; podman's own reset removes its storage cleanly.
        podman_ system reset -f >/dev/null 2>&1
    fi
    if [[ ${OCH_KEEP_TEMP:-} == 1 ]]; then echo "kept $T"; else rm -rf "$T"; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------------
log "1. build the packages and the image (scripts/package.sh)"
# ---------------------------------------------------------------------------------------------
BUILD_OK=0
if need build "cargo|cargo (rustup)" "dpkg-deb|dpkg-deb (dpkg)" "strip|strip (binutils)" "gzip|gzip" "file|file (apt-get install file)"; then
    if [[ ${OCH_PACKAGING_NO_BUILD:-} == 1 ]]; then
        ok "using existing artifacts (OCH_PACKAGING_NO_BUILD=1)"
        BUILD_OK=1
    else
        start=$(date +%s)
        if PODMAN_ARGS="$PODMAN_ARGS" scripts/package.sh >"$T/package.log" 2>&1; then
            ok "scripts/package.sh ($(($(date +%s) - start)) s; per step: $(tr '\n' ' ' <target/packaging/times))"
            BUILD_OK=1
        else
            bad "scripts/package.sh failed"
            tail -40 "$T/package.log" | sed 's/^/       | /'
        fi
    fi
fi
DEB=$(ls -t target/debian/${PKG}_*.deb 2>/dev/null | head -n1)
RPM=$(ls -t target/generate-rpm/${PKG}-*.rpm 2>/dev/null | head -n1)
BIN=target/x86_64-unknown-linux-gnu/release/$PKG # the static build scripts/package.sh packages
MANS=()
for m in target/packaging/man/*.1.gz; do [[ -e $m ]] && MANS+=("$(basename "$m")"); done

# ---------------------------------------------------------------------------------------------
log "2. the shipped config"
# ---------------------------------------------------------------------------------------------
CONF=packaging/config.toml
FIXTURE=tests/fixtures/states/runc-createRuntime.json
if [[ -x $BIN ]]; then
    check "$BIN --config $CONF explain --state $FIXTURE exits 0" "$BIN" --config "$CONF" explain --state "$FIXTURE"
    # Every commented-out `# key = value` line (and `# [qos.X]` table) must be valid too once
    # uncommented.
    sed -E 's/^# ([a-z_]+ = |\[qos\.)/\1/' "$CONF" >"$T/uncommented.toml"
    check "config with every commented-out setting enabled parses" "$BIN" --config "$T/uncommented.toml" explain --state "$FIXTURE"
    # Negative control: the check bites on an unknown key.
    { cat "$CONF"; echo; echo 'no_such_key = 1'; } >"$T/bad.toml"
    if "$BIN" --config "$T/bad.toml" explain --state "$FIXTURE" >/dev/null 2>&1; then
        bad "a config with an unknown key was accepted: the check above proves nothing"
    else ok "a config with an unknown key is rejected (the check bites)"; fi
    # The shipped values are the defaults: same decision as an empty config, for every fixture.
    : >"$T/empty.toml"
    same=1
    for f in tests/fixtures/states/*-{createRuntime,poststart,poststop}.json; do
        [[ -e $f ]] || continue
        a=$("$BIN" --config "$CONF" explain --state "$f" 2>&1)
        b=$("$BIN" --config "$T/empty.toml" explain --state "$f" 2>&1)
        [[ $a == "$b" ]] || { same=0; echo "       | $f: shipped: $a / defaults: $b"; }
    done
    ((same)) && ok "shipped config decides like the built-in defaults over every fixture" || bad "shipped config differs from the defaults"
    # The conffile an upgrade installs stays on the node across a rollback and is read by the
    # previous release's binary in a skew: it must parse there too, as must the DaemonSet's
    # ConfigMap (a rolled-back image keeps the ConfigMap). The previous release's packages are
    # built from this repository's history, cached by commit (tests/field/previous-release.sh).
    if PREV=$(tests/field/previous-release.sh 2>"$T/previous-release.err"); then
        mkdir -p "$T/prev" && dpkg-deb -x "$PREV/oci-coresched-hook.deb" "$T/prev"
        PREV_BIN=$T/prev/usr/bin/$PKG
        python3 -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "ConfigMap": sys.stdout.write(d["data"]["config.toml"])' \
            packaging/kubernetes/daemonset.yaml >"$T/configmap.toml"
        for f in "$CONF" "$T/configmap.toml"; do
            check "the previous release ($(cat "$PREV/version")) parses $([[ $f == "$CONF" ]] && echo "$CONF" || echo "the DaemonSet's ConfigMap")" \
                "$PREV_BIN" --config "$f" explain --state "$FIXTURE"
        done
        { cat "$CONF"; echo 'no_such_key = 1'; } >"$T/prev-bad.toml"
        if "$PREV_BIN" --config "$T/prev-bad.toml" explain --state "$FIXTURE" >/dev/null 2>&1; then
            bad "the previous release accepted an unknown key: the check above proves nothing"
        else ok "the previous release rejects an unknown key (the check bites)"; fi
    else
        PREV=
        bad "cannot build the previous release's packages: $(tail -n 3 "$T/previous-release.err")"
    fi
else
    bad "no $BIN to check the config with (build failed?)"
fi
# The systemd units run commands the binary has (reconcile is newer than the hook).
if [[ -x $BIN ]]; then
    for unit in packaging/systemd/*.service; do
        cmd=$(sed -n 's|^ExecStart=/usr/bin/oci-coresched-hook ||p' "$unit")
        # shellcheck disable=SC2086 # split the unit's arguments
        check "$(basename "$unit"): 'oci-coresched-hook $cmd' is a command of the binary" "$BIN" $cmd --help
    done
fi
# Every key of Config and QosRule in src/config.rs appears in the shipped config.
keys=$(awk '/^pub struct (Config|QosRule) /{on=1; next} on && /^}/{on=0} on && /^    pub [a-z_]+:/{sub(/:.*/,""); print $2}' src/config.rs)
missing_keys=()
for k in $keys; do
    [[ $k == qos ]] && continue
    grep -Eq "^(# )?$k = " "$CONF" || missing_keys+=("$k")
done
if [[ -z $keys ]]; then bad "found no config keys in src/config.rs (parser out of date?)"
elif ((${#missing_keys[@]})); then bad "keys of src/config.rs missing from $CONF: ${missing_keys[*]}"
else ok "every key of src/config.rs is in $CONF ($(echo $keys | wc -w) keys)"; fi
# LS and BE are set; LSE and LSR are documented but commented out (a [qos.LSR] table would move
# Guaranteed pods to it, a [qos.LSE] one would stop LSE following LSR: see tests/it/packaging.rs).
for class in LS BE; do
    grep -q "^\[qos\.$class\]" "$CONF" || bad "$CONF lacks [qos.$class]"
done
for class in LSE LSR; do
    grep -q "^# \[qos\.$class\]" "$CONF" || bad "$CONF lacks a commented-out [qos.$class]"
done

# ---------------------------------------------------------------------------------------------
log "3. package contents"
# ---------------------------------------------------------------------------------------------
# path|mode (owner root:root everywhere); units live in lib/ (deb) or usr/lib/ (rpm).
expected_files() { # expected_files deb|rpm
    local unitdir=lib/systemd/system zsh=usr/share/zsh/vendor-completions
    [[ $1 == rpm ]] && unitdir=usr/lib/systemd/system zsh=usr/share/zsh/site-functions
    cat <<EOF
usr/bin/$PKG|-rwxr-xr-x
usr/share/containers/oci/hooks.d/$PKG.json|-rw-r--r--
etc/$PKG/config.toml|-rw-r--r--
usr/lib/tmpfiles.d/$PKG.conf|-rw-r--r--
$unitdir/$PKG-reconcile.service|-rw-r--r--
$unitdir/$PKG-gc.service|-rw-r--r--
$unitdir/$PKG-gc.timer|-rw-r--r--
$unitdir/$PKG-nri.service|-rw-r--r--
usr/share/bash-completion/completions/$PKG|-rw-r--r--
$zsh/_$PKG|-rw-r--r--
usr/share/fish/vendor_completions.d/$PKG.fish|-rw-r--r--
usr/share/doc/$PKG/README.md|-rw-r--r--
usr/share/doc/$PKG/examples/containerd/base-runtime-spec.json|-rw-r--r--
usr/share/doc/$PKG/examples/containerd/config-1.6-base-runtime-spec.toml|-rw-r--r--
usr/share/doc/$PKG/examples/containerd/config-1.7-nri.toml|-rw-r--r--
usr/share/doc/$PKG/examples/containerd/config-2.x-nri.toml|-rw-r--r--
usr/share/doc/$PKG/examples/prometheus/$PKG.rules.yaml|-rw-r--r--
usr/share/doc/$PKG/examples/prometheus/$PKG.rules.test.yaml|-rw-r--r--
usr/share/doc/$PKG/examples/grafana/$PKG.dashboard.json|-rw-r--r--
EOF
    for m in "${MANS[@]}"; do echo "usr/share/man/man1/$m|-rw-r--r--"; done
    # README's links: the docs pages and the changelog, beside it.
    echo "usr/share/doc/$PKG/CHANGELOG.md|-rw-r--r--"
    for d in "$ROOT"/docs/*.md "$ROOT"/docs/*.svg; do echo "usr/share/doc/$PKG/docs/${d##*/}|-rw-r--r--"; done
}
# compare_listing NAME FILE: FILE has "mode owner path" lines
compare_listing() {
    local name=$1 listing=$2 kind=$3 path mode line n=0 before=$FAILS
    while IFS='|' read -r path mode; do
        line=$(grep -E " /?\.?/$path\$" "$listing" | head -n1)
        if [[ -z $line ]]; then bad "$name: missing /$path"; continue; fi
        read -r got_mode got_owner _ <<<"$line"
        if [[ $got_mode != "$mode" || $got_owner != root:root ]]; then
            bad "$name: /$path is $got_mode $got_owner, want $mode root:root"
        else n=$((n + 1)); fi
    done < <(expected_files "$kind")
    ((FAILS == before)) && ok "$name: all $n expected files present with the expected mode and owner root:root"
    ((${#MANS[@]} >= 2)) || bad "$name: expected a main man page plus one per command, found ${MANS[*]:-none}"
}

if [[ -n $DEB ]] && need "deb contents" "dpkg-deb|dpkg-deb (dpkg)"; then
    # Owner column: "root/root" or "0/0" depending on the dpkg-deb version; both mean root:root.
    dpkg-deb -c "$DEB" | awk '$1 !~ /^d/ {o = ($2 == "0/0" || $2 == "root/root") ? "root:root" : $2; print $1, o, $6}' >"$T/deb.list"
    compare_listing "$(basename "$DEB")" "$T/deb.list" deb
    conffiles=$(dpkg-deb --info "$DEB" conffiles 2>/dev/null)
    [[ $conffiles == "/etc/$PKG/config.toml" ]] && ok "deb conffiles: $conffiles" || bad "deb conffiles are '$conffiles', want /etc/$PKG/config.toml"
    ctrl=$(dpkg-deb --info "$DEB")
    for s in postinst prerm postrm; do
        grep -Eq "^ .* $s( |$)" <<<"$ctrl" && ok "deb has $s" || bad "deb lacks the $s script"
    done
    # The binary is static-pie (scripts/package.sh): no shared library, so no libc6 dependency.
    dep=$(dpkg-deb -f "$DEB" Depends)
    [[ $dep != *libc6* && $dep != *.so* ]] && ok "deb Depends: '$dep' (static binary: no shared libraries)" ||
        bad "deb Depends '$dep' names shared libraries, but the binary is meant to be static"
    dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/bin/$PKG >"$T/deb-bin"
    file "$T/deb-bin" | grep -q 'static-pie linked' && ok "deb: /usr/bin/$PKG is static-pie" ||
        bad "deb: /usr/bin/$PKG is not static-pie: $(file "$T/deb-bin")"
elif [[ -z $DEB ]]; then bad "no .deb in target/debian"; fi

if [[ -n $RPM ]] && need "rpm contents" "rpm|rpm (apt-get install rpm)"; then
    rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES} %{FILEFLAGS:fflags}\n]' "$RPM" 2>/dev/null |
        awk '{print $1, $2, $3}' >"$T/rpm.list"
    compare_listing "$(basename "$RPM")" "$T/rpm.list" rpm
    check "rpm -qlp lists /usr/bin/$PKG" grep -qx "/usr/bin/$PKG" <(rpm -qlp "$RPM" 2>/dev/null)
    flags=$(rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$RPM" 2>/dev/null | awk -v f="/etc/$PKG/config.toml" '$1 == f {print $2}')
    [[ $flags == *c* && $flags == *n* ]] && ok "rpm: /etc/$PKG/config.toml is %config(noreplace) ($flags)" || bad "rpm: config flags are '$flags', want c and n"
    configs=$(rpm -qcp "$RPM" 2>/dev/null)
    [[ $configs == "/etc/$PKG/config.toml" ]] && ok "rpm -qcp: $configs" || bad "rpm config files are '$configs'"
    rpm -qp --scripts "$RPM" >"$T/rpm.scripts" 2>/dev/null
    for s in postinstall preuninstall postuninstall; do
        grep -q "^$s scriptlet" "$T/rpm.scripts" && ok "rpm has a $s scriptlet" || bad "rpm lacks the $s scriptlet"
    done
    # Each scriptlet is valid sh.
    awk '/^[a-z]+ scriptlet/{f=FILENAME"."(++n); next} {print > f}' "$T/rpm.scripts"
    for f in "$T"/rpm.scripts.*; do check "rpm scriptlet $(head -c 40 "$f" | head -n1) is valid sh" sh -n "$f"; done
    reqs=$(rpm -qpR "$RPM" 2>/dev/null | tr '\n' ' ')
    [[ $reqs != *libc.so* && $reqs == */bin/sh* ]] && ok "rpm Requires: $reqs (static binary: no libc.so)" ||
        bad "rpm Requires '$reqs' name libc.so or lack /bin/sh (the binary is meant to be static; scriptlets need sh)"
elif [[ -z $RPM ]]; then bad "no .rpm in target/generate-rpm"; fi

# The .rpm's scriptlets as rpm itself runs them, in a scratch root (this host is Debian: no dnf, no
# systemd in the root): busybox for sh and the few tools they call, a recording `systemctl` whose
# `is-enabled` answers by the file /enabled, and /run/systemd/system so that they act as on a
# booted system. Install ($1 = 1), reinstall (the upgrade branches: %post with 2, the outgoing
# %postun with 1) and erase ($1 = 0), each with the systemctl calls it makes and what it leaves.
rpm_calls() { cat "$R/systemctl.log" 2>/dev/null; : >"$R/systemctl.log"; }
if [[ -n $RPM ]] && need "rpm scriptlets in a scratch root" "root" "rpm|rpm (apt-get install rpm)" \
    "busybox|busybox (apt-get install busybox-static)"; then
    log "3b. the .rpm's scriptlets, run by rpm in a scratch root"
    R=$T/rpmroot
    mkdir -p "$R/bin" "$R/usr/bin" "$R/dev" "$R/run/systemd/system" "$R/tmp"
    cp "$(command -v busybox)" "$R/bin/busybox"
    for a in sh mkdir chmod rm rmdir cat; do ln -s busybox "$R/bin/$a"; done
    mknod -m 666 "$R/dev/null" c 1 3
    printf '%s\n' '#!/bin/sh' 'echo "systemctl $*" >>/systemctl.log' \
        'case " $* " in *" is-enabled "*) [ -e /enabled ] || exit 1 ;; esac' >"$R/usr/bin/systemctl"
    chmod 0755 "$R/usr/bin/systemctl"
    rpmq() { rpm --root "$R" --nodeps "$@" 2>&1 | grep -v -e 'use Alien' -e 'assuming you know'; }
    rpm --root "$R" --initdb
    rpmq -i "$RPM" >"$T/rpm-install.out"
    check "rpm -i in a scratch root" rpm --root "$R" -q "$PKG"
    calls=$(rpm_calls)
    expect="systemctl daemon-reload
systemctl --no-reload enable $PKG-reconcile.service $PKG-gc.timer
systemctl start $PKG-reconcile.service $PKG-gc.timer"
    [[ $calls == "$expect" ]] && ok "rpm %post (install): enables and starts the follower and the gc timer" ||
        bad "rpm %post (install) called: $calls"
    [[ $(stat -c %a "$R/run/$PKG" 2>/dev/null) == 700 ]] && ok "rpm %post made /run/$PKG 0700" ||
        bad "rpm %post: /run/$PKG is $(stat -c %a "$R/run/$PKG" 2>&1)"
    mkdir "$R/run/$PKG/done" && touch "$R/enabled"
    rpmq --replacepkgs -U "$RPM" >"$T/rpm-upgrade.out"
    calls=$(rpm_calls)
    for want in "systemctl restart $PKG-reconcile.service" "systemctl try-restart $PKG-gc.timer $PKG-nri.service" \
        "systemctl --no-reload disable $PKG-reconcile.timer" \
        "systemctl try-restart $PKG-reconcile.service $PKG-nri.service $PKG-gc.timer"; do
        grep -qxF "$want" <<<"$calls" && ok "rpm upgrade: $want" || bad "rpm upgrade did not call '$want': $calls"
    done
    [[ -d $R/run/$PKG/done ]] && ok "rpm upgrade keeps the state dir" || bad "rpm upgrade removed /run/$PKG"
    rpmq -e "$PKG" >"$T/rpm-erase.out"
    calls=$(rpm_calls)
    grep -qxF "systemctl --no-reload disable --now $PKG-reconcile.service $PKG-gc.timer $PKG-nri.service" <<<"$calls" &&
        ok "rpm %preun (erase): disables and stops every unit" || bad "rpm %preun (erase) called: $calls"
    [[ ! -e $R/run/$PKG && ! -e $R/usr/bin/$PKG ]] && ok "rpm -e removes the binary and the state dir" ||
        bad "rpm -e left: $(ls -d "$R/run/$PKG" "$R/usr/bin/$PKG" 2>&1)"

    # Between two releases: the previous release's .rpm (tests/field/previous-release.sh builds it
    # from this repository's history with that commit's own scripts, cached by commit), upgraded to
    # this one with `rpm -U` and rolled back with `rpm -U --oldpackage`, the follower enabled.
    log "3c. the .rpm between releases: the previous release, rpm -U to this one, rpm -U --oldpackage back"
    if [[ -z ${PREV:-} ]]; then
        bad "no previous release's packages (their build failed above)"
    else
        rpmver() { rpm --root "$R" -q --qf '%{VERSION}' "$PKG" 2>&1; }
        PREV_VERSION=$(cat "$PREV/version")
        THIS_VERSION=$(rpm -qp --qf '%{VERSION}' "$RPM" 2>/dev/null)
        rm -f "$R/enabled" "$R/systemctl.log"
        rpmq -i "$PREV/oci-coresched-hook.rpm" >"$T/rpm-prev-install.out"
        [[ $(rpmver) == "$PREV_VERSION" ]] && ok "rpm -i of the previous release ($PREV_VERSION)" ||
            bad "rpm -i of the previous release: rpm -q says $(rpmver)"
        rpm_calls >/dev/null
        mkdir -p "$R/run/$PKG/done" && touch "$R/enabled" "$R/run/$PKG/cache.db"
        rpmq -U "$RPM" >"$T/rpm-upgrade-between.out"
        calls=$(rpm_calls)
        [[ $(rpmver) == "$THIS_VERSION" ]] && ok "rpm -U $PREV_VERSION -> $THIS_VERSION" ||
            bad "rpm -U from $PREV_VERSION: rpm -q says $(rpmver) ($(cat "$T/rpm-upgrade-between.out"))"
        for want in "systemctl restart $PKG-reconcile.service" "systemctl try-restart $PKG-gc.timer $PKG-nri.service"; do
            grep -qxF "$want" <<<"$calls" && ok "rpm -U from $PREV_VERSION: this release's %post calls '$want'" ||
                bad "rpm -U from $PREV_VERSION did not call '$want': $calls"
        done
        [[ -f $R/run/$PKG/cache.db && -d $R/run/$PKG/done ]] && ok "rpm -U from $PREV_VERSION keeps the state dir" ||
            bad "rpm -U from $PREV_VERSION removed $(ls -A "$R/run/$PKG" 2>&1)"
        rpmq -U --oldpackage "$PREV/oci-coresched-hook.rpm" >"$T/rpm-rollback.out"
        calls=$(rpm_calls)
        [[ $(rpmver) == "$PREV_VERSION" ]] && ok "rpm -U --oldpackage $THIS_VERSION -> $PREV_VERSION (the rollback)" ||
            bad "rpm -U --oldpackage: rpm -q says $(rpmver) ($(cat "$T/rpm-rollback.out"))"
        # The previous release's %post restarts only the follower and the timer; the outgoing
        # %postun (this release's) restarts every unit that runs, the NRI service too.
        want="systemctl try-restart $PKG-reconcile.service $PKG-nri.service $PKG-gc.timer"
        grep -qxF "$want" <<<"$calls" && ok "rollback: the outgoing release's %postun calls '$want'" ||
            bad "rollback: no '$want' among the calls: $calls"
        [[ -f $R/run/$PKG/cache.db && -d $R/run/$PKG/done ]] && ok "the rollback keeps the state dir" ||
            bad "the rollback removed $(ls -A "$R/run/$PKG" 2>&1)"
        rpmq -e "$PKG" >"$T/rpm-prev-erase.out"
        [[ ! -e $R/usr/bin/$PKG ]] && ok "rpm -e of the previous release removes its binary" || bad "rpm -e left $R/usr/bin/$PKG"
    fi
fi

# ---------------------------------------------------------------------------------------------
log "4. install the .deb here; podman and runc run the installed hook; remove; purge"
# ---------------------------------------------------------------------------------------------
if [[ -n $DEB ]] && need "install" "root" "dpkg|dpkg" "podman|podman (apt-get install podman)" \
    "conmon|conmon (apt-get install conmon)" "runc|runc (apt-get install runc)" "man|man (apt-get install man-db)" \
    "jq|jq (apt-get install jq)"; then
    if ! tests/support/mkrootfs.sh "$T/rootfs" >/dev/null 2>"$T/mkrootfs.err"; then
        need "install" "busybox-static-is-missing|$(tail -n1 "$T/mkrootfs.err")" || true
    elif dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'install ok\|config-files'; then
        bad "$PKG is already installed (or its config is left); this test installs and purges it: dpkg --purge $PKG first"
    else
        INSTALLED_BY_US=1
        check "dpkg -i $(basename "$DEB")" dpkg -i "$DEB"
        # What the package itself sets: the enablement links (this host may run no systemd, so
        # whether the service runs is not checked here).
        [[ -L /etc/systemd/system/multi-user.target.wants/$PKG-reconcile.service ]] &&
            ok "$PKG-reconcile.service enabled (multi-user.target.wants)" || bad "$PKG-reconcile.service not enabled"
        [[ -L /etc/systemd/system/timers.target.wants/$PKG-gc.timer ]] && ok "$PKG-gc.timer enabled (timers.target.wants)" ||
            bad "$PKG-gc.timer not enabled"
        left=$(find /lib/systemd/system /etc/systemd/system -name "$PKG-reconcile.timer" 2>/dev/null)
        [[ -z $left ]] && ok "no $PKG-reconcile.timer (replaced by the long-running service)" || bad "a reconcile timer is installed: $left"
        for f in /usr/bin/$PKG /usr/share/containers/oci/hooks.d/$PKG.json /etc/$PKG/config.toml \
            /usr/lib/tmpfiles.d/$PKG.conf /usr/share/bash-completion/completions/$PKG; do
            [[ -f $f ]] || bad "installed: $f missing"
        done
        check "installed binary runs: $PKG --version" /usr/bin/$PKG --version
        check "installed binary is the static-pie build (BENCHMARKS.md)" bash -c "file -L /usr/bin/$PKG | grep -q 'static-pie linked'"
        st=$(stat -c '%a %U:%G' /run/$PKG 2>/dev/null)
        [[ $st == "700 root:root" ]] && ok "/run/$PKG is 0700 root:root" || bad "/run/$PKG is '$st', want 700 root:root"
        if command -v systemd-analyze >/dev/null; then
            check "systemd-analyze verify of the installed units" systemd-analyze verify \
                /lib/systemd/system/$PKG-reconcile.service \
                /lib/systemd/system/$PKG-gc.service /lib/systemd/system/$PKG-gc.timer \
                /lib/systemd/system/$PKG-nri.service
        fi
        [[ ! -e /etc/systemd/system/multi-user.target.wants/$PKG-nri.service ]] &&
            ok "$PKG-nri.service installed, not enabled (containerd/CRI-O nodes enable it)" || bad "$PKG-nri.service enabled by the package"

        # Edit the conffile: log to a file (this also exercises "config kept on remove").
        LOG=$T/hook.log
        sed -i "s|^# log_file = .*|log_file = \"$LOG\"|" /etc/$PKG/config.toml
        check "edited conffile sets log_file" grep -qx "log_file = \"$LOG\"" /etc/$PKG/config.toml
        check "the installed config passes check-config" /usr/bin/$PKG check-config
        { cat /etc/$PKG/config.toml; echo 'bogus = 1'; } >"$T/bad-installed.toml"
        out=$(/usr/bin/$PKG check-config "$T/bad-installed.toml" 2>&1)
        rc=$?
        [[ $rc -eq 1 && $out == *bogus* ]] && ok "check-config refuses an unknown key (exit 1, names it)" ||
            bad "check-config of a config with an unknown key: rc=$rc: $out"
        out=$(/usr/bin/$PKG doctor 2>&1)
        rc=$?
        [[ $rc -le 1 && $out == *"smt "* && $out == *"hooks.d "* ]] && ok "doctor runs on the installed package (exit $rc): $(head -n1 <<<"$out")" ||
            bad "doctor on the installed package: rc=$rc: $(head -n3 <<<"$out")"

        # podman reads the installed hooks.d file.
        name=och-pkg-$$
        PODMAN_CONTAINERS+=("$name")
        out=$(podman_ --hooks-dir /usr/share/containers/oci/hooks.d run --rm --name "$name" --net=none \
            --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --cidfile "$T/cid" \
            --annotation oci-coresched-hook/group=pkgtest --rootfs "$T/rootfs" sh -c 'echo ran-in-container' 2>&1)
        rc=$?
        [[ $rc -eq 0 && $out == *ran-in-container* ]] && ok "podman ran a container with the installed hook (fail-open)" ||
            { bad "podman run rc=$rc"; printf '%s\n' "$out" | sed 's/^/       | /' | tail -20; }
        cid=$(cat "$T/cid" 2>/dev/null)
        if [[ -n $cid ]] && grep -q "decision {.*\"container_id\":\"$cid\"" "$LOG" 2>/dev/null; then
            ok "installed hook logged: $(grep -m1 "decision {.*\"container_id\":\"$cid\"" "$LOG" | cut -c1-160)…"
            grep -q "decision {.*\"container_id\":\"$cid\".*\"group\":\"[^\"]*pkgtest\"" "$LOG" &&
                ok "the decision names group pkgtest" || bad "the decision does not name group pkgtest"
        else
            bad "no 'decision {…\"container_id\":\"$cid\"…}' line in $LOG"
            sed 's/^/       | /' "$LOG" 2>/dev/null | tail -20
        fi

        # containerd 1.6's base runtime spec, run by runc as is (plus rootfs, args, annotation).
        id=och-basespec-$$
        mkdir -p "$T/bundle"
        jq --arg root "$T/rootfs" --arg cg "/$id" \
            '.root.path = $root | .process.args = ["/bin/true"] | .process.env = ["PATH=/bin"] | .process.terminal = false
             | .linux.cgroupsPath = $cg | .annotations = {"oci-coresched-hook/group": "basespec"}' \
            packaging/containerd/base-runtime-spec.json >"$T/bundle/config.json"
        out=$(runc --root "$T/runc-root" run --bundle "$T/bundle" "$id" </dev/null 2>&1)
        rc=$?
        [[ $rc -eq 0 ]] && ok "runc ran a container from containerd/base-runtime-spec.json" ||
            { bad "runc run of the base runtime spec: rc=$rc"; printf '%s\n' "$out" | sed 's/^/       | /' | tail -10; }
        grep -q "decision {.*\"container_id\":\"$id\"" "$LOG" 2>/dev/null &&
            ok "the base spec's hooks ran the installed hook for $id" || bad "no decision line for $id (base spec hooks)"

        # man page and completions.
        for m in "${MANS[@]}"; do
            page=/usr/share/man/man1/$m
            txt=$(MANWIDTH=100 man -l "$page" 2>"$T/man.err")
            if [[ $? -eq 0 && $txt == *"${m%.1.gz}"* ]]; then :; else bad "man -l $page did not render"; fi
        done
        txt=$(MANWIDTH=100 man -l /usr/share/man/man1/$PKG.1.gz 2>/dev/null)
        [[ $txt == *NAME* && $txt == *explain* ]] && ok "man -l renders ${#MANS[@]} pages (main page names its commands)" ||
            bad "man -l $PKG.1.gz output lacks NAME/explain"
        comp=$(bash -c "source /usr/share/bash-completion/completions/$PKG && complete -p $PKG" 2>&1)
        [[ $comp == complete*" $PKG" ]] && ok "bash completion loads: $comp" || bad "bash completion: '$comp'"
        words=$(bash -c "source /usr/share/bash-completion/completions/$PKG
            COMP_WORDS=($PKG ex); COMP_CWORD=1; COMP_LINE='$PKG ex'; COMP_POINT=\${#COMP_LINE}
            fn=\$(complete -p $PKG | sed -E 's/.*-F ([^ ]+).*/\1/'); \$fn $PKG ex $PKG; echo \"\${COMPREPLY[*]}\"" 2>&1)
        [[ $words == *explain* ]] && ok "bash completes '$PKG ex' to: $words" || bad "bash completion of 'ex' gave '$words'"
        if command -v zsh >/dev/null; then check "zsh completion parses (zsh -n)" zsh -n /usr/share/zsh/vendor-completions/_$PKG; fi
        if command -v fish >/dev/null; then check "fish completion parses (fish -n)" fish -n /usr/share/fish/vendor_completions.d/$PKG.fish; fi

        # dpkg -r: the program goes, the edited config stays.
        check "dpkg -r $PKG" dpkg -r "$PKG"
        for f in /usr/bin/$PKG /usr/share/containers/oci/hooks.d/$PKG.json /lib/systemd/system/$PKG-reconcile.service \
            /usr/share/man/man1/$PKG.1.gz /usr/share/bash-completion/completions/$PKG; do
            [[ -e $f ]] && bad "after dpkg -r: $f still there"
        done
        ok "after dpkg -r: binary, hooks.d file, units, man page, completion are gone"
        # As dh_installsystemd does: the removed units are masked (their enablement links stay for a
        # reinstall, and must not start a missing unit meanwhile); purge cleans both.
        [[ $(readlink /etc/systemd/system/$PKG-reconcile.service) == /dev/null &&
            $(readlink /etc/systemd/system/$PKG-gc.timer) == /dev/null ]] &&
            ok "after dpkg -r: the reconcile service and the gc timer are masked until reinstall or purge" ||
            bad "after dpkg -r: the reconcile service or the gc timer is not masked"
        grep -qx "log_file = \"$LOG\"" /etc/$PKG/config.toml 2>/dev/null &&
            ok "after dpkg -r: the edited /etc/$PKG/config.toml is kept" || bad "after dpkg -r: the edited conffile is gone"
        status=$(dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null)
        [[ $status == "deinstall ok config-files" ]] && ok "dpkg status: $status" || bad "dpkg status after remove: '$status'"
        # No dangling hook: podman still runs containers and the hook is not run.
        lines=$(wc -l <"$LOG")
        name2=och-pkg2-$$
        PODMAN_CONTAINERS+=("$name2")
        out=$(podman_ --hooks-dir /usr/share/containers/oci/hooks.d run --rm --name "$name2" --net=none \
            --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --rootfs "$T/rootfs" true 2>&1)
        rc=$?
        [[ $rc -eq 0 && $(wc -l <"$LOG") -eq $lines ]] && ok "after dpkg -r: podman runs containers, no hook runs" ||
            { bad "after dpkg -r: podman rc=$rc or the hook still ran"; printf '%s\n' "$out" | tail -5; }

        check "dpkg --purge $PKG" dpkg --purge "$PKG"
        [[ -e /etc/$PKG ]] && bad "after purge: /etc/$PKG still there ($(ls -A /etc/$PKG))" || ok "after purge: /etc/$PKG is gone"
        [[ -e /run/$PKG ]] && bad "after purge: /run/$PKG still there" || ok "after purge: /run/$PKG is gone"
        left=$(find /etc/systemd/system /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked \
            -name "*$PKG*" 2>/dev/null)
        [[ -z $left ]] && ok "after purge: no unit links or deb-systemd-helper state left" || bad "after purge: left behind: $left"
        dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q 'installed\|config-files' &&
            bad "after purge: dpkg still knows $PKG" || ok "after purge: dpkg no longer knows $PKG"
        INSTALLED_BY_US=0
    fi
fi

# ---------------------------------------------------------------------------------------------
log "5. containerd example files"
# ---------------------------------------------------------------------------------------------
if need containerd "python3|python3" "py:tomllib|python 3.11+ (tomllib)"; then
    check "TOML parses and names the installed paths; JSON spec carries the hooks.d hook" python3 - "$ROOT" <<'EOF'
import json, pathlib, sys, tomllib

root = pathlib.Path(sys.argv[1])
d = root / "packaging/containerd"
hook = json.loads((root / "hooks.d/oci-coresched-hook.json").read_text())["hook"]
want_ann = {"oci-coresched-hook/*", "koordinator.sh/*"}
errors = []

def runtime(cfg, plugin):
    return cfg["plugins"][plugin]["containerd"]["runtimes"]["runc"]

for name, version in [("config-1.7-nri.toml", 2), ("config-2.x-nri.toml", 3)]:
    # The NRI plugin route: NRI enabled, nothing else (no runtime tables, no annotation filters).
    cfg = tomllib.loads((d / name).read_text())
    if cfg.get("version") != version:
        errors.append(f"{name}: version {cfg.get('version')}, want {version}")
    nri = cfg.get("plugins", {}).get("io.containerd.nri.v1.nri", {})
    if nri.get("disable") is not False or nri.get("socket_path") != "/var/run/nri/nri.sock":
        errors.append(f"{name}: NRI not enabled on /var/run/nri/nri.sock: {nri}")
    if set(cfg["plugins"]) != {"io.containerd.nri.v1.nri"}:
        errors.append(f"{name}: sets more than NRI: {sorted(cfg['plugins'])}")
name = "config-1.6-base-runtime-spec.toml"
cfg = tomllib.loads((d / name).read_text())
if cfg.get("version") != 2:
    errors.append(f"{name}: version {cfg.get('version')}, want 2")
rt = runtime(cfg, "io.containerd.grpc.v1.cri")
for key in ("pod_annotations", "container_annotations"):
    if not want_ann <= set(rt.get(key, [])):
        errors.append(f"{name}: {key} {rt.get(key)} lacks {sorted(want_ann)}")
if rt.get("base_runtime_spec") != "/etc/containerd/oci-coresched-hook-base-spec.json":
    errors.append(f"{name}: base_runtime_spec is {rt.get('base_runtime_spec')}")

spec = json.loads((d / "base-runtime-spec.json").read_text())
for stage in ("createRuntime", "poststart", "poststop"):
    got = spec.get("hooks", {}).get(stage)
    if got != [hook]:
        errors.append(f"base-runtime-spec.json: hooks.{stage} = {got}, want [{hook}]")
if hook["path"] != "/usr/bin/oci-coresched-hook":
    errors.append(f"hooks.d hook path is {hook['path']}")
for key in ("ociVersion", "process", "root", "mounts", "linux"):
    if key not in spec:
        errors.append(f"base-runtime-spec.json lacks {key} (must be a whole default spec)")
print("\n".join(errors) or "ok")
sys.exit(1 if errors else 0)
EOF
    check "hooks.d file is oci-hooks 1.0.0 with createRuntime, poststart, poststop, PATH and a timeout" python3 -c '
import json, sys
h = json.load(open("hooks.d/oci-coresched-hook.json"))
assert h["version"] == "1.0.0", h
assert set(h["stages"]) == {"createRuntime", "poststart", "poststop"}, h["stages"]
assert any(e.startswith("PATH=") for e in h["hook"]["env"]), h["hook"]
assert 0 < h["hook"]["timeout"] <= 30, h["hook"]
assert h["when"], h
'
fi

# ---------------------------------------------------------------------------------------------
log "6. Kubernetes: manifest and node installer image"
# ---------------------------------------------------------------------------------------------
if need "kubernetes manifest" "kubernetes-validate|kubernetes-validate (scripts/test-all.sh installs it into its venv, scripts/requirements-test.txt)"; then
    check "kubernetes-validate --strict packaging/kubernetes/daemonset.yaml" \
        kubernetes-validate --strict --quiet packaging/kubernetes/daemonset.yaml
fi
if need "kubernetes manifest mounts" "py:yaml|PyYAML (apt-get install python3-yaml)"; then
    # The installer's mounts, as "HOSTPATH MOUNTPATH ro|rw" lines: the image tests below mount the
    # same host dirs (of a fake host root) at the same places.
    check "one image for all containers; the installer mounts the hooks.d, detection and config dirs of the host; nri and follow get only what they need" python3 - "$T/ds-mounts" <<'EOF'
import re, sys, yaml
docs = [d for d in yaml.safe_load_all(open("packaging/kubernetes/daemonset.yaml")) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
pod = ds["spec"]["template"]["spec"]
images = {c["image"] for c in pod["initContainers"] + pod["containers"]}
assert len(images) == 1, images
init = pod["initContainers"][0]
host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
want = {"/usr/local/bin": "rw", "/usr/share": "rw", "/etc/containers": "ro",
        "/etc/containers/oci/hooks.d": "rw", "/etc/crio": "ro", "/etc/oci-coresched-hook": "rw",
        "/run/oci-coresched-hook": "rw"}
got = {}
for m in init["volumeMounts"]:
    if m["name"] in host:
        assert m["mountPath"] == "/host" + host[m["name"]], m
        got[host[m["name"]]] = "ro" if m.get("readOnly") else "rw"
assert got == want, got
env = {e["name"]: e.get("value") for e in init.get("env", [])}
assert "HOOKS_DIR" not in env, "HOOKS_DIR set: the installer would neither use the default dir nor detect hooks_dir"
assert env.get("HOST_ROOT") == "/host", env
# Two long-running containers, at cookie 0 (policy none on the pod). The NRI plugin: the node's
# hook binary injected, host pids, the NRI socket's directory, the state dir, the config and the
# host's cgroup tree (read-only); root with SYS_PTRACE only.
# The chart's checksum of the config rolls the pods on a config change.
ann = dict(ds["spec"]["template"]["metadata"]["annotations"])
assert re.fullmatch(r"[0-9a-f]{64}", ann.pop("checksum/config", "")), ann
assert ann == {
    "oci-coresched-hook/policy": "none", "prometheus.io/scrape": "true", "prometheus.io/port": "9642",
    "prometheus.io/path": "/metrics"}, ds["spec"]["template"]["metadata"]
# Evicted after the tenants it keeps apart, never before.
assert pod.get("priorityClassName") == "system-node-critical", pod.get("priorityClassName")
# Each long-running container serves its endpoint on the node's address (the pod IP of a
# host-network pod) at a named port its probes use: never 0.0.0.0.
def endpoint(c, port, name):
    assert c["args"][-2:] == ["--listen", f"$(POD_IP):{port}"], c["args"]
    assert c["env"] == [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}], c["env"]
    assert c["ports"] == [{"name": name, "containerPort": port}], c["ports"]
    for kind, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert c[kind]["httpGet"] == {"path": path, "port": name}, c[kind]
    return c["args"][:-2]
assert [c["name"] for c in pod["containers"]] == ["nri", "follow"], pod["containers"]
nri = pod["containers"][0]
assert nri["command"] == ["/usr/bin/oci-coresched-hook"], nri
assert endpoint(nri, 9643, "nri-metrics") == ["nri", "--hook-path", "/usr/local/bin/oci-coresched-hook"], nri
assert pod.get("hostPID") is True, "the NRI plugin needs host pids"
sc = nri["securityContext"]
assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_PTRACE"]}, sc
assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"], sc
mounts = {host[m["name"]]: (m["mountPath"], bool(m.get("readOnly"))) for m in nri["volumeMounts"]}
assert mounts == {"/var/run/nri": ("/var/run/nri", False), "/run/oci-coresched-hook": ("/run/oci-coresched-hook", False),
                  "/etc/oci-coresched-hook": ("/etc/oci-coresched-hook", True),
                  "/sys/fs/cgroup": ("/sys/fs/cgroup", True)}, mounts
# reconcile --follow: the proc connector (host network and pid namespaces, NET_ADMIN), prctl on
# other users' processes (SYS_PTRACE), the state dir, the config (read-only) and the host's cgroup
# tree; root with exactly those two capabilities.
follow = pod["containers"][1]
assert follow["command"] == ["/usr/bin/oci-coresched-hook"], follow
assert endpoint(follow, 9642, "metrics") == ["reconcile", "--follow"], follow
assert pod.get("hostNetwork") is True, "the proc connector sends events only in the host network namespace"
sc = follow["securityContext"]
assert sc["capabilities"]["drop"] == ["ALL"] and sorted(sc["capabilities"]["add"]) == ["NET_ADMIN", "SYS_PTRACE"], sc
assert sc["runAsUser"] == 0 and sc["readOnlyRootFilesystem"] and sc["allowPrivilegeEscalation"] is False, sc
assert not sc.get("privileged") and sc["seLinuxOptions"] == {"type": "spc_t"}, sc
mounts = {host[m["name"]]: (m["mountPath"], bool(m.get("readOnly"))) for m in follow["volumeMounts"]}
# The host's cgroup tree writable: the follower keeps cpu.idle of sched_idle members. The
# runtimes' state dirs read-only: it finds the containers whose hook failed open there.
assert mounts == {"/run/oci-coresched-hook": ("/run/oci-coresched-hook", False),
                  "/etc/oci-coresched-hook": ("/etc/oci-coresched-hook", True),
                  "/sys/fs/cgroup": ("/sys/fs/cgroup", False),
                  "/run/runc": ("/run/runc", True),
                  "/run/containerd/runc": ("/run/containerd/runc", True),
                  "/run/crun": ("/run/crun", True)}, mounts
cg = next(v for v in pod["volumes"] if v.get("hostPath", {}).get("path") == "/sys/fs/cgroup")
assert cg["hostPath"]["type"] == "Directory", cg
assert follow["resources"]["limits"]["memory"] and follow["resources"]["requests"]["cpu"], follow
with open(sys.argv[1], "w") as f:
    for p, mode in got.items():
        print(p, "/host" + p, mode, file=f)
EOF
fi
IMAGE=$(cat target/packaging/image-name 2>/dev/null)
if ((BUILD_OK)) && need "installer image" "root" "podman|podman (apt-get install podman)" "python3|python3"; then
    if [[ -z $IMAGE ]] || ! podman_ image exists "$IMAGE" 2>/dev/null; then
        if [[ -f target/packaging/oci-coresched-hook-image.tar ]]; then
            podman_ load -i target/packaging/oci-coresched-hook-image.tar >/dev/null 2>&1
        fi
    fi
    if [[ -z $IMAGE ]] || ! podman_ image exists "$IMAGE" 2>/dev/null; then
        bad "installer image ${IMAGE:-<none>} was not built (see scripts/package.sh output)"
    elif [[ ! -s $T/ds-mounts ]]; then
        bad "no DaemonSet mounts to run the installer with (the manifest check above failed or was skipped)"
    else
        UHOOKS=usr/share/containers/oci/hooks.d EHOOKS=etc/containers/oci/hooks.d
        # new_host DIR: a fake node root with the DaemonSet's host dirs, as kubelet leaves them.
        new_host() {
            local hp
            while read -r hp _ _; do mkdir -p "$1$hp"; done <"$T/ds-mounts"
        }
        # run_installer HOST CONFIGMAP_DIR|- [ro-usr|no-hooks-mounts] [-e VAR=VALUE]... ARGS...: the
        # image with the DaemonSet's mounts of HOST; ro-usr mounts /usr/share read-only, as on a
        # read-only /usr; no-hooks-mounts leaves out the hooks.d and detection dirs, as the chart's
        # routes.hooksD=false does.
        run_installer() {
            local h=$1 cm=$2 vols=() envs=() hp mp mode rousr=0 nohooks=0
            shift 2
            [[ ${1:-} == ro-usr ]] && { rousr=1; shift; }
            [[ ${1:-} == no-hooks-mounts ]] && { nohooks=1; shift; }
            while [[ ${1:-} == -e ]]; do envs+=(-e "$2"); shift 2; done
            while read -r hp mp mode; do
                [[ $hp == /usr/share && $rousr == 1 ]] && mode=ro
                [[ $nohooks == 1 && $hp =~ ^/(usr/share|etc/containers|etc/containers/oci/hooks.d|etc/crio)$ ]] && continue
                vols+=(-v "$h$hp:$mp$([[ $mode == ro ]] && echo :ro)")
            done <"$T/ds-mounts"
            [[ $cm != - ]] && vols+=(-v "$cm:/config:ro")
            podman_ run --rm --net=none --read-only --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
                "${vols[@]}" "${envs[@]}" "$IMAGE" "$@"
        }
        # is_our_hooks FILE: the packaged hooks.d file with hook.path /usr/local/bin/oci-coresched-hook
        is_our_hooks() {
            python3 -c '
import json, sys
got = json.load(open(sys.argv[1])); want = json.load(open("hooks.d/oci-coresched-hook.json"))
want["hook"]["path"] = "/usr/local/bin/oci-coresched-hook"
assert got == want, (got, want)
' "$1"
        }
        # copies HOST: the hooks.d copies under HOST, as host paths, sorted, one line.
        copies() { (cd "$1" && find . -name "$PKG.json" | sed 's#^\.##' | sort | tr '\n' ' '); }

        H=$T/host
        new_host "$H"
        mkdir -p "$T/cm-bad" "$T/cm-good"
        check "installer image runs: install" run_installer "$H" - install
        st=$(stat -c '%a %U' "$H/usr/local/bin/$PKG" 2>/dev/null)
        [[ $st == "755 root" ]] && ok "installed /usr/local/bin/$PKG 0755 root" || bad "installed binary: '$st'"
        check "installed static binary runs on the host" "$H/usr/local/bin/$PKG" --version
        check "installed config is packaging/config.toml" cmp "$H/etc/oci-coresched-hook/config.toml" packaging/config.toml
        st=$(stat -c '%a' "$H/run/$PKG" 2>/dev/null)
        [[ $st == 700 ]] && ok "installer made the state dir (kubelet's hostPath: 0755) 0700" || bad "state dir after install: '$st', want 700"
        check "installed /$UHOOKS/$PKG.json = the packaged one with hook.path /usr/local/bin/$PKG" is_our_hooks "$H/$UHOOKS/$PKG.json"
        got=$(copies "$H")
        [[ $got == "/$UHOOKS/$PKG.json " ]] && ok "no engine config on the node: one copy, in the engines' default /$UHOOKS" ||
            bad "hooks.d copies on a node without engine config: $got (want only /$UHOOKS/$PKG.json)"
        extra=$(find "$H/$UHOOKS" "$H/$EHOOKS" "$H/usr/local/bin" "$H/etc/oci-coresched-hook" -mindepth 1 \
            ! -name "$PKG.json" ! -name "$PKG" ! -name config.toml ! -name installed-hooks-dirs)
        [[ -z $extra ]] && ok "installer left no temp files" || bad "installer left temp files: $extra"
        { cat packaging/config.toml; echo 'bogus = true'; } >"$T/cm-bad/config.toml"
        if run_installer "$H" "$T/cm-bad" install >"$T/inst-bad.log" 2>&1; then
            bad "installer accepted a ConfigMap config with an unknown key"
        else
            cmp -s "$H/etc/oci-coresched-hook/config.toml" packaging/config.toml &&
                ok "installer refuses an invalid ConfigMap config and keeps the node's ($(grep -m1 -o 'bogus[^"]*' "$T/inst-bad.log" | head -c 60))" ||
                bad "installer changed the node's config although the new one is invalid"
        fi
        printf 'log_level = "debug"\nfail_closed = true\n' >"$T/cm-good/config.toml"
        check "installer installs a ConfigMap config" run_installer "$H" "$T/cm-good" install
        check "node config is now the ConfigMap's" cmp "$H/etc/oci-coresched-hook/config.toml" "$T/cm-good/config.toml"

        # The node's configured hooks_dir: podman's containers.conf (+ drop-in with append) and
        # CRI-O's crio.conf (replaced by a drop-in), with the spacing, comments, quoting and
        # multi-line arrays TOML allows, and decoys in other tables and in comments.
        mkdir -p "$H/usr/share/containers" "$H/etc/containers/containers.conf.d" "$H/etc/crio/crio.conf.d"
        cat >"$H/usr/share/containers/containers.conf" <<'EOF'
[containers]
# hooks_dir = ["/decoy/comment"]
env = [
  ["nested", "array"],
]
[engine]
#hooks_dir = [
#  "/usr/share/containers/oci/hooks.d",
#]
hooks_dir=["/usr/share/containers/oci/hooks.d"]
[engine.runtimes]
hooks_dir = ["/decoy/other-table"]
EOF
        cat >"$H/etc/containers/containers.conf.d/50-hooks.conf" <<'EOF'
[ engine ]
  hooks_dir   =   [
    "/etc/containers/oci/hooks.d",   # a comment with "quotes" and ]
    'relative/hooks.d',
    {append = true},
  ]
log_level = "a=b # not a comment"
EOF
        cat >"$H/etc/crio/crio.conf" <<'EOF'
[crio.runtime]
hooks_dir = [ "/usr/share/containers/oci/hooks-replaced.d" ]
EOF
        cat >"$H/etc/crio/crio.conf.d/10-hooks.conf" <<'EOF'
[crio]
[crio.image]
hooks_dir = ["/decoy/crio-image"]
[crio.runtime]
hooks_dir = [
	"/usr/share/containers/oci/hooks.d",
	"/usr/share//containers/oci/hooks-crio.d/",
]
EOF
        if run_installer "$H" - install >"$T/inst-detect.log" 2>&1; then
            ok "installer with podman and CRI-O hooks_dir configured: install"
        else bad "installer with configured hooks_dir failed"; sed 's/^/       | /' "$T/inst-detect.log"; fi
        want="/$EHOOKS/$PKG.json /usr/share/containers/oci/hooks-crio.d/$PKG.json /$UHOOKS/$PKG.json "
        got=$(copies "$H")
        [[ $got == "$want" ]] && ok "copies in the default and every configured hooks_dir, none in replaced or decoy ones: $got" ||
            { bad "hooks.d copies: '$got', want '$want'"; sed 's/^/       | /' "$T/inst-detect.log"; }
        for f in "$H/$EHOOKS/$PKG.json" "$H/usr/share/containers/oci/hooks-crio.d/$PKG.json"; do
            check "${f#"$H"} = the packaged one with hook.path /usr/local/bin/$PKG" is_our_hooks "$f"
        done
        grep -q "ignoring hooks_dir entry 'relative/hooks.d' in /etc/containers/containers.conf.d/50-hooks.conf" "$T/inst-detect.log" &&
            ok "a relative hooks_dir entry is ignored with a warning naming it and its file" || bad "no warning about the relative hooks_dir entry"
        state=$(sort "$H/etc/oci-coresched-hook/installed-hooks-dirs" 2>/dev/null | tr '\n' ' ')
        [[ $state == "/$EHOOKS /usr/share/containers/oci/hooks-crio.d /$UHOOKS " ]] &&
            ok "installed-hooks-dirs records the three directories" || bad "installed-hooks-dirs: '$state'"

        # A configured hooks_dir the DaemonSet does not mount: refused, nothing changed.
        printf '[crio.runtime]\nhooks_dir = ["/opt/och-hooks.d"]\n' >"$H/etc/crio/crio.conf.d/20-opt.conf"
        before=$(stat -c %Y.%i "$H/usr/local/bin/$PKG")
        if run_installer "$H" - install >"$T/inst-unmounted.log" 2>&1; then
            bad "installer accepted a hooks_dir that is not mounted into it"
        else
            grep -q 'not mounted into the installer.*nothing was changed' "$T/inst-unmounted.log" &&
                grep -q '/opt/och-hooks.d (hooks_dir in /etc/crio/crio.conf.d/20-opt.conf)' "$T/inst-unmounted.log" &&
                [[ ! -e $H/opt && $(stat -c %Y.%i "$H/usr/local/bin/$PKG") == "$before" ]] &&
                ok "a hooks_dir not mounted into the installer is an error naming it and its file; nothing changed" ||
                { bad "unmounted hooks_dir: wrong message or the node changed"; sed 's/^/       | /' "$T/inst-unmounted.log"; }
        fi
        rm -f "$H/etc/crio/crio.conf.d/20-opt.conf"

        # uninstall removes every copy that runs the installed binary, keeps one that runs another.
        sed 's#"/usr/local/bin/oci-coresched-hook"#"/usr/bin/oci-coresched-hook"#' "$H/$EHOOKS/$PKG.json" \
            >"$H/usr/share/containers/oci/hooks-crio.d/$PKG.json"
        if run_installer "$H" - uninstall >"$T/inst-uninstall.log" 2>&1; then ok "installer uninstall"; else
            bad "installer uninstall failed"; sed 's/^/       | /' "$T/inst-uninstall.log"; fi
        got=$(copies "$H")
        [[ $got == "/usr/share/containers/oci/hooks-crio.d/$PKG.json " && ! -e $H/usr/local/bin/$PKG ]] &&
            ok "uninstall removed the binary and every copy it installed, kept a same-name file running /usr/bin/$PKG" ||
            { bad "after uninstall: copies '$got', binary $(ls "$H/usr/local/bin/")"; sed 's/^/       | /' "$T/inst-uninstall.log"; }
        [[ -e $H/etc/oci-coresched-hook/config.toml && ! -e $H/etc/oci-coresched-hook/installed-hooks-dirs ]] &&
            ok "uninstall keeps the config (PURGE=1 removes it), drops its record" || bad "uninstall: config gone or record left"

        # Read-only /usr (Flatcar, Bottlerocket, Fedora CoreOS): /usr/share mounted read-only.
        H=$T/host-ro-usr
        new_host "$H"
        # The read-only bind mount stops root too (no chmod trick): the installer's fallback below
        # is what it does on such a node, not a test artifact.
        if podman_ run --rm --net=none --read-only -v "$H/usr/share:/host/usr/share:ro" --entrypoint /bin/busybox \
            "$IMAGE" mkdir /host/usr/share/containers >/dev/null 2>&1 || [[ -e $H/usr/share/containers ]]; then
            bad "root in the installer container can write to the read-only /usr/share mount"
        else ok "root in the installer container cannot write to a read-only /usr/share mount"; fi
        if run_installer "$H" - ro-usr install >"$T/inst-ro.log" 2>&1; then ok "installer with a read-only /usr/share: install"; else
            bad "installer with a read-only /usr/share failed"; sed 's/^/       | /' "$T/inst-ro.log"; fi
        got=$(copies "$H")
        [[ $got == "/$EHOOKS/$PKG.json " ]] && ok "read-only /usr: the copy is in /$EHOOKS instead" ||
            bad "read-only /usr: copies '$got', want /$EHOOKS/$PKG.json"
        n=$(grep -c 'warning: .*read-only' "$T/inst-ro.log")
        line=$(grep 'warning: .*read-only' "$T/inst-ro.log")
        [[ $n == 1 && $line == *'hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]'* &&
            $line == *"[engine]"* && $line == *"[crio.runtime]"* ]] &&
            ok "one line tells which hooks_dir setting to add: ${line#*warning: }" ||
            { bad "read-only /usr: want one line naming hooks_dir, [engine] and [crio.runtime]"; sed 's/^/       | /' "$T/inst-ro.log"; }
        # With CRI-O's hooks_dir already naming /etc, the line asks only podman's.
        mkdir -p "$H/etc/crio/crio.conf.d" "$H/etc/containers"
        printf '[crio.runtime]\nhooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]\n' >"$H/etc/crio/crio.conf.d/10-hooks.conf"
        : >"$H/etc/containers/containers.conf"
        run_installer "$H" - ro-usr install >"$T/inst-ro2.log" 2>&1
        line=$(grep 'warning: .*read-only' "$T/inst-ro2.log")
        [[ $line == *"podman needs hooks_dir"*"[engine]"* && $line != *CRI-O\ needs* ]] &&
            ok "read-only /usr, CRI-O configured: the line asks only for podman's setting" ||
            { bad "read-only /usr with CRI-O configured: '$line'"; }
        if run_installer "$H" - ro-usr uninstall >"$T/inst-ro-un.log" 2>&1 && [[ -z $(copies "$H") && ! -e $H/usr/local/bin/$PKG ]]; then
            ok "read-only /usr: uninstall removes the /$EHOOKS copy and the binary"
        else bad "read-only /usr: uninstall"; sed 's/^/       | /' "$T/inst-ro-un.log"; fi

        # HOOKS_DIR names the one directory.
        if run_installer "$H" - -e HOOKS_DIR=/$EHOOKS install >"$T/inst-hd.log" 2>&1 && [[ $(copies "$H") == "/$EHOOKS/$PKG.json " ]]; then
            ok "HOOKS_DIR=/$EHOOKS: the only copy is there"
        else bad "HOOKS_DIR override: copies '$(copies "$H")'"; sed 's/^/       | /' "$T/inst-hd.log"; fi
        check "HOOKS_DIR: uninstall" run_installer "$H" - -e HOOKS_DIR=/$EHOOKS uninstall

        # HOOKS_DIR=none (the chart's routes.hooksD=false, NRI only): the binary, the config and the
        # state dir, no hooks.d file, though the default dir and a configured hooks_dir are mounted.
        H=$T/host-no-hooks
        new_host "$H"
        mkdir -p "$H/etc/crio/crio.conf.d"
        printf '[crio.runtime]\nhooks_dir = ["/%s"]\n' "$EHOOKS" >"$H/etc/crio/crio.conf.d/10-hooks.conf"
        if run_installer "$H" - -e HOOKS_DIR=none install >"$T/inst-none.log" 2>&1 &&
            [[ -z $(copies "$H") && ! -e $H/etc/oci-coresched-hook/installed-hooks-dirs ]] &&
            [[ -z $(find "$H/$UHOOKS" "$H/$EHOOKS" -mindepth 1 2>/dev/null) ]] &&
            cmp -s "$H/etc/oci-coresched-hook/config.toml" packaging/config.toml &&
            "$H/usr/local/bin/$PKG" --version >/dev/null && [[ $(stat -c %a "$H/run/$PKG") == 700 ]]; then
            ok "HOOKS_DIR=none: binary, config and state dir installed, nothing written into any hooks.d dir"
        else bad "HOOKS_DIR=none install: copies '$(copies "$H")'"; sed 's/^/       | /' "$T/inst-none.log"; fi
        H=$T/host-no-hooks-mounts
        new_host "$H"
        if run_installer "$H" - no-hooks-mounts -e HOOKS_DIR=none install >"$T/inst-none2.log" 2>&1 &&
            [[ -x $H/usr/local/bin/$PKG && -z $(copies "$H") ]]; then
            ok "HOOKS_DIR=none needs only the binary, config and state dir mounts (routes.hooksD=false)"
        else bad "HOOKS_DIR=none without the hooks.d mounts"; sed 's/^/       | /' "$T/inst-none2.log"; fi
        check "HOOKS_DIR=none: uninstall" run_installer "$H" - no-hooks-mounts -e HOOKS_DIR=none uninstall
        [[ ! -e $H/usr/local/bin/$PKG ]] && ok "HOOKS_DIR=none: uninstall removed the binary" || bad "HOOKS_DIR=none: binary left after uninstall"
        H=$T/host-bad-hooks-dir
        new_host "$H"
        if run_installer "$H" - -e HOOKS_DIR=None install >"$T/inst-bad-hd.log" 2>&1; then
            bad "installer accepted HOOKS_DIR=None"
        else
            grep -q "HOOKS_DIR must be an absolute path, not 'None'" "$T/inst-bad-hd.log" && [[ ! -e $H/usr/local/bin/$PKG ]] &&
                ok "HOOKS_DIR=None (neither none nor an absolute path) refused, nothing installed" ||
                { bad "HOOKS_DIR=None: wrong message or something installed"; sed 's/^/       | /' "$T/inst-bad-hd.log"; }
        fi
        size=$(podman_ image inspect --format '{{.Size}}' "$IMAGE" 2>/dev/null)
        ok "image $IMAGE: $((size / 1024)) KiB, FROM scratch"
    fi
fi

echo
if ((FAILS)); then
    echo "packaging tests: $FAILS FAILED ($SKIPS sections skipped)"
    exit 1
fi
echo "packaging tests: all passed ($SKIPS sections skipped)"
