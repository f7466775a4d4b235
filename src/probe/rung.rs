//! What every rung gets and gives: the context (evidence folder, binaries, options), the output
//! (facts, timings, the deciding fact), and the error (phase + reason, with what was gathered).

use crate::evidence::EvidenceDir;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

/// Inputs of a rung. Each rung writes only under `evidence.rung_dir(<its name>)`.
pub struct RungCtx<'a> {
    /// The run's evidence folder.
    pub evidence: &'a EvidenceDir,
    /// CRIU binary (absolute or in PATH).
    pub criu: PathBuf,
    /// OCI runtime binary.
    pub runtime: PathBuf,
    /// Rootfs for runtime rungs; `None` = built-in busybox rootfs.
    pub rootfs: Option<PathBuf>,
    /// Wrap CRIU / the runtime in `strace -f`.
    pub strace: bool,
    /// netprobe binary for holders.
    pub exe: PathBuf,
    /// The external-netns rung's holder, already being started by the runner (see
    /// [`EarlyHolder`]); `None` = the rung starts its own.
    pub early_holder: Option<&'a std::cell::RefCell<EarlyHolder>>,
}

/// A holder started on a background thread when the run begins, so that creating its network
/// namespace (which waits for the kernel's clean-up of namespaces destroyed by earlier rungs)
/// overlaps the host checks and the first rungs instead of adding to the run. The rung that
/// needs it [`take`](EarlyHolder::take)s it and proves its identity as for any holder; on every
/// other way out Drop joins the thread and stops the holder (the holder's own Drop).
pub struct EarlyHolder(
    Option<std::thread::JoinHandle<Result<crate::ns::Holder, crate::ns::NsError>>>,
);

impl EarlyHolder {
    /// Starts `Holder::spawn(opts)` on a thread.
    pub fn start(opts: crate::ns::HolderOptions) -> EarlyHolder {
        EarlyHolder(Some(std::thread::spawn(move || {
            crate::ns::Holder::spawn(&opts)
        })))
    }

    /// Waits for the holder's start; `None` if it was already taken.
    pub fn take(&mut self) -> Option<Result<crate::ns::Holder, crate::ns::NsError>> {
        self.0
            .take()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    }
}

impl Drop for EarlyHolder {
    fn drop(&mut self) {
        // A holder nobody took is stopped by its own Drop here.
        drop(self.take());
    }
}

/// What a rung that ran to the end reports besides its files.
#[derive(Debug, Default)]
pub struct RungOutput {
    /// The deciding fact when the rung passes (e.g. "lo UP with 127.0.0.1/8 after restore;
    /// state byte-equal"); on failure the runner appends the failing assertions.
    pub summary: String,
    /// Free-form facts (pids, inodes, counts).
    pub facts: BTreeMap<String, serde_json::Value>,
    /// Step timings, milliseconds, monotonic clock.
    pub timings_ms: BTreeMap<String, u64>,
}

impl RungOutput {
    /// Records a fact.
    pub fn fact(&mut self, k: &str, v: impl serde::Serialize) {
        self.facts
            .insert(k.to_string(), serde_json::to_value(v).unwrap_or_default());
    }

    /// Runs `f`, recording its wall time in milliseconds under `k`.
    pub fn timed<T>(&mut self, k: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.timings_ms
            .insert(k.to_string(), t.elapsed().as_millis() as u64);
        r
    }
}

/// A rung that could not run to the end: the phase it was in and why, plus the facts and
/// timings gathered until then (files already written stay in the evidence folder).
#[derive(Debug, thiserror::Error)]
#[error("{phase}: {reason}")]
pub struct RungError {
    /// The step that failed (e.g. `criu dump`, `runc restore`, `holder`).
    pub phase: String,
    /// Why, naming the input and where to look (log path).
    pub reason: String,
    /// Facts gathered before the failure.
    pub facts: BTreeMap<String, serde_json::Value>,
    /// Timings gathered before the failure, milliseconds.
    pub timings_ms: BTreeMap<String, u64>,
}

impl RungError {
    /// A new error in `phase`.
    pub fn new(phase: &str, reason: impl std::fmt::Display) -> Self {
        RungError {
            phase: phase.into(),
            reason: reason.to_string(),
            facts: BTreeMap::new(),
            timings_ms: BTreeMap::new(),
        }
    }

    /// Attaches what the rung had gathered so far.
    pub fn with(mut self, out: RungOutput) -> Self {
        self.facts = out.facts;
        self.timings_ms = out.timings_ms;
        self
    }
}

/// `map_err` helper: `.map_err(at("criu dump"))`.
pub fn at<E: std::fmt::Display>(phase: &'static str) -> impl Fn(E) -> RungError {
    move |e| RungError::new(phase, e)
}
