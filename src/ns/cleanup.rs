//! Release on interruption. Every guard that starts something outside netprobe's own memory
//! (a holder, an adopted restored process, a container, a work area on disk) registers how to
//! release it here; dropping the guard (normal stop, error, panic unwinding) deregisters it.
//! A signal does not unwind, so [`install_signal_handler`] runs whatever is still registered —
//! newest first, so a container goes before the rootfs it runs on — and then exits with
//! `128 + signal`, the shell convention (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).
//!
//! The rest of netprobe keeps running when the signal arrives, possibly in the middle of a
//! runtime or CRIU operation. The signal thread first kills every process tree being run
//! ([`crate::proc::kill_running_trees`]: a hung runtime or CRIU would otherwise hold its thread
//! for ever), then lets the other threads reach a stop point: each stops for good at its next [`register`] (which releases the thing just
//! started, at once) or [`checkpoint`]. Only once a thread has stopped and every declared
//! [`worker`] thread has stopped or ended (or after [`STOP_WAIT`]) does it release everything
//! and exit.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long the signal thread waits for the other threads to stop at a [`register`] or
/// [`checkpoint`] before it exits anyway (a child process such as CRIU may still be finishing).
pub const STOP_WAIT: Duration = Duration::from_secs(10);

/// A release action; what it returns (if anything) is added to the release list's line.
type Action = Box<dyn FnOnce() -> Option<String> + Send>;

struct Entry {
    id: u64,
    what: String,
    action: Action,
    /// Released after every other entry ([`register_note`]).
    last: bool,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static INTERRUPTED_BY: AtomicI32 = AtomicI32::new(0);
static CLOSING: AtomicBool = AtomicBool::new(false);
static STOPPED: AtomicBool = AtomicBool::new(false);
/// Threads that start things to release ([`worker`]) and are still running.
static WORKERS: AtomicUsize = AtomicUsize::new(0);
/// Threads stopped for good at a [`register`] or [`checkpoint`].
static STOPPED_THREADS: AtomicUsize = AtomicUsize::new(0);
static SIGNAL_THREAD: OnceLock<std::thread::ThreadId> = OnceLock::new();
/// Set by the signal handler itself (signal-hook's flag), before the signal thread wakes.
static SIGNALLED: OnceLock<std::sync::Arc<AtomicBool>> = OnceLock::new();

fn on_signal_thread() -> bool {
    SIGNAL_THREAD.get() == Some(&std::thread::current().id())
}

/// Set by [`command_finished`]: the command has done its work and printed its outcome.
static FINISHED: AtomicBool = AtomicBool::new(false);
/// What the signal path has released so far, in order ([`released_so_far`]).
static RELEASED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// What the signal path has stopped and released so far, in order (`killed the process tree
/// of …`, then each [`release_all`] entry as it finished): what an action that runs last — an
/// interruption note — writes into the evidence, so that the release list is on disk and not
/// only on stderr.
pub fn released_so_far() -> Vec<String> {
    RELEASED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn note_released(what: String) {
    RELEASED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(what);
}

/// Called by `main` once the command has done its work (its outcome printed), before it
/// returns its exit code. When the signal thread has already seen a signal: if nothing is
/// registered any more (the command released everything itself as it ended), the command's
/// exit code stands and this says so; else this thread stops here for good and the process
/// exits with `128 + signal` once every registered release ran. A signal seen after this call
/// finds the command finished: the signal thread says so and interrupts nothing (see
/// [`install_signal_handler`]).
pub fn command_finished() {
    FINISHED.store(true, Ordering::SeqCst);
    if CLOSING.load(Ordering::SeqCst) && !on_signal_thread() {
        if registered().is_empty() {
            eprintln!(
                "netprobe: the {} came after the command's last point where it could stop (the steps after it ran to their end): nothing was left to release; the outcome above and its exit code stand",
                interrupted_by().unwrap_or("signal")
            );
            return;
        }
        stop_here();
    }
}

/// Parks the calling thread for good (the process is exiting).
fn stop_here() -> ! {
    STOPPED_THREADS.fetch_add(1, Ordering::SeqCst);
    STOPPED.store(true, Ordering::SeqCst);
    loop {
        std::thread::park();
    }
}

/// A point where a long sequence of steps may be cut short: once a signal has been seen, the
/// calling thread stops here for good (the signal thread releases everything and exits).
/// Cheap: one atomic load otherwise.
pub fn checkpoint() {
    if closing() && !on_signal_thread() {
        stop_here();
    }
}

/// Whether a signal has been seen: by the signal thread (`CLOSING`), or only by the handler so
/// far (`SIGNALLED`, set inside the signal handler itself, at delivery). A child killed by the
/// same group signal can be reaped before the signal thread wakes; the flag closes that race.
fn closing() -> bool {
    CLOSING.load(Ordering::SeqCst) || SIGNALLED.get().is_some_and(|f| f.load(Ordering::SeqCst))
}

/// Whether the calling thread should stop what it is starting: a signal has been seen and this
/// is not the signal thread (used by [`crate::proc::run_tree`] right after a spawn).
pub fn interrupting() -> bool {
    closing() && !on_signal_thread()
}

/// Declares a thread that starts things netprobe must release (holders, containers, restored
/// processes) for as long as the guard lives. On a signal, the signal thread waits (up to
/// [`STOP_WAIT`]) until every such thread has ended or stopped at its next [`register`] or
/// [`checkpoint`], so nothing one of them was starting at that moment escapes the release.
/// Take the guard on the thread that spawns the worker and move it in, so the worker counts from
/// before it runs.
pub fn worker() -> WorkerGuard {
    WORKERS.fetch_add(1, Ordering::SeqCst);
    WorkerGuard { _private: () }
}

/// See [`worker`]; dropping it ends the thread's declaration.
#[must_use = "the thread counts as a worker only while the guard lives"]
#[derive(Debug)]
pub struct WorkerGuard {
    _private: (),
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        WORKERS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A registered release action; dropping it deregisters the action without running it.
#[must_use = "dropping the registration deregisters the release action at once"]
#[derive(Debug)]
pub struct Registration {
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
        r.retain(|e| e.id != self.id);
    }
}

/// Registers `action` to release `what` (e.g. `holder pid 42`) if netprobe is interrupted
/// before the returned [`Registration`] is dropped. Once a signal has been seen, a thread other
/// than the signal thread runs `action` at once and stops here for good.
pub fn register(what: impl Into<String>, action: impl FnOnce() + Send + 'static) -> Registration {
    register_reporting(what, move || {
        action();
        None
    })
}

/// The release list an interruption note carries: `released, in order:` and one `  - …` line
/// per thing the signal path stopped or released before the note ([`released_so_far`], control
/// characters as spaces); `released: nothing else was running` when none.
pub fn released_list() -> String {
    let done = released_so_far();
    if done.is_empty() {
        return "released: nothing else was running\n".into();
    }
    let mut s = String::from("released, in order:\n");
    for d in done {
        let line: String = d
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        s.push_str(&format!("  - {line}\n"));
    }
    s
}

/// [`register`] for an action that says what it found and did (e.g. `removed …`, `none found`):
/// [`release_all`] lists it as `what: detail`.
pub fn register_reporting(
    what: impl Into<String>,
    action: impl FnOnce() -> Option<String> + Send + 'static,
) -> Registration {
    register_entry(what, action, false)
}

/// [`register_reporting`] for an interruption note: released after every other entry, also
/// those registered before it, so that it can list them ([`released_so_far`]).
pub fn register_note(
    what: impl Into<String>,
    action: impl FnOnce() -> Option<String> + Send + 'static,
) -> Registration {
    register_entry(what, action, true)
}

fn register_entry(
    what: impl Into<String>,
    action: impl FnOnce() -> Option<String> + Send + 'static,
    last: bool,
) -> Registration {
    if closing() && !on_signal_thread() {
        let what = what.into();
        if let Some(d) = action() {
            eprintln!("netprobe:   released {what}: {d}");
        }
        stop_here();
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    r.push(Entry {
        id,
        what: what.into(),
        action: Box::new(action),
        last,
    });
    Registration { id }
}

/// What a release that writes a note (`interrupted.txt`) reports in the release list: `wrote
/// PATH`, or `FAILED: could not write PATH: error` — never a sentence the write did not prove.
pub fn wrote_note<T, E: std::fmt::Display>(
    path: &std::path::Path,
    r: Result<T, E>,
) -> Option<String> {
    Some(match r {
        Ok(_) => format!("wrote {}", path.display()),
        Err(e) => format!("FAILED: could not write {}: {e}", path.display()),
    })
}

/// What is registered now, oldest first (for tests and messages).
pub fn registered() -> Vec<String> {
    let r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    r.iter().map(|e| e.what.clone()).collect()
}

/// Runs every registered action, newest first, and returns what each released (`what`, or
/// `what: detail` for a [`register_reporting`] action that said something; a line equal to
/// one already returned is run but not listed again). Actions registered while this runs are
/// released too.
pub fn release_all() -> Vec<String> {
    let mut done = Vec::new();
    loop {
        let entries = {
            let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
            // Every other entry first; the notes (`last`) when nothing else is left.
            match r.iter().any(|e| !e.last) {
                true => {
                    let (now, notes): (Vec<Entry>, Vec<Entry>) =
                        std::mem::take(&mut *r).into_iter().partition(|e| !e.last);
                    *r = notes;
                    now
                }
                false => std::mem::take(&mut *r),
            }
        };
        if entries.is_empty() {
            return done;
        }
        for e in entries.into_iter().rev() {
            let line = match (e.action)() {
                Some(d) => format!("{}: {d}", e.what),
                None => e.what,
            };
            // Two guards of one thing (a container's handle and the release it was running
            // when the signal came) both act, but the thing is listed once.
            if done.contains(&line) {
                continue;
            }
            note_released(line.clone());
            done.push(line);
        }
    }
}

/// A signal [`install_signal_handler`] waits for, as evidence writes it (`"SIGINT"`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum InterruptSignal {
    /// SIGINT (Ctrl-C): exit 130.
    #[serde(rename = "SIGINT")]
    Sigint,
    /// SIGTERM: exit 143.
    #[serde(rename = "SIGTERM")]
    Sigterm,
    /// SIGHUP: exit 129.
    #[serde(rename = "SIGHUP")]
    Sighup,
}

impl InterruptSignal {
    /// The signal of number `n`, if it is one of the three.
    pub fn from_number(n: i32) -> Option<InterruptSignal> {
        match n {
            signal_hook::consts::SIGINT => Some(InterruptSignal::Sigint),
            signal_hook::consts::SIGTERM => Some(InterruptSignal::Sigterm),
            signal_hook::consts::SIGHUP => Some(InterruptSignal::Sighup),
            _ => None,
        }
    }

    /// The signal's number (2, 15, 1).
    pub fn number(self) -> i32 {
        match self {
            InterruptSignal::Sigint => signal_hook::consts::SIGINT,
            InterruptSignal::Sigterm => signal_hook::consts::SIGTERM,
            InterruptSignal::Sighup => signal_hook::consts::SIGHUP,
        }
    }

    /// The signal's name, as [`interrupted_by`] and the evidence write it (`SIGINT`, …).
    pub fn name(self) -> &'static str {
        match self {
            InterruptSignal::Sigint => "SIGINT",
            InterruptSignal::Sigterm => "SIGTERM",
            InterruptSignal::Sighup => "SIGHUP",
        }
    }

    /// The exit code of a process it interrupts: 128 + its number (130, 143, 129).
    pub fn exit_code(self) -> i32 {
        128 + self.number()
    }
}

/// The signal that interrupted this process, once the handler has seen one of the three.
pub fn interrupt_signal() -> Option<InterruptSignal> {
    InterruptSignal::from_number(INTERRUPTED_BY.load(Ordering::SeqCst))
}

/// The signal that interrupted this process, once the handler has seen one (`SIGINT`, …;
/// [`InterruptSignal::name`]).
pub fn interrupted_by() -> Option<&'static str> {
    match INTERRUPTED_BY.load(Ordering::SeqCst) {
        0 => None,
        n => Some(InterruptSignal::from_number(n).map_or("a signal", InterruptSignal::name)),
    }
}

/// Starts a thread that waits for SIGINT, SIGTERM or SIGHUP; on the first one it says so on
/// stderr, runs [`release_all`] (naming each thing released), and exits with `128 + signal`.
/// Call once, early (`netprobe run` and `netprobe slot` do; a slot verb registers only what
/// must not outlive an interrupted verb, never a holder it keeps).
///
/// Errors: the handler could not be installed (signal-hook's error).
pub fn install_signal_handler() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flag = SIGNALLED.get_or_init(|| std::sync::Arc::new(AtomicBool::new(false)));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("netprobe-signals".into())
        .spawn(move || {
            let _ = SIGNAL_THREAD.set(std::thread::current().id());
            if let Some(sig) = signals.forever().next() {
                INTERRUPTED_BY.store(sig, Ordering::SeqCst);
                CLOSING.store(true, Ordering::SeqCst);
                let name = interrupted_by().unwrap_or("a signal");
                if FINISHED.load(Ordering::SeqCst) {
                    // The command's work was done and its outcome printed: nothing to stop.
                    eprintln!(
                        "netprobe: {name} arrived after the command had finished: nothing was interrupted"
                    );
                    return;
                }
                eprintln!(
                    "netprobe: interrupted by {name}: stopping the current step, then releasing what this run started"
                );
                // A hung program (runtime, CRIU, …) would keep its thread from ever reaching a
                // stop point: kill every running process tree first.
                for what in crate::proc::kill_running_trees() {
                    eprintln!("netprobe:   killed the process tree of {what}");
                    note_released(format!("killed the process tree of {what}"));
                }
                let deadline = Instant::now() + STOP_WAIT;
                let all_stopped = || {
                    STOPPED.load(Ordering::SeqCst)
                        && STOPPED_THREADS.load(Ordering::SeqCst)
                            >= WORKERS.load(Ordering::SeqCst)
                };
                while !all_stopped() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let released = release_all();
                for what in released {
                    eprintln!("netprobe:   released {what}");
                }
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupt_signals_name_their_number_and_exit_code() {
        for (s, name, code) in [
            (InterruptSignal::Sigint, "SIGINT", 130),
            (InterruptSignal::Sigterm, "SIGTERM", 143),
            (InterruptSignal::Sighup, "SIGHUP", 129),
        ] {
            assert_eq!(InterruptSignal::from_number(s.number()), Some(s));
            assert_eq!(s.name(), name);
            assert_eq!(s.exit_code(), code);
            assert_eq!(serde_json::to_value(s).unwrap(), name);
        }
        assert_eq!(InterruptSignal::from_number(9), None);
    }

    #[test]
    fn dropped_registrations_never_run_and_live_ones_run_newest_first() {
        // A note registered before them all is still released after them, and lists them.
        let note = register_note("zz-note", || {
            let seen: Vec<String> = released_so_far()
                .into_iter()
                .filter(|w| w.starts_with("unit-"))
                .collect();
            Some(seen.join(" | "))
        });
        let log = std::sync::Arc::new(Mutex::new(Vec::new()));
        let l1 = log.clone();
        let a = register("unit-a", move || l1.lock().unwrap().push("a"));
        let l2 = log.clone();
        let b = register("unit-b", move || l2.lock().unwrap().push("b"));
        let l3 = log.clone();
        let c = register("unit-c", move || l3.lock().unwrap().push("c"));
        // A second guard of the same thing (e.g. a container's handle and the release it is
        // running): both act, listed once.
        let l5 = log.clone();
        let a2 = register("unit-a", move || l5.lock().unwrap().push("a2"));
        let l4 = log.clone();
        let d = register_reporting("unit-d", move || {
            l4.lock().unwrap().push("d");
            Some("said what it did".into())
        });
        drop(b);
        assert!(registered().contains(&"unit-a".to_string()));
        assert!(!registered().contains(&"unit-b".to_string()));
        let all = release_all();
        let released: Vec<String> = all
            .iter()
            .filter(|w| w.starts_with("unit-"))
            .cloned()
            .collect();
        assert_eq!(released, ["unit-d: said what it did", "unit-a", "unit-c"]);
        assert_eq!(
            all.last().map(String::as_str),
            Some("zz-note: unit-d: said what it did | unit-a | unit-c")
        );
        drop(note);
        assert_eq!(*log.lock().unwrap(), ["d", "a2", "c", "a"]);
        drop((a, a2, c, d)); // already released: deregistering is a no-op
    }
}
