//! Operator commands say what is true (issue 15, defect 4), through the real binary:
//!
//! * with no cache yet, `reconcile --json` reports the `dry_run` it was asked for;
//! * given a `--state-dir` that is not a usable directory (a regular file, a symlink), every
//!   command — the read-only ones included (`list`, `inspect`, `metrics`,
//!   `reconcile --dry-run`) — fails naming the path, instead of printing an empty result;
//! * a state dir that does not exist yet is still "nothing cached": an empty result, exit 0, and
//!   nothing created.
//!
//! No root or kernel support needed: nothing here reaches a prctl.

use crate::common;

use std::path::Path;

use serde_json::Value;

use common::{Output, World};

/// `oci-coresched-hook --config CFG --state-dir DIR ARGS`.
fn cmd(env: &World, state_dir: &Path, args: &[&str]) -> Output {
    let mut all = vec![
        "--config".to_string(),
        env.config_path().display().to_string(),
        "--state-dir".to_string(),
        state_dir.display().to_string(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    env.binary(&all)
}

fn json(env: &World, out: &Output) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| env.fail(&format!("stdout is not JSON: {e}")))
}

#[test]
fn reconcile_without_a_cache_reports_its_dry_run() {
    let env = World::new("reconcile-nocache");
    env.write_config("");
    let dir = env.path("no-state-yet");
    for (args, dry_run) in [
        (&["reconcile", "--dry-run", "--json"][..], true),
        (&["reconcile", "--dry-run", "--once", "--json"][..], true),
        (&["reconcile", "--json"][..], false),
    ] {
        let out = cmd(&env, &dir, args);
        check!(env, out.success(), "{args:?} failed");
        let v = json(&env, &out);
        check_eq!(env, v["dry_run"], Value::Bool(dry_run), "{args:?}: dry_run");
        check_eq!(env, v["members"], Value::Array(vec![]), "{args:?}: members");
    }
    let out = cmd(&env, &dir, &["reconcile", "--dry-run"]);
    check!(env, out.success() && out.stdout.contains("no cache yet"), "reconcile --dry-run (text)");
    check!(env, !dir.exists(), "a read-only command created the state dir {}", dir.display());
}

/// Every command that reads the cache, in text and JSON form.
const COMMANDS: &[&[&str]] = &[
    &["list"],
    &["list", "--json"],
    &["inspect", "1"],
    &["inspect", "1", "--json"],
    &["metrics"],
    &["reconcile", "--dry-run"],
    &["reconcile", "--dry-run", "--json"],
    &["reconcile"],
    &["gc"],
    &["gc", "--json"],
    &["rebuild", "--runc-root", "/nonexistent-runc-root"],
];

#[test]
fn an_unusable_state_dir_is_an_error_naming_it() {
    let env = World::new("statedir-file");
    env.write_config("");
    let file = env.path("state-file");
    std::fs::write(&file, "not a directory\n").unwrap();
    let target = env.path("real-dir");
    std::fs::create_dir(&target).unwrap();
    let link = env.path("state-link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let metrics_file = env.path("metrics.prom");
    let m = metrics_file.display().to_string();
    let mut commands: Vec<Vec<&str>> = COMMANDS.iter().map(|c| c.to_vec()).collect();
    commands.push(vec!["metrics", "--output", &m]);
    // Every command is run and every wrong answer collected, then reported at once.
    let mut wrong = Vec::new();
    for dir in [&file, &link] {
        let want = format!("state dir {} is unusable: not a directory", dir.display());
        for args in &commands {
            let out = cmd(&env, dir, args);
            let what = format!("{args:?} with --state-dir {}", dir.display());
            if out.code() != Some(1) {
                wrong.push(format!("{what}: exit {:?}, want 1", out.code()));
            }
            if !out.stderr.contains(&want) {
                wrong.push(format!("{what}: stderr lacks {want:?}"));
            }
            if !out.stdout.is_empty() {
                wrong.push(format!("{what}: printed a result: {:?}", out.stdout.lines().next().unwrap_or("")));
            }
        }
        if metrics_file.exists() {
            wrong.push(format!("metrics --output wrote {m} for --state-dir {}", dir.display()));
            std::fs::remove_file(&metrics_file).unwrap();
        }
    }
    check!(env, wrong.is_empty(), "{} wrong answers:\n{}", wrong.len(), wrong.join("\n"));
    check_eq!(env, std::fs::read_to_string(&file).unwrap(), "not a directory\n", "the file was changed");
}

#[test]
fn a_missing_state_dir_is_an_empty_cache() {
    let env = World::new("statedir-missing");
    env.write_config("");
    let dir = env.path("not/there/yet");
    for (args, want) in [
        (&["list"][..], "no groups in the cache"),
        (&["list", "--json"][..], "[]"),
        (&["gc"][..], "nothing to remove"),
        (&["reconcile", "--dry-run"][..], "no cache yet"),
        (&["metrics"][..], "# TYPE oci_coresched_hook_kernel_supported gauge"),
    ] {
        let out = cmd(&env, &dir, args);
        check!(env, out.success(), "{args:?} failed");
        check!(env, out.stdout.contains(want), "{args:?}: stdout lacks {want:?}");
    }
    let out = cmd(&env, &dir, &["gc", "--json"]);
    check!(env, out.success(), "gc --json failed");
    let v = json(&env, &out);
    for key in ["removed", "groups_dropped", "unreadable"] {
        check_eq!(env, v[key], Value::Array(vec![]), "gc --json: {key}");
    }
    check!(env, !env.path("not").exists(), "a read-only command created the state dir");
}

/// The one exit point maps clap's outcomes too: `--help` and `--version` print and exit 0, a usage
/// error prints clap's message and exits 2, and the help text lists the codes the README lists.
#[test]
fn help_version_and_usage_errors_exit_with_the_documented_codes() {
    let env = World::new("exit-codes");
    for (args, want, stream_has) in [
        (&["--help"][..], 0, "Exit codes:"),
        (&["--version"][..], 0, "oci-coresched-hook "),
        (&["list", "--help"][..], 0, "Usage:"),
        (&["frobnicate"][..], 2, "unrecognized subcommand"),
        (&["list", "--no-such-flag"][..], 2, "unexpected argument"),
        (&["hook", "--stage", "sideways"][..], 2, "invalid value"),
    ] {
        let out = env.binary(args);
        check_eq!(env, out.code(), Some(want), "{args:?}: exit code");
        let text = if want == 0 { &out.stdout } else { &out.stderr };
        check!(env, text.contains(stream_has), "{args:?}: {stream_has:?} missing from {text:?}");
    }
    // `--version` names the package version and the commit of the checkout it was built in.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let want = format!("oci-coresched-hook {} (commit {head})\n", env!("CARGO_PKG_VERSION"));
    check_eq!(env, env.binary(&["--version"]).stdout, want, "--version");
    let help = env.binary(&["--help"]).stdout;
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for code in ["0", "1", "2"] {
        check!(env, help.contains(&format!("\n  {code}  ")), "--help does not list exit code {code}");
        check!(env, readme.contains(&format!("\n| {code} | ")), "README does not list exit code {code}");
    }
}
