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
if [ "$1" -eq 1 ]; then
    # First install: enable the timers (a preset file may still disable them), and start them.
    systemctl --no-reload enable oci-coresched-hook-reconcile.timer oci-coresched-hook-gc.timer >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl start oci-coresched-hook-reconcile.timer oci-coresched-hook-gc.timer >/dev/null 2>&1 || :
    fi
elif [ -d /run/systemd/system ]; then
    # Upgrade: pick up changed timer intervals, keep the admin's enable/disable choice.
    systemctl try-restart oci-coresched-hook-reconcile.timer oci-coresched-hook-gc.timer >/dev/null 2>&1 || :
fi
