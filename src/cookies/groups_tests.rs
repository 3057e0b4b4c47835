use super::*;

fn member(id: &str, group: &str, pid: Pid, seq: i64) -> Member {
    Member { seq, ..Member::new(id, group, pid, 100 + pid as u64) }
}

#[test]
fn a_groups_cookie_is_its_oldest_live_member_holding_one() {
    let ms = [member("a", "g", 10, 1), member("b", "g", 11, 2), member("c", "g", 12, 3)];
    let groups = Groups::new([(&ms[0], 0), (&ms[1], 7), (&ms[2], 9)]);
    let src = groups.source("g").expect("a source");
    assert_eq!(src.container_id, "b");
    assert_eq!(src.init, ms[1].init());
    assert_eq!(groups.cookie("g"), Some(7));
    assert_eq!(groups.off("g"), vec![("a".to_string(), 10), ("c".to_string(), 12)]);
    assert!(groups.is_split("g"));
    assert_eq!(groups.held("g"), BTreeSet::from([7, 9]));
}

#[test]
fn a_group_without_a_cookie_has_no_source_and_nothing_off() {
    let ms = [member("a", "g", 10, 1)];
    let groups = Groups::new([(&ms[0], 0)]);
    assert_eq!(groups.cookie("g"), None);
    assert!(groups.off("g").is_empty());
    assert!(!groups.is_split("g"));
    assert_eq!(groups.with_cookie(), 0);
    assert_eq!(groups.cookie("other"), None);
}

#[test]
fn one_cookie_with_zeros_is_not_split() {
    let ms = [member("a", "g", 10, 1), member("b", "g", 11, 2)];
    let groups = Groups::new([(&ms[0], 5), (&ms[1], 0)]);
    assert!(!groups.is_split("g"));
    assert_eq!(groups.off("g"), vec![("b".to_string(), 11)]);
}

#[test]
fn a_cookie_belongs_to_the_group_whose_holder_joined_first() {
    let ms = [member("a", "young", 10, 5), member("b", "old", 11, 2), member("c", "own", 12, 3)];
    let groups = Groups::new([(&ms[0], 7), (&ms[1], 7), (&ms[2], 8)]);
    assert_eq!(groups.owner_of(7), Some("old"));
    assert_eq!(groups.owner_of(8), Some("own"));
    assert_eq!(groups.owner_of(0), None);
    assert_eq!(groups.owner_of(99), None);
    assert_eq!(groups.borrowed("young"), Some("old"));
    assert_eq!(groups.borrowed("old"), None);
    assert_eq!(groups.with_cookie(), 3);
    assert_eq!(groups.cookies().collect::<Vec<_>>(), vec![("old", 7), ("own", 8), ("young", 7)]);
}

#[test]
fn a_cleared_shim_is_named_and_recognised_in_one_place_and_has_no_cookie() {
    let name = cleared_shim_group("sb1");
    assert_eq!(name, "shim:sb1:cleared");
    assert!(is_cleared_shim(&name));
    assert!(!is_cleared_shim("shim:sb1"));
    let ms = [member("shim:sb1", &name, 10, 1)];
    let groups = Groups::new([(&ms[0], 7)]);
    assert_eq!(groups.cookie(&name), None);
    assert_eq!(groups.owner_of(7), None);
}

#[test]
fn the_groups_holding_a_cookie_are_counted_and_zero_is_held_by_none() {
    let ms = [
        member("a", "g", 10, 1),
        member("b", "g", 11, 2),
        member("c", "h", 12, 3),
        member("d", "h", 13, 4),
        member("e", &cleared_shim_group("s1"), 14, 5),
    ];
    let groups = Groups::new([(&ms[0], 7), (&ms[1], 7), (&ms[2], 7), (&ms[3], 0), (&ms[4], 7)]);
    assert_eq!(groups.holding(7), BTreeMap::from([("g", 2), ("h", 1)]), "a cleared shim's group never counts");
    assert!(groups.holding(0).is_empty());
    assert!(groups.holding(8).is_empty());
}
