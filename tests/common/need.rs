//! What a test needs from the host (tools, root, a static busybox), checked once: [`require`] skips
//! (or, under CI, fails) when something is missing.

#[allow(unused_imports)]
use super::*;

/// Something a test needs from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Running as root (runtimes, cgroups, mounts).
    Root,
    /// `runc`.
    Runc,
    /// `crun`.
    Crun,
    /// `podman` (with conmon).
    Podman,
    /// `unshare` (util-linux), for crun's private mount namespace.
    Unshare,
    /// A statically linked busybox for the rootfs.
    BusyboxStatic,
    /// `newuidmap` and `newgidmap`, for rootless podman.
    Uidmap,
}

impl Need {
    fn what(self) -> &'static str {
        match self {
            Need::Root => "root",
            Need::Runc => "runc",
            Need::Crun => "crun",
            Need::Podman => "podman",
            Need::Unshare => "unshare",
            Need::BusyboxStatic => "busybox (static)",
            Need::Uidmap => "newuidmap",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Need::Root => "",
            Need::Runc => "runc",
            Need::Crun => "crun",
            Need::Podman => "podman",
            Need::Unshare => "util-linux",
            Need::BusyboxStatic => "busybox-static",
            Need::Uidmap => "uidmap",
        }
    }

    fn available(self) -> bool {
        match self {
            // SAFETY: geteuid has no preconditions and cannot fail.
            Need::Root => (unsafe { libc::geteuid() }) == 0,
            Need::Runc => which("runc").is_some(),
            Need::Crun => which("crun").is_some(),
            Need::Podman => which("podman").is_some() && which("conmon").is_some(),
            Need::Unshare => which("unshare").is_some(),
            Need::BusyboxStatic => static_busybox().is_some(),
            Need::Uidmap => which("newuidmap").is_some() && which("newgidmap").is_some(),
        }
    }

    fn problem(self) -> String {
        match self {
            Need::Root => "root required (run the tests as root)".to_string(),
            Need::Podman if which("podman").is_some() => "conmon not installed (apt-get install conmon)".to_string(),
            _ => format!("{} not installed (apt-get install {})", self.what(), self.package()),
        }
    }
}

/// Checks what a test needs. When something is missing, [`skip`]s: panics if `CI` is set (a CI
/// host must have it), otherwise prints `SKIPPED <test>: <tool> not installed (apt-get install X)`
/// on stderr and returns false.
pub fn require(test: &str, needs: &[Need]) -> bool {
    for need in needs {
        if !need.available() {
            skip(test, &need.problem());
            return false;
        }
    }
    true
}

/// Finds an executable in `PATH` (and the sbin dirs, where Debian puts runc).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from);
    std::env::split_paths(&path).chain(extra).map(|d| d.join(name)).find(|p| is_executable(p))
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The first statically linked busybox among `$BUSYBOX`, `/bin/busybox`, `/usr/bin/busybox` (a
/// dynamic one would need the host's libc inside the rootfs).
pub fn static_busybox() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(b) = std::env::var_os("BUSYBOX") {
        candidates.push(b.into());
    }
    candidates.push("/bin/busybox".into());
    candidates.push("/usr/bin/busybox".into());
    candidates.into_iter().find(|p| is_executable(p) && is_static_elf(p))
}

/// An ELF file without a `PT_INTERP` program header (static or static-pie).
pub(crate) fn is_static_elf(p: &Path) -> bool {
    let mut head = Vec::new();
    if File::open(p).and_then(|f| f.take(1 << 20).read_to_end(&mut head)).is_err() {
        return false;
    }
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[5] != 1 {
        return false; // not ELF, or not little-endian
    }
    let u16_at = |o: usize| head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| head.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    let u64_at = |o: usize| head.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    let (phoff, phentsize, phnum) = match head[4] {
        2 => (u64_at(0x20), u16_at(0x36), u16_at(0x38)),
        1 => (u32_at(0x1c), u16_at(0x2a), u16_at(0x2c)),
        _ => return false,
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (phoff, phentsize, phnum) else { return false };
    const PT_INTERP: usize = 3;
    for i in 0..phnum {
        match u32_at(phoff + i * phentsize) {
            Some(PT_INTERP) => return false,
            Some(_) => {}
            None => return false,
        }
    }
    true
}

/// What a hook that must give a cookie (createRuntime) reports when the state dir is broken and
/// `fail_closed = true`, on this kernel. The hook probes the kernel before it opens the state dir,
/// so on a kernel without core scheduling (or without SMT) the kernel's message wins; on a kernel
/// with it, the state dir's.
pub fn broken_state_dir_failure_text() -> &'static str {
    const PR_SCHED_CORE: libc::c_int = 62;
    const PR_SCHED_CORE_GET: libc::c_ulong = 0;
    let mut cookie: u64 = 0;
    // SAFETY: PR_SCHED_CORE_GET on the calling thread (pid 0, scope thread 0) writes one u64 to
    // the pointer passed as arg5, which points to a live local.
    let rc = unsafe {
        libc::prctl(PR_SCHED_CORE, PR_SCHED_CORE_GET, 0 as libc::c_ulong, 0 as libc::c_ulong, &mut cookie as *mut u64)
    };
    if rc == 0 {
        return "state dir";
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENODEV) => "core scheduling is unavailable",
        Some(libc::EINVAL) => "core scheduling is not supported",
        _ => "state dir",
    }
}
