//! Child-process wall time without wrappers: the kernel's process-events connector
//! (`NETLINK_CONNECTOR`, `CN_IDX_PROC`) reports every fork, exec and exit with a
//! `CLOCK_MONOTONIC` timestamp (ns). The bench records them while `netprobe run` (or `netprobe
//! matrix`) runs, then
//! keeps the direct children of netprobe's own processes that exec'd another program: their
//! exec → exit intervals are "time the child ran", the rest of the wall time is netprobe's.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;
const PROC_EVENT_FORK: u32 = 1;
const PROC_EVENT_EXEC: u32 = 2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// One process event, timestamps in nanoseconds of `CLOCK_MONOTONIC`.
#[derive(Debug, Clone)]
pub enum Event {
    /// A new process (not thread): `parent` tgid, `child` pid.
    Fork { parent: i32, child: i32 },
    /// `pid` exec'd `exe` (read from `/proc/<pid>/exe` when the event arrived; `?` if gone).
    /// `args`: its `/proc/<pid>/cmdline` (arguments joined by spaces), read only when the
    /// program's file name contains `netprobe` or is `runc`, `crun` or `criu`, else empty.
    Exec {
        ts: u64,
        pid: i32,
        exe: String,
        args: String,
    },
    /// Process `pid` (thread-group leader) exited.
    Exit { ts: u64, pid: i32 },
}

/// A running recorder; [`Monitor::stop`] returns the events.
pub struct Monitor {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<io::Result<Vec<Event>>>>,
}

impl Monitor {
    /// Subscribes to process events (root) and records them on a thread until stopped.
    pub fn start() -> io::Result<Monitor> {
        let fd = subscribe()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            // Real-time priority, so each exec event's `/proc/<pid>/exe` is read before a
            // short-lived child (a 3 ms `runc state`) exits; a late read loses the program name
            // ("?") and with it the child's time. Best effort: without it the bench still runs.
            let prio = libc::sched_param { sched_priority: 10 };
            // SAFETY: sets this thread's own scheduling policy; no memory is shared.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &prio) };
            let r = record(fd, &s2);
            // SAFETY: our fd.
            unsafe {
                let _ = send_op(fd, PROC_CN_MCAST_IGNORE);
                libc::close(fd);
            }
            r
        });
        Ok(Monitor {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops recording and returns every event seen.
    pub fn stop(mut self) -> io::Result<Vec<Event>> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .take()
            .expect("running")
            .join()
            .map_err(|_| io::Error::other("monitor thread panicked"))?
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn subscribe() -> io::Result<i32> {
    // SAFETY: socket syscalls on an fd we own; closed on error.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            NETLINK_CONNECTOR,
        );
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut sa: libc::sockaddr_nl = std::mem::zeroed();
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = CN_IDX_PROC;
        let rcvbuf: i32 = 16 << 20;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&rcvbuf as *const i32).cast(),
            4,
        );
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 50_000,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
        let r = libc::bind(
            fd,
            (&sa as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        );
        if r != 0 || send_op(fd, PROC_CN_MCAST_LISTEN).is_err() {
            let e = io::Error::last_os_error();
            libc::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

unsafe fn send_op(fd: i32, op: u32) -> io::Result<()> {
    // nlmsghdr (16) + cn_msg (20) + op (4)
    let mut m = [0u8; 40];
    m[0..4].copy_from_slice(&40u32.to_ne_bytes());
    m[4..6].copy_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
    m[12..16].copy_from_slice(&std::process::id().to_ne_bytes());
    m[16..20].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m[20..24].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m[32..34].copy_from_slice(&4u16.to_ne_bytes());
    m[36..40].copy_from_slice(&op.to_ne_bytes());
    // SAFETY: valid buffer.
    let n = unsafe { libc::send(fd, m.as_ptr().cast(), m.len(), 0) };
    if n != 40 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes(b[o..o + 4].try_into().unwrap())
}

fn record(fd: i32, stop: &AtomicBool) -> io::Result<Vec<Event>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: recv into our buffer.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    if stop.load(Ordering::SeqCst) {
                        return Ok(out);
                    }
                    continue;
                }
                Some(libc::ENOBUFS) => return Err(io::Error::other("process events dropped")),
                _ => return Err(e),
            }
        }
        let n = n as usize;
        let mut off = 0;
        while off + 16 <= n {
            let len = rd32(&buf, off) as usize;
            if len < 16 || off + len > n {
                break;
            }
            let m = &buf[off..off + len];
            // cn_msg at 16 (20 bytes), proc_event at 36: what, cpu, ts (u64), data at 52.
            if m.len() >= 52 + 16 {
                let what = rd32(m, 36);
                let ts = u64::from_ne_bytes(m[44..52].try_into().unwrap());
                let d = |i: usize| rd32(m, 52 + 4 * i) as i32;
                match what {
                    PROC_EVENT_FORK if d(2) == d(3) => out.push(Event::Fork {
                        parent: d(1),
                        child: d(3),
                    }),
                    PROC_EVENT_EXEC if d(0) == d(1) => {
                        let exe = std::fs::read_link(format!("/proc/{}/exe", d(0)))
                            .map(|p| p.display().to_string())
                            .unwrap_or_else(|_| "?".into());
                        let base = exe.rsplit('/').next().unwrap_or("");
                        let named =
                            base.contains("netprobe") || ["runc", "crun", "criu"].contains(&base);
                        let args = if named {
                            std::fs::read(format!("/proc/{}/cmdline", d(0)))
                                .map(|b| {
                                    String::from_utf8_lossy(&b)
                                        .trim_end_matches('\0')
                                        .replace('\0', " ")
                                })
                                .unwrap_or_default()
                        } else {
                            String::new()
                        };
                        out.push(Event::Exec {
                            ts,
                            pid: d(0),
                            exe,
                            args,
                        })
                    }
                    PROC_EVENT_EXIT if d(0) == d(1) => out.push(Event::Exit { ts, pid: d(0) }),
                    _ => {}
                }
            }
            off += (len + 3) & !3;
        }
    }
}

/// Where the wall time of one netprobe process tree went.
#[derive(Debug, Default)]
pub struct ChildTime {
    /// Union of exec → exit intervals of the counted children of netprobe's processes, ns.
    pub union_ns: u64,
    /// Sum per program (basename of the exe), ns, and call count.
    pub by_program: HashMap<String, (u64, u32)>,
    /// Every external child: exec and exit (ns, monotonic) and the exe path (followed by the
    /// runtime's or CRIU's subcommand, e.g. `/opt/runc-1.4.3/sbin/runc checkpoint`), in exit
    /// order.
    pub timeline: Vec<(u64, u64, String)>,
}

/// From `events`, the time external programs (anything but `netprobe_exe`) exec'd by
/// netprobe's own processes (the root `root` and its non-exec'ing or netprobe-exec'ing
/// descendants, e.g. the holder) ran, exec → exit. Every program is listed in
/// [`ChildTime::by_program`]; only those whose basename is in `count` (the runtime and CRIU)
/// enter [`ChildTime::union_ns`] (`count` holding `*`: every program).
pub fn child_time(events: &[Event], root: i32, netprobe_exe: &str, count: &[&str]) -> ChildTime {
    // Netprobe processes: root, plus forks of netprobe processes until they exec non-netprobe.
    let mut np: HashMap<i32, bool> = HashMap::new(); // pid -> is netprobe
    np.insert(root, true);
    let mut parent: HashMap<i32, i32> = HashMap::new();
    let mut started: HashMap<i32, (u64, String, String)> = HashMap::new();
    let mut intervals: Vec<(u64, u64)> = Vec::new();
    let mut out = ChildTime::default();
    for e in events {
        match e {
            Event::Fork {
                parent: p, child, ..
            } => {
                if np.get(p) == Some(&true) {
                    np.insert(*child, true);
                    parent.insert(*child, *p);
                }
            }
            Event::Exec { ts, pid, exe, args } => {
                if np.get(pid) == Some(&true) && *pid != root {
                    let is_np = exe == netprobe_exe || exe.ends_with("/netprobe");
                    if !is_np {
                        np.insert(*pid, false);
                        started.insert(*pid, (*ts, exe.clone(), subcommand(args)));
                    }
                }
            }
            Event::Exit { ts, pid } => {
                np.remove(pid);
                if let Some((t0, exe, sub)) = started.remove(pid) {
                    let base = exe.rsplit('/').next().unwrap_or(&exe).to_string();
                    let d = ts.saturating_sub(t0);
                    out.timeline.push((t0, *ts, format!("{exe}{sub}")));
                    let ent = out.by_program.entry(base.clone()).or_default();
                    ent.0 += d;
                    ent.1 += 1;
                    if count.contains(&"*") || count.contains(&base.as_str()) {
                        intervals.push((t0, *ts));
                    }
                }
            }
        }
    }
    out.union_ns = union_ns(intervals);
    out
}

/// ` <subcommand>`: the first argument after the program that is not an option or an
/// option's value (`runc --root R checkpoint …` → ` checkpoint`); empty when none is known.
fn subcommand(args: &str) -> String {
    let mut words = args.split(' ').skip(1);
    while let Some(w) = words.next() {
        if w == "--root" || w == "--log" || w == "--log-format" {
            words.next();
            continue;
        }
        if !w.starts_with('-') && !w.is_empty() {
            return format!(" {w}");
        }
    }
    String::new()
}

/// Total length of the union of `[start, end)` intervals (ns).
pub fn union_ns(mut intervals: Vec<(u64, u64)>) -> u64 {
    intervals.sort();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (a, b) in intervals {
        match cur {
            Some((s, e)) if a <= e => cur = Some((s, e.max(b))),
            Some((s, e)) => {
                total += e - s;
                cur = Some((a, b));
            }
            None => cur = Some((a, b)),
        }
    }
    if let Some((s, e)) = cur {
        total += e - s;
    }
    total
}

/// One `netprobe` process that `root` started directly (a matrix part): its pid, exec and exit
/// (ns, monotonic) and its command line.
#[derive(Debug, Clone)]
pub struct NetprobeChild {
    pub pid: i32,
    pub exec_ns: u64,
    pub exit_ns: u64,
    pub args: String,
}

/// The direct children of `root` that exec'd netprobe (`netprobe_exe`, or a file named
/// `netprobe`) and exited, in exec order.
pub fn netprobe_children(events: &[Event], root: i32, netprobe_exe: &str) -> Vec<NetprobeChild> {
    let mut forked = std::collections::HashSet::new();
    let mut running: HashMap<i32, (u64, String)> = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        match e {
            Event::Fork { parent, child } if *parent == root => {
                forked.insert(*child);
            }
            Event::Exec { ts, pid, exe, args }
                if forked.contains(pid) && (exe == netprobe_exe || exe.ends_with("/netprobe")) =>
            {
                running.insert(*pid, (*ts, args.clone()));
            }
            Event::Exit { ts, pid } => {
                forked.remove(pid);
                if let Some((t0, args)) = running.remove(pid) {
                    out.push(NetprobeChild {
                        pid: *pid,
                        exec_ns: t0,
                        exit_ns: *ts,
                        args,
                    });
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|c| c.exec_ns);
    out
}

/// `CLOCK_MONOTONIC` now, nanoseconds (the clock of the process-event timestamps).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
