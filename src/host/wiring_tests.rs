use super::*;

fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
    let p = under(root, rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

const PACKAGED: &str = include_str!("../../hooks.d/oci-coresched-hook.json");

#[test]
fn the_packaged_hooks_d_file_reads_as_ours() {
    let t = tempfile::tempdir().unwrap();
    let f = write(t.path(), "/usr/share/containers/oci/hooks.d/oci-coresched-hook.json", PACKAGED);
    let h = read_hook_file(&f).unwrap();
    assert_eq!(h.hook.as_ref().unwrap().path, Path::new("/usr/bin/oci-coresched-hook"));
    assert!(h.hook.as_ref().unwrap().runs_this_binary());
    assert_eq!(h.stages, ["createRuntime", "poststart", "poststop"]);
    assert!(h.always);
}

#[test]
fn hooks_d_keeps_our_files_only_and_says_a_missing_dir() {
    let t = tempfile::tempdir().unwrap();
    let dir = under(t.path(), HOOKS_DIRS[1]);
    assert!(hooks_d(&dir).unwrap().is_none());
    write(t.path(), &format!("{}/other.json", HOOKS_DIRS[1]), r#"{"hook":{"path":"/usr/bin/nvidia-hook"}}"#);
    write(
        t.path(),
        &format!("{}/renamed.json", HOOKS_DIRS[1]),
        r#"{"hook":{"path":"/opt/bin/oci-coresched-hook"},"stages":["createRuntime"]}"#,
    );
    write(t.path(), &format!("{}/oci-coresched-hook.json", HOOKS_DIRS[1]), "{ not json");
    write(t.path(), &format!("{}/notes.txt", HOOKS_DIRS[1]), "x");
    let found = hooks_d(&dir).unwrap().unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(matches!(&found[0], Err(WiringError::Parse { .. })), "{found:?}");
    assert_eq!(found[1].as_ref().unwrap().hook.as_ref().unwrap().path, Path::new("/opt/bin/oci-coresched-hook"));
}

#[test]
fn crio_and_podman_hooks_dir_the_last_file_wins() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(crio_hooks_dirs(t.path()).unwrap(), None);
    assert_eq!(podman_hooks_dirs(t.path()).unwrap(), None);
    write(t.path(), "/etc/crio/crio.conf", "[crio.runtime]\nhooks_dir = [\"/a\"]\n");
    write(t.path(), "/etc/crio/crio.conf.d/10-x.conf", "[crio.runtime]\nhooks_dir = [\"/b\", \"/c\"]\n");
    write(t.path(), "/etc/crio/crio.conf.d/20-y.conf", "[crio.runtime]\nlog_level = \"info\"\n");
    let s = crio_hooks_dirs(t.path()).unwrap().unwrap();
    assert_eq!(s.dirs, [PathBuf::from("/b"), PathBuf::from("/c")]);
    assert_eq!(s.file, Path::new("/etc/crio/crio.conf.d/10-x.conf"));
    write(t.path(), "/etc/containers/containers.conf", "[engine]\nhooks_dir = [\"/p\"]\n");
    assert_eq!(podman_hooks_dirs(t.path()).unwrap().unwrap().dirs, [PathBuf::from("/p")]);
    write(t.path(), "/etc/crio/crio.conf.d/30-z.conf", "[crio.runtime\n");
    assert!(matches!(crio_hooks_dirs(t.path()), Err(WiringError::Parse { .. })));
}

#[test]
fn containerd_base_specs_are_found_in_the_config_and_its_imports() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(containerd_base_specs(t.path()).unwrap(), None);
    write(
        t.path(),
        CONTAINERD_CONFIG,
        &format!(
            "imports = [\"/etc/containerd/conf.d/*.toml\"]\n{}",
            include_str!("../../packaging/containerd/config-1.6-base-runtime-spec.toml")
        ),
    );
    write(
        t.path(),
        "/etc/containerd/conf.d/crun.toml",
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.crun]\nbase_runtime_spec = \"/etc/crun-spec.json\"\n",
    );
    let specs = containerd_base_specs(t.path()).unwrap().unwrap();
    assert_eq!(
        specs,
        [
            (PathBuf::from("/etc/containerd/oci-coresched-hook-base-spec.json"), PathBuf::from(CONTAINERD_CONFIG)),
            (PathBuf::from("/etc/crun-spec.json"), PathBuf::from("/etc/containerd/conf.d/crun.toml")),
        ]
    );
    let spec = write(
        t.path(),
        "/etc/containerd/oci-coresched-hook-base-spec.json",
        include_str!("../../packaging/containerd/base-runtime-spec.json"),
    );
    let hooks = base_spec_hooks(&spec).unwrap();
    let stages: Vec<&str> = hooks.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(stages, ["createRuntime", "poststart", "poststop"]);
}

#[test]
fn same_binary_compares_files_then_bytes() {
    let t = tempfile::tempdir().unwrap();
    let a = write(t.path(), "/a", "binary one");
    let b = write(t.path(), "/b", "binary one");
    let c = write(t.path(), "/c", "binary two");
    let d = write(t.path(), "/d", "short");
    std::os::unix::fs::symlink(&a, t.path().join("link")).unwrap();
    assert!(same_binary(&a, &t.path().join("link")).unwrap());
    assert!(same_binary(&a, &b).unwrap());
    assert!(!same_binary(&a, &c).unwrap());
    assert!(!same_binary(&a, &d).unwrap());
    assert!(same_binary(&a, &t.path().join("missing")).is_err());
}

#[test]
fn engines_are_told_by_their_files() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(Engines::read(t.path()), Engines::default());
    write(t.path(), "/usr/bin/podman", "");
    write(t.path(), CONTAINERD_CONFIG, "");
    write(t.path(), NRI_SOCKET, "");
    let e = Engines::read(t.path());
    assert!(e.podman && e.containerd && e.nri_socket && !e.crio, "{e:?}");
}
