//! The layering rules ARCHITECTURE.md states, checked on the source itself, so
//! that a later change cannot quietly bring a seam back:
//!
//! * `src/` is cut into layers, top to bottom ([`LAYERS`]): a folder or top-level module names
//!   (`crate::…`, in production code: no `*_tests.rs`, no `#[cfg(test)] mod tests`, no
//!   `scenarios/`) only what sits in a lower layer, or in its own folder;
//! * the modules ([`unit`]: a file at the top of `src/`, or a module of a namespace folder such as
//!   `host::procfs`) form no cycle, inside a folder as across folders;
//! * nothing below the operator commands (`cli`, `commands`, `ops`, `agent::nri`,
//!   `agent::follow`) names them;
//! * exactly one file calls `prctl`;
//! * only `membership` decides whether a cached member is alive (a recorded identity compared
//!   with `/proc`) and which member owns a cgroup (`cgroup::within`);
//! * the decision (`decide/`) names no storage type, the cache (`store`) no kernel call, and the
//!   value types they share sit in a leaf (`values`);
//! * unit tests live in a sibling `*_tests.rs` file that its module includes, never inline;
//! * ARCHITECTURE.md's module map names every folder and module by its path below `src/`, and
//!   every `.rs` file and every item it names as a path (`module::item`, `Type::member`) exists in
//!   the source;
//! * every bare identifier it writes in backticks (`write_existing`, `Session`) is an item of the
//!   source, or a word that is not code by a rule derived from the sources (config keys, SQL
//!   names, crates, names read as a whole string) or by a short justified list;
//! * it stays a map: at most 300 lines, none over 200 characters.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top to bottom: each entry is a folder of `src/` or a top-level module, and may name
/// only entries of later layers (and its own folder's modules). The last layer holds the leaves,
/// which name nothing of the crate.
const LAYERS: [&[&str]; 11] = [
    &["cli"],
    &["commands"],
    &["agent"],
    &["ops"],
    &["hook"],
    &["session"],
    &["cookies"],
    &["store"],
    &["decide"],
    &["host"],
    &["config", "error", "exit_codes", "exposition", "fault", "logging", "textfile", "timing", "values"],
];

/// The folders that only group modules (their `mod.rs` declares them and holds no code): a module
/// below one of them is a unit of its own (`host::procfs`). Any other folder (`store/`, `ops/`,
/// `session/`, …) is one module with its private parts.
const NAMESPACES: [&str; 4] = ["host", "decide", "cookies", "agent"];

const OPERATOR_LAYER: [&str; 5] = ["cli", "commands", "ops", "agent::nri", "agent::follow"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`, as (path relative to `src/`, text).
fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src()).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The production part of a file: without its inline test module and without comments.
fn production(text: &str) -> String {
    let text = text.find("#[cfg(test)]\nmod tests").map_or(text, |i| &text[..i]);
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The module a path of the crate falls in (`["host", "procfs", "ProcFs"]` → `host::procfs`,
/// `["store", "Member"]` → `store`): the first segment, and the second below a namespace folder.
fn unit(segments: &[&str]) -> String {
    match segments {
        [ns, module, ..] if NAMESPACES.contains(ns) => format!("{ns}::{module}"),
        [first, ..] => first.to_string(),
        [] => String::new(),
    }
}

/// The layer (its index in [`LAYERS`]) of a unit, from its first segment.
fn layer(unit: &str) -> Option<usize> {
    let top = unit.split("::").next().unwrap_or(unit);
    LAYERS.iter().position(|l| l.contains(&top))
}

/// The units named after each `crate::`, including those in `use crate::{a, b::c}`.
fn crate_refs(text: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let path = |s: &str| -> String {
        let p: String = s.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        unit(&p.split("::").filter(|s| !s.is_empty()).collect::<Vec<_>>())
    };
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for item in group.split(',') {
                refs.insert(path(item.trim()));
            }
        } else {
            refs.insert(path(rest));
        }
    }
    refs.retain(|r| !r.is_empty());
    refs
}

/// Unit → the units its production code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &files {
        if rel.ends_with("_tests.rs")
            || rel.starts_with("scenarios")
            || ["main.rs", "lib.rs", "test_world.rs"].contains(&rel.as_str())
        {
            continue;
        }
        let segments: Vec<&str> = rel.trim_end_matches(".rs").split('/').filter(|s| *s != "mod").collect();
        if segments.len() == 1 && NAMESPACES.contains(&segments[0]) {
            continue; // a namespace folder's mod.rs only declares its modules
        }
        let me = unit(&segments);
        let mut refs = crate_refs(&production(text));
        refs.remove(&me);
        g.entry(me).or_default().extend(refs);
    }
    // A name of another module, or of a whole layer (`crate::host`, `crate::cookies`: a path that
    // ends at a namespace folder still names that layer); other crates' paths are dropped.
    let known: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d| known.contains(d) || NAMESPACES.contains(&d.as_str()));
    }
    g
}

fn reaches(g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(m) = stack.pop() {
        for d in g.get(&m).into_iter().flatten() {
            if d == to {
                return true;
            }
            if seen.insert(d.clone()) {
                stack.push(d.clone());
            }
        }
    }
    false
}

#[test]
fn module_graph_has_no_cycle() {
    let g = graph();
    assert!(
        g.len() > 30 && g["hook"].contains("cookies::engine") && g["host::system"].contains("host::kernel"),
        "the module scan found too little: {g:?}"
    );
    let mut cycles = Vec::new();
    for a in g.keys() {
        for b in g.keys().filter(|b| *b > a) {
            if reaches(&g, a, b) && reaches(&g, b, a) {
                cycles.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(cycles.is_empty(), "modules that reach each other: {cycles:?}\ngraph: {g:#?}");
}

#[test]
fn every_folder_names_only_lower_layers() {
    let g = graph();
    // The scan reads `crate::a::b` paths and one level of `crate::{a, b}`; nested groups and
    // `super::super::` could hide a name from it, so production code uses neither.
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let hidden: Vec<&str> = files
        .iter()
        .filter(|(rel, text)| {
            let code = production(text);
            !rel.ends_with("_tests.rs") && (code.contains("super::super::") || code.contains("crate::{"))
        })
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert!(
        hidden.is_empty(),
        "grouped crate:: imports or super::super:: paths the layer scan cannot read: {hidden:?}"
    );
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(from) = layer(m) else {
            wrong.push(format!("{m} is in no layer: add its folder or module to LAYERS"));
            continue;
        };
        let folder = m.split("::").next().unwrap_or(m);
        for d in deps {
            let same_folder = d.split("::").next() == Some(folder);
            match layer(d) {
                Some(to) if to > from || same_folder => {}
                _ => wrong.push(format!("{m} -> {d}")),
            }
        }
    }
    assert!(wrong.is_empty(), "a module names one of its own layer or a higher one: {wrong:#?}");
    // Every entry of `src/` is in a layer: a new folder or top-level module must be placed.
    let mut unplaced = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let name = name.trim_end_matches(".rs");
        let test_only = name.ends_with("_tests") || ["main", "lib", "test_world", "scenarios"].contains(&name);
        if !test_only && layer(name).is_none() {
            unplaced.push(name.to_string());
        }
    }
    assert!(unplaced.is_empty(), "entries of src/ in no layer: {unplaced:?}");
}

#[test]
fn nothing_below_the_operator_commands_names_them() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in g.iter().filter(|(m, _)| !OPERATOR_LAYER.contains(&m.as_str())) {
        for d in deps.iter().filter(|d| OPERATOR_LAYER.contains(&d.as_str())) {
            if !(m == "cli" || m == "commands" || m.starts_with("agent::") && d == "ops") {
                wrong.push(format!("{m} -> {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "a lower layer names an operator command module: {wrong:?}");
}

#[test]
fn exactly_one_file_calls_prctl() {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let callers: Vec<&str> = files
        .iter()
        .filter(|(_, text)| production(text).contains("libc::prctl("))
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert_eq!(callers, ["host/kernel/linux.rs"]);
}

#[test]
fn only_membership_decides_liveness_and_cgroup_ownership() {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let mut wrong = Vec::new();
    for (rel, text) in files.iter().filter(|(rel, _)| !rel.ends_with("_tests.rs") && !rel.starts_with("scenarios/")) {
        if rel == "cookies/membership.rs" {
            continue;
        }
        for line in production(text).lines() {
            let compares_identity = line.contains(".task(") && (line.contains("==") || line.contains("!="));
            let owns_cgroup = line.contains("within(") && rel != "host/cgroup.rs";
            let liveness = line.contains("fn liveness") || line.contains("enum Liveness") || line.contains("is_same(");
            if compares_identity || owns_cgroup || liveness {
                wrong.push(format!("{rel}: {}", line.trim()));
            }
        }
    }
    assert!(wrong.is_empty(), "liveness or cgroup ownership decided outside membership.rs: {wrong:#?}");
    let membership =
        files.iter().find(|(rel, _)| rel == "cookies/membership.rs").expect("src/cookies/membership.rs exists");
    assert!(membership.1.contains("pub fn liveness") && membership.1.contains("pub fn owner"));
}

#[test]
fn architecture_md_maps_every_module() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    // Each module by its path below `src/` (`host/procfs.rs`, `host/kernel/`), each folder too.
    let mut missing: Vec<String> = graph()
        .keys()
        .map(|m| m.replace("::", "/"))
        .filter(|m| !doc.contains(&format!("`{m}.rs`")) && !doc.contains(&format!("`{m}/`")))
        .collect();
    missing.extend(NAMESPACES.iter().map(|f| format!("{f}/")).filter(|f| !doc.contains(&format!("`{f}`"))));
    assert!(missing.is_empty(), "ARCHITECTURE.md's module map lacks {missing:?}");
}

#[test]
fn the_decision_names_no_storage_and_the_cache_no_kernel() {
    let g = graph();
    for (m, deps) in g.iter().filter(|(m, _)| m.starts_with("decide::")) {
        let cache = deps.iter().filter(|d| ["store", "session"].contains(&d.as_str()) || d.starts_with("cookies::"));
        let cache: Vec<&String> = cache.collect();
        assert!(cache.is_empty(), "{m} names the cache: {cache:?}");
    }
    assert!(g.contains_key("decide::policy"), "the scan found no decide/policy: {g:?}");
    let store = &g["store"];
    assert!(!store.contains("host::kernel"), "the cache names the kernel seam: {store:?}");
    assert!(g["values"].is_empty(), "values.rs is a leaf: {:?}", g["values"]);
}

/// The `.rs` files ARCHITECTURE.md names (relative to the repository or to `src/`) and the items
/// it names as a path (`module::item`, `module::Type::member`, `Type::member`), each as written.
fn named_in_architecture_md() -> (Vec<String>, Vec<String>) {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let (mut files, mut paths) = (BTreeSet::new(), BTreeSet::new());
    for (i, span) in doc.split('`').enumerate() {
        if i % 2 == 0 || span.contains(char::is_whitespace) {
            continue;
        }
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if span.ends_with(".rs") && span.chars().all(|c| word(c) || "./-".contains(c)) {
            files.insert(span.to_string());
        }
        let path = span.strip_suffix("()").unwrap_or(span);
        let segments: Vec<&str> = path.split("::").collect();
        if segments.len() > 1
            && segments
                .iter()
                .all(|s| !s.is_empty() && s.chars().all(word) && !s.starts_with(|c: char| c.is_ascii_digit()))
        {
            paths.insert(path.to_string());
        }
    }
    (files.into_iter().collect(), paths.into_iter().collect())
}

/// Whether `text` (production code) defines `name`: an item, a field, an enum variant or an
/// associated const or fn.
fn defines(text: &str, name: &str) -> bool {
    let item = ["fn", "struct", "enum", "trait", "type", "const", "static", "mod"]
        .iter()
        .any(|kw| text.match_indices(&format!("{kw} {name}")).any(|(i, m)| ends_word(text, i + m.len())));
    let member = text.lines().map(str::trim).any(|l| {
        let l = l.strip_prefix("pub ").or_else(|| l.strip_prefix("pub(crate) ")).unwrap_or(l);
        l.strip_prefix(name).is_some_and(|rest| rest.starts_with([':', '(', ',', ' ', '{']) && !rest.starts_with("::"))
    });
    let reexport = text.lines().map(str::trim).filter(|l| l.starts_with("pub use ")).any(|l| {
        l.match_indices(name).any(|(i, _)| {
            ends_word(l, i + name.len()) && !l[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    });
    item || member || reexport
}

fn ends_word(text: &str, at: usize) -> bool {
    text[at..].chars().next().is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
}

/// The other crates whose paths ARCHITECTURE.md may name.
const OTHER_CRATES: [&str; 11] =
    ["std", "libc", "rusqlite", "serde", "serde_json", "clap", "nix", "rustix", "oci_spec", "prost", "i32"];

/// Methods a derive provides, which no source file defines.
const DERIVED: [&str; 1] = ["Cli::command"];

#[test]
fn every_file_and_item_architecture_md_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let production: BTreeMap<String, String> =
        files.iter().map(|(rel, text)| (rel.clone(), production(text))).collect();
    // A module is named from the crate's root (`store::Member`) or, as the text around it says
    // which module it is in, by its own name (`format::judge` for `store/format.rs`; `common::…`
    // for the integration tests' `tests/common/`).
    let mut by_stem: BTreeMap<String, String> = BTreeMap::new();
    for (rel, text) in &production {
        let stem = rel.strip_suffix("/mod.rs").or_else(|| rel.strip_suffix(".rs")).unwrap_or(rel);
        by_stem.entry(stem.rsplit('/').next().unwrap_or(stem).to_string()).or_default().push_str(text);
    }
    let mut common = String::new();
    for entry in std::fs::read_dir(root.join("tests/common")).unwrap() {
        common.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    by_stem.insert("common".into(), common);
    let module_text = |segments: &[&str]| -> Option<String> {
        let base = segments.join("/");
        let from_root =
            [format!("{base}.rs"), format!("{base}/mod.rs")].iter().find_map(|f| production.get(f).cloned());
        // Or by its path inside its folder (`state_dir::choice` for `host/state_dir/choice.rs`).
        let in_folder = || {
            production.iter().find_map(|(rel, text)| {
                let stem = rel.strip_suffix("/mod.rs").or_else(|| rel.strip_suffix(".rs"))?;
                (segments.len() > 1 && stem.ends_with(&format!("/{base}"))).then(|| text.clone())
            })
        };
        from_root
            .or_else(in_folder)
            .or_else(|| (segments.len() == 1).then(|| by_stem.get(segments[0]).cloned()).flatten())
    };
    let all: String = production.values().cloned().collect::<Vec<_>>().join("\n");
    let (named_files, named_paths) = named_in_architecture_md();
    assert!(
        named_files.len() > 30 && named_paths.len() > 30,
        "the scan found too little: {named_files:?} {named_paths:?}"
    );
    let mut stale = Vec::new();
    // A bare file name (in a directory's row of the module map) is a file somewhere below `src/`.
    let somewhere = |f: &str| !f.contains('/') && files.iter().any(|(rel, _)| rel.rsplit('/').next() == Some(f));
    for f in &named_files {
        if !root.join(f).is_file() && !src().join(f).is_file() && !somewhere(f) {
            stale.push(format!("file `{f}`"));
        }
    }
    for p in named_paths.iter().filter(|p| !DERIVED.contains(&p.as_str())) {
        let segments: Vec<&str> = p.split("::").collect();
        // The longest prefix that is a module of the crate; the rest is defined there.
        let found = (1..segments.len()).rev().find_map(|n| Some((module_text(&segments[..n])?, &segments[n..])));
        let ok = match found {
            Some((text, rest)) => rest.iter().all(|name| defines(&text, name)),
            // `Type::member`: the type is defined in the crate, and the member in a file that
            // defines or implements the type (so that another type's `open` does not count).
            None if segments[0].starts_with(|c: char| c.is_ascii_uppercase()) => {
                let ty = segments[0];
                let homes: String = production
                    .values()
                    .filter(|text| {
                        ["struct", "enum", "trait", "type", "impl", "for", ">"].iter().any(|kw| {
                            let pat = format!("{kw} {ty}");
                            text.match_indices(&pat).any(|(i, m)| ends_word(text, i + m.len()))
                        })
                    })
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n");
                defines(&all, ty) && segments[1..].iter().all(|name| defines(&homes, name))
            }
            // Another crate's path: not ours to check; any other lowercase path names a module
            // this crate does not have.
            None => OTHER_CRATES.contains(&segments[0]),
        };
        if !ok {
            stale.push(format!("`{p}`"));
        }
    }
    assert!(stale.is_empty(), "ARCHITECTURE.md names what the code does not have: {stale:#?}");
}

/// The bare identifiers ARCHITECTURE.md writes in backticks (no `::`), as written without a
/// trailing `()`: those that look like a Rust item. A snake_case word with an underscore
/// (`write_existing`), a CamelCase word (`Session`, `CoreSched`), a SCREAMING_SNAKE word with an
/// underscore (`HOOK_BACKLOG`), or any word followed by `()`. A plain lowercase or uppercase word
/// (`hook`, `gc`, `GET`) is a command, a state or a kernel operation as often as an item, and is
/// not checked.
fn bare_identifiers_in_architecture_md() -> Vec<String> {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let mut names = BTreeSet::new();
    for (i, span) in doc.split('`').enumerate() {
        let name = span.strip_suffix("()").unwrap_or(span);
        let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if i % 2 == 0 || name.is_empty() || !name.chars().all(word) || name.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let has_lower = name.chars().any(|c| c.is_ascii_lowercase());
        let has_upper = name.chars().any(|c| c.is_ascii_uppercase());
        let snake = !has_upper && name.contains('_');
        let camel = name.starts_with(|c: char| c.is_ascii_uppercase()) && has_lower && !name.contains('_');
        let screaming = !has_lower && name.contains('_');
        if snake || camel || screaming || span.ends_with("()") {
            names.insert(name.to_string());
        }
    }
    names.into_iter().collect()
}

/// The contents of the string literals of `text` (production code): SQL, environment variables'
/// names, file names. Rough (an escaped quote ends a literal early), which only loses words.
fn string_literals(text: &str) -> Vec<&str> {
    text.split('"').skip(1).step_by(2).collect()
}

/// Words in backticks that are not items of this crate and that no file of the crate spells as
/// a name, each with what it is.
const NOT_CODE: [(&str, &str); 2] = [
    ("PR_SCHED_CORE", "the prctl option, libc's constant (host/kernel/linux.rs passes it)"),
    ("CONFIG_SCHED_CORE", "the kernel's build option for core scheduling"),
];

/// The crates `Cargo.toml` depends on, as Rust spells them (`serde_json`, `env_logger`).
fn dependencies(root: &Path) -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.trim_matches(['[', ']']).ends_with("dependencies");
        } else if let Some((key, _)) = line.split_once('=').filter(|_| in_deps) {
            deps.insert(key.trim().replace('-', "_"));
        }
    }
    deps
}

#[test]
fn every_bare_identifier_architecture_md_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let code: Vec<(String, String)> = files
        .iter()
        .filter(|(rel, _)| !rel.ends_with("_tests.rs"))
        .map(|(rel, t)| (rel.clone(), production(t)))
        .collect();
    let all: String = code.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n");
    // Config keys: the keys of docs/configuration.md's example file (`key = value`, maybe commented).
    let configuration = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let config_keys: BTreeSet<&str> = configuration
        .lines()
        .filter_map(|l| l.trim_start_matches(['#', ' ']).split_once(" = ").map(|(k, _)| k.trim()))
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    assert!(config_keys.contains("fail_closed") && config_keys.contains("sched_idle"), "{config_keys:?}");
    // SQL names (tables, columns, pragmas): the words of `store/`'s string literals.
    let sql: BTreeSet<&str> = code
        .iter()
        .filter(|(rel, _)| rel.starts_with("store/"))
        .flat_map(|(_, t)| string_literals(t))
        .flat_map(|s| s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .collect();
    assert!(sql.contains("user_version") && sql.contains("members"), "the scan of store/'s SQL found too little");
    // Environment variables and other names the code reads as a whole string (`"OCH_FAULT"`).
    let build = std::fs::read_to_string(root.join("build.rs")).unwrap_or_default();
    let literal = |name: &str| {
        let quoted = format!("\"{name}\"");
        all.contains(&quoted) || build.contains(&quoted)
    };
    let crates = dependencies(root);
    assert!(crates.contains("rusqlite") && crates.contains("serde_json"), "{crates:?}");
    let names = bare_identifiers_in_architecture_md();
    assert!(names.len() > 20, "the scan found too few bare identifiers: {names:?}");
    let stale: Vec<&String> = names
        .iter()
        .filter(|name| {
            let item = defines(&all, name) || all.contains(&format!("macro_rules! {name} "));
            let not_code = config_keys.contains(name.as_str())
                || sql.contains(name.as_str())
                || literal(name)
                || crates.contains(name.as_str())
                || NOT_CODE.iter().any(|(word, _)| word == name);
            !item && !not_code
        })
        .collect();
    assert!(stale.is_empty(), "ARCHITECTURE.md names identifiers the code does not have: {stale:?}");
}

#[test]
fn architecture_md_is_a_short_map() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let lines = doc.lines().count();
    assert!(lines <= 300, "ARCHITECTURE.md has {lines} lines, more than 300: function detail belongs in `//!` headers");
    let long: Vec<(usize, usize)> =
        doc.lines().enumerate().map(|(i, l)| (i + 1, l.chars().count())).filter(|(_, n)| *n > 200).collect();
    assert!(long.is_empty(), "ARCHITECTURE.md lines over 200 characters (line, length): {long:?}");
}

#[test]
fn unit_tests_live_in_sibling_files() {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let inline: Vec<&str> = files
        .iter()
        .filter(|(_, text)| {
            text.lines().any(|l| l.trim_start().starts_with("mod tests {") || l.contains(" mod tests {"))
        })
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert!(inline.is_empty(), "unit tests inline instead of in a sibling `*_tests.rs` file: {inline:?}");
    let unattached: Vec<&str> = files
        .iter()
        .filter(|(rel, _)| rel.ends_with("_tests.rs"))
        .map(|(rel, _)| rel.as_str())
        .filter(|rel| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            !files.iter().any(|(_, text)| text.contains(&format!("#[path = \"{name}\"]")))
        })
        .collect();
    assert!(unattached.is_empty(), "test files no module includes: {unattached:?}");
}
