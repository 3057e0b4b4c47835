//! The files `packaging/` ships, checked with the real binary on every `cargo test` (no root, no
//! packaging tools; the package build and install tests are `tests/packaging/run.sh`):
//! the default config (`/etc/oci-coresched-hook/config.toml`) parses, also with every commented-out
//! setting enabled, and decides exactly like the built-in defaults; containerd's example files
//! parse and carry the same hook as `hooks.d/oci-coresched-hook.json`; the systemd units are the
//! ones both packages ship, and the reconcile service is long-running with only the privileges
//! `reconcile --follow` needs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const HOOK: &str = env!("CARGO_BIN_EXE_oci-coresched-hook");
const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn repo(rel: &str) -> PathBuf {
    Path::new(MANIFEST_DIR).join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn explain(config: &Path, state: &Path) -> Output {
    Command::new(HOOK)
        .arg("--config")
        .arg(config)
        .arg("explain")
        .arg("--state")
        .arg(state)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run oci-coresched-hook")
}

fn explain_ok(config: &Path, state: &Path) -> String {
    let out = explain(config, state);
    assert!(
        out.status.success(),
        "explain with {} over {} exited {:?}: {}",
        config.display(),
        state.display(),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn states() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo("tests/fixtures/states"))
        .expect("fixtures dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            ["-createRuntime.json", "-poststart.json", "-poststop.json"].iter().any(|s| name.ends_with(s))
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixture states");
    v
}

#[test]
fn shipped_config_parses_and_the_check_bites() {
    let dir = tempfile::tempdir().unwrap();
    let state = repo("tests/fixtures/states/runc-createRuntime.json");
    explain_ok(&repo("packaging/config.toml"), &state);

    // Every commented-out `# key = value` line and `# [qos.X]` table is valid too once enabled.
    let uncommented: String = read("packaging/config.toml")
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with("[qos.")
                    || rest
                        .split_once(" = ")
                        .is_some_and(|(k, _)| k.chars().all(|c| c.is_ascii_lowercase() || c == '_')) =>
            {
                format!("{rest}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    assert!(uncommented.contains("\nlog_file = "), "log_file is documented as a commented-out setting");
    assert!(uncommented.contains("\n[qos.LSR]\nenable = true"), "[qos.LSR] is documented as a commented-out table");
    let p = dir.path().join("uncommented.toml");
    std::fs::write(&p, &uncommented).unwrap();
    explain_ok(&p, &state);

    // Negative control: an unknown key fails, so the passes above mean something.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, format!("{}\nno_such_key = 1\n", read("packaging/config.toml"))).unwrap();
    let out = explain(&bad, &state);
    assert_eq!(out.status.code(), Some(2), "unknown key accepted: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no_such_key"));
}

#[test]
fn shipped_config_is_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let shipped = repo("packaging/config.toml");
    for state in states() {
        assert_eq!(explain_ok(&shipped, &state), explain_ok(&empty, &state), "{}", state.display());
    }
    // LSE and LSR are documented but left out: an [qos.LSR] table would move Guaranteed pods from
    // the LS rule to it, and an [qos.LSE] one would stop LSE from following LSR.
    let text = read("packaging/config.toml");
    for class in ["LS", "BE"] {
        assert!(text.contains(&format!("\n[qos.{class}]")), "no [qos.{class}] table");
    }
    for class in ["LSE", "LSR"] {
        assert!(text.contains(&format!("\n# [qos.{class}]")), "no commented-out [qos.{class}] table");
        assert!(!text.contains(&format!("\n[qos.{class}]")), "[qos.{class}] is set");
    }
}

#[test]
fn containerd_examples_carry_the_hooks_d_hook_or_enable_nri_only() {
    let hooks_d: Value = serde_json::from_str(&read("hooks.d/oci-coresched-hook.json")).unwrap();
    let hook = &hooks_d["hook"];
    assert_eq!(hook["path"], "/usr/bin/oci-coresched-hook");
    let spec: Value = serde_json::from_str(&read("packaging/containerd/base-runtime-spec.json")).unwrap();
    for stage in ["createRuntime", "poststart", "poststop"] {
        assert_eq!(spec["hooks"][stage], Value::Array(vec![hook.clone()]), "base spec hooks.{stage}");
    }
    let parse = |file: &str| -> toml::Table {
        let text = read(&format!("packaging/containerd/{file}"));
        toml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    // The base_runtime_spec route needs the annotation filters; the NRI plugin route needs NRI on
    // and nothing else.
    let cfg = parse("config-1.6-base-runtime-spec.toml");
    let runc = &cfg["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"];
    let pod: Vec<&str> =
        runc["pod_annotations"].as_array().expect("pod_annotations").iter().filter_map(|v| v.as_str()).collect();
    assert!(pod.contains(&"oci-coresched-hook/*") && pod.contains(&"koordinator.sh/*"), "{pod:?}");
    for file in ["config-1.7-nri.toml", "config-2.x-nri.toml"] {
        let cfg = parse(file);
        let plugins = cfg["plugins"].as_table().expect("plugins");
        assert_eq!(plugins.keys().collect::<Vec<_>>(), ["io.containerd.nri.v1.nri"], "{file}: sets more than NRI");
        assert_eq!(plugins["io.containerd.nri.v1.nri"]["disable"].as_bool(), Some(false), "{file}: NRI not enabled");
    }
}

/// `[Section]` → `(key, value)` lines of a systemd unit, in order (comments and blanks dropped).
fn unit(rel: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in read(rel).lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
        } else {
            let (k, v) = line.split_once('=').unwrap_or_else(|| panic!("{rel}: not key=value: {line}"));
            out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// The values of `key` in `section`, in order.
fn values<'a>(unit: &'a [(String, String, String)], section: &str, key: &str) -> Vec<&'a str> {
    unit.iter().filter(|(s, k, _)| s == section && k == key).map(|(_, _, v)| v.as_str()).collect()
}

#[test]
fn both_packages_ship_exactly_the_units_in_packaging_systemd() {
    let mut units: Vec<String> = std::fs::read_dir(repo("packaging/systemd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    units.sort();
    assert_eq!(
        units,
        [
            "oci-coresched-hook-gc.service",
            "oci-coresched-hook-gc.timer",
            "oci-coresched-hook-nri.service",
            "oci-coresched-hook-reconcile.service",
        ],
        "the reconcile timer is replaced by the long-running reconcile service"
    );
    let cargo: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let meta = &cargo["package"]["metadata"];
    let mut deb: Vec<String> = meta["deb"]["assets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a[0].as_str()?.strip_prefix("packaging/systemd/").map(str::to_string))
        .collect();
    let mut rpm: Vec<String> = meta["generate-rpm"]["assets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["source"].as_str()?.strip_prefix("packaging/systemd/").map(str::to_string))
        .collect();
    deb.sort();
    rpm.sort();
    assert_eq!(deb, units, "[package.metadata.deb] assets");
    assert_eq!(rpm, units, "[package.metadata.generate-rpm] assets");
    // The maintainer scripts enable the service where they enabled the timer; they name the old
    // reconcile timer only to check, stop or disable it (upgrades).
    for script in ["packaging/debian/postinst", "packaging/rpm/post_install.sh"] {
        assert!(read(script).contains("oci-coresched-hook-reconcile.service oci-coresched-hook-gc.timer"), "{script}");
    }
    for script in [
        "packaging/debian/postinst",
        "packaging/debian/prerm",
        "packaging/debian/postrm",
        "packaging/rpm/post_install.sh",
        "packaging/rpm/pre_uninstall.sh",
        "packaging/rpm/post_uninstall.sh",
    ] {
        for line in read(script).lines().filter(|l| l.contains("reconcile.timer") && !l.trim_start().starts_with('#')) {
            assert!(
                ["LEGACY_TIMER=", "disable", "stop", "is-enabled"].iter().any(|w| line.contains(w)),
                "{script}: the old reconcile timer is only checked, stopped or disabled: {line}"
            );
        }
    }
}

#[test]
fn reconcile_service_follows_with_two_capabilities_in_the_host_network_namespace() {
    let u = unit("packaging/systemd/oci-coresched-hook-reconcile.service");
    let one = |section: &str, key: &str| -> String {
        let v = values(&u, section, key);
        assert_eq!(v.len(), 1, "[{section}] {key}: {v:?}");
        v[0].to_string()
    };
    assert_eq!(one("Service", "Type"), "simple");
    assert_eq!(one("Service", "ExecStart"), "/usr/bin/oci-coresched-hook reconcile --follow");
    assert_eq!(one("Service", "Restart"), "always");
    assert_eq!(one("Service", "RestartSec"), "2");
    // A bad config exits 2 (tests/it/doctor.rs): the unit stops with the line, no restart loop.
    assert_eq!(one("Service", "RestartPreventExitStatus"), "2");
    assert_eq!(one("Service", "CapabilityBoundingSet"), "CAP_SYS_PTRACE CAP_NET_ADMIN");
    assert_eq!(one("Service", "AmbientCapabilities"), "");
    assert_eq!(one("Service", "RestrictAddressFamilies"), "AF_UNIX AF_NETLINK");
    // The proc connector sends events only in the initial network namespace.
    assert!(values(&u, "Service", "PrivateNetwork").is_empty(), "PrivateNetwork would cut it off the proc connector");
    assert!(values(&u, "Service", "TimeoutStartSec").is_empty(), "a oneshot's start timeout on a long-running service");
    assert_eq!(one("Install", "WantedBy"), "multi-user.target");
    assert_eq!(one("Unit", "ConditionPathExists"), "/usr/bin/oci-coresched-hook");
    assert_eq!(one("Unit", "Documentation"), "man:oci-coresched-hook(1)");
    // The rest of the NRI service's hardening applies as is.
    let nri = unit("packaging/systemd/oci-coresched-hook-nri.service");
    let differ = [
        "Type",
        "ExecStart",
        "Restart",
        "RestartSec",
        "CapabilityBoundingSet",
        "RestrictAddressFamilies",
        "PrivateNetwork",
    ];
    assert_eq!(values(&nri, "Service", "RestartPreventExitStatus"), ["2"], "the NRI service stops on a bad config too");
    for (section, key, value) in nri.iter().filter(|(s, k, _)| s == "Service" && !differ.contains(&k.as_str())) {
        assert_eq!(values(&u, section, key), [value.as_str()], "[{section}] {key} as in the NRI service");
    }
}

/// The version a user can name is one version everywhere: the DaemonSet's image tag (which
/// `scripts/package.sh` builds as `localhost/oci-coresched-hook:<version>`), the install commands
/// of README and packaging/README.md, and a release section of CHANGELOG.md; the previous
/// release the upgrade test installs is an older one, recorded with its commit.
#[test]
fn the_version_is_named_the_same_everywhere() {
    let version = env!("CARGO_PKG_VERSION");
    let ds = read("packaging/kubernetes/daemonset.yaml");
    let tags: Vec<&str> = ds.lines().filter_map(|l| l.trim().strip_prefix("image: ")).collect();
    assert!(!tags.is_empty());
    for t in &tags {
        assert_eq!(*t, format!("localhost/oci-coresched-hook:{version}"), "daemonset.yaml");
    }
    for doc in ["README.md", "packaging/README.md"] {
        let text = read(doc);
        assert!(text.contains(&format!("oci-coresched-hook_{version}-1_amd64.deb")), "{doc} installs another .deb");
        assert!(text.contains(&format!("oci-coresched-hook-{version}-1.x86_64.rpm")), "{doc} installs another .rpm");
    }
    assert!(read("CHANGELOG.md").contains(&format!("\n## {version} ")), "CHANGELOG.md has no section for {version}");
    let prev = read("tests/field/previous-release.txt");
    let line = prev.lines().find(|l| !l.starts_with('#')).expect("a release line");
    let (pv, commit) = line.split_once(' ').expect("VERSION COMMIT");
    assert!(commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "{commit}");
    let num = |v: &str| v.split('.').map(|p| p.parse::<u32>().unwrap()).collect::<Vec<_>>();
    assert!(num(pv) < num(version), "the previous release {pv} is not older than {version}");
    assert!(read("CHANGELOG.md").contains(&format!("\n## {pv} ")), "CHANGELOG.md has no section for {pv}");
}
