# shellcheck shell=sh
# oci-coresched-hook node installer, run by /bin/busybox sh inside the FROM-scratch image.
#
#   install.sh install    (default) copy the binary, config and hooks.d file onto the node
#   install.sh uninstall  remove every hooks.d copy it installed, then the binary (PURGE=1: the
#                         config too)
#   install.sh sleep      do nothing until terminated (a long-running container that does nothing)
#
# The node's filesystem is reached through hostPath mounts under $HOST_ROOT (default /host): a
# host path P is $HOST_ROOT/P here. Every file is written to a temporary name in its target
# directory and renamed into place, so a runtime starting a container meanwhile sees either the
# old or the new file, never half of one. The hooks.d files are written last (and removed first),
# so they never name a binary that is not there.
#
# Where the hooks.d file goes (unless HOOKS_DIR names one directory):
#   * /usr/share/containers/oci/hooks.d, the directory podman and CRI-O read when their hooks_dir
#     is not set, and that containerd's NRI hook-injector always reads;
#   * every directory of the node's configured hooks_dir: podman's ([engine] in
#     /usr/share/containers/containers.conf, /etc/containers/containers.conf and their
#     containers.conf.d/ and containers.rootful.conf.d/ drop-ins) and CRI-O's ([crio.runtime] in
#     /etc/crio/crio.conf and /etc/crio/crio.conf.d/*), read in the engines' order: a later file
#     replaces the list, unless it has {append = true};
#   * where /usr is read-only on the node (Flatcar, Bottlerocket, Fedora CoreOS, ...):
#     /etc/containers/oci/hooks.d instead of the /usr/share directory, with one line saying which
#     hooks_dir setting podman and CRI-O need to run it.
# A configured directory that is not mounted into this container is an error (nothing is changed):
# the hook would silently not run there. The directories written are recorded in
# /etc/oci-coresched-hook/installed-hooks-dirs, so that uninstall removes every copy.
#
# Environment (host paths):
#   HOST_ROOT      where the host paths are mounted        [/host]
#   HOOK_BIN_DIR   directory of the installed binary       [/usr/local/bin]
#   HOOKS_DIR      install the hooks.d file into this directory only (no default, no detection);
#                  `none`: install no hooks.d file (the binary, config and state dir still are;
#                  for nodes whose runtime reaches the hook through NRI only). Copies an earlier
#                  install recorded stay until uninstall, which removes them
#   CONFIG_SOURCE  config to install (a ConfigMap key); when missing, the default config is
#                  installed only if the node has none     [/config/config.toml]
#   PURGE          uninstall also removes /etc/oci-coresched-hook (its contents where the
#                  directory is a mount point) [0]
set -eu

NL='
'
TAB=$(printf '\t')

HOST_ROOT=${HOST_ROOT:-/host}
HOOK_BIN_DIR=${HOOK_BIN_DIR:-/usr/local/bin}
HOOKS_DIR=${HOOKS_DIR:-}
CONFIG_SOURCE=${CONFIG_SOURCE:-/config/config.toml}
CONFIG_DIR=/etc/oci-coresched-hook
STATE_DIR=/run/oci-coresched-hook
PURGE=${PURGE:-0}

DEFAULT_HOOKS_DIR=/usr/share/containers/oci/hooks.d
FALLBACK_HOOKS_DIR=/etc/containers/oci/hooks.d
STATE=$CONFIG_DIR/installed-hooks-dirs
IMAGE_BIN=/usr/bin/oci-coresched-hook
SHARE=/usr/share/oci-coresched-hook
NAME=oci-coresched-hook

log() { echo "oci-coresched-hook-installer: $*"; }
warn() { echo "oci-coresched-hook-installer: warning: $*" >&2; }
die() {
    echo "oci-coresched-hook-installer: error: $*" >&2
    exit 1
}

# clean_dir PATH: PATH without repeated or trailing slashes; fails unless PATH is absolute, is not
# / and has no . or .. component (a hooks_dir like /../x must not lead out of $HOST_ROOT).
clean_dir() {
    case $1 in /*) ;; *) return 1 ;; esac
    case $1 in *"$NL"*) return 1 ;; esac
    _d=$(printf '%s\n' "$1" | sed 's#//*#/#g; s#/$##')
    case "$_d/" in / | */./* | */../*) return 1 ;; esac
    printf '%s\n' "$_d"
}

case $HOST_ROOT in /*) ;; *) die "HOST_ROOT must be an absolute path, not '$HOST_ROOT'" ;; esac
HR=$(printf '%s\n' "$HOST_ROOT" | sed 's#//*#/#g; s#/$##') # "" when the host root is /
# (through _d: the message names the value given, not clean_dir's empty output)
_d=$(clean_dir "$HOOK_BIN_DIR") || die "HOOK_BIN_DIR must be an absolute path, not '$HOOK_BIN_DIR'"
HOOK_BIN_DIR=$_d
case $HOOK_BIN_DIR in *[!A-Za-z0-9._/+-]*) die "HOOK_BIN_DIR '$HOOK_BIN_DIR' has characters other than A-Z a-z 0-9 . _ / + -" ;; esac
NO_HOOKS=0
if [ "$HOOKS_DIR" = none ]; then
    NO_HOOKS=1 HOOKS_DIR=
elif [ -n "$HOOKS_DIR" ]; then
    _d=$(clean_dir "$HOOKS_DIR") || die "HOOKS_DIR must be an absolute path, not '$HOOKS_DIR'"
    HOOKS_DIR=$_d
fi

# in_list LIST DIR: LIST (lines "DIR<TAB>..." or "DIR") has DIR.
in_list() {
    case "$NL$1" in *"$NL$2$TAB"* | *"$NL$2$NL"*) return 0 ;; esac
    return 1
}

# --- where a host path is, seen from here ------------------------------------------------------

# canon PATH: PATH with its deepest existing ancestor resolved (symlinks), the rest appended.
canon() {
    _p=$1 _rest=
    while [ -n "$_p" ] && [ ! -e "$_p" ]; do
        _rest=/${_p##*/}$_rest
        _p=${_p%/*}
    done
    _c=$(readlink -f "${_p:-/}" 2>/dev/null) || _c=${_p:-/}
    [ "$_c" = / ] && _c=
    printf '%s\n' "$_c$_rest"
}

# mount_of PATH: two lines, the mount point PATH lives on and that mount's options (per mount and
# per superblock), from /proc/self/mountinfo (the longest mount point that is PATH or a parent).
mount_of() {
    awk -v p="$1" '
    {
        mp = $5; gsub(/\\040/, " ", mp)
        sep = 7; while (sep <= NF && $sep != "-") sep++
        if ((mp == "/" || p == mp || index(p, mp "/") == 1) && length(mp) >= best) {
            best = length(mp); m = mp; o = $6 "," $(sep + 3)
        }
    }
    END { print m; print o }' /proc/self/mountinfo
}

# dir_state DIR: "ok", "ro" (on a read-only mount) or "unmounted" (not under a mount of the host
# below $HOST_ROOT, so writing there would write into this container, not onto the node).
dir_state() {
    _c=$(canon "$HR$1")
    _m=$(mount_of "$_c")
    _mp=${_m%%"$NL"*}
    if [ -n "$HR" ]; then
        case $_mp/ in "$HR"/*) ;; *)
            echo unmounted
            return 0
            ;;
        esac
    fi
    case ",${_m#*"$NL"}," in *,ro,*) echo ro ;; *) echo ok ;; esac
}

# --- the engines' configured hooks_dir ---------------------------------------------------------

# For each assignment of KEY (a dotted key: table + name) in the TOML FILEs, in order: a line
# "=FILE" (the list replaces earlier ones) or "+FILE" ({append = true} in the list), then one
# "-ENTRY" line per string of the array. Tolerates any spacing, multi-line arrays, comments, both
# quote styles and trailing commas; other TOML (multi-line strings, ...) is not needed here.
# shellcheck disable=SC2016 # an awk program, not shell
TOML_AWK='
function flush() {
    printf "%s%s\n", (tb ~ /append[ \t]*=[ \t]*true/ ? "+" : "="), FILENAME
    printf "%s", ents
    ents = ""; cap = 0
}
FNR == 1 { tbl = ""; depth = 0; instr = ""; cap = 0; intab = 0 }
{
    line = $0; sub(/\r$/, "", line); i = 1
    if (depth == 0 && instr == "") {
        if (line ~ /^[ \t]*\[/) {
            h = line; sub(/^[ \t]*\[+/, "", h); sub(/\].*$/, "", h); gsub(/[ \t"]/, "", h); gsub(q, "", h)
            tbl = h; next
        }
        eq = index(line, "=")
        k = substr(line, 1, eq - 1)
        if (eq == 0 || k !~ /^[ \t]*[A-Za-z0-9_." \t-]+$/) next
        gsub(/[ \t"]/, "", k); gsub(q, "", k)
        if (tbl != "") k = tbl "." k
        cap = (k == key); ents = ""; tb = ""; intab = 0
        i = eq + 1
    }
    n = length(line)
    for (; i <= n; i++) {
        c = substr(line, i, 1)
        if (instr != "") {
            if (c == "\\" && instr == "\"") { i++; s = s substr(line, i, 1); continue }
            if (c != instr) { s = s c; continue }
            instr = ""
            if (cap && intab == 0) ents = ents "-" s "\n"
            if (depth == 0 && cap) flush()
            continue
        }
        if (c == "#") break
        if (c == "\"" || c == q) { instr = c; s = ""; continue }
        if (c == "[") { depth++; continue }
        if (c == "]") { depth--; if (depth == 0 && cap) flush(); continue }
        if (c == "{") { intab++; continue }
        if (c == "}") { intab--; continue }
        if (intab > 0) tb = tb c
    }
}'

# engine_dirs KEY FILE...: DIRS = the hooks_dir list (lines "DIR<TAB>FILE") an engine that reads
# the FILEs in this order ends up with; SET = 1 when one of them sets it.
engine_dirs() {
    _key=$1
    shift
    DIRS='' SET=0
    [ $# -gt 0 ] || return 0
    _out=$(awk -v key="$_key" -v q="'" "$TOML_AWK" "$@") || die "could not read $*"
    while IFS= read -r _l; do
        case $_l in
        =*) DIRS='' SET=1 _src=${_l#=} ;;
        +*) SET=1 _src=${_l#+} ;;
        -*)
            _e=${_l#-}
            if _d=$(clean_dir "$_e"); then
                in_list "$DIRS" "$_d" || DIRS=$DIRS$_d$TAB${_src#"$HR"}$NL
            else
                warn "ignoring hooks_dir entry '$_e' in ${_src#"$HR"}: not an absolute path without . or .."
            fi
            ;;
        esac
    done <<EOF
$_out
EOF
}

# detect: PODMAN_DIRS and CRIO_DIRS (lines "DIR<TAB>WHY"), the directories each engine reads;
# PODMAN_FILES / CRIO_FILES = how many config files of each the node has.
detect() {
    set --
    for _f in "$HR"/usr/share/containers/containers.conf "$HR"/usr/share/containers/containers.conf.d/*.conf \
        "$HR"/usr/share/containers/containers.rootful.conf.d/*.conf "$HR"/etc/containers/containers.conf \
        "$HR"/etc/containers/containers.conf.d/*.conf "$HR"/etc/containers/containers.rootful.conf.d/*.conf; do
        if [ -f "$_f" ]; then set -- "$@" "$_f"; fi
    done
    PODMAN_FILES=$#
    engine_dirs engine.hooks_dir "$@"
    if [ "$SET" = 0 ]; then
        PODMAN_DIRS="$DEFAULT_HOOKS_DIR${TAB}podman's default$NL"
    elif [ -z "$DIRS" ]; then
        # podman: an empty hooks_dir means both of these (as root).
        PODMAN_DIRS="$DEFAULT_HOOKS_DIR${TAB}podman's default for hooks_dir = []$NL$FALLBACK_HOOKS_DIR${TAB}podman's default for hooks_dir = []$NL"
    else
        PODMAN_DIRS=$DIRS
    fi

    set --
    for _f in "$HR"/etc/crio/crio.conf "$HR"/etc/crio/crio.conf.d/*; do
        if [ -f "$_f" ]; then set -- "$@" "$_f"; fi
    done
    CRIO_FILES=$#
    engine_dirs crio.runtime.hooks_dir "$@"
    if [ "$SET" = 0 ]; then
        CRIO_DIRS="$DEFAULT_HOOKS_DIR${TAB}CRI-O's default$NL"
    else
        CRIO_DIRS=$DIRS # hooks_dir = [] turns CRI-O's hooks off
        if [ -z "$DIRS" ] && [ "$CRIO_FILES" -gt 0 ]; then
            warn "CRI-O's hooks_dir is empty: CRI-O runs no hooks.d hook on this node"
        fi
    fi
}

# plan: TARGETS (lines "DIR<TAB>WHY"), where the hooks.d file goes.
plan() {
    TARGETS='' PODMAN_DIRS='' CRIO_DIRS='' PODMAN_FILES=0 CRIO_FILES=0
    if [ -n "$HOOKS_DIR" ]; then
        TARGETS="$HOOKS_DIR${TAB}HOOKS_DIR$NL"
        return 0
    fi
    detect
    TARGETS="$DEFAULT_HOOKS_DIR${TAB}the default$NL"
    while IFS="$TAB" read -r _d _why; do
        [ -n "$_d" ] || continue
        in_list "$TARGETS" "$_d" || TARGETS="$TARGETS$_d${TAB}hooks_dir in $_why$NL"
    done <<EOF
$PODMAN_DIRS$CRIO_DIRS
EOF
}

# --- install -----------------------------------------------------------------------------------

# put SRC DEST MODE: atomic copy (same-directory temp file + rename).
put() {
    tmp="$(dirname "$2")/.$(basename "$2").tmp.$$"
    cp "$1" "$tmp"
    chmod "$3" "$tmp"
    mv -f "$tmp" "$2"
}

# A config the hook would reject makes every hook run fail: check it with the binary first
# (check-config: exit 1 invalid, 2 unreadable; its error names the key).
check_config() {
    "$IMAGE_BIN" check-config "$1" >/dev/null ||
        die "config $1 is invalid (see the message above); nothing was changed"
}

# put_hooks DIR: the packaged hooks.d file, pointed at the installed binary, atomically into DIR.
put_hooks() {
    _dir=$HR$1
    mkdir -p "$_dir" || die "cannot create $1 (host path; $_dir here)"
    tmp="$_dir/.$NAME.json.tmp.$$" # not *.json: engines ignore it
    sed "s#\"/usr/bin/oci-coresched-hook\"#\"$HOOK_BIN_DIR/$NAME\"#" "$SHARE/$NAME.json" >"$tmp" ||
        die "cannot write $tmp"
    if ! grep -q "\"path\": *\"$HOOK_BIN_DIR/$NAME\"" "$tmp"; then
        rm -f "$tmp"
        die "could not point the hooks.d file at $HOOK_BIN_DIR/$NAME"
    fi
    chmod 0644 "$tmp"
    mv -f "$tmp" "$_dir/$NAME.json" || die "cannot rename $tmp to $_dir/$NAME.json"
}

# write_state LIST: record the directories that hold a copy (for uninstall), atomically.
write_state() {
    tmp="$HR$STATE.tmp.$$"
    printf '%s' "$1" >"$tmp"
    mv -f "$tmp" "$HR$STATE"
}

read_state() {
    if [ -f "$HR$STATE" ]; then cat "$HR$STATE"; fi
}

install_all() {
    bin_dir="$HR$HOOK_BIN_DIR"
    config_dir="$HR$CONFIG_DIR"

    # Check every directory before changing anything.
    for d in "$HOOK_BIN_DIR" "$CONFIG_DIR"; do
        case $(dir_state "$d") in
        unmounted) die "$d is not mounted into the installer (mount the host's $d at $HOST_ROOT$d); nothing was changed" ;;
        ro) die "$d is read-only on this node (or mounted read-only here); for the binary, set HOOK_BIN_DIR and the host-bin volume to a writable directory such as /opt/bin; nothing was changed" ;;
        esac
    done
    WRITE='' RO='' UNMOUNTED='' TARGETS=''
    default_ro=0
    [ "$NO_HOOKS" = 1 ] || plan
    while IFS="$TAB" read -r d why; do
        [ -n "$d" ] || continue
        case $(dir_state "$d") in
        ok) WRITE="$WRITE$d$NL" ;;
        ro)
            RO="$RO$d$NL"
            [ "$d" = "$DEFAULT_HOOKS_DIR" ] && [ -z "$HOOKS_DIR" ] && default_ro=1
            ;;
        *) UNMOUNTED="$UNMOUNTED  $d ($why)$NL" ;;
        esac
    done <<EOF
$TARGETS
EOF
    if [ -n "$UNMOUNTED" ]; then
        die "these hooks.d directories are not mounted into the installer, so the hook cannot be installed there; mount each host directory at $HOST_ROOT/<dir> (a hostPath volume) or set HOOKS_DIR; nothing was changed:$NL$UNMOUNTED"
    fi
    if [ "$default_ro" = 1 ] && ! in_list "$WRITE" "$FALLBACK_HOOKS_DIR"; then
        case $(dir_state "$FALLBACK_HOOKS_DIR") in
        ok) WRITE="$WRITE$FALLBACK_HOOKS_DIR$NL" ;;
        *) die "$DEFAULT_HOOKS_DIR is read-only and $FALLBACK_HOOKS_DIR is not writable here (mount it read-write at $HOST_ROOT$FALLBACK_HOOKS_DIR); nothing was changed" ;;
        esac
    fi
    if [ -z "$WRITE" ] && [ "$NO_HOOKS" = 0 ]; then
        die "no writable hooks.d directory: $(printf '%s' "$RO" | tr '\n' ' ')is read-only here; nothing was changed"
    fi

    mkdir -p "$bin_dir" "$config_dir"
    chmod 0755 "$config_dir"

    if [ -f "$CONFIG_SOURCE" ]; then
        check_config "$CONFIG_SOURCE"
    fi

    put "$IMAGE_BIN" "$bin_dir/$NAME" 0755
    log "installed $HOOK_BIN_DIR/$NAME ($("$bin_dir/$NAME" --version))"

    if [ -f "$CONFIG_SOURCE" ]; then
        put "$CONFIG_SOURCE" "$config_dir/config.toml" 0644
        log "installed $CONFIG_DIR/config.toml from $CONFIG_SOURCE"
    elif [ ! -e "$config_dir/config.toml" ]; then
        put "$SHARE/config.toml" "$config_dir/config.toml" 0644
        log "installed the default $CONFIG_DIR/config.toml"
    else
        check_config "$config_dir/config.toml"
        log "kept the node's $CONFIG_DIR/config.toml"
    fi

    # The hooks.d copies last; each is recorded before it is written, so uninstall finds it even
    # if this run stops half-way.
    state=$(read_state)
    if [ "$NO_HOOKS" = 1 ]; then
        log "installed no hooks.d file (HOOKS_DIR=none)"
        [ -z "$state" ] ||
            warn "hooks.d copies of an earlier install stay (uninstall removes them): $(printf '%s' "$state" | tr '\n' ' ')"
    fi
    [ -z "$state" ] || state="$state$NL"
    while IFS= read -r d; do
        [ -n "$d" ] || continue
        if ! in_list "$state" "$d"; then
            state="$state$d$NL"
            write_state "$state"
        fi
        put_hooks "$d"
        why=$(printf '%s' "$TARGETS" | awk -F "$TAB" -v d="$d" '$1 == d { print $2; exit }')
        log "installed $d/$NAME.json (${why:-fallback for the read-only $DEFAULT_HOOKS_DIR})"
    done <<EOF
$WRITE
EOF

    state_dir
    [ -n "$RO" ] && ro_advice
    return 0
}

# state_dir: the hook's state directory, 0700 root, as the hook itself makes it. kubelet creates a
# missing hostPath directory 0755, which the hook refuses; the nri and follow containers mount it
# after this init container ran. Skipped when the DaemonSet does not mount it.
state_dir() {
    d=$HR$STATE_DIR
    [ -d "$d" ] || return 0
    if [ -L "$d" ]; then
        die "$STATE_DIR is a symlink on this node; the hook refuses it (remove it)"
    fi
    chmod 0700 "$d"
    log "state directory $STATE_DIR is 0700"
}

# ro_advice: the one line an admin needs when a hooks.d directory was read-only.
ro_advice() {
    if [ "$default_ro" = 1 ]; then
        what="$DEFAULT_HOOKS_DIR is read-only on this node, so the hook is in $FALLBACK_HOOKS_DIR instead (containerd's NRI hook-injector reads it as is)"
    else
        what="skipped read-only $(printf '%s' "$RO" | tr '\n' ' ')"
    fi
    covered() { # covered DIRS: one of DIRS got a copy
        while IFS="$TAB" read -r _d _; do
            [ -n "$_d" ] && in_list "$WRITE" "$_d" && return 0
        done <<EOF
$1
EOF
        return 1
    }
    want='["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"]'
    need=
    if [ "$PODMAN_FILES" -gt 0 ] && ! covered "$PODMAN_DIRS"; then
        need="podman needs hooks_dir = $want in [engine] of /etc/containers/containers.conf or a /etc/containers/containers.conf.d/*.conf drop-in"
    fi
    if [ "$CRIO_FILES" -gt 0 ] && ! covered "$CRIO_DIRS"; then
        need="${need:+$need; }CRI-O needs hooks_dir = $want in [crio.runtime] of a /etc/crio/crio.conf.d/ drop-in, then a restart of crio"
    fi
    if [ -z "$need" ] && [ "$PODMAN_FILES" = 0 ] && [ "$CRIO_FILES" = 0 ]; then
        need="podman and CRI-O would run it only with hooks_dir = $want (containers.conf [engine], crio.conf [crio.runtime])"
    fi
    warn "$what; ${need:-the configured hooks_dir of podman and CRI-O already names a directory it is in}"
}

# --- uninstall ---------------------------------------------------------------------------------

uninstall_all() {
    plan
    # Every directory a copy may be in: the plan, the default and fallback, and the record.
    cands=
    while IFS="$TAB" read -r d _; do
        [ -n "$d" ] || continue
        in_list "$cands" "$d" || cands="$cands$d$NL"
    done <<EOF
$TARGETS$DEFAULT_HOOKS_DIR
$FALLBACK_HOOKS_DIR
$(read_state)
EOF
    state=$(read_state)
    failed=
    while IFS= read -r d; do
        [ -n "$d" ] || continue
        f="$HR$d/$NAME.json"
        if [ "$(dir_state "$d")" = unmounted ]; then
            # Recorded: a copy is there, and this container cannot reach it.
            in_list "$state$NL" "$d" && failed="$failed  $d/$NAME.json (not mounted into the installer)$NL"
            continue
        fi
        [ -e "$f" ] || continue
        if ! grep -q "\"path\": *\"$HOOK_BIN_DIR/$NAME\"" "$f"; then
            log "kept $d/$NAME.json: it runs another binary than $HOOK_BIN_DIR/$NAME"
            continue
        fi
        if rm -f "$f"; then
            log "removed $d/$NAME.json"
        else
            failed="$failed  $d/$NAME.json$NL"
        fi
    done <<EOF
$cands
EOF
    if [ -n "$failed" ]; then
        die "could not remove these hooks.d files, so $HOOK_BIN_DIR/$NAME is kept (they would name a missing binary and make container starts fail):$NL$failed"
    fi
    rm -f "$HR$STATE"
    rm -f "$HR$HOOK_BIN_DIR/$NAME"
    log "removed $HOOK_BIN_DIR/$NAME"
    if [ "$PURGE" = 1 ]; then
        # Under the DaemonSet the directory is the mount point of its hostPath volume (kubelet
        # created it): what is in it goes, and the directory itself only where it can.
        rm -rf "$HR${CONFIG_DIR:?}"/* "$HR${CONFIG_DIR:?}"/.[!.]* "$HR${CONFIG_DIR:?}"/..?*
        if rmdir "$HR$CONFIG_DIR" 2>/dev/null; then
            log "removed $CONFIG_DIR"
        else
            log "removed everything in $CONFIG_DIR; the empty directory stays (the host directory mounted here)"
        fi
    fi
}

case "${1:-install}" in
install) install_all ;;
uninstall) uninstall_all ;;
sleep)
    trap 'exit 0' TERM INT
    while :; do
        sleep 3600 &
        wait $! || true
    done
    ;;
*) die "usage: install.sh [install|uninstall|sleep]" ;;
esac
