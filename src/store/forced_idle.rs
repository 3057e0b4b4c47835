//! The forced idle of core scheduling the cache keeps: each group's total (`group_force_idle`),
//! which only grows, and each member's cgroup's last reading (`member_force_idle`, valid for the
//! member with that identity only), from which the next reading's growth is added to the group.
//!
//! The code spells it "forced idle" throughout; the two tables keep the names the cache format
//! stores them under (format 6: `group_force_idle`, `member_force_idle`, after the kernel's
//! `core_sched.force_idle_usec`), as do the JSON keys and metric names users read.

use rusqlite::{OptionalExtension, params};

use super::{Member, Store, StoreError, Txn};

impl Store {
    /// The reading last recorded for member `m`'s cgroup (for this very init), µs.
    pub fn forced_idle_seen(&self, m: &Member) -> Result<Option<u64>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT usec FROM member_force_idle WHERE container_id = ?1 AND pid = ?2 AND start_time = ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![m.container_id, m.pid, m.start_time as i64], |r| r.get::<_, i64>(0)).optional()
            })
            .map(|v| v.map(|v| v as u64))
            .map_err(|e| self.err(e))
    }

    /// Every group's forced idle total, µs, by group.
    pub fn group_forced_idle(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT group_key, usec FROM group_force_idle ORDER BY group_key")
            .map_err(|e| self.err(e))?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }
}

impl Txn<'_> {
    /// Records that member `m`'s cgroup `cgroup` reads `usec`, and adds `grown` to its group's
    /// total.
    pub fn add_forced_idle(&self, m: &Member, cgroup: &str, usec: u64, grown: u64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO member_force_idle (container_id, pid, start_time, cgroup, usec) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (container_id) DO UPDATE SET
                   pid = excluded.pid, start_time = excluded.start_time, cgroup = excluded.cgroup, usec = excluded.usec",
            )
            .and_then(|mut s| s.execute(params![m.container_id, m.pid, m.start_time as i64, cgroup, usec as i64]))
            .map_err(|e| self.err(e))?;
        if grown > 0 {
            self.conn
                .prepare_cached(
                    "INSERT INTO group_force_idle (group_key, usec) VALUES (?1, ?2)
                     ON CONFLICT (group_key) DO UPDATE SET usec = usec + excluded.usec",
                )
                .and_then(|mut s| s.execute(params![m.group, grown as i64]))
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Drops the readings of member identities the cache no longer has. Returns how many.
    pub fn drop_stale_forced_idle(&self) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(
                "DELETE FROM member_force_idle WHERE NOT EXISTS (SELECT 1 FROM members m
                     WHERE m.container_id = member_force_idle.container_id AND m.pid = member_force_idle.pid
                       AND m.start_time = member_force_idle.start_time)",
            )
            .and_then(|mut s| s.execute([]))
            .map_err(|e| self.err(e))
    }
}
