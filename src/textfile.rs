//! A Prometheus textfile, written so that a collector never reads half of one: what `metrics
//! --output FILE` writes, and the follower's `follow.prom`.

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
mod tests {
    use super::*;

    #[test]
    fn write_replaces_the_file_with_mode_0644() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("coresched.prom");
        write(&path, "a 1\n").unwrap();
        write(&path, "b 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "b 2\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["coresched.prom"], "no temporary file is left behind");
        // A missing directory is an error, and leaves nothing behind.
        assert!(write(&dir.path().join("nope/x.prom"), "c 3\n").is_err());
    }
}
