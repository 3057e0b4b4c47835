//! A Prometheus textfile, written so that a collector never reads half of one: what `metrics
//! --output FILE` writes, and the follower's `follow.prom`.
//!
//! A temporary file, fsync, mode 0644, rename over the old one, fsync of the directory.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Writes `text` to `path` atomically for a textfile collector: a temporary file in the same
/// directory (whose name does not end in `.prom`, so it is never collected half-written), fsync,
/// mode 0644, rename over `path`, then fsync of the directory.
pub fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "metrics path has no file name"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let write = || -> std::io::Result<()> {
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&tmp)?;
        // The umask may have narrowed the mode; the collector (often another user) must read it.
        f.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    let result = write();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
#[path = "textfile_tests.rs"]
mod tests;
