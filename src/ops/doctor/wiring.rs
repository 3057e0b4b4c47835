//! The wiring's facts: `hooks.d` (each hooks.d file of this hook in the directories podman and
//! CRI-O read, the binary it names compared with this one), `containerd` (its base runtime spec,
//! or the NRI plugin) and `routes` (which engines run the hook; none at all fails).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::host::wiring::{self, Engines, HOOKS_DIRS, Hook, HookFile, HooksDirSetting, WiringError};

use super::agents::Agents;
use super::{Fact, Level, Node};

/// How the binary a hook names stands.
fn check_binary(root: &Path, hook: &Hook, self_exe: &Path) -> (Level, String) {
    let path = &hook.path;
    let here = wiring::under(root, path);
    match std::fs::metadata(&here) {
        Err(e) => (
            Level::Fail,
            format!("names {}, which cannot be used ({e}): the runtime fails every container start", path.display()),
        ),
        Ok(m) if !m.is_file() || m.permissions().mode() & 0o111 == 0 => (
            Level::Fail,
            format!(
                "names {}, which is not an executable file: the runtime fails every container start",
                path.display()
            ),
        ),
        Ok(_) => match wiring::same_binary(&here, self_exe) {
            Ok(true) => (Level::Ok, format!("runs {} (this binary)", path.display())),
            Ok(false) => (
                Level::Warn,
                format!(
                    "runs {}, another build than {}: finish the upgrade or reinstall",
                    path.display(),
                    self_exe.display()
                ),
            ),
            Err(e) => (Level::Info, format!("runs {} (failed to compare it with this binary: {e})", path.display())),
        },
    }
}

/// One hooks.d file judged: its level and one line.
fn check_file(root: &Path, read: &Result<HookFile, WiringError>, self_exe: &Path) -> (Level, String) {
    let f = match read {
        Ok(f) => f,
        Err(e) => return (Level::Fail, format!("{e}: podman and CRI-O refuse to load it")),
    };
    let shown = Path::new("/").join(f.file.strip_prefix(root).unwrap_or(&f.file));
    let Some(hook) = &f.hook else {
        return (Level::Fail, format!("{}: has no hook.path", shown.display()));
    };
    let (mut level, mut line) = check_binary(root, hook, self_exe);
    line = format!("{}: {line}", shown.display());
    if !f.stages.iter().any(|s| s == "createRuntime" || s == "prestart") {
        level = level.min(Level::Warn);
        line.push_str(&format!("; its stages {:?} lack createRuntime: containers start without a cookie", f.stages));
    }
    if !f.always {
        level = level.min(Level::Warn);
        line.push_str("; when.always is not true: it runs only for the containers its `when` matches");
    }
    (level, line)
}

/// Where an engine reads hooks.d files: its setting, or the default.
fn reads(setting: &Option<HooksDirSetting>) -> Vec<PathBuf> {
    match setting {
        Some(s) => s.dirs.clone(),
        None => vec![PathBuf::from(HOOKS_DIRS[0])],
    }
}

/// The `hooks.d`, `containerd` and `routes` facts.
pub fn facts<K>(node: &Node<'_, K>, agents: &Agents) -> Vec<Fact> {
    let root = node.host_root;
    let engines = Engines::read(root);
    let mut detail = Vec::new();
    let setting = |name: &str, r: Result<Option<HooksDirSetting>, WiringError>, detail: &mut Vec<String>| match r {
        Ok(s) => {
            match &s {
                Some(s) => detail.push(format!("{name}'s hooks_dir (set in {}): {:?}", s.file.display(), s.dirs)),
                None => detail.push(format!("{name}'s hooks_dir is not set: it reads {}", HOOKS_DIRS[0])),
            }
            s
        }
        Err(e) => {
            detail.push(format!("{name}'s hooks_dir: {e}"));
            None
        }
    };
    let podman = setting("podman", wiring::podman_hooks_dirs(root), &mut detail);
    let crio = setting("CRI-O", wiring::crio_hooks_dirs(root), &mut detail);
    let (hooks_d, good_dirs) = hooks_d_fact(node, &podman, &crio, detail);
    let covered = |setting: &Option<HooksDirSetting>| reads(setting).iter().any(|d| good_dirs.contains(d));
    let mut routes = Vec::new();
    let mut uncovered = Vec::new();
    if engines.podman || (!engines.crio && covered(&podman)) {
        if covered(&podman) {
            routes.push("podman (hooks.d)".to_string());
        } else if engines.podman {
            uncovered.push("podman");
        }
    }
    if engines.crio {
        if covered(&crio) || agents.nri_running() {
            routes.push(if covered(&crio) { "CRI-O (hooks.d)" } else { "CRI-O (NRI plugin)" }.to_string());
        } else {
            uncovered.push("CRI-O");
        }
    }
    let containerd = containerd_fact(node, &engines, agents, &mut routes);
    if containerd.level == Level::Fail {
        uncovered.push("containerd");
    }
    let route = routes_fact(routes, uncovered, !good_dirs.is_empty(), agents);
    vec![hooks_d, containerd, route]
}

/// The hooks.d fact: every hooks.d file of this hook in the default directories and in podman's
/// and CRI-O's configured ones, each judged; with the directories whose file runs this binary.
fn hooks_d_fact<K>(
    node: &Node<'_, K>,
    podman: &Option<HooksDirSetting>,
    crio: &Option<HooksDirSetting>,
    mut detail: Vec<String>,
) -> (Fact, Vec<PathBuf>) {
    let root = node.host_root;
    let mut dirs: Vec<PathBuf> = HOOKS_DIRS.iter().map(PathBuf::from).collect();
    for d in reads(podman).into_iter().chain(reads(crio)) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let mut good_dirs = Vec::new();
    let mut judged = Vec::new();
    for dir in &dirs {
        match wiring::hooks_d(&wiring::under(root, dir)) {
            Ok(None) => {}
            Ok(Some(found)) => {
                for read in &found {
                    let (l, line) = check_file(root, read, node.self_exe);
                    if l > Level::Fail {
                        good_dirs.push(dir.clone());
                    }
                    detail.push(line.clone());
                    judged.push((l, line));
                }
            }
            Err(e) => {
                detail.push(e.to_string());
                judged.push((Level::Warn, e.to_string()));
            }
        }
    }
    judged.sort_by_key(|(l, _)| *l);
    let hooks_d = match judged.first() {
        None => Fact::new("hooks.d", Level::Info, format!("no hooks.d file of this hook in {}", display(&dirs))),
        Some((Level::Ok | Level::Info, _)) => {
            Fact::new("hooks.d", Level::Ok, format!("{} hooks.d file(s) run this binary", judged.len()))
        }
        Some((l, line)) => Fact { isolation: *l != Level::Fail, ..Fact::new("hooks.d", *l, line.clone()) },
    }
    .with_detail(detail);
    (hooks_d, good_dirs)
}

/// The routes fact: which engines run the hook and from where, and which run containers without it.
fn routes_fact(mut routes: Vec<String>, uncovered: Vec<&str>, any_good_dir: bool, agents: &Agents) -> Fact {
    if routes.is_empty() && any_good_dir {
        routes.push("a hooks.d file (no podman or CRI-O found)".into());
    }
    if routes.is_empty() && agents.nri_running() {
        routes.push("the NRI plugin".into());
    }
    if routes.is_empty() {
        Fact::new(
            "routes",
            Level::Fail,
            "no runtime runs the hook: no hooks.d file, no containerd base_runtime_spec, no NRI plugin (docs/wiring.md)",
        )
    } else if !uncovered.is_empty() {
        Fact::new(
            "routes",
            Level::Warn,
            format!(
                "{} run(s) containers without the hook; the hook runs from {}",
                uncovered.join(", "),
                routes.join(", ")
            ),
        )
    } else {
        Fact::new("routes", Level::Ok, format!("the hook runs from {}", routes.join(", ")))
    }
}

fn display(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn containerd_fact<K>(node: &Node<'_, K>, engines: &Engines, agents: &Agents, routes: &mut Vec<String>) -> Fact {
    let root = node.host_root;
    if !engines.containerd {
        return Fact::new("containerd", Level::Info, "no containerd on this node");
    }
    let mut detail = Vec::new();
    let mut level = Level::Ok;
    let mut wired = false;
    let mut broken = false;
    match wiring::containerd_base_specs(root) {
        Ok(None) => detail.push(format!("no {}", wiring::CONTAINERD_CONFIG)),
        Ok(Some(specs)) if specs.is_empty() => {
            detail.push(format!("{} sets no base_runtime_spec", wiring::CONTAINERD_CONFIG))
        }
        Ok(Some(specs)) => {
            for (spec, named_in) in specs {
                let at = format!("base_runtime_spec {} (in {})", spec.display(), named_in.display());
                match wiring::base_spec_hooks(&wiring::under(root, &spec)) {
                    Err(e) => {
                        level = Level::Fail;
                        broken = true;
                        detail.push(format!("{at}: {e}: containerd fails every container of that runtime"));
                    }
                    Ok(hooks) => match hooks.iter().find(|(stage, _)| stage == "createRuntime") {
                        None => detail.push(format!("{at}: no createRuntime hook runs this binary")),
                        Some((_, hook)) => {
                            let (l, line) = check_binary(root, hook, node.self_exe);
                            wired |= l > Level::Fail;
                            broken |= l == Level::Fail;
                            level = level.min(l);
                            detail.push(format!("{at}: {line}"));
                        }
                    },
                }
            }
        }
        Err(e) => {
            level = Level::Warn;
            detail.push(e.to_string());
        }
    }
    if wired {
        routes.push("containerd (base_runtime_spec)".into());
    }
    if agents.nri_running() {
        routes.push("containerd (NRI plugin)".into());
        if !engines.nri_socket {
            level = level.min(Level::Warn);
            detail.push(format!(
                "the NRI plugin runs but there is no NRI socket ({}): is NRI enabled in containerd?",
                wiring::NRI_SOCKET
            ));
        }
    }
    let worst = || detail.iter().rev().find(|d| !d.contains("(this binary)")).cloned().unwrap_or_default();
    let fact = if broken || (level < Level::Ok && (wired || agents.nri_running())) {
        Fact::new("containerd", level, worst())
    } else if !wired && !agents.nri_running() {
        Fact::new(
            "containerd",
            Level::Fail,
            "containerd runs its containers without the hook: enable the NRI plugin (systemctl enable --now \
             oci-coresched-hook-nri.service, or the DaemonSet) or wire a base_runtime_spec (docs/wiring.md)",
        )
    } else if agents.nri_running() {
        Fact::new("containerd", Level::Ok, "containerd runs the hook through the NRI plugin")
    } else {
        Fact::new("containerd", Level::Ok, "containerd runs the hook through its base_runtime_spec")
    };
    Fact { isolation: !broken, ..fact }.with_detail(detail)
}

#[cfg(test)]
#[path = "wiring_tests.rs"]
mod tests;
