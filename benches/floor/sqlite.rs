//! Benchmark floor (`make bench`): the least a hook that keeps its groups in SQLite can cost. It
//! reads the state from stdin, takes the state dir's flock, opens the cache the way the hook does
//! (exclusive locking, WAL, `synchronous = OFF`), reads the members of one group, writes one row,
//! commits and closes. No config, no decision, no `/proc`, no kernel calls. Whatever the hook
//! costs above this is its own work; below it no SQLite-backed design can go.
//!
//! Usage: `floor-sqlite STATE_DIR GROUP` (the benchmark's seeded cache).

use std::io::Read;

fn main() {
    let mut args = std::env::args().skip(1);
    let (dir, group) = match (args.next(), args.next()) {
        (Some(d), Some(g)) => (std::path::PathBuf::from(d), g),
        _ => panic!("usage: floor-sqlite STATE_DIR GROUP"),
    };
    let mut state = Vec::new();
    std::io::stdin().read_to_end(&mut state).expect("read stdin");
    assert!(!state.is_empty(), "floor-sqlite: no state on stdin");
    let lock = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(dir.join("lock")).unwrap();
    lock.lock().unwrap();
    let conn = rusqlite::Connection::open(dir.join("cache.db")).unwrap();
    conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE; PRAGMA synchronous = OFF; BEGIN IMMEDIATE;").unwrap();
    let members: Vec<(i64, i64, i64)> = conn
        .prepare("SELECT pid, start_time, cookie FROM members WHERE group_key = ?1 ORDER BY seq")
        .unwrap()
        .query_map([&group], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!members.is_empty(), "floor-sqlite: group {group} has no members in the cache");
    conn.execute(
        "INSERT INTO failures (reason, count) VALUES ('bench-floor', 1) \
         ON CONFLICT (reason) DO UPDATE SET count = count + 1",
        [],
    )
    .unwrap();
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);
    drop(lock);
}
