//! The fake kernel's side of the world fixture ([`World::fake_kernel`], `tests/common`), for
//! binary-level tests of the cookie path on a host without `CONFIG_SCHED_CORE`: the real hook
//! binary over the shared fake kernel (`OCH_FAKE_KERNEL`, feature `fake-kernel`), real `sleep`
//! processes as container inits ([`World::spawn`]), and the world's temp dir holding the config,
//! the state dir, the fake kernel's state and the cgroup mount the hook sees
//! (`OCH_FAKE_CGROUP_ROOT`); OCI state documents and the cache's consistency checks. Used by the
//! `bad_input`, `error_messages`, `faults`, `follow`, `nri`, `sched_idle` and `stress` tests
//! (`tests/it`).
//!
//! Without the feature those tests still exist: [`needs_feature`] fails them under `CI` and
//! prints `SKIPPED <name>: needs --features <feature>` otherwise.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{HOOK, HookLog, Output, World, run_command, skip};

/// Longest a single hook (or `list`) run may take before the test calls it stuck.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The body of a test compiled without a feature it needs: a failure under `CI`, a visible skip
/// otherwise (never a silent pass).
pub fn needs_feature(test: &str, feature: &str) {
    skip(test, &format!("needs --features {feature}"));
}

/// Runs `cmd` with `input` on its stdin (a pipe, also when empty), killed after [`RUN_TIMEOUT`]
/// (a stuck hook fails the test instead of hanging it): [`run_command`] with this world's
/// defaults.
pub fn run(cmd: Command, input: &[u8]) -> Output {
    run_command(None, cmd, Some(input.to_vec()), RUN_TIMEOUT)
}

/// An OCI state document.
pub fn state(id: &str, status: &str, pid: Option<i32>, annotations: &[(&str, &str)]) -> Vec<u8> {
    let ann: serde_json::Map<String, Value> =
        annotations.iter().map(|(k, v)| (k.to_string(), Value::String(v.to_string()))).collect();
    let mut s = json!({"ociVersion": "1.0.2", "id": id, "status": status, "annotations": ann});
    if let Some(p) = pid {
        s["pid"] = json!(p);
    }
    serde_json::to_vec(&s).unwrap()
}

/// Annotations of a pod in `namespace` naming `group`.
pub fn pod(namespace: &'static str, group: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![("io.kubernetes.pod.namespace", namespace), ("oci-coresched-hook/group", group)]
}

/// The fake kernel's side of the one world fixture ([`World`]): a world whose hooks the test runs
/// itself, over the fake kernel whose state is a file in the temp dir.
impl World {
    /// A fresh world for `tag`; the config is `syslog = false`, `log_level = "debug"` plus
    /// `extra_config` (the hook's log is its stderr, which the test reads).
    pub fn fake_kernel(tag: &str, extra_config: &str) -> Self {
        let w = Self::with_hook_log(tag, HookLog::DebugStderr);
        w.write_config(extra_config);
        w
    }

    /// The fake kernel's shared state file.
    pub fn kernel_file(&self) -> PathBuf {
        self.path("fake-kernel.json")
    }

    /// The cache.
    pub fn db(&self) -> PathBuf {
        self.state_dir().join("cache.db")
    }

    /// The cgroup mount the hook sees (`OCH_FAKE_CGROUP_ROOT`): an empty dir unless a test fills
    /// it, so no test ever writes the host's cgroups.
    pub fn cgroup_root(&self) -> PathBuf {
        self.path("cgroup")
    }

    /// `oci-coresched-hook --config C --state-dir S ARGS` over the fake kernel.
    pub fn cmd(&self, args: &[&str]) -> Command {
        self.cmd_in(&self.state_dir(), args)
    }

    /// The same with another state dir.
    pub fn cmd_in(&self, state_dir: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(HOOK);
        cmd.env("OCH_FAKE_KERNEL", self.kernel_file())
            .env("OCH_FAKE_CGROUP_ROOT", self.cgroup_root())
            // No runtime roots: a cache that may lack containers is refilled from none, so the
            // host's own containers never enter a test's cache.
            .env("OCH_FAKE_RUNTIME_ROOTS", "")
            .env_remove("RUST_LOG")
            .arg("--config")
            .arg(self.config_path())
            .arg("--state-dir")
            .arg(state_dir)
            .args(args);
        cmd
    }

    /// Runs [`World::cmd`] with `args` and `input` on stdin (a pipe, also when empty), recorded
    /// in the transcript, killed after [`RUN_TIMEOUT`].
    pub fn cli(&self, args: &[&str], input: &[u8]) -> Output {
        self.run_input(self.cmd(args), Some(input.to_vec()), RUN_TIMEOUT)
    }

    /// `hook` with the state on stdin.
    pub fn hook(&self, input: &[u8]) -> Output {
        self.cli(&["hook"], input)
    }

    /// A createRuntime hook that must succeed: container `id` with init `pid`.
    pub fn ensure(&self, id: &str, pid: i32, annotations: &[(&str, &str)]) -> Output {
        let out = self.hook(&state(id, "creating", Some(pid), annotations));
        assert_eq!(out.code(), Some(0), "ensure {id} failed:\n{out}");
        assert!(!out.stderr.contains(" warn: ") && !out.stderr.contains(" error: "), "ensure {id}:\n{out}");
        out
    }

    /// A poststop hook that must succeed.
    pub fn forget(&self, id: &str) -> Output {
        let out = self.hook(&state(id, "stopped", None, &[]));
        assert_eq!(out.code(), Some(0), "forget {id} failed:\n{out}");
        out
    }

    /// `list --json`, which must succeed.
    pub fn list(&self) -> Value {
        let out = self.cli(&["list", "--json"], b"");
        assert_eq!(out.code(), Some(0), "list --json failed:\n{out}");
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("list --json is not JSON ({e}):\n{out}"))
    }

    /// The cookie the fake kernel gives `pid` now (`inspect PID --json`).
    pub fn cookie(&self, pid: i32) -> String {
        let out = self.cli(&["--log-level", "off", "inspect", &pid.to_string(), "--json"], b"");
        assert_eq!(out.code(), Some(0), "inspect {pid} failed:\n{out}");
        let v: Value = serde_json::from_str(&out.stdout).expect("inspect JSON");
        v["cookie"].as_str().expect("cookie string").to_string()
    }

    /// Whether the fake kernel holds a cookie record for task `pid` (it forgets exited tasks).
    /// Reads the fake's file format, so only with the feature (the tests that call it fail
    /// loudly without it through [`needs_feature`]).
    #[cfg(feature = "fake-kernel")]
    pub fn kernel_knows(&self, pid: i32) -> bool {
        let bytes = std::fs::read(self.kernel_file()).unwrap_or_default();
        let json = oci_coresched_hook::host::kernel::fake_file::json_of(&bytes);
        let v: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
        v["tasks"].get(pid.to_string()).is_some()
    }

    /// Whether the lock is free now (a non-blocking flock on the lock file succeeds).
    pub fn lock_is_free(&self) -> bool {
        let f = std::fs::OpenOptions::new().write(true).open(self.state_dir().join("lock")).expect("open lock file");
        let free = f.try_lock().is_ok();
        drop(f);
        free
    }

    /// `PRAGMA integrity_check` of the cache, under the state lock, through the library.
    pub fn integrity(&self) -> String {
        let dir = oci_coresched_hook::host::state_dir::StateDir::open(&self.state_dir()).expect("state dir");
        let _lock = dir.lock(Duration::from_secs(30)).expect("state lock");
        let store = oci_coresched_hook::store::Store::open(&dir.db_path()).expect("open cache");
        assert!(
            !matches!(store.found(), oci_coresched_hook::store::Found::Replaced { .. }),
            "the cache had to be quarantined"
        );
        store.integrity_check().expect("integrity_check")
    }
}

/// A flattened `list --json`: `(group, id, pid, live, cookie_cached, cookie_now)` per member.
pub type Row = (String, String, i64, bool, String, Option<String>);

/// Flattens a `list --json`.
pub fn members(list: &Value) -> Vec<Row> {
    let mut rows = Vec::new();
    for g in list.as_array().expect("list is an array") {
        for m in g["members"].as_array().expect("members array") {
            rows.push((
                g["group"].as_str().unwrap().to_string(),
                m["id"].as_str().unwrap().to_string(),
                m["pid"].as_i64().unwrap(),
                m["live"].as_bool().unwrap(),
                m["cookie_cached"].as_str().unwrap().to_string(),
                m["cookie_now"].as_str().map(str::to_string),
            ));
        }
    }
    rows
}

/// Checks the invariants of a cache listing against the (fake) kernel: every live member's
/// current cookie is the cached one and non-zero; each group has exactly one cookie among its
/// live members; no two groups share a cookie; no container is listed twice. Returns
/// group → cookie.
pub fn check_consistent(list: &Value) -> std::collections::BTreeMap<String, String> {
    let mut by_group: std::collections::BTreeMap<String, String> = Default::default();
    let mut seen = std::collections::BTreeSet::new();
    for (group, id, pid, live, cached, now) in members(list) {
        assert!(seen.insert(id.clone()), "container {id} is listed twice:\n{list:#}");
        if !live {
            continue;
        }
        let now = now.unwrap_or_else(|| panic!("live member {id} (pid {pid}) has no current cookie:\n{list:#}"));
        assert_eq!(now, cached, "member {id} (pid {pid}): kernel cookie != cached cookie:\n{list:#}");
        assert_ne!(now, "0x0", "member {id} (pid {pid}) has no cookie:\n{list:#}");
        if let Some(c) = by_group.get(&group) {
            assert_eq!(*c, now, "group {group} has two cookies among its live members:\n{list:#}");
        }
        by_group.insert(group, now);
    }
    let mut cookies: Vec<&String> = by_group.values().collect();
    let n = cookies.len();
    cookies.sort();
    cookies.dedup();
    assert_eq!(cookies.len(), n, "two groups share a cookie: {by_group:?}");
    by_group
}
