//! One container handle for the probe's runtime rungs and the slot driver: [`Container`]
//! (runtime, id, bundle, pid file, guard) with the steps create → start → checkpoint → prove
//! gone → restore → release, over a small runtime trait ([`RuntimeOps`]: state, create, start,
//! checkpoint, restore, kill, delete) that [`Runtime`] implements and a recording fake
//! (`fake::RecordingRuntime`, unit tests only) imitates, the way youki's `Syscall` trait
//! separates its container logic from the system.

use super::error::{OciError, Result};
use super::guard::ContainerGuard;
use super::runtime::{ContainerState, Runtime, RuntimeOutcome, read_pid_file};
use std::path::{Path, PathBuf};

/// The runtime operations a container handle needs. Implemented by [`Runtime`] (the real
/// runc/crun CLI); every method mirrors the [`Runtime`] method of the same name and has its
/// errors.
pub trait RuntimeOps: Send + Sync + std::fmt::Debug {
    /// The runtime's private state root (`--root`).
    fn root(&self) -> &Path;
    /// The runtime binary every call runs (for the evidence's log lines); a fake names itself.
    fn binary(&self) -> &Path {
        Path::new("(fake runtime)")
    }
    /// The proof that the runtime does not know `id` without running it: `<root>/<id>` does not
    /// exist (`lstat` says `ENOENT`). runc (libcontainer's `Create`/`Load`, 1.x) and crun
    /// (`libcrun_container_*`, 1.x) keep a container's state only in `<root>/<id>`, and netprobe
    /// always passes a private `--root`, so no entry there means `runtime state` would answer
    /// "does not exist". `None` when the entry exists or `lstat` fails otherwise (then only
    /// `runtime state` can tell).
    fn absent_by_root(&self, id: &str) -> Option<String> {
        let path = self.root().join(id);
        match std::fs::symlink_metadata(&path) {
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && super::ids::validate_id(id).is_ok()
                    && id != "."
                    && id != ".." =>
            {
                Some(format!("{} does not exist (lstat: ENOENT)", path.display()))
            }
            _ => None,
        }
    }
    /// `runtime state ID`; `Ok(None)` when the container does not exist.
    fn state(&self, id: &str) -> Result<Option<ContainerState>>;
    /// [`RuntimeOps::state`] decided without running the runtime where netprobe decides it as
    /// the runtime does (runc: [`super::runc_state::read`]), else by the runtime. Returns the
    /// answer and a sentence saying how it was obtained (for the evidence).
    fn state_quick(&self, id: &str) -> (Result<Option<ContainerState>>, String) {
        (self.state(id), "runtime state".into())
    }
    /// `runtime create --bundle B --pid-file P ID` (detached).
    fn create(&self, id: &str, bundle: &Path, pid_file: &Path) -> Result<RuntimeOutcome>;
    /// `runtime start ID`.
    fn start(&self, id: &str) -> Result<RuntimeOutcome>;
    /// `runtime checkpoint --image-path I --work-path W [extra…] ID`.
    fn checkpoint(
        &self,
        id: &str,
        images: &Path,
        work: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome>;
    /// `runtime restore --detach --bundle B --image-path I --work-path W --pid-file P ID`.
    fn restore(
        &self,
        id: &str,
        bundle: &Path,
        images: &Path,
        work: &Path,
        pid_file: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome>;
    /// `runtime kill ID SIGNAL`.
    fn kill(&self, id: &str, signal: &str) -> Result<RuntimeOutcome>;
    /// `runtime delete [--force] ID`.
    fn delete(&self, id: &str, force: bool) -> Result<RuntimeOutcome>;
    /// Kill (the init `pid` reaped when known), delete `--force` ("does not exist" ignored),
    /// then prove the container gone with `runtime state`.
    fn release(&self, id: &str, pid: Option<i32>) -> Result<()>;
    /// Registers the release of `id` for an interruption by a signal ([`crate::ns::cleanup`]);
    /// `None` where nothing real runs (the fake).
    fn on_signal(&self, id: &str) -> Option<crate::ns::cleanup::Registration>;
    /// Registers, for an interruption by a signal during a checkpoint that leaves the container
    /// running (`slot snapshot`'s container is kept on failure), a thaw of `id` if the killed
    /// checkpoint left it paused (the runtime freezes it for CRIU). `None` where nothing real
    /// runs (the fake).
    fn on_signal_thaw(&self, id: &str) -> Option<crate::ns::cleanup::Registration>;
}

impl RuntimeOps for Runtime {
    fn root(&self) -> &Path {
        &self.root
    }
    fn binary(&self) -> &Path {
        &self.path
    }
    fn state(&self, id: &str) -> Result<Option<ContainerState>> {
        Runtime::state(self, id)
    }
    fn state_quick(&self, id: &str) -> (Result<Option<ContainerState>>, String) {
        if self.kind != super::runtime::RuntimeKind::Runc {
            return (Runtime::state(self, id), "runtime state".into());
        }
        if let Err(e) = super::ids::validate_id(id) {
            return (Err(e), "runtime state".into());
        }
        match super::runc_state::read(&self.root, id) {
            Ok(d) => (Ok(Some(d.state)), d.how),
            Err(u) => (
                Runtime::state(self, id),
                format!("runtime state (not decided in-process: {})", u.0),
            ),
        }
    }
    fn create(&self, id: &str, bundle: &Path, pid_file: &Path) -> Result<RuntimeOutcome> {
        Runtime::create(self, id, bundle, pid_file)
    }
    fn start(&self, id: &str) -> Result<RuntimeOutcome> {
        Runtime::start(self, id)
    }
    fn checkpoint(
        &self,
        id: &str,
        images: &Path,
        work: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome> {
        Runtime::checkpoint(self, id, images, work, extra)
    }
    fn restore(
        &self,
        id: &str,
        bundle: &Path,
        images: &Path,
        work: &Path,
        pid_file: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome> {
        Runtime::restore(self, id, bundle, images, work, pid_file, extra)
    }
    fn kill(&self, id: &str, signal: &str) -> Result<RuntimeOutcome> {
        Runtime::kill(self, id, signal)
    }
    fn delete(&self, id: &str, force: bool) -> Result<RuntimeOutcome> {
        Runtime::delete(self, id, force)
    }
    fn release(&self, id: &str, pid: Option<i32>) -> Result<()> {
        let mut g = ContainerGuard::new(self, id);
        if let Some(p) = pid {
            g.set_pid(p);
        }
        g.release()
    }
    fn on_signal_thaw(&self, id: &str) -> Option<crate::ns::cleanup::Registration> {
        let (rt, cid) = (self.clone(), id.to_string());
        Some(crate::ns::cleanup::register_reporting(
            format!("container {id} left paused by the interrupted checkpoint"),
            move || match rt.state(&cid) {
                Ok(Some(s)) if s.status == "paused" => Some(match rt.resume(&cid) {
                    Ok(_) => "resumed (running again)".to_string(),
                    Err(e) => format!("could not resume it: {e}"),
                }),
                Ok(Some(s)) => Some(format!("not paused ({}), nothing to thaw", s.status)),
                Ok(None) => Some("gone, nothing to thaw".to_string()),
                Err(e) => Some(format!("its state could not be read: {e}")),
            },
        ))
    }
    fn on_signal(&self, id: &str) -> Option<crate::ns::cleanup::Registration> {
        let (rt, cid) = (self.clone(), id.to_string());
        Some(crate::ns::cleanup::register_reporting(
            format!("container {id}"),
            move || {
                let _ = rt.kill(&cid, "KILL");
                let _ = rt.delete(&cid, true);
                // A runtime killed before it recorded the container leaves a state directory
                // (with runc's criu-root mounted) that `delete` cannot remove and that makes
                // the next restore of the same id fail ("already exists").
                rt.discard_half_made(&cid);
                super::cgroups::remove_leftover_cgroups(&cid);
                // What the release proves: the runtime asked again.
                Some(super::guard::release_proof(&rt, &cid))
            },
        ))
    }
}

/// One container of one runtime: its id, bundle and `--pid-file`, and a guard that kills and
/// deletes it on drop, error, panic or signal while armed ([`Container::create`] and
/// [`Container::restore`] arm it; [`Container::disarm`] lets it outlive the handle).
#[derive(Debug)]
pub struct Container<'r> {
    rt: &'r dyn RuntimeOps,
    id: String,
    bundle: PathBuf,
    pid_file: PathBuf,
    pid: Option<i32>,
    armed: bool,
    on_signal: Option<crate::ns::cleanup::Registration>,
}

impl<'r> Container<'r> {
    /// A handle for container `id` of `rt` with `bundle` and `pid_file` (unarmed: nothing is
    /// created or released until a step is called).
    pub fn new(
        rt: &'r dyn RuntimeOps,
        id: impl Into<String>,
        bundle: impl Into<PathBuf>,
        pid_file: impl Into<PathBuf>,
    ) -> Self {
        Container {
            rt,
            id: id.into(),
            bundle: bundle.into(),
            pid_file: pid_file.into(),
            pid: None,
            armed: false,
            on_signal: None,
        }
    }

    /// The container id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The runtime.
    pub fn runtime(&self) -> &'r dyn RuntimeOps {
        self.rt
    }

    /// The init pid read from the pid file by the last [`Container::read_pid`], if any.
    pub fn pid(&self) -> Option<i32> {
        self.pid
    }

    fn arm(&mut self) {
        if !self.armed {
            self.armed = true;
            self.on_signal = self.rt.on_signal(&self.id);
        }
    }

    /// `runtime state ID`: `Ok(None)` = proven absent.
    ///
    /// Errors: those of [`Runtime::state`].
    pub fn state(&self) -> Result<Option<ContainerState>> {
        self.rt.state(&self.id)
    }

    /// `runtime state ID` decided in-process where netprobe can decide it as the runtime does
    /// ([`RuntimeOps::state_quick`]); the answer and how it was obtained.
    pub fn state_quick(&self) -> (Result<Option<ContainerState>>, String) {
        self.rt.state_quick(&self.id)
    }

    /// Fails when the id already exists (netprobe never deletes a container it did not create).
    ///
    /// Errors: [`OciError::AlreadyExists`], or those of [`Runtime::state`].
    pub fn refuse_existing(&self) -> Result<()> {
        match self.state()? {
            None => Ok(()),
            Some(_) => Err(OciError::AlreadyExists {
                id: self.id.clone(),
                root: self.rt.root().to_path_buf(),
            }),
        }
    }

    /// Arms the guard, then `runtime create`.
    ///
    /// Errors: those of [`Runtime::create`].
    pub fn create(&mut self) -> Result<RuntimeOutcome> {
        self.arm();
        self.rt.create(&self.id, &self.bundle, &self.pid_file)
    }

    /// `runtime start`.
    ///
    /// Errors: those of [`Runtime::start`].
    pub fn start(&mut self) -> Result<RuntimeOutcome> {
        self.rt.start(&self.id)
    }

    /// The init pid from the pid file written by `create`/`restore` (which `start` execs in
    /// place), checked to be a live process (`kill(pid, 0)`); remembered for the release.
    ///
    /// Errors: [`OciError::Io`]/[`OciError::Parse`] (pid file), [`OciError::NotRunning`].
    pub fn read_pid(&mut self) -> Result<i32> {
        let pid = read_pid_file(&self.pid_file)?;
        // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return Err(OciError::NotRunning {
                pid,
                pid_file: self.pid_file.clone(),
            });
        }
        self.pid = Some(pid);
        Ok(pid)
    }

    /// `/proc/<init pid>/ns/net` of the container (after [`Container::read_pid`]).
    pub fn netns_path(&self) -> Option<PathBuf> {
        self.pid.map(|p| PathBuf::from(format!("/proc/{p}/ns/net")))
    }

    /// `runtime checkpoint` (through `via` when given, e.g. a runtime whose CRIU is wrapped in
    /// strace); without `--leave-running` the runtime stops and removes the container.
    ///
    /// Errors: those of [`Runtime::checkpoint`].
    pub fn checkpoint(
        &mut self,
        via: Option<&dyn RuntimeOps>,
        images: &Path,
        work: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome> {
        via.unwrap_or(self.rt)
            .checkpoint(&self.id, images, work, extra)
    }

    /// Proves the runtime no longer knows the container (`runtime state`: does not exist).
    ///
    /// Errors: [`OciError::StillExists`], or those of [`Runtime::state`].
    pub fn prove_gone(&self) -> Result<()> {
        match self.state()? {
            None => Ok(()),
            Some(st) => Err(OciError::StillExists {
                id: self.id.clone(),
                status: st.status,
                root: self.rt.root().to_path_buf(),
            }),
        }
    }

    /// Arms the guard, removes the old pid file (a stale pid is never read), then `runtime
    /// restore --detach` from `images` with CRIU's work folder `work`.
    ///
    /// Errors: those of [`Runtime::restore`].
    pub fn restore(
        &mut self,
        images: &Path,
        work: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome> {
        self.arm();
        self.pid = None;
        let _ = std::fs::remove_file(&self.pid_file);
        self.rt
            .restore(&self.id, &self.bundle, images, work, &self.pid_file, extra)
    }

    /// Kill, delete `--force`, prove gone — now; disarms the guard.
    ///
    /// Errors: those of [`RuntimeOps::release`].
    pub fn release(&mut self) -> Result<()> {
        self.armed = false;
        // The signal registration stays until the release is done: a signal that lands while
        // the release's own runtime calls run (and kills them) still releases the container.
        let registration = self.on_signal.take();
        let r = self.rt.release(&self.id, self.pid);
        drop(registration);
        r
    }

    /// Lets the container outlive this handle on drop (the caller's own failure path stops it),
    /// while an interruption by a signal still releases it until the returned registration is
    /// dropped: a restored container whose gates have not all passed yet (`slot restore`,
    /// `slot reset`: an ungated container never outlives an interrupted verb). `None` when
    /// nothing was registered (the fake runtime).
    pub fn disarm_keeping_signal(&mut self) -> Option<crate::ns::cleanup::Registration> {
        self.armed = false;
        self.on_signal.take()
    }

    /// Lets the container outlive this handle (e.g. a provisioned slot).
    pub fn disarm(&mut self) {
        self.armed = false;
        self.on_signal = None;
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        if self.armed
            && let Err(e) = self.release()
        {
            eprintln!("netprobe: cleaning up container {}: {e}", self.id);
        }
    }
}

/// A recording fake runtime for unit tests without root: every call is appended to a shared
/// event list (`runtime <verb> <id>`), answers come from a scripted container status.
#[cfg(test)]
pub mod fake {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Shared, ordered event list (runtime calls and whatever else a test records).
    pub type Events = Arc<Mutex<Vec<String>>>;

    /// The fake: `status` is what `state` answers (`None` = does not exist); create/restore set
    /// it to `running`, checkpoint/kill+delete/release to `None`. Clones share events and status
    /// (one container seen by every runtime a verb builds).
    #[derive(Debug, Default, Clone)]
    pub struct RecordingRuntime {
        /// The recorded events.
        pub events: Events,
        /// The scripted container status.
        pub status: Arc<Mutex<Option<String>>>,
        /// Root path reported.
        pub root: PathBuf,
    }

    impl RecordingRuntime {
        /// A fake whose container has `status`, recording into `events`.
        pub fn new(events: Events, status: Option<&str>) -> Self {
            RecordingRuntime {
                events,
                status: Arc::new(Mutex::new(status.map(str::to_string))),
                root: PathBuf::from("/nonexistent/fake-runtime-root"),
            }
        }

        fn log(&self, what: String) {
            self.events.lock().unwrap().push(what);
        }

        fn set(&self, s: Option<&str>) {
            *self.status.lock().unwrap() = s.map(str::to_string);
        }

        fn ok(&self, argv: &str) -> Result<RuntimeOutcome> {
            Ok(RuntimeOutcome {
                argv: vec!["fake".into(), argv.into()],
                code: Some(0),
                signal: None,
                stdout: String::new(),
                stderr: String::new(),
                duration_ms: 0,
                strace_path: None,
            })
        }
    }

    impl RuntimeOps for RecordingRuntime {
        fn root(&self) -> &Path {
            &self.root
        }
        /// The fake keeps no state folder: its recorded status is the only answer.
        fn absent_by_root(&self, _id: &str) -> Option<String> {
            None
        }
        fn state(&self, id: &str) -> Result<Option<ContainerState>> {
            self.log(format!("runtime state {id}"));
            Ok(self
                .status
                .lock()
                .unwrap()
                .clone()
                .map(|status| ContainerState {
                    id: id.into(),
                    pid: 0,
                    status,
                    bundle: PathBuf::new(),
                }))
        }
        fn create(&self, id: &str, _: &Path, _: &Path) -> Result<RuntimeOutcome> {
            self.log(format!("runtime create {id}"));
            self.set(Some("created"));
            self.ok("create")
        }
        fn start(&self, id: &str) -> Result<RuntimeOutcome> {
            self.log(format!("runtime start {id}"));
            self.set(Some("running"));
            self.ok("start")
        }
        fn checkpoint(&self, id: &str, _: &Path, _: &Path, _: &[String]) -> Result<RuntimeOutcome> {
            self.log(format!("runtime checkpoint {id}"));
            self.set(None);
            self.ok("checkpoint")
        }
        fn restore(
            &self,
            id: &str,
            _: &Path,
            _: &Path,
            _: &Path,
            _: &Path,
            _: &[String],
        ) -> Result<RuntimeOutcome> {
            self.log(format!("runtime restore {id}"));
            self.set(Some("running"));
            self.ok("restore")
        }
        fn kill(&self, id: &str, signal: &str) -> Result<RuntimeOutcome> {
            self.log(format!("runtime kill {id} {signal}"));
            self.ok("kill")
        }
        fn delete(&self, id: &str, _: bool) -> Result<RuntimeOutcome> {
            self.log(format!("runtime delete {id}"));
            self.set(None);
            self.ok("delete")
        }
        fn release(&self, id: &str, _: Option<i32>) -> Result<()> {
            self.log(format!("runtime kill {id} KILL"));
            self.log(format!("runtime delete {id}"));
            self.set(None);
            Ok(())
        }
        fn on_signal(&self, _: &str) -> Option<crate::ns::cleanup::Registration> {
            None
        }
        fn on_signal_thaw(&self, _: &str) -> Option<crate::ns::cleanup::Registration> {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::RecordingRuntime;
    use super::*;

    #[test]
    fn handle_runs_the_cycle_and_releases_when_dropped_armed() {
        let ev = fake::Events::default();
        let rt = RecordingRuntime::new(ev.clone(), None);
        {
            let mut c = Container::new(&rt, "c1", "/b", "/nonexistent/pid");
            c.refuse_existing().unwrap();
            c.create().unwrap();
            c.start().unwrap();
            assert!(c.refuse_existing().is_err());
            c.checkpoint(None, Path::new("/i"), Path::new("/w"), &[])
                .unwrap();
            c.prove_gone().unwrap();
            c.restore(Path::new("/i"), Path::new("/w"), &[]).unwrap();
        }
        let ev = ev.lock().unwrap().clone();
        assert_eq!(
            ev,
            [
                "runtime state c1",
                "runtime create c1",
                "runtime start c1",
                "runtime state c1",
                "runtime checkpoint c1",
                "runtime state c1",
                "runtime restore c1",
                "runtime kill c1 KILL",
                "runtime delete c1",
            ]
        );
    }

    #[test]
    fn disarmed_handle_leaves_the_container() {
        let ev = fake::Events::default();
        let rt = RecordingRuntime::new(ev.clone(), None);
        let mut c = Container::new(&rt, "c2", "/b", "/p");
        c.create().unwrap();
        c.disarm();
        drop(c);
        assert_eq!(ev.lock().unwrap().last().unwrap(), "runtime create c2");
    }

    #[test]
    fn absence_is_proven_only_by_a_missing_entry_under_the_root() {
        let root = tempfile::tempdir().unwrap();
        let rt = Runtime::new("/nonexistent/runc", root.path(), None);
        let p = rt.absent_by_root("c1").expect("no entry: absent");
        assert!(p.contains("c1") && p.contains("ENOENT"), "{p}");
        std::fs::create_dir(root.path().join("c1")).unwrap();
        assert_eq!(
            rt.absent_by_root("c1"),
            None,
            "a state folder: ask the runtime"
        );
        std::fs::write(root.path().join("c2"), b"").unwrap();
        assert_eq!(rt.absent_by_root("c2"), None, "any entry: ask the runtime");
        std::os::unix::fs::symlink("/nonexistent", root.path().join("c3")).unwrap();
        assert_eq!(
            rt.absent_by_root("c3"),
            None,
            "a dangling symlink is an entry"
        );
        for bad in ["", "a/b", "..", ".", "c 1"] {
            assert_eq!(rt.absent_by_root(bad), None, "invalid id {bad:?}");
        }
        let gone = Runtime::new("/nonexistent/runc", root.path().join("never-made"), None);
        assert!(
            gone.absent_by_root("c1").is_some(),
            "no root at all: absent"
        );
    }
}
