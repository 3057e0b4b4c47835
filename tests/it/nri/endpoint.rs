//! The plugin's HTTP endpoint (`nri --listen`): ready once configured, not ready while its
//! runtime restarts (and live throughout), its counters on /metrics, and hostile HTTP clients
//! that never hold up the NRI connection: a CreateContainer is answered while they are connected.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixListener;

use oci_coresched_hook::agent::nri::messages::{CreateContainerRequest, CreateContainerResponse};
use oci_coresched_hook::agent::nri::proto::Message;
use oci_coresched_hook::agent::nri::ttrpc::code;

use super::support::{Plugin, Runtime, WAIT, accept, container, plugin_cmd, pod, setup};
use crate::common::http::{get, sample, served_at};
use crate::common::wait::{wait_for, wait_until};

fn served(plugin: &Plugin) -> SocketAddr {
    wait_for("the plugin to log where it serves", WAIT, || served_at(&plugin.log()).ok_or("not yet"))
}

/// The runtime's end of the plugin's next connection on `listener`, registered and configured.
fn configured(listener: &UnixListener) -> Runtime {
    let mut rt = accept(listener);
    rt.expect_register();
    rt.configure();
    rt
}

fn wait_status(addr: SocketAddr, path: &str, want: u16) -> String {
    wait_for(&format!("{path} to answer {want}"), WAIT, || {
        let (status, body) = get(addr, path);
        if status == want { Ok(body) } else { Err(format!("{status}: {body}")) }
    })
}

#[test]
fn readiness_follows_the_runtime_and_liveness_survives_its_restart() {
    let s = setup("endpoint");
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &["--listen", "127.0.0.1:0"]), s.dir.path());
    let addr = served(&plugin);
    // No runtime yet: live, not ready, and /metrics says so.
    assert_eq!(get(addr, "/healthz").0, 200);
    let body = wait_status(addr, "/readyz", 503);
    assert!(body.contains("failed to connect to the NRI socket"), "{body}");
    assert_eq!(sample(&get(addr, "/metrics").1, "oci_coresched_hook_nri_ready"), Some(0.0));

    let listener = UnixListener::bind(&s.socket).unwrap();
    let rt = configured(&listener);
    wait_status(addr, "/readyz", 200);
    let metrics = get(addr, "/metrics").1;
    assert_eq!(sample(&metrics, "oci_coresched_hook_nri_ready"), Some(1.0), "{metrics}");
    assert_eq!(sample(&metrics, "oci_coresched_hook_nri_configurations_total"), Some(1.0), "{metrics}");
    assert!(metrics.contains("oci_coresched_hook_nri_runtime_info{runtime=\"fake\""), "{metrics}");

    // A routine restart: the connection closes, the socket goes and comes back.
    drop(rt);
    drop(listener);
    std::fs::remove_file(&s.socket).unwrap();
    let body = wait_status(addr, "/readyz", 503);
    assert!(body.contains("runtime restarting"), "{body}");
    assert_eq!(get(addr, "/healthz").0, 200, "live while the runtime is away");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let _rt = configured(&listener);
    wait_status(addr, "/readyz", 200);
    let metrics = get(addr, "/metrics").1;
    assert_eq!(sample(&metrics, "oci_coresched_hook_nri_connection_ends_total"), Some(1.0), "{metrics}");
    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    assert!(log.contains("runtime restarting: NRI connection ended"), "{log}");
    let errors: Vec<&str> = log.lines().filter(|l| l.contains(": error: ")).collect();
    // The one error is the start's, before any runtime was there; the restart logs none.
    assert_eq!(errors.len(), 1, "{log}");
}

#[test]
fn hostile_http_clients_never_hold_up_the_nri_connection() {
    let s = setup("endpoint-hostile");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let plugin = Plugin::spawn(plugin_cmd(&s, &["--listen", "127.0.0.1:0"]), s.dir.path());
    let mut rt = configured(&listener);
    let addr = served(&plugin);
    wait_status(addr, "/readyz", 200);

    // Every connection slot taken by clients that trickle, send junk or never finish, and a
    // megabyte of header on top.
    let mut hostile: Vec<TcpStream> = Vec::new();
    for i in 0..40 {
        let mut c = TcpStream::connect(addr).unwrap();
        let _ = c.write_all(match i % 3 {
            0 => b"GET /metr".as_slice(),
            1 => b"GET / HTTP/1.1\r\nX: ",
            _ => b"",
        });
        hostile.push(c);
    }
    let mut huge = TcpStream::connect(addr).unwrap();
    let writer = std::thread::spawn(move || {
        let _ = huge.write_all(b"GET /metrics HTTP/1.1\r\nX-Fill: ");
        let _ = huge.write_all(&vec![b'a'; 1 << 20]);
    });
    let mut junk = TcpStream::connect(addr).unwrap();
    let _ = junk.write_all(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03");

    // The runtime's requests are answered meanwhile.
    for n in 1..=3 {
        let req = CreateContainerRequest {
            pod: Some(pod()),
            container: Some(container(&format!("c{n}"), 0, &[("oci-coresched-hook/group", "solo")])),
        };
        let r = rt.call("CreateContainer", req.to_bytes());
        assert_eq!(r.code(), code::OK, "{r:?}");
        assert!(CreateContainerResponse::decode(&r.payload).unwrap().adjust.is_some());
    }
    // Once the hostile clients' deadline has passed, the endpoint serves again, counting them.
    let metrics = wait_for("a scrape after the hostile clients", WAIT, || {
        let (status, body) = get(addr, "/metrics");
        if status == 200 { Ok(body) } else { Err(status) }
    });
    assert_eq!(sample(&metrics, "oci_coresched_hook_nri_containers_adjusted_total"), Some(3.0), "{metrics}");
    drop(hostile);
    let _ = writer.join();
    wait_until("the plugin to stay up", WAIT, || plugin.log().contains("registered as NRI plugin"));
}

#[test]
fn a_bad_listen_address_is_a_usage_error() {
    let s = setup("endpoint-bad");
    for bad in ["localhost:9642", "99999", "9642x"] {
        let out = crate::fakeworld::run(plugin_cmd(&s, &["--once", "--listen", bad]), b"");
        assert_eq!(out.code(), Some(2), "{out}");
        assert!(out.stderr.contains("--listen"), "{out}");
    }
}

#[test]
fn a_port_in_use_is_logged_and_the_plugin_goes_on() {
    let s = setup("endpoint-busy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &["--listen", &port.to_string()]), s.dir.path());
    let _rt = configured(&listener);
    plugin.wait_for_log(&format!("failed to listen on 127.0.0.1:{port}"));
    let log = plugin.log();
    assert!(log.contains("/metrics, /healthz and /readyz are not served (trying again every 10 s)"), "{log}");
    assert_eq!(plugin.terminate(), Some(0));
}
