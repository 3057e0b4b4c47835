//! The file through which separate processes share one [`super::fake::FakeKernel`] (tests and the
//! non-default `fake-kernel` feature only).
//!
//! Every fake kernel call takes the file's flock. The file starts with a fixed-size header carrying
//! a generation number that each write bumps, so a process whose in-memory state is already that
//! generation (the common case: a hook making a dozen calls in a row) re-reads only the header
//! instead of reading and parsing the whole JSON state. The descriptor stays open between calls;
//! if the path is replaced (a test or benchmark resetting the kernel), it is reopened.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

const MAGIC: &str = "och-fake-kernel gen=";
/// The header: [`MAGIC`], 20 decimal digits, newline.
const HEADER_LEN: usize = MAGIC.len() + 21;

/// What [`SharedFile::acquire`] found.
#[derive(Debug)]
pub(super) enum Acquired {
    /// The file holds the generation already in memory.
    Current,
    /// The file holds another generation: this JSON state replaces the one in memory.
    Changed(Vec<u8>),
    /// The file is empty (new): the state in memory stands.
    Empty,
}

/// The shared state file, locked for the duration of one fake kernel call.
#[derive(Debug)]
pub(super) struct SharedFile {
    path: PathBuf,
    /// The open file and its inode number.
    open: Option<(File, u64)>,
    /// Generation of the state in memory, when it came from (or went to) the file.
    seen: Option<u64>,
    /// Generation the file held at the last [`SharedFile::acquire`] (0: empty); the next
    /// [`SharedFile::store`] writes the one after it.
    on_file: u64,
}

fn bad(path: &std::path::Path, what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{} is not a fake kernel state: {what}", path.display()))
}

impl SharedFile {
    pub(super) fn new(path: PathBuf) -> Self {
        Self { path, open: None, seen: None, on_file: 0 }
    }

    pub(super) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Opens the file, or reopens it when the path now names another file or none.
    fn reopen_if_replaced(&mut self) -> io::Result<()> {
        let current = match (&self.open, std::fs::metadata(&self.path)) {
            (Some((_, ino)), Ok(meta)) => meta.ino() == *ino,
            _ => false,
        };
        if !current {
            let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&self.path)?;
            let ino = f.metadata()?.ino();
            self.open = Some((f, ino));
            self.seen = None;
        }
        Ok(())
    }

    /// The open file (after [`SharedFile::reopen_if_replaced`]).
    fn opened(&self) -> io::Result<&File> {
        self.open.as_ref().map(|(f, _)| f).ok_or_else(|| io::Error::other("fake kernel file is not open"))
    }

    /// Locks the file and says whether the state in memory is current.
    pub(super) fn acquire(&mut self) -> io::Result<Acquired> {
        self.reopen_if_replaced()?;
        let f = self.opened()?;
        f.lock()?;
        let mut header = [0u8; HEADER_LEN];
        let n = read_at_most(f, &mut header, 0)?;
        if n == 0 {
            self.on_file = 0;
            return Ok(Acquired::Empty);
        }
        let generation = parse_header(&header[..n]).ok_or_else(|| bad(&self.path, "bad header"))?;
        let body = if self.seen == Some(generation) {
            None
        } else {
            let len = f.metadata()?.len() as usize;
            let mut body = vec![0u8; len.saturating_sub(HEADER_LEN)];
            f.read_exact_at(&mut body, HEADER_LEN as u64)?;
            Some(body)
        };
        self.on_file = generation;
        self.seen = Some(generation);
        Ok(body.map_or(Acquired::Current, Acquired::Changed))
    }

    /// Writes `json` as the next generation (the file must be acquired).
    pub(super) fn store(&mut self, json: &[u8]) -> io::Result<()> {
        let generation = self.on_file + 1;
        let mut bytes = format!("{MAGIC}{generation:020}\n").into_bytes();
        bytes.extend_from_slice(json);
        let f = self.opened()?;
        f.write_all_at(&bytes, 0)?;
        f.set_len(bytes.len() as u64)?;
        self.on_file = generation;
        self.seen = Some(generation);
        Ok(())
    }

    /// Unlocks the file (kept open for the next call).
    pub(super) fn release(&mut self) {
        if let Some((f, _)) = &self.open {
            let _ = f.unlock();
        }
    }
}

fn read_at_most(f: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], offset + n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

fn parse_header(h: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(h).ok()?;
    text.strip_prefix(MAGIC)?.strip_suffix('\n')?.parse().ok()
}

/// The JSON part of a shared fake kernel file (for tests that look inside it).
pub fn json_of(bytes: &[u8]) -> &[u8] {
    if bytes.len() >= HEADER_LEN && parse_header(&bytes[..HEADER_LEN]).is_some() { &bytes[HEADER_LEN..] } else { bytes }
}

#[cfg(test)]
#[path = "fake_file_tests.rs"]
mod tests;
