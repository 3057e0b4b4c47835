//! The tolerant `config.json` reader: what it takes, what it skips, and how it fails.

use super::*;

fn p() -> &'static Path {
    Path::new("/b/config.json")
}

fn ok(doc: &str) -> BundleConfig {
    parse(p(), doc.as_bytes()).unwrap_or_else(|e| panic!("{doc}: {e}"))
}

#[test]
fn takes_annotations_and_cgroups_path_and_nothing_else() {
    let c = ok(r#"{"ociVersion":"9.9.9","annotations":{"a":"1","b":""},"linux":{"cgroupsPath":"/kubepods/x"}}"#);
    let ann: BTreeMap<String, String> = [("a", "1"), ("b", "")].map(|(k, v)| (k.to_string(), v.to_string())).into();
    assert_eq!(c, BundleConfig { annotations: ann, cgroups_path: Some("/kubepods/x".into()), names_hook: false });
    assert_eq!(ok("{}"), BundleConfig::default());
    assert_eq!(ok(r#"{"annotations":null,"linux":null}"#), BundleConfig::default());
    assert_eq!(ok(r#"{"linux":{"cgroupsPath":null}}"#).cgroups_path, None);
    assert_eq!(ok(r#"{"linux":{"cgroupsPath":""}}"#).cgroups_path, None, "empty is unset, as runc takes it");
}

#[test]
fn values_it_does_not_use_are_never_judged() {
    let c = ok(r#"{
        "ociVersion": "1.3.0",
        "process": {"capabilities": {"bounding": ["CAP_FROM_2030", 7, null]}, "newKnob": {"x": [1.5e300]}},
        "linux": {
            "seccomp": {"defaultAction": "SCMP_ACT_FROM_THE_FUTURE", "syscalls": [{"names": ["x"], "action": 3}]},
            "resources": "not even an object",
            "cgroupsPath": "kubepods-besteffort-pod1.slice:cri-containerd:c1",
            "intelRdtNext": true
        },
        "vendor.example/extension": [[[]]]
    }"#);
    assert_eq!(c.cgroups_path.as_deref(), Some("kubepods-besteffort-pod1.slice:cri-containerd:c1"));
    // A repeated key: the last one wins, as in runc's decoder.
    let c = ok(r#"{"linux":{"cgroupsPath":"/a"},"annotations":{"k":"1"},"linux":{"cgroupsPath":"/b"}}"#);
    assert_eq!(c.cgroups_path.as_deref(), Some("/b"));
    assert_eq!(c.annotations.len(), 1);
}

#[test]
fn a_field_it_uses_with_the_wrong_type_is_an_error_naming_file_and_field() {
    let cases: &[(&str, &str)] = &[
        ("", "failed to parse bundle config /b/config.json: EOF while parsing a value"),
        ("{", "failed to parse bundle config /b/config.json: EOF while parsing an object"),
        ("[]", "failed to parse bundle config /b/config.json: invalid type: sequence, expected a JSON object"),
        ("7", "invalid type: integer `7`, expected a JSON object"),
        (r#"{"linux":"x"}"#, "expected `linux` to be an object"),
        (r#"{"linux":["/x"]}"#, "invalid type: sequence, expected `linux` to be an object"),
        (r#"{"annotations":[]}"#, "failed to parse bundle config /b/config.json: `annotations` is not an object"),
        (r#"{"annotations":{"k":1}}"#, "`annotations` has a non-string value for key \"k\""),
        (
            r#"{"linux":{"cgroupsPath":17}}"#,
            "failed to parse bundle config /b/config.json: `linux.cgroupsPath` is not a string",
        ),
    ];
    for (doc, want) in cases {
        let err = crate::error::Chain(&parse(p(), doc.as_bytes()).unwrap_err()).to_string();
        assert!(err.contains(want), "{doc:?}: {err:?} lacks {want:?}");
    }
}

#[test]
fn messages_are_bounded_and_say_the_cause_once() {
    let doc = format!(r#"{{"annotations":{{"{}":1}}}}"#, "k".repeat(100_000));
    let err = crate::error::Chain(&parse(p(), doc.as_bytes()).unwrap_err()).to_string();
    assert!(err.len() < 200, "{} bytes", err.len());
    let chain = format!("{:#}", anyhow::Error::from(parse(p(), b"{").unwrap_err()));
    assert_eq!(chain.matches("EOF while parsing").count(), 1, "{chain}");
    let chain = format!("{:#}", anyhow::Error::from(read(Path::new("/nonexistent/config.json")).unwrap_err()));
    assert_eq!(chain.matches("No such file").count(), 1, "{chain}");
}

#[test]
fn reads_are_bounded_and_a_missing_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let mut doc = br#"{"linux":{"cgroupsPath":"/a"},"pad":""#.to_vec();
    doc.resize(MAX_CONFIG_BYTES as usize - 2, b'x');
    doc.extend_from_slice(b"\"}");
    std::fs::write(&path, &doc).unwrap();
    assert_eq!(read(&path).unwrap().cgroups_path.as_deref(), Some("/a"), "exactly the limit is read");
    doc.insert(doc.len() - 2, b'x');
    std::fs::write(&path, &doc).unwrap();
    let err = read(&path).unwrap_err();
    assert!(matches!(err, BundleError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains(&path.display().to_string()), "{err}");
    std::fs::remove_file(&path).unwrap();
    let err = read(&path).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(
        crate::error::Chain(&err).to_string(),
        format!("failed to read bundle config {}: No such file or directory (os error 2)", path.display())
    );
}

#[test]
fn the_runtime_copy_of_an_annotation_wins() {
    let c = ok(r#"{"annotations":{"a":"file","b":"file"}}"#);
    let mut ann: BTreeMap<String, String> = [("a".to_string(), "state".to_string())].into();
    c.complete(&mut ann);
    assert_eq!(ann, [("a", "state"), ("b", "file")].map(|(k, v)| (k.to_string(), v.to_string())).into());
}

#[test]
fn hooks_name_this_hook_only_at_a_stage_that_gives_the_cookie() {
    let ok = |doc: &str| parse_with(p(), doc.as_bytes(), Hooks::Read).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let entry = |stage: &str, path: &str, args: &str| {
        format!(r#"{{"hooks": {{"{stage}": [{{"path": "/bin/true"}}, {{"path": "{path}", "args": {args}}}]}}}}"#)
    };
    let ours = r#"["oci-coresched-hook", "hook", "--stage", "createRuntime"]"#;
    assert!(ok(&entry("createRuntime", "/usr/bin/oci-coresched-hook", ours)).names_hook);
    assert!(ok(&entry("poststart", "/opt/x/oci-coresched-hook", r#"["oci-coresched-hook", "hook"]"#)).names_hook);
    assert!(ok(&entry("prestart", "/usr/local/bin/renamed", ours)).names_hook, "args[0] names it");
    assert!(!ok(&entry("poststop", "/usr/bin/oci-coresched-hook", ours)).names_hook, "poststop gives no cookie");
    assert!(!ok(&entry("createRuntime", "/usr/bin/oci-coresched-hook", r#"["oci-coresched-hook", "gc"]"#)).names_hook);
    assert!(!ok(&entry("createRuntime", "/usr/bin/other", r#"["other", "hook"]"#)).names_hook);
    assert!(!ok(r#"{"hooks": {"createRuntime": "x"}}"#).names_hook, "a malformed hooks is only not ours");
    assert!(!ok(r#"{"hooks": 7}"#).names_hook);
    assert!(!ok("{}").names_hook);
    let doc = entry("createRuntime", "/usr/bin/oci-coresched-hook", ours);
    assert!(!parse(p(), doc.as_bytes()).unwrap().names_hook, "the hook's own read skips hooks");
}
