//! Real (root) tests of the holder, process identity, pidfd stop and netns entry.
//! Every holder/child created here is released on success, failure and panic (Drop guards).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use netprobe::ns::{
    ChildGuard, Holder, HolderOptions, NsError, ProcessGuard, ProcessIdentity, netns_inode_of,
    own_netns_inode, run_in_fresh_netns, run_in_netns, stop_by_identity,
};

fn exe() -> PathBuf {
    PathBuf::from(crate::common::EXE)
}

fn opts(lo_up: bool) -> HolderOptions {
    HolderOptions { exe: exe(), lo_up }
}

/// `/proc` no longer shows `id` (gone, or the pid now belongs to someone else).
fn assert_gone(id: &ProcessIdentity) {
    match ProcessIdentity::read(id.pid) {
        Err(NsError::Gone { .. }) => {}
        Ok(other) => assert_ne!(other, *id, "process {id} is still alive"),
        Err(e) => panic!("cannot tell whether {id} is gone: {e}"),
    }
}

/// (lo flags, fib_trie, if_inet6) as seen from inside the netns at `path`.
fn lo_view(path: &Path) -> (u32, String, String) {
    run_in_netns(path, || {
        (
            netprobe::netlink::capture().unwrap().lo().unwrap().flags,
            std::fs::read_to_string("/proc/thread-self/net/fib_trie").unwrap(),
            std::fs::read_to_string("/proc/thread-self/net/if_inet6").unwrap(),
        )
    })
    .unwrap()
}

#[test]
fn holder_lo_up_identity_netns_and_clean_fds() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(true)).unwrap();
    let id = *h.identity();
    h.verify().unwrap();
    assert_eq!(
        h.netns_path(),
        PathBuf::from(format!("/proc/{}/ns/net", id.pid))
    );
    assert_ne!(id.netns_inode, own_netns_inode().unwrap());
    assert_eq!(netns_inode_of(&h.netns_path()).unwrap(), id.netns_inode);

    let (flags, fib, inet6) = lo_view(&h.netns_path());
    assert_ne!(flags & libc::IFF_UP as u32, 0, "lo must be UP");
    assert!(
        fib.contains("127.0.0.1"),
        "fib_trie without 127.0.0.1: {fib}"
    );
    assert!(
        inet6.contains("00000000000000000000000000000001"),
        "no ::1: {inet6}"
    );
    // Our own thread did not move.
    assert_ne!(own_netns_inode().unwrap(), id.netns_inode);

    // What CRIU needs: only fds 0-2, all /dev/null; one thread; own session.
    let mut fds: Vec<(String, PathBuf)> = std::fs::read_dir(format!("/proc/{}/fd", id.pid))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read_link(e.path()).unwrap(),
            )
        })
        .collect();
    fds.sort();
    let null = PathBuf::from("/dev/null");
    assert_eq!(
        fds,
        vec![
            ("0".into(), null.clone()),
            ("1".into(), null.clone()),
            ("2".into(), null)
        ]
    );
    let status = std::fs::read_to_string(format!("/proc/{}/status", id.pid)).unwrap();
    assert!(status.lines().any(|l| l == "Threads:\t1"), "{status}");
    assert_eq!(
        // SAFETY: getsid on a pid has no memory effects.
        unsafe { libc::getsid(id.pid) },
        id.pid,
        "holder must be a session leader"
    );

    h.stop().unwrap();
    assert_gone(&id);
}

#[test]
fn holder_without_lo_up_has_lo_down() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(false)).unwrap();
    let (flags, fib, _) = lo_view(&h.netns_path());
    assert_eq!(flags & libc::IFF_UP as u32, 0, "lo must be DOWN");
    assert!(!fib.contains("127.0.0.1"), "{fib}");
}

#[test]
fn externally_killed_holder_is_gone() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(true)).unwrap();
    let pid = h.identity().pid;
    // SAFETY: our own unreaped child; its pid cannot be reused.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let mut gone = false;
    for _ in 0..200 {
        if let Err(NsError::Gone { pid: p }) = h.verify() {
            assert_eq!(p, pid);
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone, "verify() never reported Gone");
    // Drop reaps the zombie without error.
}

#[test]
fn changed_start_time_is_identity_changed() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(false)).unwrap();
    let other = ProcessIdentity {
        start_time: h.identity().start_time + 1,
        ..*h.identity()
    };
    match other.verify() {
        Err(NsError::IdentityChanged { expected, found }) => {
            assert_eq!(expected, other);
            assert_eq!(found, *h.identity());
        }
        r => panic!("expected IdentityChanged, got {r:?}"),
    }
    let other_ns = ProcessIdentity {
        netns_inode: own_netns_inode().unwrap(),
        ..*h.identity()
    };
    assert!(matches!(
        other_ns.verify(),
        Err(NsError::IdentityChanged { .. })
    ));
}

#[test]
fn drop_kills_holder() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(true)).unwrap();
    let id = *h.identity();
    drop(h);
    assert_gone(&id);
}

#[test]
fn panic_with_live_holder_still_kills_it() {
    let _baton = crate::common::baton(module_path!());
    let seen = std::sync::Mutex::new(None);
    let r = std::panic::catch_unwind(|| {
        let h = Holder::spawn(&opts(true)).unwrap();
        *seen.lock().unwrap() = Some(*h.identity());
        panic!("deliberate panic with a live holder");
    });
    assert!(r.is_err());
    let id = seen.lock().unwrap().expect("holder was spawned");
    assert_gone(&id);
}

#[test]
fn detach_then_stop_by_identity() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(true)).unwrap();
    let id = h.detach();
    // Guard so a failing assertion below still kills it.
    let guard = ProcessGuard::adopt(id).unwrap();
    // Still alive after the Holder value is gone.
    id.verify().unwrap();
    let id = guard.release();
    stop_by_identity(&id, Duration::from_secs(5)).unwrap();
    assert_gone(&id);
    assert!(matches!(
        stop_by_identity(&id, Duration::from_secs(1)),
        Err(NsError::Gone { .. })
    ));
}

#[test]
fn stop_by_identity_refuses_changed_identity() {
    let _baton = crate::common::baton(module_path!());
    let h = Holder::spawn(&opts(false)).unwrap();
    let wrong = ProcessIdentity {
        start_time: h.identity().start_time + 7,
        ..*h.identity()
    };
    assert!(matches!(
        stop_by_identity(&wrong, Duration::from_secs(1)),
        Err(NsError::IdentityChanged { .. })
    ));
    // Nothing was signalled.
    h.verify().unwrap();
    h.stop().unwrap();
}

#[test]
fn fresh_netns_is_new_and_lo_down() {
    let _baton = crate::common::baton(module_path!());
    let own = own_netns_inode().unwrap();
    let (inode, flags) = run_in_fresh_netns(|| {
        (
            own_netns_inode().unwrap(),
            netprobe::netlink::capture().unwrap().lo().unwrap().flags,
        )
    })
    .unwrap();
    assert_ne!(inode, own);
    assert_eq!(flags & libc::IFF_UP as u32, 0);
    assert_eq!(own_netns_inode().unwrap(), own);
}

#[test]
fn netns_entry_switches_the_calling_thread_back_also_on_panic() {
    let _baton = crate::common::baton(module_path!());
    let own = own_netns_inode().unwrap();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let (fresh, inner, same_thread) = run_in_fresh_netns(|| {
        let fresh = own_netns_inode().unwrap();
        // A nested entry switches back to the netns it started from (the outer fresh one).
        let inner = run_in_fresh_netns(own_netns_inode).unwrap().unwrap();
        assert_eq!(own_netns_inode().unwrap(), fresh);
        // By path: the thread's own netns file, entered again.
        let by_path = run_in_netns(Path::new(&format!("/proc/self/task/{tid}/ns/net")), || {
            own_netns_inode().unwrap()
        });
        assert_eq!(by_path.unwrap(), fresh);
        assert_eq!(own_netns_inode().unwrap(), fresh);
        // SAFETY: gettid has no preconditions.
        (fresh, inner, unsafe { libc::gettid() } == tid)
    })
    .unwrap();
    assert!(same_thread, "the closure runs on the calling thread");
    assert_ne!(fresh, own);
    assert!(inner != fresh && inner != own);
    assert_eq!(own_netns_inode().unwrap(), own);

    let r =
        std::panic::catch_unwind(|| run_in_fresh_netns::<()>(|| panic!("inside the fresh netns")));
    assert!(r.is_err(), "the panic propagates");
    assert_eq!(
        own_netns_inode().unwrap(),
        own,
        "switched back after the panic"
    );
}

#[test]
fn run_in_netns_bad_path_is_setns_error() {
    let _baton = crate::common::baton(module_path!());
    let r = run_in_netns(Path::new("/proc/self/fd/does-not-exist"), || ());
    assert!(matches!(r, Err(NsError::Setns { .. })), "{r:?}");
    // A regular file is not a namespace: setns fails with EINVAL.
    let f = tempfile::NamedTempFile::new().unwrap();
    let r = run_in_netns(f.path(), || ());
    assert!(matches!(r, Err(NsError::Setns { .. })), "{r:?}");
}

#[test]
fn handshake_failure_is_reported_and_reaped() {
    let _baton = crate::common::baton(module_path!());
    let r = Holder::spawn(&HolderOptions {
        exe: PathBuf::from("/bin/true"),
        lo_up: false,
    });
    assert!(matches!(r, Err(NsError::Handshake { .. })), "{r:?}");
    let r = Holder::spawn(&HolderOptions {
        exe: PathBuf::from("/nonexistent/netprobe"),
        lo_up: false,
    });
    assert!(matches!(r, Err(NsError::Spawn { .. })), "{r:?}");
}

/// `sleep 300` with stdio on /dev/null.
fn sleeper() -> std::process::Child {
    Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn child_guard_and_process_guard_kill_on_drop() {
    let _baton = crate::common::baton(module_path!());
    let child = sleeper();
    let guard = ChildGuard::new(child);
    let id = ProcessIdentity::read(guard.pid()).unwrap();
    drop(guard);
    assert_gone(&id);

    let child = sleeper();
    // Keep a ChildGuard as a backstop until the ProcessGuard has done its job.
    let mut backstop = ChildGuard::new(child);
    let id = ProcessIdentity::read(backstop.pid()).unwrap();
    let pg = ProcessGuard::adopt(id).unwrap();
    assert_eq!(*pg.identity(), id);
    drop(pg);
    assert_gone(&id);
    // The ProcessGuard reaped it (our child): waitpid has nothing left.
    assert!(backstop.child_mut().try_wait().is_err());
    // Disarm the backstop: its pid is free now and must never be signalled.
    drop(backstop.into_inner());
}
