//! What every rung gets and gives: the context (evidence folder, binaries, options), the output
//! (facts, timings, the deciding fact), and the error (phase + reason, with what was gathered).

use crate::evidence::EvidenceDir;
use crate::evidence::result::RungName;
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
    /// The runtime's kind, from its `--version` (None when no runtime rung runs).
    pub runtime_kind: Option<crate::oci::RuntimeKind>,
    /// The requested CRIU's version (`criu --version`): the runtime rungs fail unless CRIU's
    /// own dump.log/restore.log name it.
    pub criu_version: String,
    /// Rootfs for runtime rungs; `None` = built-in busybox rootfs.
    pub rootfs: Option<PathBuf>,
    /// Wrap CRIU / the runtime in `strace -f`.
    pub strace: bool,
    /// netprobe binary for holders.
    pub exe: PathBuf,
    /// Holders the runner started when the run began (see [`EarlyHolders`]); `None` = each
    /// rung starts its own.
    pub early_holders: Option<&'a EarlyHolders>,
    /// What the probe's netns holds before the checkpoint (`--netns lo|rich`; criu and
    /// runtime rungs).
    pub netns: crate::probe::netns_content::NetnsContent,
    /// The built-in busybox rootfs the runner started building when the run began (see
    /// [`SharedRootfs`]); `None` (with `rootfs` `None` too) = each runtime rung builds its own.
    pub shared_rootfs: Option<&'a SharedRootfs>,
}

/// Why [`SharedRootfs`] has no rootfs. `Clone`: every runtime rung that asks gets the same
/// answer, so the causes are kept as their sentences.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SharedRootfsError {
    /// The work area could not be made.
    #[error("work area for the busybox rootfs: {0}")]
    WorkArea(String),
    /// `oci::build_busybox_rootfs` failed (busybox missing or not static, an applet missing, I/O).
    #[error("{0}")]
    Build(String),
    /// [`SharedRootfs::get`] found no build thread (it cannot be started twice).
    #[error("the busybox rootfs build was not started")]
    NotStarted,
}

/// What [`SharedRootfs`]'s thread yields: the work area holding the rootfs, and its path.
type BuiltRootfs = Result<(crate::probe::util::WorkArea, std::path::PathBuf), SharedRootfsError>;

/// The built-in busybox rootfs (`oci::build_busybox_rootfs`), built once per run on a thread
/// of its own when the run begins (beside `criu check`) instead of once in each runtime rung,
/// and shared by the runtime rungs: each one's container mounts it read-only, one container
/// after the other. It lives in a work area of its own (`/var/tmp/netprobe-<pid>-…`, released
/// on a signal and found by the next run after a SIGKILL), removed when this is dropped.
pub struct SharedRootfs {
    start: std::sync::Mutex<Option<std::thread::JoinHandle<BuiltRootfs>>>,
    built: std::sync::OnceLock<BuiltRootfs>,
}

impl SharedRootfs {
    /// Starts building the rootfs on a thread.
    pub fn start() -> SharedRootfs {
        let handle = std::thread::spawn(|| {
            let work = crate::probe::util::WorkArea::new()
                .map_err(|e| SharedRootfsError::WorkArea(e.to_string()))?;
            let rootfs = work.path().join("rootfs");
            crate::oci::build_busybox_rootfs(&rootfs)
                .map_err(|e| SharedRootfsError::Build(e.to_string()))?;
            Ok((work, rootfs))
        });
        SharedRootfs {
            start: std::sync::Mutex::new(Some(handle)),
            built: std::sync::OnceLock::new(),
        }
    }

    /// Waits for the build. Returns the rootfs folder.
    ///
    /// Errors: [`SharedRootfsError`]: why the work area or the rootfs could not be made.
    pub fn get(&self) -> Result<std::path::PathBuf, SharedRootfsError> {
        self.built
            .get_or_init(|| {
                let handle = self.start.lock().unwrap_or_else(|p| p.into_inner()).take();
                match handle {
                    Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
                    None => Err(SharedRootfsError::NotStarted),
                }
            })
            .as_ref()
            .map(|(_, p)| p.clone())
            .map_err(Clone::clone)
    }
}

impl Drop for SharedRootfs {
    fn drop(&mut self) {
        // A build nobody waited for is joined, so its work area is removed here too.
        let handle = self
            .start
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            drop(h.join());
        }
    }
}

/// The holder a rung runs its process or container in: netprobe's `__holder` mode (`exe`), with
/// `lo` brought up for the criu and external-netns rungs and left DOWN for the kernel rung (which
/// brings it up itself). `None` for the oci rung (runc creates its netns).
pub fn holder_options(rung: RungName, exe: &std::path::Path) -> Option<crate::ns::HolderOptions> {
    let lo_up = match rung {
        RungName::Kernel => false,
        RungName::Criu | RungName::ExternalNetns => true,
        RungName::Oci => return None,
    };
    Some(crate::ns::HolderOptions {
        exe: exe.to_path_buf(),
        lo_up,
    })
}

impl RungCtx<'_> {
    /// The rung's holder: the one the runner started early for it, else a new one
    /// ([`holder_options`]). Its identity is proven by `Holder::spawn` either way.
    ///
    /// Errors: those of `Holder::spawn`; `NsError::Os` if the rung has no holder.
    pub fn holder(&self, rung: RungName) -> Result<crate::ns::Holder, crate::ns::NsError> {
        if let Some(h) = self.early_holders.and_then(|e| e.take(rung)) {
            return h;
        }
        let opts = holder_options(rung, &self.exe).ok_or_else(|| crate::ns::NsError::Os {
            op: "holder for a rung that has none",
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        })?;
        crate::ns::Holder::spawn_for_run(&opts)
    }
}

/// Holders started on background threads when the run begins, one per requested rung that uses
/// one, so that creating their network namespaces (which waits for the kernel's clean-up of
/// namespaces destroyed by earlier rungs) overlaps the host checks (`criu check`) instead of
/// adding to each rung. A rung [`take`](EarlyHolders::take)s its own and proves its identity as
/// for any holder; Drop joins every thread and stops every holder nobody took.
#[derive(Default)]
pub struct EarlyHolders(std::sync::Mutex<Vec<(RungName, HolderStart)>>);

/// A holder being started on its own thread.
type HolderStart = std::thread::JoinHandle<Result<crate::ns::Holder, crate::ns::NsError>>;

impl EarlyHolders {
    /// Starts `Holder::spawn` on a thread for every rung of `rungs` that has a holder.
    pub fn start(rungs: &[RungName], exe: &std::path::Path) -> EarlyHolders {
        let started = rungs
            .iter()
            .filter_map(|r| holder_options(*r, exe).map(|o| (*r, o)))
            .map(|(r, o)| {
                let worker = crate::ns::cleanup::worker();
                let start = std::thread::spawn(move || {
                    let _worker = worker;
                    crate::ns::Holder::spawn_for_run(&o)
                });
                (r, start)
            })
            .collect();
        EarlyHolders(std::sync::Mutex::new(started))
    }

    /// Waits for `rung`'s holder to be started; `None` if there is none (not started, or taken).
    pub fn take(&self, rung: RungName) -> Option<Result<crate::ns::Holder, crate::ns::NsError>> {
        // After a signal, a holder thread parks at its `register` and is never joined: stop here.
        crate::ns::cleanup::checkpoint();
        let handle = {
            let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
            let i = list.iter().position(|(r, _)| *r == rung)?;
            list.remove(i).1
        };
        Some(
            handle
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        )
    }
}

impl Drop for EarlyHolders {
    fn drop(&mut self) {
        let list = std::mem::take(self.0.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (_, handle) in list {
            // A holder nobody took is stopped by its own Drop here.
            drop(handle.join());
        }
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
    /// A new error in `phase`. A `reason` that itself begins with `<phase>: ` (e.g. a CRIU
    /// error, `criu dump: …`) keeps the phase once: it is shown as `phase: reason`.
    pub fn new(phase: &str, reason: impl std::fmt::Display) -> Self {
        let reason = reason.to_string();
        let reason = match reason
            .strip_prefix(phase)
            .and_then(|r| r.strip_prefix(": "))
        {
            Some(rest) => rest.to_string(),
            None => reason,
        };
        RungError {
            phase: phase.into(),
            reason,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_that_repeats_its_phase_keeps_it_once() {
        let e = RungError::new("criu dump", "criu dump: did not finish within 50 ms");
        assert_eq!(e.reason, "did not finish within 50 ms");
        let e = RungError::new("criu dump", "criu dumped nothing");
        assert_eq!(e.reason, "criu dumped nothing");
        let e = RungError::new("holder", "holder pid 3 died");
        assert_eq!(e.reason, "holder pid 3 died");
    }
}
