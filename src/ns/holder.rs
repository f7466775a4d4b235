//! The holder: a child process that owns a network namespace (Rust port of the seed's
//! `holder.py`; docs/ARCHITECTURE.md section 5).
//!
//! Child side: `netprobe __holder --report-fd N [--lo-up] [--keep-fd K]... [--publish
//! FD:GUEST_PORT]...` → [`holder_main`]: stdio on
//! `/dev/null`, every other fd closed, `unshare(CLONE_NEWNET)`, `lo` up if asked, `setsid()`,
//! one JSON line with its [`ProcessIdentity`] on fd N, fd N closed, then `pause()` forever with
//! default SIGTERM/SIGKILL. After the handshake it holds only fds 0-2 (`/dev/null`) and one
//! thread, so CRIU can dump it — unless it was asked to keep inherited descriptors
//! (`--keep-fd K`, [`Holder::spawn_keeping`]: the slot's sealed binaries, never dumped), or
//! given listening sockets to forward (`--publish`, [`Holder::spawn_publishing`]: then it runs
//! the threads of [`super::forward`] instead of `pause()`).
//!
//! Parent side: [`Holder::spawn`] proves the identity the child reports against `/proc` and
//! pins it with a pidfd; [`Holder`] kills and reaps it on Drop unless [`Holder::detach`]ed.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::{HandshakeError, NsError};
use super::guard::{ChildGuard, DROP_STOP_TIMEOUT, ProcessGuard, prove_gone};
use super::identity::ProcessIdentity;
use super::netns::own_netns_inode;
use super::pidfd::{pidfd_open, pidfd_send_signal, wait_pidfd_exit};

/// How long [`Holder::spawn`] waits for the holder's JSON line and EOF on the report pipe. A
/// holder answers in milliseconds on a host; 30 s leaves room for a slow guest (a debug build
/// exec'd under TCG with one host thread for both vCPUs missed 5 s in CI) while a holder that
/// never answers is still reported, and reaped, within a bound.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// The hidden argv\[1\] that selects holder mode in the netprobe binary.
pub const HOLDER_ARG: &str = "__holder";

/// The holder argument naming the probe run that started it (`--run-pid <pid>`,
/// [`Holder::spawn_for_run`]); a slot's holder has none.
pub const RUN_PID_ARG: &str = "--run-pid";

/// The netprobe executable holders are spawned from: `$NETPROBE_EXE` if set (integration tests
/// set it to `env!("CARGO_BIN_EXE_netprobe")`), else `std::env::current_exe()`, else
/// `/proc/self/exe`.
pub fn default_exe() -> PathBuf {
    if let Some(p) = std::env::var_os("NETPROBE_EXE") {
        return PathBuf::from(p);
    }
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"))
}

/// How to start a holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HolderOptions {
    /// The netprobe binary to run as `exe __holder ...` (see [`default_exe`]).
    pub exe: PathBuf,
    /// Bring `lo` up (then the kernel gives it `127.0.0.1/8` and `::1/128`).
    pub lo_up: bool,
}

impl HolderOptions {
    /// Options with `exe = default_exe()`.
    pub fn new(lo_up: bool) -> HolderOptions {
        HolderOptions {
            exe: default_exe(),
            lo_up,
        }
    }
}

/// What the holder writes on its report fd: its identity, or an error.
#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum HolderReport {
    Ready(ProcessIdentity),
    Failed { error: String },
}

/// Writes `report` as one line on `report_fd` and closes it.
fn write_report(report_fd: RawFd, report: &HolderReport) {
    // SAFETY: report_fd was handed to us by the parent and is owned by this function now.
    let mut f = unsafe { File::from_raw_fd(report_fd) };
    let mut line =
        serde_json::to_string(report).unwrap_or_else(|_| "{\"error\":\"serialize\"}".into());
    line.push('\n');
    let _ = f.write_all(line.as_bytes());
}

fn report_and_exit(report_fd: RawFd, report: &HolderReport, code: i32) -> ! {
    write_report(report_fd, report);
    std::process::exit(code);
}

/// After the handshake: `pause()` forever (one thread), or the forwarder of the published
/// ports ([`super::forward::serve`]) when the holder was given any.
fn hold(publish: &[super::forward::Listener]) -> ! {
    if !publish.is_empty() {
        super::forward::serve(publish);
    }
    loop {
        // SAFETY: pause has no preconditions; default SIGTERM/SIGKILL end the process.
        unsafe { libc::pause() };
    }
}

/// ifindex of `lo` in a fresh network namespace.
const LO_IFINDEX: u32 = 1;

fn fail(report_fd: RawFd, what: &str, e: impl std::fmt::Display) -> ! {
    let pid = std::process::id();
    report_and_exit(
        report_fd,
        &HolderReport::Failed {
            error: format!("holder pid {pid}: {what}: {e}"),
        },
        1,
    )
}

fn reset_signals() {
    // SAFETY: plain signal-mask/disposition calls on this single-threaded process.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

fn stdio_to_dev_null() -> io::Result<()> {
    let null = File::options().read(true).write(true).open("/dev/null")?;
    for target in 0..=2 {
        // SAFETY: dup2 onto the standard fds; `null` stays valid for the call.
        if unsafe { libc::dup2(null.as_raw_fd(), target) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn close_range(first: u32, last: u32) -> io::Result<()> {
    if first > last {
        return Ok(());
    }
    // SAFETY: close_range on fds this process does not use any more.
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Closes every fd from 3 up except `report_fd` and `keep`.
fn close_all_but(report_fd: RawFd, keep: &[RawFd]) -> io::Result<()> {
    let mut open: Vec<u32> = keep.iter().map(|&k| k as u32).collect();
    open.push(report_fd as u32);
    open.sort_unstable();
    let mut first = 3u32;
    for k in open {
        if k > first {
            close_range(first, k - 1)?;
        }
        first = first.max(k + 1);
    }
    close_range(first, u32::MAX)
}

/// Entry point of holder mode (`netprobe __holder --report-fd N [--lo-up] [--keep-fd K]...
/// [--publish FD:GUEST_PORT]...`); never returns.
///
/// Steps: default signal dispositions and an empty signal mask; stdio onto `/dev/null`; every
/// fd except 0-2, `report_fd`, `keep` and the `publish` listeners closed;
/// `unshare(CLONE_NEWNET)`; `lo` up via one `RTM_NEWLINK` if `lo_up`; `setsid()`; its own
/// [`ProcessIdentity`] written as one JSON line (`{"pid":..,"start_time":..,"netns_inode":..}`)
/// to `report_fd`, which is then closed; then `pause()` forever (SIGTERM/SIGKILL end it with the
/// default action) — or, with `publish` listeners (made by the slot driver in the host's
/// namespace), the forwarder of [`super::forward`].
///
/// Errors: on any failed step it writes `{"error":"holder pid P: <step>: <errno>"}` on
/// `report_fd` and exits 1; `report_fd < 3` exits 2 at once (stdio is not a report channel).
pub fn holder_main(
    report_fd: RawFd,
    lo_up: bool,
    keep: &[RawFd],
    publish: &[super::forward::Listener],
) -> ! {
    let mut keep = keep.to_vec();
    keep.extend(publish.iter().map(|l| l.fd));
    let keep = &keep[..];
    if report_fd < 3 || keep.iter().any(|&k| k < 3 || k == report_fd) {
        let _ = writeln!(
            io::stderr(),
            "netprobe __holder: --report-fd, --keep-fd and --publish fds must be >= 3 and differ, got {report_fd} and {keep:?}"
        );
        std::process::exit(2);
    }
    reset_signals();
    if let Err(e) = stdio_to_dev_null() {
        fail(report_fd, "redirect stdio to /dev/null", e);
    }
    if let Err(e) = close_all_but(report_fd, keep) {
        fail(report_fd, "close inherited fds", e);
    }
    // SAFETY: single-threaded process; moves it into a new network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        fail(
            report_fd,
            "unshare(CLONE_NEWNET) (needs root)",
            io::Error::last_os_error(),
        );
    }
    if lo_up && let Err(e) = crate::netlink::set_link_up(LO_IFINDEX) {
        fail(report_fd, "bring lo up", e);
    }
    // SAFETY: setsid has no preconditions; fails only for a process-group leader.
    if unsafe { libc::setsid() } < 0 {
        fail(report_fd, "setsid", io::Error::last_os_error());
    }
    match ProcessIdentity::read(std::process::id() as i32) {
        Ok(id) => {
            write_report(report_fd, &HolderReport::Ready(id));
            hold(publish)
        }
        Err(e) => fail(report_fd, "read own identity", e),
    }
}

/// Reads the report pipe until EOF or `timeout`; returns the bytes or a reason.
fn read_report(rd: &OwnedFd, timeout: Duration) -> Result<Vec<u8>, HandshakeError> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // SAFETY: borrow the fd as a File without taking ownership (ManuallyDrop).
    let mut f = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(rd.as_raw_fd()) });
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HandshakeError::Timeout {
                ms: timeout.as_millis(),
                got: String::from_utf8_lossy(&out).into_owned(),
            });
        }
        let mut pfd = libc::pollfd {
            fd: rd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(HandshakeError::Poll(e));
        }
        if r == 0 {
            continue;
        }
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() > 64 * 1024 {
                    return Err(HandshakeError::TooLarge);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(HandshakeError::Read(e)),
        }
    }
}

/// A running holder that netprobe spawned, identity proven, pinned by a pidfd.
///
/// Dropping it SIGKILLs it through the pidfd and reaps it (also during a panic unwind; Drop
/// never panics). [`Holder::detach`] hands it over to the slot driver instead.
#[derive(Debug)]
pub struct Holder {
    identity: ProcessIdentity,
    pidfd: OwnedFd,
    child: Option<Child>,
    /// Kills the holder if netprobe is interrupted by a signal (see [`super::cleanup`]).
    on_signal: Option<super::cleanup::Registration>,
}

impl Holder {
    /// Starts `opts.exe __holder --report-fd N [--lo-up]` (stdio `/dev/null`, report pipe
    /// `O_CLOEXEC` on the parent end, the child end inherited only by this child), waits up to
    /// [`HANDSHAKE_TIMEOUT`] for its JSON line and EOF, reads `/proc/<pid>` itself and proves it
    /// equals the report, proves its netns inode differs from netprobe's, and opens a pidfd.
    ///
    /// Errors: `Spawn { exe }`; `Handshake { pid, exe, reason }` (timeout, EOF, bad JSON, pid
    /// mismatch); `HolderFailed { pid, message }` (the holder's own error, e.g. not root);
    /// `IdentityChanged` (report differs from `/proc`); `SameNetns`; `Gone`; `Pidfd`; `Os`.
    /// On every error the child is killed and reaped.
    pub fn spawn(opts: &HolderOptions) -> Result<Holder, NsError> {
        Holder::spawn_keeping(opts, &[])
    }

    /// [`Holder::spawn`], and the holder inherits `keep` under the same numbers and holds them
    /// open until it ends (`--keep-fd K` each; the slot's sealed binaries,
    /// [`crate::slot::resources::sealed_binaries`]). Errors: those of [`Holder::spawn`].
    pub fn spawn_keeping(
        opts: &HolderOptions,
        keep: &[std::os::fd::BorrowedFd<'_>],
    ) -> Result<Holder, NsError> {
        Holder::spawn_with(opts, keep, &[], None)
    }

    /// [`Holder::spawn_keeping`], and the holder owns the listening sockets `publish` (made in
    /// netprobe's namespace, each with the guest port its connections go to: `--publish
    /// FD:GUEST_PORT`) and forwards their connections into its namespace
    /// ([`super::forward`]); the caller closes its copies afterwards. Errors: those of
    /// [`Holder::spawn`].
    pub fn spawn_publishing(
        opts: &HolderOptions,
        keep: &[std::os::fd::BorrowedFd<'_>],
        publish: &[(std::os::fd::BorrowedFd<'_>, u16)],
    ) -> Result<Holder, NsError> {
        let publish: Vec<super::forward::Listener> = publish
            .iter()
            .map(|(fd, port)| super::forward::Listener {
                fd: fd.as_raw_fd(),
                guest_port: *port,
            })
            .collect();
        Holder::spawn_with(opts, keep, &publish, None)
    }

    /// [`Holder::spawn`] for a probe run: the holder's command line carries `--run-pid <this
    /// process's pid>` (a marker it never reads), so that a holder a run killed with SIGKILL
    /// left behind is found and stopped by the next run ([`RUN_PID_ARG`],
    /// `crate::probe::stale`). Never for a slot's holder, which outlives the verb that started
    /// it. Errors: those of [`Holder::spawn`].
    pub fn spawn_for_run(opts: &HolderOptions) -> Result<Holder, NsError> {
        Holder::spawn_with(opts, &[], &[], Some(std::process::id()))
    }

    fn spawn_with(
        opts: &HolderOptions,
        keep: &[std::os::fd::BorrowedFd<'_>],
        publish: &[super::forward::Listener],
        run_pid: Option<u32>,
    ) -> Result<Holder, NsError> {
        let mut keep: Vec<RawFd> = keep.iter().map(|k| k.as_raw_fd()).collect();
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two fds into the array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(NsError::Os {
                op: "pipe2 for holder report",
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: both fds are fresh and owned here.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let wr_raw = wr.as_raw_fd();

        let mut cmd = Command::new(&opts.exe);
        cmd.arg(HOLDER_ARG)
            .arg("--report-fd")
            .arg(wr_raw.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if opts.lo_up {
            cmd.arg("--lo-up");
        }
        if let Some(pid) = run_pid {
            cmd.arg(RUN_PID_ARG).arg(pid.to_string());
        }
        for k in &keep {
            cmd.arg("--keep-fd").arg(k.to_string());
        }
        for l in publish {
            cmd.arg("--publish")
                .arg(format!("{}:{}", l.fd, l.guest_port));
            // Inherited like a kept fd (FD_CLOEXEC cleared in the child below).
            keep.push(l.fd);
        }
        // SAFETY: the closure only calls fcntl (async-signal-safe) between fork and exec; it
        // clears FD_CLOEXEC on the report fd and the kept fds in the child only.
        unsafe {
            cmd.pre_exec(move || {
                for fd in std::iter::once(wr_raw).chain(keep.iter().copied()) {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| NsError::Spawn {
            exe: opts.exe.clone(),
            source,
        })?;
        drop(wr);
        let guard = ChildGuard::new(child);
        let pid = guard.pid();
        let handshake = |reason: HandshakeError| NsError::Handshake {
            pid,
            exe: opts.exe.clone(),
            reason,
        };

        let bytes = read_report(&rd, HANDSHAKE_TIMEOUT).map_err(handshake)?;
        drop(rd);
        let reported = parse_report(bytes, pid, handshake)?;
        let observed = ProcessIdentity::read(pid)?;
        if observed != reported {
            return Err(NsError::IdentityChanged {
                expected: reported,
                found: observed,
            });
        }
        let own = own_netns_inode()?;
        if observed.netns_inode == own {
            return Err(NsError::SameNetns { pid, inode: own });
        }
        let pidfd = pidfd_open(pid)?;
        let on_signal = super::cleanup::register(format!("holder {observed}"), move || {
            let _ = stop_by_identity(&observed, DROP_STOP_TIMEOUT);
        });
        Ok(Holder {
            identity: observed,
            pidfd,
            child: Some(guard.into_inner()),
            on_signal: Some(on_signal),
        })
    }

    /// The proven identity (pid, start time, netns inode).
    pub fn identity(&self) -> &ProcessIdentity {
        &self.identity
    }

    /// Re-proves the identity against `/proc`. Errors: `Gone { pid }`, `IdentityChanged`,
    /// `ProcRead`/`StatParse` (fail closed).
    pub fn verify(&self) -> Result<(), NsError> {
        self.identity.verify()
    }

    /// `/proc/<pid>/ns/net`: the path to name in `config.json` or to pass to
    /// [`run_in_netns`](super::run_in_netns).
    pub fn netns_path(&self) -> PathBuf {
        self.identity.netns_path()
    }

    fn stop_inner(&mut self) -> Result<(), NsError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pid = self.identity.pid;
        if let Err(e) = pidfd_send_signal(&self.pidfd, libc::SIGKILL) {
            // The child is unreaped, so its pid cannot be reused: kill(2) by pid is safe.
            if child.kill().is_err() {
                self.child = Some(child);
                return Err(match e {
                    NsError::Pidfd { op, source, .. } => NsError::Pidfd { op, pid, source },
                    e => e,
                });
            }
        }
        match wait_pidfd_exit(&self.pidfd, DROP_STOP_TIMEOUT) {
            Ok(true) => {}
            // Keep the child so a later Drop retries (it is still unreaped, so ours).
            Ok(false) => {
                self.child = Some(child);
                return Err(NsError::StopTimeout {
                    pid,
                    timeout_ms: DROP_STOP_TIMEOUT.as_millis(),
                });
            }
            Err(e) => {
                self.child = Some(child);
                return Err(match e {
                    NsError::Pidfd { op, source, .. } => NsError::Pidfd { op, pid, source },
                    e => e,
                });
            }
        }
        child.wait().map_err(|source| NsError::Os {
            op: "waitpid holder",
            source,
        })?;
        prove_gone(&self.identity)
    }

    /// SIGKILL through the pidfd, wait for exit (up to 5 s), reap with `waitpid`, prove
    /// `/proc` no longer shows the identity.
    ///
    /// Errors: `Pidfd`, `StopTimeout { pid, timeout_ms }`, `StillAlive { pid }`, `Os`.
    pub fn stop(mut self) -> Result<(), NsError> {
        self.stop_inner()
    }

    /// Leaves the holder running and returns its identity (for `holder.json`); it is no longer
    /// killed on Drop. Stop it later with [`stop_by_identity`]. Note: until this process
    /// exits the holder is still its child, so [`stop_by_identity`] also reaps it.
    pub fn detach(mut self) -> ProcessIdentity {
        // Dropping a std Child neither kills nor waits.
        self.child = None;
        self.on_signal = None;
        self.identity
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if self.child.is_some()
            && let Err(e) = self.stop_inner()
        {
            let _ = writeln!(
                io::stderr(),
                "netprobe: could not stop holder {}: {e}",
                self.identity
            );
        }
    }
}

/// Stops a detached holder (or any process) known only by its recorded identity: opens a
/// pidfd on `id.pid`, proves the process there is `id` (refuses otherwise: never kill a process
/// that is not ours), SIGKILLs it through the pidfd, waits up to `timeout` for the pidfd to
/// become readable (exited; it need not be our child), reaps it if it is our child, and proves
/// `/proc` no longer shows `id`.
///
/// Errors: `Gone { pid }` if it is already gone (callers that only want it gone may accept
/// that); `IdentityChanged` (nothing was signalled); `Pidfd`; `StopTimeout`; `StillAlive`.
pub fn stop_by_identity(id: &ProcessIdentity, timeout: Duration) -> Result<(), NsError> {
    ProcessGuard::adopt(*id)?.stop(timeout)
}

/// The holder's one report line (`bytes`: everything read from the report pipe until EOF),
/// parsed and checked against the spawned `pid`.
///
/// Errors: `Handshake` via `handshake` (not UTF-8, not one line, bad JSON, another pid);
/// `HolderFailed` when the holder reported its own error.
fn parse_report(
    bytes: Vec<u8>,
    pid: i32,
    handshake: impl Fn(HandshakeError) -> NsError,
) -> Result<ProcessIdentity, NsError> {
    let text = String::from_utf8(bytes).map_err(|e| handshake(HandshakeError::NotUtf8(e)))?;
    let line = match text.strip_suffix('\n') {
        Some(l) if !l.contains('\n') => l,
        _ => {
            return Err(handshake(HandshakeError::NotOneLine(text.clone())));
        }
    };
    let reported = match serde_json::from_str::<HolderReport>(line) {
        Ok(HolderReport::Ready(id)) => id,
        Ok(HolderReport::Failed { error }) => {
            return Err(NsError::HolderFailed {
                pid,
                message: error,
            });
        }
        Err(source) => {
            return Err(handshake(HandshakeError::BadJson {
                line: line.to_string(),
                source,
            }));
        }
    };
    if reported.pid != pid {
        return Err(handshake(HandshakeError::PidMismatch {
            reported: reported.pid,
            spawned: pid,
        }));
    }
    Ok(reported)
}
