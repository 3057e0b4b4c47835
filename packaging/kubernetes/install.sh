# oci-coresched-hook node installer, run by /bin/busybox sh inside the FROM-scratch image.
#
#   install.sh install    (default) copy the binary, config and hooks.d file onto the node
#   install.sh uninstall  remove the hooks.d file and the binary (PURGE=1: the config too)
#   install.sh sleep      do nothing until terminated (the DaemonSet's long-running container)
#
# The node's filesystem is reached through hostPath mounts under $HOST_ROOT (default /host): a
# host path P is $HOST_ROOT/P here. Every file is written to a temporary name in its target
# directory and renamed into place, so a runtime starting a container meanwhile sees either the
# old or the new file, never half of one. The hooks.d file is written last (and removed first), so
# it never names a binary that is not there.
#
# Environment (host paths):
#   HOST_ROOT      where the host paths are mounted        [/host]
#   HOOK_BIN_DIR   directory of the installed binary       [/usr/local/bin]
#   HOOKS_DIR      oci-hooks(5) directory to write into    [/etc/containers/oci/hooks.d]
#   CONFIG_SOURCE  config to install (a ConfigMap key); when missing, the default config is
#                  installed only if the node has none     [/config/config.toml]
#   PURGE          uninstall also removes /etc/oci-coresched-hook [0]
set -eu

HOST_ROOT=${HOST_ROOT:-/host}
HOOK_BIN_DIR=${HOOK_BIN_DIR:-/usr/local/bin}
HOOKS_DIR=${HOOKS_DIR:-/etc/containers/oci/hooks.d}
CONFIG_SOURCE=${CONFIG_SOURCE:-/config/config.toml}
CONFIG_DIR=/etc/oci-coresched-hook
PURGE=${PURGE:-0}

IMAGE_BIN=/usr/bin/oci-coresched-hook
SHARE=/usr/share/oci-coresched-hook
NAME=oci-coresched-hook

log() { echo "oci-coresched-hook-installer: $*"; }
die() { echo "oci-coresched-hook-installer: error: $*" >&2; exit 1; }

case $HOOK_BIN_DIR$HOOKS_DIR in
/*/*) ;;
*) die "HOOK_BIN_DIR and HOOKS_DIR must be absolute paths" ;;
esac

# put SRC DEST MODE: atomic copy (same-directory temp file + rename).
put() {
    tmp="$(dirname "$2")/.$(basename "$2").tmp.$$"
    cp "$1" "$tmp"
    chmod "$3" "$tmp"
    mv -f "$tmp" "$2"
}

# A config the hook would reject makes every hook run fail: check it with the binary first.
check_config() {
    "$IMAGE_BIN" --config "$1" explain --state "$SHARE/probe-state.json" >/dev/null ||
        die "config $1 is invalid (see the message above); nothing was changed"
}

install_all() {
    bin_dir="$HOST_ROOT$HOOK_BIN_DIR"
    hooks_dir="$HOST_ROOT$HOOKS_DIR"
    config_dir="$HOST_ROOT$CONFIG_DIR"
    mkdir -p "$bin_dir" "$hooks_dir" "$config_dir"
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

    # The packaged hooks.d file, pointed at the installed binary (temp file: not *.json).
    tmp="$hooks_dir/.$NAME.json.tmp.$$"
    sed "s#\"/usr/bin/oci-coresched-hook\"#\"$HOOK_BIN_DIR/$NAME\"#" "$SHARE/$NAME.json" >"$tmp"
    if ! grep -q "\"path\": *\"$HOOK_BIN_DIR/$NAME\"" "$tmp"; then
        rm -f "$tmp"
        die "could not point the hooks.d file at $HOOK_BIN_DIR/$NAME"
    fi
    chmod 0644 "$tmp"
    mv -f "$tmp" "$hooks_dir/$NAME.json"
    log "installed $HOOKS_DIR/$NAME.json"
}

uninstall_all() {
    rm -f "$HOST_ROOT$HOOKS_DIR/$NAME.json"
    log "removed $HOOKS_DIR/$NAME.json"
    rm -f "$HOST_ROOT$HOOK_BIN_DIR/$NAME"
    log "removed $HOOK_BIN_DIR/$NAME"
    if [ "$PURGE" = 1 ]; then
        rm -rf "$HOST_ROOT$CONFIG_DIR"
        log "removed $CONFIG_DIR"
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
