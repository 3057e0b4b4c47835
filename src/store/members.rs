//! The member rows: reading them (with the `cpu.idle` cgroup recorded for the same identity),
//! writing one (next in join order, or as the oldest), recording a cookie, removing one.

use rusqlite::{OptionalExtension, params};

use super::{Labels, Member, Store, StoreError, Txn, now};
use crate::values::Cookie;

impl Store {
    fn row_to_member(r: &rusqlite::Row<'_>) -> rusqlite::Result<Member> {
        Ok(Member {
            container_id: r.get(0)?,
            group: r.get(1)?,
            pid: r.get(2)?,
            start_time: r.get::<_, i64>(3)? as u64,
            cookie: r.get::<_, i64>(4)? as u64,
            labels: Labels {
                cgroup: r.get(5)?,
                namespace: r.get(6)?,
                pod_name: r.get(10)?,
                pod_uid: r.get(11)?,
                container_name: r.get(12)?,
                idle_cgroup: r.get(13)?,
            },
            seq: r.get(7)?,
            created_at: r.get(8)?,
            updated_at: r.get(9)?,
        })
    }

    /// Members of `group`, oldest first.
    pub fn members(&self, group: &str) -> Result<Vec<Member>, StoreError> {
        let mut st = self.conn.prepare_cached(MEMBERS_OF).map_err(|e| self.err(e))?;
        let rows = st.query_map([group], Self::row_to_member).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Every member, by group then age.
    pub fn all_members(&self) -> Result<Vec<Member>, StoreError> {
        let mut st = self.conn.prepare_cached(ALL_MEMBERS).map_err(|e| self.err(e))?;
        let rows = st.query_map([], Self::row_to_member).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The cached row of a container.
    pub fn member(&self, container_id: &str) -> Result<Option<Member>, StoreError> {
        let mut st = self.conn.prepare_cached(MEMBER).map_err(|e| self.err(e))?;
        st.query_row([container_id], Self::row_to_member).optional().map_err(|e| self.err(e))
    }
}

/// A read of member rows: the member columns, `m` the members table joined with the `cpu.idle`
/// cgroup recorded for the same identity (a row an older build replaced keeps no stale one), then
/// `$tail`. The join names the identity's columns (`USING`), and a column is qualified only where
/// both tables have it (`cgroup`; a `USING` column unqualified is the members row's): the same
/// read with every column qualified and the join spelled out cost SQLite 25,000 instructions more
/// to prepare.
macro_rules! select_members {
    ($tail:literal) => {
        concat!(
            "SELECT container_id, group_key, pid, start_time, cookie, m.cgroup, namespace, seq, created_at, \
             updated_at, pod_name, pod_uid, container_name, i.cgroup \
             FROM members m LEFT JOIN member_idle i USING (container_id, pid, start_time) ",
            $tail
        )
    };
}

/// The members of group `?1`, oldest first.
pub(super) const MEMBERS_OF: &str = select_members!("WHERE group_key = ?1 ORDER BY seq");
/// Every member, by group then age.
const ALL_MEMBERS: &str = select_members!("ORDER BY group_key, seq");
/// The row of container `?1`.
pub(super) const MEMBER: &str = select_members!("WHERE container_id = ?1");

impl Txn<'_> {
    /// Inserts or updates a member (creating its group row); a new member gets the next `seq`.
    /// Returns the stored row.
    ///
    /// The next `seq` is the last entry of the `members_by_seq` index: without it, `max(seq)`
    /// read every row of a 10,000-container cache (~2.5 MB) on each hook run, and scanning the
    /// `members_by_group` index instead still read ~120 pages of it.
    pub fn upsert_member(&self, m: &Member) -> Result<Member, StoreError> {
        self.write_member(m, "(SELECT coalesce(max(seq), 0) + 1 FROM members INDEXED BY members_by_seq)")
    }

    /// Inserts (or updates) a member as the oldest of the whole cache: its `seq` is below every
    /// other. For a running container found in the runtimes' state that the cache had lost,
    /// older than the members recorded since, so that a group split by the loss converges to the
    /// cookie its older members hold.
    pub fn insert_oldest(&self, m: &Member) -> Result<Member, StoreError> {
        self.write_member(m, "(SELECT coalesce(min(seq), 1) - 1 FROM members INDEXED BY members_by_seq)")
    }

    fn write_member(&self, m: &Member, seq: &str) -> Result<Member, StoreError> {
        let t = now();
        self.conn
            .prepare_cached("INSERT OR IGNORE INTO groups (key, created_at) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![m.group, t]))
            .map_err(|e| self.err(e))?;
        // A container id the cache lacks is inserted, one it has is updated: each of the two plain
        // statements costs SQLite less than half as much to prepare as the one INSERT ... ON
        // CONFLICT DO UPDATE that did both (each prepared alone: the upsert 247,000 instructions,
        // the insert 103,000, the update 118,000), and a run prepares one of them; the read before
        // runs a statement the ensure has already prepared. The caller holds the lock and this
        // runs in its transaction: nothing writes the row between the read and the write.
        let sql = if self.member(&m.container_id)?.is_none() {
            format!(
                "INSERT INTO members (container_id, group_key, pid, start_time, cookie, cgroup, namespace, seq, created_at,
                                      updated_at, pod_name, pod_uid, container_name)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, {seq}, ?8, ?8, ?9, ?10, ?11)"
            )
        } else {
            // The same container id with the same group and init keeps its place in the join
            // order; another group or init is a new join.
            format!(
                "UPDATE members SET
                   seq = CASE WHEN group_key = ?2 AND pid = ?3 AND start_time = ?4 THEN seq ELSE {seq} END,
                   group_key = ?2, pid = ?3, start_time = ?4, cookie = ?5, cgroup = ?6, namespace = ?7, updated_at = ?8,
                   pod_name = ?9, pod_uid = ?10, container_name = ?11
                 WHERE container_id = ?1"
            )
        };
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.execute(params![
                    m.container_id,
                    m.group,
                    m.pid,
                    m.start_time as i64,
                    m.cookie as i64,
                    m.labels.cgroup,
                    m.labels.namespace,
                    t,
                    m.labels.pod_name,
                    m.labels.pod_uid,
                    m.labels.container_name,
                ])
            })
            .map_err(|e| self.err(e))?;
        if let Some(cgroup) = &m.labels.idle_cgroup {
            self.conn
                .prepare_cached(
                    "INSERT INTO member_idle (container_id, pid, start_time, cgroup) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (container_id) DO UPDATE SET
                       pid = excluded.pid, start_time = excluded.start_time, cgroup = excluded.cgroup",
                )
                .and_then(|mut s| s.execute(params![m.container_id, m.pid, m.start_time as i64, cgroup]))
                .map_err(|e| self.err(e))?;
        }
        let mut row = self.member(&m.container_id)?.expect("row just written");
        // A record left for this very init by an earlier ensure that had one (a config changed
        // since) goes; one of another init never joins the row, and `gc` drops it.
        if m.labels.idle_cgroup.is_none() && row.labels.idle_cgroup.is_some() {
            self.conn
                .prepare_cached("DELETE FROM member_idle WHERE container_id = ?1")
                .and_then(|mut s| s.execute([&m.container_id]))
                .map_err(|e| self.err(e))?;
            row.labels.idle_cgroup = None;
        }
        Ok(row)
    }

    /// Records the cookie seen on a member now.
    pub fn set_cookie(&self, container_id: &str, cookie: Cookie) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE members SET cookie = ?2, updated_at = ?3 WHERE container_id = ?1")
            .and_then(|mut s| s.execute(params![container_id, cookie as i64, now()]))
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Removes a container; drops its group when that leaves it empty. Returns the removed row.
    /// Its `cpu.idle` cgroup goes with it when it had one; a record of another init of the same
    /// container id, which never joined the row, is left to `gc` ([`Txn::drop_stale_idle`]), so
    /// that removing a member without one (nearly all) costs no statement more.
    pub fn remove_member(&self, container_id: &str) -> Result<Option<Member>, StoreError> {
        let Some(m) = self.member(container_id)? else { return Ok(None) };
        let idle = m.labels.idle_cgroup.is_some().then_some("DELETE FROM member_idle WHERE container_id = ?1");
        for sql in std::iter::once("DELETE FROM members WHERE container_id = ?1").chain(idle) {
            self.conn.prepare_cached(sql).and_then(|mut s| s.execute([container_id])).map_err(|e| self.err(e))?;
        }
        self.drop_group_if_empty(&m.group)?;
        Ok(Some(m))
    }

    /// Deletes the `cpu.idle` cgroups recorded for a member identity the cache no longer has (an
    /// older build removed or replaced the row without knowing of them). Returns how many.
    pub fn drop_stale_idle(&self) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(
                "DELETE FROM member_idle WHERE NOT EXISTS (SELECT 1 FROM members m WHERE m.container_id = member_idle.container_id
                     AND m.pid = member_idle.pid AND m.start_time = member_idle.start_time)",
            )
            .and_then(|mut s| s.execute([]))
            .map_err(|e| self.err(e))
    }
}
