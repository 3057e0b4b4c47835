# %post of oci-coresched-hook ($1: 1 = install, 2 = upgrade).
# The state directory, 0700 root (tmpfiles.d recreates it at boot).
if command -v systemd-tmpfiles >/dev/null 2>&1; then
    systemd-tmpfiles --create oci-coresched-hook.conf >/dev/null 2>&1 || :
fi
if [ ! -d /run/oci-coresched-hook ]; then
    mkdir -p /run/oci-coresched-hook && chmod 0700 /run/oci-coresched-hook || :
fi
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
# A config the hook cannot parse makes every hook run fail open (or closed) and the services stop:
# say so, with the line naming the key, but never fail the install over it (an upgrade keeps the
# admin's %config(noreplace) file as it is).
if ! /usr/bin/oci-coresched-hook check-config >/dev/null; then
    echo "oci-coresched-hook: warning: /etc/oci-coresched-hook/config.toml does not pass check-config (above):" \
        "the hook fails open and the services stop until it is fixed; then systemctl restart" \
        "oci-coresched-hook-reconcile.service (oci-coresched-hook doctor says what else is wrong)" >&2
fi
if [ "$1" -eq 1 ]; then
    # First install: enable the reconcile service and the gc timer (a preset file may still
    # disable them), and start them.
    systemctl --no-reload enable oci-coresched-hook-reconcile.service oci-coresched-hook-gc.timer >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl start oci-coresched-hook-reconcile.service oci-coresched-hook-gc.timer >/dev/null 2>&1 || :
    fi
else
    # Upgrade from a version with oci-coresched-hook-reconcile.timer (the old package's files are
    # still on disk here): the long-running service replaces it, enabled if the timer was.
    if systemctl --quiet is-enabled oci-coresched-hook-reconcile.timer >/dev/null 2>&1; then
        systemctl --no-reload enable oci-coresched-hook-reconcile.service >/dev/null 2>&1 || :
    fi
    systemctl --no-reload disable oci-coresched-hook-reconcile.timer >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl stop oci-coresched-hook-reconcile.timer >/dev/null 2>&1 || :
        # Pick up the new binary and units, keep the admin's enable/disable choice.
        if systemctl --quiet is-enabled oci-coresched-hook-reconcile.service >/dev/null 2>&1; then
            systemctl restart oci-coresched-hook-reconcile.service >/dev/null 2>&1 || :
        fi
        # Every other unit that runs (the NRI plugin's service, started by an admin) picks up
        # the new binary too.
        systemctl try-restart oci-coresched-hook-gc.timer oci-coresched-hook-nri.service >/dev/null 2>&1 || :
    fi
fi
