# %preun of oci-coresched-hook ($1: 0 = erase, 1 = upgrade).
if [ "$1" -eq 0 ]; then
    systemctl --no-reload disable --now oci-coresched-hook-reconcile.service oci-coresched-hook-gc.timer \
        oci-coresched-hook-nri.service >/dev/null 2>&1 || :
    if [ -d /run/systemd/system ]; then
        systemctl stop oci-coresched-hook-reconcile.service oci-coresched-hook-gc.service >/dev/null 2>&1 || :
    fi
fi
