//! The proc connector's wire format, subscription and release check, and the real connector on
//! this host's kernel (root; a skip elsewhere, a failure under `CI`).

use super::*;

fn message(what: u32, data: &[u32]) -> Vec<u8> {
    let mut ev = Vec::new();
    ev.extend_from_slice(&what.to_ne_bytes());
    ev.extend_from_slice(&1u32.to_ne_bytes()); // cpu
    ev.extend_from_slice(&12345u64.to_ne_bytes());
    for d in data {
        ev.extend_from_slice(&d.to_ne_bytes());
    }
    let mut cn = Vec::new();
    cn.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    cn.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    cn.extend_from_slice(&[0; 8]);
    cn.extend_from_slice(&(ev.len() as u16).to_ne_bytes());
    cn.extend_from_slice(&[0; 2]);
    cn.extend_from_slice(&ev);
    let mut m = Vec::new();
    m.extend_from_slice(&((NLMSG_HDRLEN + cn.len()) as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&[0; 10]);
    m.extend_from_slice(&cn);
    m
}

fn parsed(d: &[u8]) -> Vec<Parsed> {
    let mut out = Vec::new();
    parse(d, &mut out);
    out
}

#[test]
fn fork_exec_and_ack_are_read_at_their_offsets() {
    assert_eq!(
        parsed(&message(PROC_EVENT_FORK, &[9, 8, 11, 10])),
        [Parsed::Event(Event::Fork { parent: 8, pid: 11, tgid: 10, at_ns: 12345 })]
    );
    assert_eq!(parsed(&message(PROC_EVENT_EXEC, &[7, 7])), [Parsed::Event(Event::Exec { tgid: 7, at_ns: 12345 })]);
    assert_eq!(parsed(&message(PROC_EVENT_NONE, &[1])), [Parsed::Ack(1)]);
    assert_eq!(parsed(&message(0x8000_0000, &[7, 7, 0, 0, 1, 1])), [Parsed::Other]);
}

#[test]
fn several_messages_in_one_datagram_and_garbage() {
    let mut d = message(PROC_EVENT_EXEC, &[5, 5]);
    d.extend(message(PROC_EVENT_FORK, &[5, 5, 6, 6]));
    assert_eq!(parsed(&d).len(), 2);
    // Truncated, too short, a length past the end, another connector index: nothing, no panic.
    for cut in 0..d.len() {
        let _ = parsed(&d[..cut]);
    }
    let mut other = message(PROC_EVENT_EXEC, &[5, 5]);
    other[NLMSG_HDRLEN] = 9;
    assert!(parsed(&other).is_empty());
    let mut long = message(PROC_EVENT_EXEC, &[5, 5]);
    long[0] = 200;
    assert!(parsed(&long).is_empty());
    assert!(parsed(&message(PROC_EVENT_EXEC, &[])).is_empty(), "no pid: dropped");
}

#[test]
fn the_subscription_is_listen_for_the_proc_connector() {
    let m = subscription(&Subscription::All.payload());
    assert_eq!(m.len(), 40);
    assert_eq!(u32_at(&m, 0), Some(40));
    assert_eq!(u32_at(&m, NLMSG_HDRLEN), Some(CN_IDX_PROC));
    assert_eq!(u16_at(&m, NLMSG_HDRLEN + 16), Some(4));
    assert_eq!(u32_at(&m, 36), Some(PROC_CN_MCAST_LISTEN));
}

#[test]
fn the_filtered_subscription_is_a_proc_input_of_fork_and_exec() {
    let m = subscription(&Subscription::Filtered.payload());
    assert_eq!(m.len(), 44);
    assert_eq!(u32_at(&m, 0), Some(44));
    assert_eq!(u16_at(&m, NLMSG_HDRLEN + 16), Some(8), "sizeof(struct proc_input)");
    assert_eq!(u32_at(&m, 36), Some(PROC_CN_MCAST_LISTEN));
    assert_eq!(u32_at(&m, 40), Some(1 | 2), "PROC_EVENT_FORK | PROC_EVENT_EXEC");
}

#[test]
fn only_releases_from_6_6_get_the_filtered_subscription_first() {
    for r in ["6.6.0", "6.12.48+deb13-amd64", "6.18.44-fc-v1098", "7.0", "10.1.2"] {
        assert_eq!(Subscription::for_release(r), Subscription::Filtered, "{r}");
    }
    for r in ["6.5.13", "6.1.0-37-amd64", "5.14.0-503.el9.x86_64", "4.19.0", "", "garbage", "6"] {
        assert_eq!(Subscription::for_release(r), Subscription::All, "{r:?}");
    }
}

/// Opens `c` then waits for the exec of a `/bin/true` child and, after it exited, 300 ms
/// more: the events seen.
fn exec_of_a_child(c: &mut ProcConnector) -> Vec<Event> {
    let mut child = std::process::Command::new("/bin/true").spawn().unwrap();
    let pid = child.id() as Pid;
    let mut seen = Vec::new();
    let _ = crate::test_wait::poll(Duration::from_secs(5), Duration::ZERO, || {
        c.wait(Duration::from_millis(200), &mut seen).unwrap();
        if seen.iter().any(|e| matches!(e, Event::Exec { tgid, .. } if *tgid == pid)) { Ok(()) } else { Err(()) }
    });
    child.wait().unwrap();
    // An observation window, not a wait: the events that follow the exec (its exit) are collected
    // for 300 ms.
    let settle = Instant::now() + Duration::from_millis(300);
    while Instant::now() < settle {
        c.wait(Duration::from_millis(50), &mut seen).unwrap();
    }
    assert!(
        seen.iter().any(|e| matches!(e, Event::Exec { tgid, .. } if *tgid == pid)),
        "no exec event for pid {pid}: {seen:?}"
    );
    seen
}

/// Why a test that needs the real connector cannot run here, from an error of
/// [`ProcConnector::open`]: it must be one of those a host without events gives (no root, no
/// `CONFIG_PROC_EVENTS`). The callers hand it to the suite's skip (`crate::test_skip::skip`, a
/// failure under `CI`).
fn unavailable(e: ProcEventsError) -> String {
    assert!(matches!(e, ProcEventsError::Socket(_) | ProcEventsError::Bind(_) | ProcEventsError::Silent(_)), "{e:?}");
    format!("needs the proc connector as root: {}", crate::error::Chain(&e))
}

/// From 6.6 on the kernel keeps the exit (and every other unwanted) event of the child away.
#[test]
fn a_kernel_from_6_6_sends_only_fork_and_exec() {
    let release = kernel_release();
    if Subscription::for_release(&release) != Subscription::Filtered {
        crate::test_skip::skip(
            "a_kernel_from_6_6_sends_only_fork_and_exec",
            &format!("needs Linux 6.6 or later (the proc connector's event filter); this is {release}"),
        );
        return;
    }
    match ProcConnector::open() {
        Ok(mut c) => {
            assert!(c.filtered(), "kernel {release} took the filtered subscription");
            exec_of_a_child(&mut c);
            assert_eq!(c.unwanted(), 0, "the child's exit and the host's other events are filtered out");
        }
        Err(e) => crate::test_skip::skip("a_kernel_from_6_6_sends_only_fork_and_exec", &unavailable(e)),
    }
}

/// A filter the kernel ignores (a length it does not know, as a kernel before 6.6 ignores
/// `struct proc_input`) leaves the bare subscription sent before it: every event comes.
#[test]
fn an_ignored_filter_leaves_the_subscription_to_every_event() {
    let unknown = [PROC_CN_MCAST_LISTEN.to_ne_bytes(), WANTED_EVENTS.to_ne_bytes(), 0u32.to_ne_bytes()].concat();
    match ProcConnector::open_with(Some(&unknown)) {
        Ok(mut c) => {
            exec_of_a_child(&mut c);
            assert!(c.unwanted() > 0, "every event comes, the child's exit too");
        }
        Err(e) => crate::test_skip::skip("an_ignored_filter_leaves_the_subscription_to_every_event", &unavailable(e)),
    }
}

/// On a kernel with the proc connector and as root (CAP_NET_ADMIN) this opens for real and
/// sees the exec of a child; elsewhere the error must be one of the documented ones, and the
/// test is skipped (a failure under `CI`, which runs as root on such a kernel).
#[test]
fn the_real_connector_reports_an_exec_or_says_why_not() {
    match ProcConnector::open() {
        Ok(mut c) => {
            let child = std::process::Command::new("/bin/true").spawn().unwrap();
            let pid = child.id() as Pid;
            let mut seen = Vec::new();
            let _ = crate::test_wait::poll(Duration::from_secs(5), Duration::ZERO, || {
                c.wait(Duration::from_millis(200), &mut seen).unwrap();
                if seen.iter().any(|e| matches!(e, Event::Exec { tgid, .. } if *tgid == pid)) {
                    Ok(())
                } else {
                    Err(())
                }
            });
            let mut child = child;
            child.wait().unwrap();
            let exec = seen.iter().find_map(|e| match e {
                Event::Exec { tgid, at_ns } if *tgid == pid => Some(*at_ns),
                _ => None,
            });
            let at = exec.unwrap_or_else(|| panic!("no exec event for pid {pid}: {seen:?}"));
            assert!(at <= monotonic_ns(), "event times are CLOCK_MONOTONIC");
        }
        Err(e) => crate::test_skip::skip("the_real_connector_reports_an_exec_or_says_why_not", &unavailable(e)),
    }
}
