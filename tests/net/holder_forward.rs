//! Real (root) tests of the holder's forwarder for published ports (`netprobe __holder
//! --publish FD:GUEST_PORT`, `netprobe::ns::forward`): bytes both ways through splice with a
//! half-close, a guest that refuses (the client is reset at once), the bound on connections,
//! the quiesce/resume protocol — and that a holder without published ports stays one thread
//! (the probe ladder's holders do not change). Every holder is killed by its Drop guard.

use netprobe::ns::{Holder, HolderOptions, forward, run_in_netns};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn opts() -> HolderOptions {
    HolderOptions {
        exe: PathBuf::from(crate::common::EXE),
        lo_up: true,
    }
}

fn threads(pid: i32) -> u32 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A holder forwarding a fresh host listener (127.0.0.1, ephemeral port) to `guest_port`;
/// returns it with the host address.
fn forwarding_holder(guest_port: u16) -> (Holder, std::net::SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = Holder::spawn_publishing(&opts(), &[], &[(l.as_fd(), guest_port)]).unwrap();
    drop(l);
    (h, addr)
}

/// A listener on 127.0.0.1:`port` inside the holder's namespace.
fn guest_listener(h: &Holder, port: u16) -> TcpListener {
    run_in_netns(&h.netns_path(), || {
        TcpListener::bind(("127.0.0.1", port)).unwrap()
    })
    .unwrap()
}

/// True when the peer resets or closes `s` within 2 s without sending anything.
fn refused(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

#[test]
fn a_holder_without_published_ports_stays_one_thread() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts()).unwrap();
    assert_eq!(threads(h.identity().pid), 1);
    // The holder reports ready before it starts the forwarder's threads (connections wait in
    // the listener's backlog meanwhile), so the count is awaited, bounded.
    let (f, _) = forwarding_holder(5000);
    let deadline = Instant::now() + Duration::from_secs(5);
    while threads(f.identity().pid) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        threads(f.identity().pid) >= 2,
        "the forwarder runs its threads"
    );
}

#[test]
fn bytes_flow_both_ways_with_a_half_close() {
    let _baton = crate::common::baton(module_path!());
    let (h, addr) = forwarding_holder(5000);
    let g = guest_listener(&h, 5000);
    let server = std::thread::spawn(move || {
        let (mut s, _) = g.accept().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap(); // ends at the client's half-close
        let reply = format!(
            "got {} bytes, sum {}",
            got.len(),
            got.iter().map(|b| *b as u64).sum::<u64>()
        );
        s.write_all(reply.as_bytes()).unwrap();
    });
    let mut c = TcpStream::connect(addr).unwrap();
    let data: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let sum: u64 = data.iter().map(|b| *b as u64).sum();
    c.write_all(&data).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut reply = String::new();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, format!("got {} bytes, sum {sum}", data.len()));
    server.join().unwrap();
}

#[test]
fn a_guest_that_refuses_gets_the_client_reset_at_once() {
    let _baton = crate::common::baton(module_path!());
    let (_h, addr) = forwarding_holder(5000);
    let t = Instant::now();
    assert!(refused(TcpStream::connect(addr).unwrap()));
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[test]
fn connections_beyond_the_bound_are_reset() {
    let _baton = crate::common::baton(module_path!());
    let (h, addr) = forwarding_holder(5000);
    let g = guest_listener(&h, 5000);
    // The guest accepts and holds every connection.
    let held = std::thread::spawn(move || {
        let mut v = Vec::new();
        while v.len() < forward::MAX_CONNECTIONS {
            v.push(g.accept().unwrap().0);
        }
        v
    });
    let clients: Vec<TcpStream> = (0..forward::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let guests = held.join().unwrap();
    assert_eq!(guests.len(), forward::MAX_CONNECTIONS);
    assert!(
        refused(TcpStream::connect(addr).unwrap()),
        "the 65th is reset"
    );
    drop(clients);
    drop(guests);
}

#[test]
fn quiesce_resets_open_connections_and_holds_new_ones_until_resume() {
    let _baton = crate::common::baton(module_path!());
    let (h, addr) = forwarding_holder(5000);
    let g = guest_listener(&h, 5000);
    let open = TcpStream::connect(addr).unwrap();
    let (guest_side, _) = g.accept().unwrap();
    let ms = forward::quiesce(h.identity(), Duration::from_secs(5)).unwrap();
    assert!(ms < 5000);
    assert!(
        refused(open),
        "the open connection was reset by the quiesce"
    );
    let mut b = [0u8; 1];
    guest_side
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    assert!(
        matches!((&guest_side).read(&mut b), Ok(0) | Err(_)),
        "the guest's side is closed too"
    );
    // A new connection waits in the backlog: nothing reaches the guest.
    let mut waiting = TcpStream::connect(addr).unwrap();
    g.set_nonblocking(true).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        g.accept().is_err(),
        "no connection is forwarded while quiesced"
    );
    g.set_nonblocking(false).unwrap();
    forward::resume(h.identity(), Duration::from_secs(2)).unwrap();
    let (mut s, _) = g.accept().unwrap();
    waiting.write_all(b"ping").unwrap();
    let mut got = [0u8; 4];
    s.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ping");
}
