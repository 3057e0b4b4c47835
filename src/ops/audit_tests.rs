//! `audit` over the fake kernel and a fake `/proc`: a clean node has no violation, and each kind
//! of violation seeded behind the hook's back is found, at the thread that carries it.

use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::cookies::engine::{Engine, EnsureRequest};
use crate::host::kernel::Scope;
use crate::store::Member;
use crate::test_world::World;
use crate::values::Labels;

impl World {
    /// A container: its init (with 2 more threads) in `cgroup`, ensured into `group` as the hook does.
    fn member(&self, id: &str, group: &str, pid: Pid, cgroup: &str) -> Cookie {
        self.fp.spawn(pid, 1000 + pid as u64, 2, cgroup).unwrap();
        let req = EnsureRequest {
            container_id: id.into(),
            group: group.into(),
            pid,
            labels: Labels { cgroup: Some(cgroup.into()), ..Default::default() },
        };
        self.store.transaction(|tx| Engine::new(&self.kernel, &self.proc, tx).ensure(&req)).unwrap().cookie
    }

    fn audit(&self, roots: &[RuntimeRoot]) -> AuditReport {
        audit(Some(&self.store), &self.kernel, &self.proc, roots, &Config::default()).unwrap()
    }
}

fn found(r: &AuditReport) -> Vec<(Rule, Pid, Pid)> {
    r.violations.iter().map(|v| (v.rule, v.pid, v.tid)).collect()
}

/// Two groups, a host process, everything as the hook left it.
fn node() -> (World, Cookie, Cookie) {
    let w = World::new();
    let web = w.member("a1", "tenant-a/web", 100, "/pod1/a1");
    assert_eq!(w.member("a2", "tenant-a/web", 200, "/pod1/a2"), web);
    let db = w.member("b1", "tenant-a/db", 300, "/pod2/b1");
    assert_ne!(web, db);
    w.fp.spawn(900, 9000, 1, "/system.slice/sshd.service").unwrap();
    (w, web, db)
}

#[test]
fn a_clean_node_has_no_violation() {
    let (w, _, _) = node();
    let r = w.audit(&[]);
    assert!(r.violations.is_empty(), "{}", r.render());
    assert_eq!((r.members, r.groups), (3, 2));
    assert_eq!(r.threads, 3 * 3 + 2, "every thread of the four processes");
    assert!(r.render().ends_with("2 groups, 0 cleared containers, 0 escaped; 0 violations\n"), "{}", r.render());
}

#[test]
fn a_thread_given_another_cookie_behind_the_hooks_back_is_found() {
    let (w, web, _) = node();
    // Thread 102 of a1 makes a cookie of its own (what `coresched new -t pid` does).
    w.kernel.create(102, Scope::Thread).unwrap();
    let r = w.audit(&[]);
    assert_eq!(found(&r), [(Rule::Member, 100, 102)], "{}", r.render());
    let v = &r.violations[0];
    assert_eq!((v.container.as_deref(), v.group.as_deref()), (Some("a1"), Some("tenant-a/web")));
    assert_eq!(v.want, CookieHex(web).to_string());
    assert!(r.render().starts_with("member   pid 100 tid 102 (fake) container a1 group tenant-a/web: want 0x"));
}

#[test]
fn a_foreign_process_joined_to_a_tenants_cookie_is_found() {
    let (w, web, _) = node();
    // `coresched copy -s <a1> -d 900`: a host process takes tenant-a/web's cookie.
    w.kernel.force(900, web);
    let r = w.audit(&[]);
    assert_eq!(found(&r), [(Rule::Outside, 900, 900), (Rule::Outside, 900, 901)], "{}", r.render());
    assert_eq!(r.violations[0].group.as_deref(), Some("tenant-a/web"));
    assert_eq!(r.violations[0].want, "0x0");
    // A cookie that is no group's is none of the audit's business.
    w.kernel.force(900, 0x0ff1_c1a1);
    assert!(w.audit(&[]).violations.is_empty());
}

#[test]
fn two_groups_sharing_a_cookie_are_found() {
    let (w, web, _) = node();
    w.kernel.force(300, web);
    w.store.transaction(|tx| tx.set_cookie("b1", web)).unwrap();
    let r = w.audit(&[]);
    assert_eq!(found(&r), [(Rule::Shared, 300, 300)], "{}", r.render());
    assert!(r.violations[0].group.as_deref().unwrap().contains("tenant-a/db (cookie of tenant-a/web)"));
}

#[test]
fn a_member_on_another_cookie_splits_its_group() {
    let (w, web, _) = node();
    w.kernel.force(200, 0x5_1517);
    let r = w.audit(&[]);
    assert_eq!(
        found(&r),
        [(Rule::Split, 200, 200), (Rule::Member, 200, 201), (Rule::Member, 200, 202)],
        "{}",
        r.render()
    );
    assert_eq!(r.violations[0].want, CookieHex(web).to_string());
}

#[test]
fn the_pods_shims_carry_their_groups_cookie_and_a_cleared_shim_0() {
    let (w, web, _) = node();
    w.fp.spawn(50, 500, 0, "/system.slice/containerd.service").unwrap();
    w.kernel.force(50, web);
    w.store
        .transaction(|tx| tx.upsert_member(&Member { cookie: web, ..Member::new("shim:sb1", "tenant-a/web", 50, 500) }))
        .unwrap();
    assert!(w.audit(&[]).violations.is_empty(), "{}", w.audit(&[]).render());
    w.fp.spawn(60, 600, 0, "/system.slice/containerd.service").unwrap();
    w.store.transaction(|tx| tx.upsert_member(&Member::new("shim:sb2", "shim:sb2:cleared", 60, 600))).unwrap();
    w.kernel.force(60, web);
    let r = w.audit(&[]);
    assert_eq!(found(&r), [(Rule::Cleared, 60, 60)], "{}", r.render());
}

#[test]
fn a_container_the_policy_clears_must_carry_0() {
    let (w, web, _) = node();
    w.fp.spawn(400, 4000, 0, "/pod3/n1").unwrap();
    let root = w.dir.path().join("runc");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runtime-state/runc-state.json");
    let mut st: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    st["id"] = json!("n1");
    st["init_process_pid"] = json!(400);
    st["init_process_start"] = json!(4000);
    st["config"]["labels"] =
        json!(["oci-coresched-hook/policy=none", format!("bundle={}", w.dir.path().join("no-bundle").display())]);
    std::fs::create_dir_all(root.join("n1")).unwrap();
    std::fs::write(root.join("n1/state.json"), serde_json::to_vec(&st).unwrap()).unwrap();
    let roots = [RuntimeRoot::runc(PathBuf::from(&root))];
    let r = w.audit(&roots);
    assert!(r.violations.is_empty(), "{}", r.render());
    assert_eq!(r.cleared, 1);
    w.kernel.force(400, web);
    let r = w.audit(&roots);
    assert_eq!(found(&r), [(Rule::Cleared, 400, 400)], "{}", r.render());
    assert_eq!((r.violations[0].container.as_deref(), r.violations[0].want.as_str()), (Some("n1"), "0x0"));
}

#[test]
fn a_container_whose_hook_failed_open_is_escaped_with_or_without_a_cache() {
    let (w, web, _) = node();
    let hooks = r#"{"poststart": [{"path": "/usr/bin/oci-coresched-hook", "args": ["oci-coresched-hook", "hook"]}]}"#;
    crate::ops::escapes::tests::container(
        &w,
        "a3",
        500,
        hooks,
        json!({"oci-coresched-hook/group": "web", "io.kubernetes.pod.namespace": "tenant-a"}),
    );
    let roots = crate::ops::escapes::tests::roots(&w);
    let r = w.audit(&roots);
    assert_eq!(found(&r), [(Rule::Escaped, 500, 500), (Rule::Escaped, 500, 501)], "{}", r.render());
    assert_eq!(r.escaped.len(), 1);
    assert_eq!((r.escaped[0].id.as_str(), r.escaped[0].group.as_str()), ("a3", "tenant-a/web"));
    assert!(r.render().contains("escaped  container a3 (pid 500) of group tenant-a/web"), "{}", r.render());
    let v = &r.violations[0];
    assert_eq!((v.container.as_deref(), v.have.as_str()), (Some("a3"), "0x0"));
    assert_eq!(v.want, CookieHex(web).to_string(), "its group's cookie");

    // No cache: the members' rules have nothing to judge, the escape is still found.
    let r = audit(None, &w.kernel, &w.proc, &roots, &Config::default()).unwrap();
    assert_eq!(found(&r), [(Rule::Escaped, 500, 500), (Rule::Escaped, 500, 501)], "{}", r.render());
    assert_eq!(r.violations[0].want, "a cookie of its group");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["violations"][0]["rule"], "escaped");
    assert_eq!(json["escaped"][0]["id"], "a3");

    // Given its cookie, it is not.
    w.kernel.force(500, web);
    w.kernel.force(501, web);
    assert!(w.audit(&roots).escaped.is_empty());
}
