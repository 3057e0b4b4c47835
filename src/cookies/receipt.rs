//! Receipts: what an ensure proved, kept beside the cache in `done/<container id>` so that a later
//! stage of the same container (poststart, or createRuntime after old podman's prestart) can see
//! that the work is done without opening SQLite.
//!
//! A receipt is written under the state lock, after the transaction that recorded the container
//! committed. It names the init (pid and start time), the group, the cookie and the cache file
//! (device and inode) that holds the row. It is trusted only when all of these still hold: the
//! decision names the same group, the cache is the same file (a damaged cache moved aside and
//! replaced is another inode), the init is the same process before and after a GET, and the GET
//! shows the receipt's cookie. Anything else, or any error, sends the caller down the full path
//! under the lock, which repairs what is wrong. Rows are never removed for a live init that keeps
//! its cookie under the same decision (a clear sets cookie 0; gc, a join and a deferred forget
//! remove only dead or reused inits), so a receipt that passes these checks has its row.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::host::kernel::CoreSched;
use crate::host::procfs::{ProcFs, TaskId};
use crate::host::state_dir::StateDir;
use crate::values::{Cookie, Pid};

/// The directory of receipts inside the state dir.
pub const DIR: &str = "done";

/// What an ensure proved about one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The group the row records.
    pub group: String,
    /// The init, by pid and start time.
    pub init: TaskId,
    /// The cookie the init held, verified by GET.
    pub cookie: Cookie,
    /// The cache file holding the row: (device, inode).
    pub cache: (u64, u64),
}

fn path(state_dir: &Path, container_id: &str) -> PathBuf {
    state_dir.join(DIR).join(container_id)
}

/// The cache file's identity: (device, inode).
pub fn cache_identity(db: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(db)?;
    Ok((m.dev(), m.ino()))
}

impl Receipt {
    fn render(&self) -> String {
        let (dev, ino) = self.cache;
        let TaskId { pid, start_time } = self.init;
        format!("v1 {pid} {start_time} {:x} {dev} {ino} {}\n", self.cookie, self.group)
    }

    fn parse(text: &str) -> Option<Self> {
        let mut f = text.strip_suffix('\n')?.split(' ');
        if f.next()? != "v1" {
            return None;
        }
        let pid = f.next()?.parse().ok()?;
        let start_time = f.next()?.parse().ok()?;
        let cookie = Cookie::from_str_radix(f.next()?, 16).ok()?;
        let cache = (f.next()?.parse().ok()?, f.next()?.parse().ok()?);
        let group = f.next()?.to_string();
        if f.next().is_some() || group.is_empty() {
            return None;
        }
        Some(Self { group, init: TaskId { pid, start_time }, cookie, cache })
    }
}

/// Writes the receipt of `container_id` (the caller holds the lock and has committed the row).
pub fn write(state_dir: &Path, container_id: &str, receipt: &Receipt) -> std::io::Result<()> {
    // A reader never runs while its own container's createRuntime writes: a torn file can only be
    // one that fails to parse, which sends the reader down the full path.
    crate::host::state_dir::create_in(&state_dir.join(DIR), container_id)?.write_all(receipt.render().as_bytes())
}

/// Records the receipt of an ensure of `container_id` into `group` that just committed (the
/// caller still holds the lock): its init `pid` as `/proc` shows it now, the `cookie`, and the
/// cache file's identity. Best effort: without it, the next stage takes the full path.
pub fn record(proc: &ProcFs, dir: &StateDir, container_id: &str, group: &str, pid: Pid, cookie: Cookie) {
    let written = proc.task(pid).and_then(|init| {
        let init = init.ok_or_else(|| std::io::Error::other(format!("pid {pid} is gone")))?;
        let cache = cache_identity(&dir.db_path())?;
        write(dir.path(), container_id, &Receipt { group: group.to_string(), init, cookie, cache })
    });
    if let Err(e) = written {
        log::debug!("failed to write the receipt of container {container_id}: {e}");
    }
}

/// Removes the receipt of `container_id`, if any.
pub fn remove(state_dir: &Path, container_id: &str) {
    match std::fs::remove_file(path(state_dir, container_id)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!("failed to remove the receipt of container {container_id}: {e}"),
    }
}

/// The receipt of `container_id`: `None` when there is none (or it cannot be opened, e.g. a
/// symlink); a receipt that is there but does not parse (one torn by a crash, one a build of
/// another version wrote) is said in one line, and `None` too: the caller's full path writes
/// it anew.
fn read(state_dir: &Path, container_id: &str) -> Option<Receipt> {
    let mut buf = [0u8; 512];
    let file = path(state_dir, container_id);
    let mut f = OpenOptions::new().read(true).custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW).open(&file).ok()?;
    let n = std::io::Read::read(&mut f, &mut buf).ok()?;
    let parsed = std::str::from_utf8(&buf[..n]).ok().and_then(Receipt::parse);
    if parsed.is_none() {
        log::info!(
            "container {container_id}: its receipt {} is not one this build reads (torn, or another version's); \
             taking the full path, which writes it anew",
            file.display()
        );
    }
    parsed
}

/// The cookie `pid` holds when `container_id`'s receipt proves that its ensure into `group` is
/// done and still holds (see the module documentation); `None` sends the caller down the full path.
pub fn holds<K: CoreSched>(
    kernel: &K,
    proc: &ProcFs,
    state_dir: &Path,
    container_id: &str,
    group: &str,
    pid: Pid,
) -> Option<Cookie> {
    let r = read(state_dir, container_id)?;
    if r.group != group || r.init.pid != pid || r.cookie == 0 {
        return None;
    }
    if cache_identity(&state_dir.join(crate::host::state_dir::DB_FILE)).ok()? != r.cache {
        return None;
    }
    crate::cookies::membership::holds(proc, kernel, r.init, r.cookie).then_some(r.cookie)
}

#[cfg(test)]
#[path = "receipt_tests.rs"]
mod tests;
