use crate::ops::doctor::Level;
use crate::ops::doctor::tests::{FOLLOWER, Fixture};

const HOOKS_D: &str = "host/usr/share/containers/oci/hooks.d/oci-coresched-hook.json";

#[test]
fn the_packaged_hooks_d_file_naming_this_binary_is_podmans_route() {
    let f = Fixture::new();
    let h = f.fact("hooks.d");
    assert_eq!((h.level, h.summary.as_str()), (Level::Ok, "1 hooks.d file(s) run this binary"));
    assert!(h.detail.iter().any(|d| d.ends_with("runs /usr/bin/oci-coresched-hook (this binary)")), "{:?}", h.detail);
    assert_eq!(f.fact("routes").summary, "the hook runs from podman (hooks.d)");
}

#[test]
fn a_hooks_d_file_naming_a_missing_binary_fails_even_with_smt_off() {
    let f = Fixture::new();
    std::fs::remove_file(f.g.path("host/usr/bin/oci-coresched-hook")).unwrap();
    let h = f.fact("hooks.d");
    assert_eq!(h.level, Level::Fail);
    assert!(h.summary.contains("the runtime fails every container start"), "{}", h.summary);
    assert_eq!(f.fact("routes").level, Level::Fail, "a broken file is no route");
    f.write("sys/devices/system/cpu/smt/active", "0\n");
    assert_eq!(f.fact("hooks.d").level, Level::Fail);
    assert_eq!(f.fact("routes").level, Level::Info);
}

#[test]
fn another_build_or_a_missing_stage_warns() {
    let f = Fixture::new();
    f.exe("host/usr/bin/oci-coresched-hook", "build B");
    let h = f.fact("hooks.d");
    assert_eq!(h.level, Level::Warn);
    assert!(h.summary.contains("another build than"), "{}", h.summary);
    f.exe("host/usr/bin/oci-coresched-hook", "build A");
    f.write(HOOKS_D, r#"{"version":"1.0.0","hook":{"path":"/usr/bin/oci-coresched-hook"},"when":{"always":true},"stages":["poststop"]}"#);
    let h = f.fact("hooks.d");
    assert!(h.level == Level::Warn && h.summary.contains("lack createRuntime"), "{h:?}");
    f.write(HOOKS_D, "{ broken");
    assert_eq!(f.fact("hooks.d").level, Level::Fail);
}

#[test]
fn cri_os_configured_hooks_dir_is_read() {
    let f = Fixture::new();
    std::fs::remove_file(f.g.path(HOOKS_D)).unwrap();
    std::fs::remove_file(f.g.path("host/usr/bin/podman")).unwrap();
    f.exe("host/usr/bin/crio", "crio");
    f.write("host/etc/crio/crio.conf.d/10-hooks.conf", "[crio.runtime]\nhooks_dir = [\"/opt/hooks\"]\n");
    assert_eq!(f.fact("routes").level, Level::Fail);
    assert!(f.fact("routes").summary.starts_with("no runtime runs the hook"));
    f.write("host/opt/hooks/oci-coresched-hook.json", include_str!("../../../hooks.d/oci-coresched-hook.json"));
    let h = f.fact("hooks.d");
    assert!(
        h.detail.iter().any(|d| d.contains("CRI-O's hooks_dir (set in /etc/crio/crio.conf.d/10-hooks.conf)")),
        "{h:?}"
    );
    assert_eq!(f.fact("routes").summary, "the hook runs from CRI-O (hooks.d)");
    // A file in the default directory is not one CRI-O reads any more.
    std::fs::remove_dir_all(f.g.path("host/opt/hooks")).unwrap();
    f.write(HOOKS_D, include_str!("../../../hooks.d/oci-coresched-hook.json"));
    let r = f.fact("routes");
    assert_eq!(r.level, Level::Warn);
    assert!(r.summary.starts_with("CRI-O run(s) containers without the hook"), "{}", r.summary);
}

#[test]
fn containerd_needs_a_base_runtime_spec_or_the_nri_plugin() {
    let f = Fixture::new();
    f.write("host/etc/containerd/config.toml", "version = 2\n");
    let c = f.fact("containerd");
    assert_eq!(c.level, Level::Fail);
    assert!(c.summary.starts_with("containerd runs its containers without the hook"), "{}", c.summary);
    assert_eq!(f.fact("routes").level, Level::Warn);

    f.write(
        "host/etc/containerd/config.toml",
        include_str!("../../../packaging/containerd/config-1.6-base-runtime-spec.toml"),
    );
    let c = f.fact("containerd");
    assert!(c.level == Level::Fail && c.summary.contains("fails every container"), "missing spec file: {c:?}");
    f.write(
        "host/etc/containerd/oci-coresched-hook-base-spec.json",
        include_str!("../../../packaging/containerd/base-runtime-spec.json"),
    );
    let c = f.fact("containerd");
    assert_eq!((c.level, c.summary.as_str()), (Level::Ok, "containerd runs the hook through its base_runtime_spec"));
    assert_eq!(f.fact("routes").summary, "the hook runs from podman (hooks.d), containerd (base_runtime_spec)");

    f.write("host/etc/containerd/config.toml", "version = 2\n");
    f.agent(
        FOLLOWER + 1,
        &["/usr/local/bin/oci-coresched-hook", "--log-level", "info", "nri"],
        "bin/oci-coresched-hook",
    );
    let c = f.fact("containerd");
    assert!(c.level == Level::Warn && c.summary.contains("no NRI socket"), "{c:?}");
    f.write("host/var/run/nri/nri.sock", "");
    let c = f.fact("containerd");
    assert_eq!((c.level, c.summary.as_str()), (Level::Ok, "containerd runs the hook through the NRI plugin"));
}

#[test]
fn no_route_at_all_fails() {
    let f = Fixture::new();
    std::fs::remove_file(f.g.path(HOOKS_D)).unwrap();
    let r = f.report();
    let routes = r.facts.iter().find(|x| x.name == "routes").unwrap();
    assert_eq!(routes.level, Level::Fail);
    assert_eq!(r.exit_code, 1);
    assert_eq!(f.fact("hooks.d").level, Level::Info);
}
