# %postun of oci-coresched-hook ($1: 0 = erase, 1 = upgrade).
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -ge 1 ] && [ -d /run/systemd/system ]; then
    # Upgrade or downgrade: this is the outgoing version's scriptlet, run after the incoming one's
    # files and %post. Every unit that runs is restarted on the binary now installed (an older
    # incoming %post may not restart them all).
    systemctl try-restart oci-coresched-hook-reconcile.service oci-coresched-hook-nri.service \
        oci-coresched-hook-gc.timer >/dev/null 2>&1 || :
fi
if [ "$1" -eq 0 ]; then
    # The cache of running containers is meaningless without the hook. A modified config was
    # saved as config.toml.rpmsave by rpm and is kept.
    rm -rf /run/oci-coresched-hook
    rmdir /etc/oci-coresched-hook /usr/share/doc/oci-coresched-hook/examples/containerd \
        /usr/share/doc/oci-coresched-hook/examples /usr/share/doc/oci-coresched-hook 2>/dev/null || :
fi
