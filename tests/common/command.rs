//! The one process runner ([`run_command`]): stdin from `/dev/null` or written from a thread,
//! stdout and stderr to files, a timeout, and the [`Output`] a failing check prints.

#[allow(unused_imports)]
use super::*;

/// One finished (or timed-out) command.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, `{:?}`-quoted.
    pub cmdline: String,
    /// Exit status; `None` when it timed out and was killed.
    pub status: Option<ExitStatus>,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl Output {
    /// The exit code (`None`: killed by a signal or timed out).
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// The signal that killed it (`None`: it exited, or timed out).
    pub fn signal(&self) -> Option<i32> {
        self.status.and_then(|s| s.signal())
    }

    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code() == Some(0)
    }
}

pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 8000;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut cut = s.len() - MAX;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[... {cut} bytes cut ...]{}", &s[cut..])
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            None => "TIMED OUT (killed)".to_string(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("{s}"),
            },
        };
        writeln!(f, "$ {}", self.cmdline)?;
        writeln!(f, "  status: {status} after {:.3}s", self.elapsed.as_secs_f64())?;
        writeln!(f, "  --- stdout ---\n{}", clip(&self.stdout))?;
        writeln!(f, "  --- stderr ---\n{}", clip(&self.stderr))
    }
}

pub(crate) static SEQ: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn seq() -> usize {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// A file for a command's stdout or stderr: `dir/name` (kept with a kept temp dir), or an
/// anonymous temp file without `dir`. A file, not a pipe: a detached container inherits it, and
/// a pipe would keep the reader waiting for it.
pub(crate) fn capture_file(dir: Option<&Path>, name: &str) -> File {
    match dir {
        Some(d) => {
            let path = d.join(name);
            File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("create {}: {e}", path.display()))
        }
        None => tempfile::tempfile().expect("anonymous temp file"),
    }
}

/// What the command wrote to `file` (its copy of the descriptor shares the offset: rewind).
pub(crate) fn read_back(mut file: File) -> String {
    let mut bytes = Vec::new();
    let _ = file.rewind().and_then(|()| file.read_to_end(&mut bytes));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The one way the tests run a process: `cmd` with stdin `/dev/null`, or `input` written from a
/// thread; in its own process group, killed with the group after `timeout`; stdout and stderr in
/// files (`cmd-<n>.stdout`, `cmd-<n>.stderr` under `dir`, or anonymous ones without `dir`).
pub fn run_command(dir: Option<&Path>, mut cmd: Command, input: Option<Vec<u8>>, timeout: Duration) -> Output {
    let n = seq();
    let out_file = capture_file(dir, &format!("cmd-{n}.stdout"));
    let err_file = capture_file(dir, &format!("cmd-{n}.stderr"));
    let cmdline = format!("{cmd:?}");
    cmd.stdout(out_file.try_clone().expect("dup stdout file"));
    cmd.stderr(err_file.try_clone().expect("dup stderr file"));
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("failed to spawn {cmdline}: {e}"));
    let writer = input.map(|bytes| {
        let mut stdin = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            // The child may exit without reading everything: a broken pipe is not our failure.
            let _ = stdin.write_all(&bytes);
        })
    });
    let exited = wait::poll(timeout, Duration::from_millis(5), || match child.try_wait() {
        Ok(Some(status)) => Ok(status),
        Ok(None) => Err(()),
        Err(e) => panic!("failed to wait for {cmdline}: {e}"),
    });
    let status = match exited {
        Ok(status) => Some(status),
        Err(()) => {
            // SAFETY: kill(2) with a negative pid signals the process group we created with
            // process_group(0); it has no memory-safety preconditions.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            None
        }
    };
    let elapsed = start.elapsed();
    if let Some(w) = writer {
        let _ = w.join();
    }
    Output { cmdline, status, stdout: read_back(out_file), stderr: read_back(err_file), elapsed }
}
