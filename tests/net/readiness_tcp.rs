//! The `tcp` readiness check for real (root): `netprobe::slot::gate::guest_net::tcp_connect_in_netns`
//! connects from a thread inside a holder's network namespace, so a port listening only in that
//! namespace is reached and one listening nowhere there fails within its bound, naming the port.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use netprobe::ns::{Holder, HolderOptions, run_in_netns};
use netprobe::slot::gate::guest_net::tcp_connect_in_netns;

#[test]
fn tcp_check_connects_inside_the_netns_only_and_fails_bounded() {
    let _baton = crate::common::baton(module_path!());
    crate::common::require_root();
    let h = Holder::spawn(&HolderOptions {
        exe: PathBuf::from(crate::common::EXE),
        lo_up: true,
    })
    .unwrap();
    let ns = h.netns_path();
    // A listener created in the holder's netns (the socket keeps that netns).
    let l = run_in_netns(&ns, || TcpListener::bind("127.0.0.1:0").unwrap()).unwrap();
    let port = l.local_addr().unwrap().port();
    let ok = tcp_connect_in_netns(&ns, port, Duration::from_secs(5)).unwrap();
    assert!(ok.contains(&format!("127.0.0.1:{port}")), "{ok}");
    // netprobe's own netns has no such listener (unless by chance the same port is used here).
    if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let own = PathBuf::from("/proc/self/ns/net");
        assert!(tcp_connect_in_netns(&own, port, Duration::from_millis(300)).is_err());
    }
    drop(l);
    let t = Instant::now();
    let e = tcp_connect_in_netns(&ns, port, Duration::from_millis(700)).unwrap_err();
    assert!(
        e.contains(&format!("127.0.0.1:{port}")) && e.contains("within 700 ms"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    drop(h);
}
