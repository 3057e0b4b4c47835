//! The files `packaging/` ships, checked with the real binary on every `cargo test` (no root, no
//! packaging tools; the package build and install tests are `tests/packaging/run.sh`):
//! the default config (`/etc/oci-coresched-hook/config.toml`) parses, also with every commented-out
//! setting enabled, and decides exactly like the built-in defaults; containerd's example files
//! parse and carry the same hook as `hooks.d/oci-coresched-hook.json`.

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
