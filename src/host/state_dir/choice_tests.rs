//! The unit tests of `src/host/state_dir/choice.rs`.

use super::*;
use std::collections::HashMap;

/// The initial user namespace.
const INITIAL: &str = "         0          0 4294967295\n";
/// Rootless podman's namespace for host uid 1000 with a subordinate range.
const PODMAN_1000: &str = "         0       1000          1\n         1     100000      65536\n";

#[derive(Default)]
struct Fake {
    euid: u32,
    uid_map: Option<&'static str>,
    vars: HashMap<&'static str, &'static str>,
    dirs: HashMap<&'static str, u32>,
}

impl Host for Fake {
    fn euid(&self) -> u32 {
        self.euid
    }
    fn uid_map(&self) -> Option<String> {
        self.uid_map.map(str::to_string)
    }
    fn var(&self, name: &str) -> Option<OsString> {
        self.vars.get(name).map(OsString::from)
    }
    fn dir_owner(&self, path: &Path) -> Result<u32, DirProblem> {
        self.dirs.get(path.to_str().unwrap()).copied().ok_or(DirProblem::Missing)
    }
}

fn fake(euid: u32, uid_map: Option<&'static str>) -> Fake {
    Fake { euid, uid_map, ..Fake::default() }
}

fn ok(f: &Fake) -> String {
    choose(None, f).unwrap().display().to_string()
}

fn err(f: &Fake) -> String {
    choose(None, f).unwrap_err().to_string()
}

#[test]
fn explicit_dir_is_used_as_given() {
    let f = fake(0, Some(PODMAN_1000));
    assert_eq!(choose(Some(Path::new("/srv/x")), &f).unwrap(), PathBuf::from("/srv/x"));
    let f = fake(1000, Some(INITIAL));
    assert_eq!(choose(Some(Path::new("/srv/x")), &f).unwrap(), PathBuf::from("/srv/x"));
}

#[test]
fn root_in_the_initial_namespace_uses_the_system_dir() {
    assert_eq!(ok(&fake(0, Some(INITIAL))), DEFAULT_STATE_DIR);
    // No /proc: the euid is taken as the host uid.
    assert_eq!(ok(&fake(0, None)), DEFAULT_STATE_DIR);
    // A namespace that maps its uid 0 to host root is root too.
    assert_eq!(ok(&fake(0, Some("0 0 1\n"))), DEFAULT_STATE_DIR);
}

#[test]
fn rootless_podman_uses_run_user_of_the_host_uid() {
    // Inside podman's namespace the user is uid 0 and /run/user/1000 appears owned by uid 0.
    let mut f = fake(0, Some(PODMAN_1000));
    f.dirs.insert("/run/user/1000", 0);
    assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
}

#[test]
fn unprivileged_user_prefers_an_owned_xdg_runtime_dir() {
    let mut f = fake(1000, Some(INITIAL));
    f.vars.insert("XDG_RUNTIME_DIR", "/run/user/1000");
    f.dirs.insert("/run/user/1000", 1000);
    assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
    f.vars.insert("XDG_RUNTIME_DIR", "/tmp/xdg-1000");
    f.dirs.insert("/tmp/xdg-1000", 1000);
    assert_eq!(ok(&f), "/tmp/xdg-1000/oci-coresched-hook");
}

#[test]
fn unusable_xdg_runtime_dir_falls_back_to_run_user() {
    let mut f = fake(1000, Some(INITIAL));
    f.dirs.insert("/run/user/1000", 1000);
    f.vars.insert("XDG_RUNTIME_DIR", "/tmp/someone-else");
    f.dirs.insert("/tmp/someone-else", 1001);
    assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
    f.vars.insert("XDG_RUNTIME_DIR", "relative/dir");
    assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
    f.vars.insert("XDG_RUNTIME_DIR", "");
    assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
}

#[test]
fn no_usable_dir_is_one_error_naming_each_candidate() {
    let f = fake(0, Some(PODMAN_1000));
    assert_eq!(
        err(&f),
        "failed to find a per-user state dir for host uid 1000 (uid 0 in a user namespace): XDG_RUNTIME_DIR \
             is not set, and /run/user/1000 does not exist; pass --state-dir DIR"
    );
    let mut f = fake(1000, Some(INITIAL));
    f.vars.insert("XDG_RUNTIME_DIR", "/run/user/1000");
    f.dirs.insert("/run/user/1000", 0);
    assert_eq!(
        err(&f),
        "failed to find a per-user state dir for uid 1000: XDG_RUNTIME_DIR /run/user/1000 is owned by uid 0, \
             and /run/user/1000 is owned by uid 0; pass --state-dir DIR"
    );
}

#[test]
fn host_uid_follows_the_map() {
    assert_eq!(host_uid(0, Some(PODMAN_1000)), 1000);
    assert_eq!(host_uid(5, Some(PODMAN_1000)), 100004);
    assert_eq!(host_uid(1000, Some(INITIAL)), 1000);
    assert_eq!(host_uid(7, Some("garbage\n")), 7);
    assert_eq!(host_uid(7, None), 7);
}
