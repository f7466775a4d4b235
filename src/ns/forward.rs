//! The holder's forwarder for a slot's published ports (docs/ARCHITECTURE.md, "Published
//! ports"). Only a holder started with `--publish FD:GUEST_PORT` runs it; every other holder
//! stays single-threaded in `pause()`.
//!
//! The listening sockets were made by the slot driver in the host's network namespace and
//! inherited; connections they accept stay there. Per listener one thread accepts; per accepted
//! connection one thread connects to `127.0.0.1:GUEST_PORT` from the holder's own namespace
//! (the slot's) and two threads move the bytes, one per direction, with `splice(2)` through a
//! pipe (no copy through user space). EOF on one side is passed on as `shutdown(SHUT_WR)` on the
//! other (half-close); the pair is closed once both directions ended. At most
//! [`MAX_CONNECTIONS`] at once: one more is reset at once. A guest that refuses the inward
//! connection gets the outer one reset at once (`SO_LINGER` 0), so a client sees the failure.
//!
//! Quiesce protocol (the driver's side: [`quiesce`], [`resume`]): SIGUSR1 stops accepting (new
//! connections wait in the listen backlog) and resets every forwarded connection; once none is
//! left the holder names its main thread [`QUIESCED_COMM`] (`/proc/PID/comm`), which is the
//! driver's acknowledgement. SIGUSR2 accepts again and gives the name back. CRIU cannot dump an
//! established TCP socket without `--tcp-established`, which the slot does not use: `slot
//! snapshot` quiesces around the runtime checkpoint.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use super::error::NsError;
use super::identity::ProcessIdentity;
use super::pidfd::{pidfd_open, pidfd_send_signal};

/// Forwarded connections at once; one more is reset at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The holder's main-thread name (`/proc/PID/comm`) while it is quiesced (at most 15 bytes).
pub const QUIESCED_COMM: &str = "np-quiesced";

/// How long the holder waits for its forwarded connections to end after SIGUSR1 before it
/// gives up acknowledging (the driver's own bound is longer).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Bytes moved per `splice(2)` call.
const SPLICE_CHUNK: usize = 64 * 1024;

/// How long the inward connect may take (the guest is in the same host).
const INWARD_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One inherited listener and the guest port its connections go to.
#[derive(Debug, Clone, Copy)]
pub struct Listener {
    /// The listening socket's fd (inherited, in the host's namespace).
    pub fd: RawFd,
    /// The guest's TCP port on 127.0.0.1 in the holder's namespace.
    pub guest_port: u16,
}

/// A holder `--publish FD:GUEST_PORT` argument that does not parse (usage of a hidden internal
/// command: clap reports it, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum PublishArgError {
    /// No `:` between the two numbers.
    #[error("--publish {given:?}: expected FD:GUEST_PORT")]
    Malformed {
        /// The argument as given.
        given: String,
    },
    /// The part before `:` is not a descriptor number.
    #[error("--publish {given:?}: {fd:?} is not an fd")]
    Fd {
        /// The argument as given.
        given: String,
        /// Its descriptor part.
        fd: String,
    },
    /// The part after `:` is not a port 1-65535.
    #[error("--publish {given:?}: {port:?} is not a port 1-65535")]
    Port {
        /// The argument as given.
        given: String,
        /// Its port part.
        port: String,
    },
}

/// Parses the holder's `--publish FD:GUEST_PORT` argument.
///
/// Errors: [`PublishArgError`] naming the argument and the part that does not parse.
pub fn parse_publish_arg(s: &str) -> Result<Listener, PublishArgError> {
    let (fd, port) = s
        .split_once(':')
        .ok_or_else(|| PublishArgError::Malformed { given: s.into() })?;
    let fd_num: RawFd = fd.parse().map_err(|_| PublishArgError::Fd {
        given: s.into(),
        fd: fd.into(),
    })?;
    let guest_port: u16 =
        port.parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| PublishArgError::Port {
                given: s.into(),
                port: port.into(),
            })?;
    Ok(Listener {
        fd: fd_num,
        guest_port,
    })
}

struct Conn {
    outer: RawFd,
    inner: Option<RawFd>,
    killed: bool,
}

#[derive(Default)]
struct Registry {
    paused: bool,
    next: u64,
    conns: HashMap<u64, Conn>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
static CHANGED: Condvar = Condvar::new();

fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    let mut g = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(Registry::default))
}

/// Closes `fd` with `SO_LINGER` 0, so the peer gets a reset, not a FIN.
fn reset_close(fd: RawFd) {
    set_linger_zero(fd);
    // SAFETY: `fd` is owned by the caller and not used after this.
    unsafe { libc::close(fd) };
}

fn set_linger_zero(fd: RawFd) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a plain setsockopt with a valid pointer and size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

fn shutdown(fd: RawFd, how: libc::c_int) {
    // SAFETY: shutdown on a socket fd this process holds open.
    unsafe { libc::shutdown(fd, how) };
}

fn set_comm(name: &str) {
    let mut b = [0u8; 16];
    let n = name.len().min(15);
    b[..n].copy_from_slice(&name.as_bytes()[..n]);
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, b.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

/// Runs the forwarder for `listeners` in the calling holder; never returns. Blocks SIGUSR1 and
/// SIGUSR2 (the main thread takes them with `sigwaitinfo`), ignores SIGPIPE, starts one accept
/// thread per listener. SIGTERM/SIGKILL end the holder as before.
pub fn serve(listeners: &[Listener]) -> ! {
    // SAFETY: signal-mask calls before any thread exists; every thread inherits the mask.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    let comm = std::fs::read_to_string("/proc/self/comm")
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|_| "netprobe".into());
    for l in listeners.iter().copied() {
        // A thread that cannot start leaves that port unserved; the published-ports gate
        // names it. Nothing else is there to report to.
        let _ = std::thread::Builder::new()
            .name(format!("accept-{}", l.guest_port))
            .spawn(move || accept_loop(l));
    }
    loop {
        // SAFETY: sigwaitinfo on a set of blocked signals.
        let sig = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR1);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::sigwaitinfo(&set, std::ptr::null_mut())
        };
        match sig {
            libc::SIGUSR1 if pause_and_drain() => set_comm(QUIESCED_COMM),
            libc::SIGUSR2 => {
                with_registry(|r| r.paused = false);
                CHANGED.notify_all();
                set_comm(&comm);
            }
            _ => {}
        }
    }
}

/// Stops accepting and resets every forwarded connection; true once none is left (within
/// [`DRAIN_TIMEOUT`]).
fn pause_and_drain() -> bool {
    let mut g = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let r = g.get_or_insert_with(Registry::default);
    r.paused = true;
    for c in r.conns.values_mut() {
        c.killed = true;
        for fd in std::iter::once(c.outer).chain(c.inner) {
            set_linger_zero(fd);
            shutdown(fd, libc::SHUT_RDWR);
        }
    }
    CHANGED.notify_all();
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        let r = g.get_or_insert_with(Registry::default);
        if r.conns.is_empty() {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        g = CHANGED
            .wait_timeout(g, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

fn accept_loop(l: Listener) {
    // SAFETY: fcntl on the inherited listener.
    unsafe {
        let fl = libc::fcntl(l.fd, libc::F_GETFL);
        libc::fcntl(l.fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    loop {
        // While quiesced, wait for SIGUSR2 (connections queue in the backlog).
        {
            let mut g = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
            while g.get_or_insert_with(Registry::default).paused {
                g = CHANGED
                    .wait_timeout(g, Duration::from_millis(500))
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        }
        let mut pfd = libc::pollfd {
            fd: l.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 200) } <= 0 {
            continue;
        }
        // Accepted and registered under the lock: a quiesce never misses a connection.
        let accepted = with_registry(|r| {
            if r.paused {
                return None;
            }
            // SAFETY: accept4 on the listener; null address pointers are allowed.
            let fd = unsafe {
                libc::accept4(
                    l.fd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return None;
            }
            if r.conns.len() >= MAX_CONNECTIONS {
                reset_close(fd);
                return None;
            }
            let id = r.next;
            r.next += 1;
            r.conns.insert(
                id,
                Conn {
                    outer: fd,
                    inner: None,
                    killed: false,
                },
            );
            Some((id, fd))
        });
        let Some((id, fd)) = accepted else {
            // EMFILE and the like: do not spin.
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        let spawned = std::thread::Builder::new()
            .name("conn".into())
            .spawn(move || connection(id, fd, l.guest_port));
        if spawned.is_err() {
            end_connection(id);
            reset_close(fd);
        }
    }
}

/// Removes connection `id` from the registry; returns whether a quiesce reset it.
fn end_connection(id: u64) -> bool {
    let killed = with_registry(|r| r.conns.remove(&id).is_some_and(|c| c.killed));
    CHANGED.notify_all();
    killed
}

fn connection(id: u64, outer: RawFd, guest_port: u16) {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, guest_port));
    let inner = match TcpStream::connect_timeout(&addr, INWARD_CONNECT_TIMEOUT) {
        Ok(s) => s.into_raw_fd(),
        Err(_) => {
            end_connection(id);
            reset_close(outer);
            return;
        }
    };
    let killed = with_registry(|r| match r.conns.get_mut(&id) {
        Some(c) if !c.killed => {
            c.inner = Some(inner);
            false
        }
        _ => true,
    });
    if killed {
        end_connection(id);
        reset_close(inner);
        reset_close(outer);
        return;
    }
    let back = std::thread::Builder::new()
        .name("conn-back".into())
        .spawn(move || pump(inner, outer));
    pump(outer, inner);
    match back {
        Ok(t) => {
            let _ = t.join();
        }
        Err(_) => {
            shutdown(outer, libc::SHUT_RDWR);
            shutdown(inner, libc::SHUT_RDWR);
        }
    }
    let killed = end_connection(id);
    for fd in [inner, outer] {
        match killed {
            true => reset_close(fd),
            // SAFETY: both fds are this connection's, removed from the registry above.
            false => unsafe {
                libc::close(fd);
            },
        }
    }
}

/// Moves bytes from `src` to `dst` until EOF (then `shutdown(dst, SHUT_WR)`: half-close) or an
/// error (then both sockets shut down, which ends the other direction too).
fn pump(src: RawFd, dst: RawFd) {
    let ok = match splice_all(src, dst) {
        Ok(()) => true,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => copy_all(src, dst).is_ok(),
        Err(_) => false,
    };
    if ok {
        shutdown(dst, libc::SHUT_WR);
    } else {
        shutdown(src, libc::SHUT_RDWR);
        shutdown(dst, libc::SHUT_RDWR);
    }
}

fn splice_all(src: RawFd, dst: RawFd) -> io::Result<()> {
    let mut p = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds are fresh and owned here.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    loop {
        let n = splice(src, wr.as_raw_fd(), SPLICE_CHUNK)?;
        if n == 0 {
            return Ok(());
        }
        let mut left = n;
        while left > 0 {
            let m = splice(rd.as_raw_fd(), dst, left)?;
            if m == 0 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
            left -= m;
        }
    }
}

fn splice(from: RawFd, to: RawFd, len: usize) -> io::Result<usize> {
    loop {
        // SAFETY: splice between two fds this thread holds; null offsets (sockets and pipes).
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The fallback where `splice` refuses the pair (EINVAL): read and write through a buffer.
fn copy_all(src: RawFd, dst: RawFd) -> io::Result<()> {
    use std::io::{Read, Write};
    // SAFETY: borrowed for the copy only (ManuallyDrop: the caller closes them).
    let mut s = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(src) });
    // SAFETY: as `src`: borrowed for the copy only, never closed here (ManuallyDrop).
    let mut d = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(dst) });
    let mut buf = vec![0u8; SPLICE_CHUNK];
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        d.write_all(&buf[..n])?;
    }
}

/// What a quiesce or resume of holder `h` came to, for the snapshot's evidence.
#[derive(Debug, thiserror::Error)]
pub enum QuiesceError {
    /// The holder could not be proven or signalled.
    #[error("holder pid {pid}: {source}")]
    Holder {
        /// The holder's pid.
        pid: i32,
        /// The cause.
        #[source]
        source: NsError,
    },
    /// The holder did not acknowledge within the bound.
    #[error(
        "holder pid {pid} did not acknowledge {what} within {ms} ms (its /proc/{pid}/comm is {comm:?})"
    )]
    NoAck {
        /// The holder's pid.
        pid: i32,
        /// `the quiesce (SIGUSR1)` or `the resume (SIGUSR2)`.
        what: &'static str,
        /// The bound, ms.
        ms: u128,
        /// Its comm when the bound ran out.
        comm: String,
    },
}

fn signal_holder(h: &ProcessIdentity, sig: i32) -> Result<(), QuiesceError> {
    let err = |source| QuiesceError::Holder { pid: h.pid, source };
    let fd = pidfd_open(h.pid).map_err(err)?;
    // Proven after the pidfd pins the pid: the signal reaches the recorded process or none.
    h.verify().map_err(err)?;
    pidfd_send_signal(&fd, sig).map_err(err)
}

fn comm_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_string())
        .unwrap_or_default()
}

fn wait_comm(
    h: &ProcessIdentity,
    quiesced: bool,
    what: &'static str,
    timeout: Duration,
) -> Result<u128, QuiesceError> {
    let t = Instant::now();
    loop {
        let comm = comm_of(h.pid);
        if (comm == QUIESCED_COMM) == quiesced {
            return Ok(t.elapsed().as_millis());
        }
        if t.elapsed() >= timeout {
            return Err(QuiesceError::NoAck {
                pid: h.pid,
                what,
                ms: timeout.as_millis(),
                comm,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Driver side: SIGUSR1 to holder `h` through a pidfd (identity proven first), then waits up
/// to `timeout` for its acknowledgement ([`QUIESCED_COMM`]). Returns the ms it took.
/// Errors: [`QuiesceError`].
pub fn quiesce(h: &ProcessIdentity, timeout: Duration) -> Result<u128, QuiesceError> {
    signal_holder(h, libc::SIGUSR1)?;
    wait_comm(h, true, "the quiesce (SIGUSR1)", timeout)
}

/// Driver side: SIGUSR2 to holder `h` (accept again), then waits up to `timeout` for its main
/// thread's name to be given back. Returns the ms it took. Errors: [`QuiesceError`].
pub fn resume(h: &ProcessIdentity, timeout: Duration) -> Result<u128, QuiesceError> {
    signal_holder(h, libc::SIGUSR2)?;
    wait_comm(h, false, "the resume (SIGUSR2)", timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_arg_is_fd_colon_port() {
        let l = parse_publish_arg("7:5000").unwrap();
        assert_eq!((l.fd, l.guest_port), (7, 5000));
        assert!(parse_publish_arg("7").is_err());
        assert!(parse_publish_arg("x:5000").is_err());
        assert!(parse_publish_arg("7:0").is_err());
        assert!(parse_publish_arg("7:65536").is_err());
    }
}
