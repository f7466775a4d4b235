//! Running a matrix's parts: one `netprobe run --quiet` per job, `--jobs` side by side, each
//! bounded by `--cell-timeout`. A signal (SIGINT, SIGTERM, SIGHUP) to the matrix stops it the
//! way it stops `netprobe run` ([`crate::ns::cleanup`]): no new part starts, every running part
//! gets SIGTERM (its own handler releases what it started and leaves its `interrupted.txt`),
//! SIGKILL 30 s later, each named in the release list; the matrix folder gets
//! `interrupted.txt` and no `matrix.json`; exit 128 + signal. A matrix that cannot handle its
//! end (SIGKILL, a crash) still takes its parts with it: each part gets SIGTERM from the kernel
//! when the thread that started it ends ([`die_with_matrix`]), and stops as above.

use super::model::MatrixPart;
use super::{Job, MatrixOptions};
use std::time::{Duration, Instant};

/// Runs every job, `opts.jobs` side by side, in order of the list.
pub(super) fn run_jobs(opts: &MatrixOptions, jobs: &[Job]) -> Vec<MatrixPart> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1).min(jobs.len()) {
            // Each thread starts parts the matrix must stop on a signal: the signal thread
            // waits until each has stopped (at its next check) before it stops the parts.
            let guard = crate::ns::cleanup::worker();
            let (next, done) = (&next, &done);
            s.spawn(move || {
                let _guard = guard;
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    let part = run_part(opts, job);
                    done.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((i, part));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, p)| p).collect()
}

/// One `netprobe run --quiet` for `job`, output in `logs/<folder>.txt`, bounded by the timeout.
fn run_part(opts: &MatrixOptions, job: &Job) -> MatrixPart {
    let t0 = Instant::now();
    let log_path = opts
        .evidence
        .join("logs")
        .join(format!("{}.txt", job.folder));
    let mut part = MatrixPart {
        folder: job.folder.clone(),
        phases: job.phases.into(),
        criu: job.criu.display().to_string(),
        runtime: job.runtime.as_ref().map(|r| r.display().to_string()),
        exit_code: None,
        error: None,
        duration_ms: 0,
        log_sha256: None,
    };
    // No part starts once a signal has been seen (this thread stops here for good).
    crate::ns::cleanup::checkpoint();
    let spawned = std::fs::File::create(&log_path).and_then(|log| {
        let mut cmd = std::process::Command::new(&opts.exe);
        cmd.args(["run", "--quiet", "--phases", job.phases, "--criu"])
            .arg(&job.criu)
            .arg("--evidence")
            .arg(opts.evidence.join(&job.folder))
            // Its folder is inside this one: the part may create it only as this matrix's
            // part, which it proves (`evidence::enclosing::refuse_inside_evidence`).
            .arg("--part-of-matrix")
            .arg(&opts.evidence)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(r) = &job.runtime {
            cmd.arg("--runtime").arg(r);
        }
        let matrix = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the child between fork and exec and makes only the
        // async-signal-safe calls signal(2), prctl(2) and getppid(2); it allocates nothing.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || die_with_matrix(matrix));
        }
        cmd.spawn()
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            part.error = Some(format!("cannot start {}: {e}", opts.exe.display()));
            return part;
        }
    };
    let release = on_signal(
        &job.folder,
        &opts.evidence.join(&job.folder),
        child.id() as i32,
    );
    let status = wait_bounded(&mut child, opts.cell_timeout);
    // A group signal (Ctrl-C) ends the part too: seen here, the matrix stops, not records it.
    crate::ns::cleanup::checkpoint();
    drop(release);
    part.duration_ms = t0.elapsed().as_millis() as u64;
    part.log_sha256 = crate::evidence::sha256_recorded(&log_path)
        .ok()
        .map(|(s, _)| s);
    let tail = std::fs::read_to_string(&log_path)
        .map(|t| t.lines().rev().take(3).collect::<Vec<_>>().join(" | "))
        .unwrap_or_default();
    match status {
        Ok(st) => {
            part.exit_code = st.code();
            if !opts
                .evidence
                .join(&job.folder)
                .join(crate::evidence::result::RESULT_FILE)
                .is_file()
            {
                let how = match (
                    st.code(),
                    std::os::unix::process::ExitStatusExt::signal(&st),
                ) {
                    (Some(c), _) => format!("exit code {c}"),
                    (None, Some(sig)) => format!("killed by signal {sig}"),
                    (None, None) => "no exit status".to_string(),
                };
                part.error = Some(format!("no result ({how}): {tail}"));
            }
        }
        Err(stopped) => {
            part.error = Some(format!(
                "did not finish within {} s: stopped ({stopped}); its evidence so far is kept in {}",
                opts.cell_timeout.as_secs(),
                job.folder
            ));
        }
    }
    part
}

/// Run in a part's child between fork and exec: the part gets SIGTERM when the thread that
/// forked it ends (`PR_SET_PDEATHSIG` is tied to the forking thread, not the process). That is
/// this worker thread, which waits for its part and returns only once the part has ended: it
/// ends first only when the matrix dies (SIGKILL, a crash) or the thread panics. The part then
/// stops as on any SIGTERM: its own release stops what it started (holders, runtime, CRIU,
/// containers) and leaves its `interrupted.txt`. The setting survives the part's `execve`
/// (netprobe is not set-user-ID). A matrix `matrix` that died before the setting took (the child
/// already re-parented) ends the child here, before exec: nothing has started. SIGTERM is set
/// back to its default action first: the child inherited the matrix's handler, which would
/// swallow a SIGTERM arriving before exec and let the part run on unsignalled; now such a
/// signal ends the child before exec (after exec the action is the default anyway until the
/// part installs its own handler, first thing, before it starts anything).
///
/// Errors: signal(2) or prctl(2) refused, or the parent is no longer `matrix` (`ESRCH`); the
/// spawn fails.
fn die_with_matrix(matrix: libc::pid_t) -> std::io::Result<()> {
    // SAFETY: signal(2) with SIG_DFL installs no handler and touches no memory of ours.
    if unsafe { libc::signal(libc::SIGTERM, libc::SIG_DFL) } == libc::SIG_ERR {
        return Err(std::io::Error::last_os_error());
    }
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)?;
    if nix::unistd::getppid().as_raw() != matrix {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Waits for `child` at most `limit`; then SIGTERM, and SIGKILL 30 s later. `Err` on timeout:
/// how it was stopped, as done — `SIGTERM; it exited after N ms`, `SIGTERM; no exit within 30 s,
/// then SIGKILL`, or `SIGKILL` (no pidfd to signal it through).
fn wait_bounded(
    child: &mut std::process::Child,
    limit: Duration,
) -> Result<std::process::ExitStatus, super::PartStop> {
    let pid = child.id() as i32;
    let fd = crate::ns::pidfd_open(pid).ok();
    let ended = match &fd {
        Some(fd) => {
            // In slices, so that a signal to the matrix stops this thread within 200 ms (the
            // part itself is stopped by its registered release).
            let deadline = Instant::now() + limit;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let slice = left.min(Duration::from_millis(200));
                if crate::ns::wait_pidfd_exit(fd, slice).unwrap_or(false) {
                    break true;
                }
                crate::ns::cleanup::checkpoint();
                if left <= slice {
                    break false;
                }
            }
        }
        None => {
            let deadline = Instant::now() + limit;
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break true;
                }
                crate::ns::cleanup::checkpoint();
                if Instant::now() >= deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    };
    if ended {
        return child.wait().map_err(super::PartStop::WaitFailed);
    }
    let how = match &fd {
        Some(fd) => {
            let t = Instant::now();
            let _ = crate::ns::pidfd_send_signal(fd, libc::SIGTERM);
            if crate::ns::wait_pidfd_exit(fd, PART_STOP_WAIT).unwrap_or(false) {
                super::PartStop::Terminated {
                    ms: t.elapsed().as_millis(),
                }
            } else {
                let _ = crate::ns::pidfd_send_signal(fd, libc::SIGKILL);
                super::PartStop::Killed {
                    waited_s: PART_STOP_WAIT.as_secs(),
                }
            }
        }
        None => {
            let _ = child.kill();
            super::PartStop::KilledWithoutPidfd
        }
    };
    let _ = child.wait();
    Err(how)
}

/// What the part's folder `dir` holds now: its result, its `interrupted.txt`, or neither —
/// said of each part the matrix's release stopped, from the folder, not assumed.
fn kept(dir: &std::path::Path) -> String {
    let result = dir.join(crate::evidence::result::RESULT_FILE);
    let note = dir.join(crate::evidence::dir::INTERRUPTED_FILE);
    if result.is_file() {
        format!("its folder holds its result, {}", result.display())
    } else if note.is_file() {
        format!("its folder keeps its interrupted.txt, {}", note.display())
    } else {
        format!(
            "{} holds neither a result nor interrupted.txt",
            dir.display()
        )
    }
}

/// How long a part may take to release what it started after SIGTERM before it is killed.
const PART_STOP_WAIT: Duration = Duration::from_secs(30);

/// Registers the stop of the part `folder` (child `pid`) for an interruption of the matrix:
/// SIGTERM through a pidfd opened now (so a reused pid is never signalled), then at most
/// [`PART_STOP_WAIT`] for it to release what it started and exit, then SIGKILL. The release
/// list names it with how it ended. `None` when the pidfd cannot be opened (the part already
/// ended).
fn on_signal(
    folder: &str,
    dir: &std::path::Path,
    pid: i32,
) -> Option<crate::ns::cleanup::Registration> {
    let fd = crate::ns::pidfd_open(pid).ok()?;
    let dir = dir.to_path_buf();
    Some(crate::ns::cleanup::register_reporting(
        format!("matrix part {folder} (pid {pid})"),
        move || {
            let t0 = Instant::now();
            // Ended but not yet reaped: a signal would still be "sent" to it.
            if crate::ns::wait_pidfd_exit(&fd, Duration::ZERO).unwrap_or(false)
                || crate::ns::pidfd_send_signal(&fd, libc::SIGTERM).is_err()
            {
                return Some(format!("it had already ended ({})", kept(&dir)));
            }
            if crate::ns::wait_pidfd_exit(&fd, PART_STOP_WAIT).unwrap_or(false) {
                return Some(format!(
                    "sent SIGTERM; it ended in {} ms ({})",
                    t0.elapsed().as_millis(),
                    kept(&dir)
                ));
            }
            let _ = crate::ns::pidfd_send_signal(&fd, libc::SIGKILL);
            Some(format!(
                "sent SIGTERM, then SIGKILL after {} s without an exit",
                PART_STOP_WAIT.as_secs()
            ))
        },
    ))
}
