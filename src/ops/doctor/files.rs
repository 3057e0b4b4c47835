//! The files' facts: `config` (valid or the error naming the key), `state_dir` (there and usable,
//! never created) and `cache` (its format and revision, read as it is on disk).

use crate::host::state_dir::{DB_FILE, StateDir};
use crate::store::peek::{self, Kind};
use crate::store::{FORMAT, REVISION};

use super::{Fact, Level, Node};

/// The facts of the config, the state dir and the cache.
pub fn facts<K>(node: &Node<'_, K>) -> Vec<Fact> {
    let mut out = vec![config_fact(node)];
    out.extend(state_facts(node));
    out
}

fn config_fact<K>(node: &Node<'_, K>) -> Fact {
    let c = &node.config_file;
    let path = c.path.display();
    match c.error {
        Some(e) => Fact::always(
            "config",
            Level::Fail,
            format!(
                "{}; every hook fails {} until it is fixed",
                crate::error::Chain(e),
                if node.config.fail_closed { "closed (fail_closed = true is kept)" } else { "open" }
            ),
        ),
        None if !c.explicit && !c.path.exists() => {
            Fact::always("config", Level::Ok, format!("no config file at {path}: the defaults apply"))
        }
        None => Fact::always("config", Level::Ok, format!("{path} is valid")),
    }
    .with_detail(vec![format!(
        "fail_closed = {}, lock_timeout_ms = {}, sched_ext_guard = {}",
        node.config.fail_closed, node.config.lock_timeout_ms, node.config.sched_ext_guard
    )])
}

fn state_facts<K>(node: &Node<'_, K>) -> Vec<Fact> {
    if let Some(e) = &node.state_dir_error {
        return vec![Fact::new("state_dir", Level::Fail, e.clone())];
    }
    let dir = &node.sys.state_dir;
    let shown = dir.display();
    let state = match StateDir::existing(dir) {
        Ok(Some(_)) => Fact::new("state_dir", Level::Ok, format!("{shown} is there and usable"))
            .with_detail(vec!["a directory of this user, open to nobody else".into()]),
        Ok(None) => {
            return vec![Fact::new(
                "state_dir",
                Level::Warn,
                format!("{shown} does not exist: no container has run the hook here yet, or --state-dir is mistyped"),
            )];
        }
        Err(e) => {
            return vec![Fact::new(
                "state_dir",
                Level::Fail,
                format!("{}: every hook fails on it", crate::error::Chain(&e)),
            )];
        }
    };
    let db = dir.join(DB_FILE);
    let cache = if !db.exists() {
        Fact::new("cache", Level::Info, format!("no cache yet ({}): the first hook run creates it", db.display()))
    } else {
        match peek::peek(&db) {
            Ok(p) => {
                let numbers = format!(
                    "format {}, revision {}",
                    p.format,
                    p.revision.map_or_else(|| "none".to_string(), |r| r.to_string())
                );
                let this = format!("this binary writes format {FORMAT}, revision {REVISION}");
                let (level, what) = match p.kind {
                    Kind::Current => (Level::Ok, format!("{} is current ({numbers})", db.display())),
                    Kind::Empty => (Level::Info, format!("{} is empty: the next hook run fills it", db.display())),
                    Kind::Older => (
                        Level::Info,
                        format!(
                            "{} was written by an older build ({numbers}): the next opener upgrades it",
                            db.display()
                        ),
                    ),
                    Kind::Newer => (
                        Level::Warn,
                        format!(
                            "{} was written by a newer build ({numbers}): this binary leaves it in place and records \
                             nothing (finish the upgrade: restart every oci-coresched-hook service)",
                            db.display()
                        ),
                    ),
                    Kind::Damaged(why) => (
                        Level::Warn,
                        format!("{} is not a usable cache ({why}): the next opener moves it aside", db.display()),
                    ),
                };
                Fact::new("cache", level, what).with_detail(vec![this])
            }
            Err(e) => Fact::new("cache", Level::Warn, format!("failed to read the cache: {}", crate::error::Chain(&e))),
        }
    };
    vec![state, cache]
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
