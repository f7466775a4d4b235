//! OCI runtime wrapper (runc and crun; the argv is their common CLI).
//!
//! Every call spawns the runtime binary directly (never a shell), always with `--root <private
//! state dir>`. The runtime is pointed at the requested CRIU through its `PATH`: a private folder
//! holding only a `criu` symlink comes first (runc ignores `--criu` since 1.2 and removed it in
//! 1.4; runc and crun's libcriu exec the first `criu` in `PATH`), so the runtime never picks
//! whatever `criu` the host has (Debian 12's 3.17 does not work on kernels >= 6.13). A runtime
//! whose path ends in a number (a slot's sealed copy, `/proc/<holder>/fd/<n>`) is executed
//! through a `runc`/`crun` symlink in that folder with that `argv[0]`, so the kernel names the
//! process after it, not after the descriptor.
//!
//! crun on a hybrid-cgroup host (cgroup2 at `/sys/fs/cgroup/unified`) refuses to run ("cgroups
//! in hybrid mode not supported"): each crun call then runs in a private mount namespace with
//! that mount detached (never on the host), with `--cgroup-manager=cgroupfs`. crun 1.28 records
//! `/run/crun/.empty-directory` for directory `maskedPaths` at checkpoint but looks under
//! `<root>/.empty-directory` at restore, so inside that mount namespace the private state folder
//! is bind-mounted on `/run/crun` and crun gets `--root /run/crun` (see [`crun_quirks`]).

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::error::{OciError, Result, io_err};
use super::guard::reap_if_child;
use super::ids::validate_id;
pub use super::runtime_env::{
    CRUN_DEFAULT_ROOT, HYBRID_UNIFIED_MOUNT, RuntimeKind, crun_quirks, host_is_hybrid,
};
use super::runtime_env::{CriuPathDir, CrunNamespace, RUNC_LOG_PREFIX, tmp_name_prefix};

/// Bytes of stderr (from the end) kept in [`OciError::Failed`].
const STDERR_TAIL_BYTES: usize = 2000;

/// An OCI runtime binary and the private state it works in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime {
    /// The runtime binary, e.g. `/usr/bin/runc`.
    pub path: PathBuf,
    /// Private state directory, always passed as `--root` (never the shared `/run/runc`).
    pub root: PathBuf,
    /// CRIU binary the runtime must use (e.g. `/opt/criu-4.3/sbin/criu`): when set, every call
    /// runs with a private folder holding only a `criu` symlink to it first in `PATH`.
    pub criu: Option<PathBuf>,
    /// The runtime's CLI kind (crun gets its host quirks handled, see the module doc).
    pub kind: RuntimeKind,
    /// strace binary: when set, `checkpoint` and `restore` run as
    /// `strace -f -b execve -tt -o <work_path>/strace-{checkpoint,restore}.txt <runtime> …`:
    /// the runtime and its forks are traced, and strace detaches from a process when it execs,
    /// so `criu swrk` runs untraced. Under plain `strace -f` CRIU fails: at restore the tasks it
    /// forks are strace's tracees ("Can't attach to init: Operation not permitted"), and CRIU
    /// 4.2 or later cannot start at all (its kerndat breakpoints probe needs PTRACE_TRACEME);
    /// both measured here with runc 1.1.5 and CRIU 4.1.1 / 4.2.1.
    pub strace: Option<PathBuf>,
    /// Pass the global `--systemd-cgroup` (runc/crun: the systemd cgroup driver; `cgroupsPath`
    /// must then be `slice:prefix:name`, see `crate::cgroup::systemd`). False: cgroupfs.
    pub systemd_cgroup: bool,
    /// The owner tag of every temporary name a call makes (the CRIU PATH folder, the runc
    /// `--log` file): `slot-<owner id>` for a slot's runtime ([`Runtime::with_slot_owner`]), so
    /// that only that slot's `cleanup` takes what a killed verb of it left; `None` for a probe
    /// run's.
    pub owner_tag: Option<String>,
}

/// The longest any one runtime call may take by default before its whole process tree is killed
/// (SIGKILL) and reported as [`OciError::Timeout`]: 120 s, as for CRIU's own dump and restore.
/// `NETPROBE_STEP_TIMEOUT_S` overrides it (see [`runtime_timeout`]).
pub const RUNTIME_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The bound of one runtime call: [`RUNTIME_TIMEOUT`], or `NETPROBE_STEP_TIMEOUT_S` seconds
/// when set (see [`crate::proc::step_timeout`]).
pub fn runtime_timeout() -> std::time::Duration {
    crate::proc::step_timeout(RUNTIME_TIMEOUT)
}

/// What one runtime invocation did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RuntimeOutcome {
    /// The full argv, binary first (strace first when wrapped).
    pub argv: Vec<String>,
    /// Exit code; None when killed by a signal.
    pub code: Option<i32>,
    /// The signal that killed it (`code` None), e.g. 9.
    pub signal: Option<i32>,
    /// Captured stdout (UTF-8, lossy). Empty for `create`/`restore`, whose stdio is /dev/null.
    pub stdout: String,
    /// Captured stderr (UTF-8, lossy). For `create`/`restore`: the content of runc's `--log`
    /// file (logrus text), since their stdio must be /dev/null.
    pub stderr: String,
    /// Wall time of the invocation, milliseconds, monotonic clock.
    pub duration_ms: u64,
    /// The strace output file, when the call was wrapped.
    pub strace_path: Option<PathBuf>,
}

/// The runtime's view of one container (`runc state ID`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct ContainerState {
    /// Container id.
    pub id: String,
    /// Host pid of the container's init (0 when stopped).
    pub pid: i32,
    /// "created", "running", "paused" or "stopped".
    pub status: String,
    /// Bundle directory the container was created/restored from.
    pub bundle: PathBuf,
}

/// How a runtime call's stdio is wired.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stdio3 {
    /// stdin /dev/null, stdout + stderr piped (the runtime exits; nothing inherits the pipes).
    Piped,
    /// All three /dev/null, runc messages through `--log <tempfile>`: for `create` and `restore`,
    /// whose container init would otherwise inherit the pipes (blocking the read forever) or a
    /// host file (which makes the next checkpoint fail).
    Detached,
}

impl Runtime {
    /// A runtime at `path` using the private state directory `root` and, when given, the CRIU
    /// binary `criu`. Nothing is checked or created here; `root` is created by the runtime.
    /// The kind is guessed from the file name ([`RuntimeKind::guess_from_path`]); set the proven
    /// one with [`Runtime::with_kind`].
    pub fn new(path: impl Into<PathBuf>, root: impl Into<PathBuf>, criu: Option<PathBuf>) -> Self {
        let path = path.into();
        Self {
            kind: RuntimeKind::guess_from_path(&path),
            path,
            root: root.into(),
            criu,
            strace: None,
            systemd_cgroup: false,
            owner_tag: None,
        }
    }

    /// The same runtime, its temporary names tagged with the slot owner id `owner_id`
    /// ([`super::runtime_env::slot_owner_tag`]; an id that is not lowercase hex leaves them
    /// untagged, so no slot's cleanup takes them).
    pub fn with_slot_owner(mut self, owner_id: &str) -> Self {
        self.owner_tag = super::runtime_env::slot_owner_tag(owner_id);
        self
    }

    /// The same runtime with the systemd cgroup driver (`--systemd-cgroup` on every call) when
    /// `on`, cgroupfs otherwise.
    pub fn with_systemd_cgroup(mut self, on: bool) -> Self {
        self.systemd_cgroup = on;
        self
    }

    /// The same runtime, known to be of `kind` (from its `--version`).
    pub fn with_kind(mut self, kind: RuntimeKind) -> Self {
        self.kind = kind;
        self
    }

    /// The same runtime with `checkpoint` and `restore` wrapped in strace (binary `strace`); see
    /// the `strace` field for the flags and why.
    pub fn with_strace(mut self, strace: impl Into<PathBuf>) -> Self {
        self.strace = Some(strace.into());
        self
    }

    /// `<runtime> --version`: stdout holds e.g. "runc version 1.1.5+ds1\ncommit: …".
    ///
    /// Errors: [`OciError::Spawn`] (binary missing), [`OciError::Failed`].
    pub fn version(&self) -> Result<RuntimeOutcome> {
        let out = self.run_raw(vec!["--version".into()], Stdio3::Piped, None, false)?;
        check(out, None)
    }

    /// `runc create --bundle B --pid-file P ID`, detached, no terminal, container stdio
    /// /dev/null. The container's init then waits for [`Runtime::start`].
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Spawn`], [`OciError::Failed`].
    pub fn create(&self, id: &str, bundle: &Path, pid_file: &Path) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        let args = vec![
            "create".into(),
            "--bundle".into(),
            bundle.into(),
            "--pid-file".into(),
            pid_file.into(),
            id.into(),
        ];
        check(self.run_raw(args, Stdio3::Detached, None, true)?, None)
    }

    /// `runc start ID`: run the created container's user process.
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Spawn`], [`OciError::Failed`].
    pub fn start(&self, id: &str) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        check(
            self.run_raw(vec!["start".into(), id.into()], Stdio3::Piped, None, true)?,
            None,
        )
    }

    /// `runc state ID`, parsed. `Ok(None)` when the runtime says the container does not exist.
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Spawn`], [`OciError::Failed`] (any other
    /// failure), [`OciError::Parse`] (stdout is not the state JSON).
    pub fn state(&self, id: &str) -> Result<Option<ContainerState>> {
        validate_id(id)?;
        let out = self.run_raw(vec!["state".into(), id.into()], Stdio3::Piped, None, true)?;
        if out.code != Some(0) && says_does_not_exist(&out.stderr) {
            return Ok(None);
        }
        let out = check(out, None)?;
        serde_json::from_str(&out.stdout)
            .map(Some)
            .map_err(|e| OciError::Parse {
                argv: out.argv.clone(),
                reason: e.to_string(),
                output: truncate_tail(&out.stdout, STDERR_TAIL_BYTES),
            })
    }

    /// `runc kill ID SIGNAL` (signal as runc accepts it: "KILL", "SIGKILL", "9", …). For KILL the
    /// init's pid is read first and reaped afterwards if it is our child (subreaper case).
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Spawn`], [`OciError::Failed`] (also when the
    /// container is not running or does not exist).
    pub fn kill(&self, id: &str, signal: &str) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        let fatal = matches!(signal, "KILL" | "SIGKILL" | "9");
        let pid = if fatal { self.init_pid(id) } else { None };
        self.kill_reaping(id, signal, pid)
    }

    /// `runtime resume ID`: thaws a paused (frozen) container.
    ///
    /// Errors: [`OciError`] when the id is invalid, the runtime cannot run or fails (e.g. the
    /// container is not paused).
    pub fn resume(&self, id: &str) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        check(
            self.run_raw(vec!["resume".into(), id.into()], Stdio3::Piped, None, true)?,
            None,
        )
    }

    /// `runc kill ID SIGNAL`, then reap `pid` (the init's pid, already known from the pid
    /// file) if it is our child — without the extra `runc state` that [`Runtime::kill`] runs.
    pub(crate) fn kill_reaping(
        &self,
        id: &str,
        signal: &str,
        pid: Option<i32>,
    ) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        let out = check(
            self.run_raw(
                vec!["kill".into(), id.into(), signal.into()],
                Stdio3::Piped,
                None,
                true,
            )?,
            None,
        )?;
        if let Some(pid) = pid {
            reap_if_child(pid);
        }
        Ok(out)
    }

    /// `runc delete [--force] ID`; the init's pid (if any) is reaped afterwards if it is our child.
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Spawn`], [`OciError::Failed`].
    pub fn delete(&self, id: &str, force: bool) -> Result<RuntimeOutcome> {
        self.delete_inner(id, force, true)
    }

    /// `runc delete`; with `lookup_pid` the init's pid is read first (`runc state`) and reaped
    /// afterwards. Without it (the init was just killed and reaped) no `runc state` is run.
    pub(crate) fn delete_inner(
        &self,
        id: &str,
        force: bool,
        lookup_pid: bool,
    ) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        let mut args: Vec<OsString> = vec!["delete".into()];
        if force {
            args.push("--force".into());
        }
        args.push(id.into());
        let pid = if lookup_pid { self.init_pid(id) } else { None };
        let out = check(self.run_raw(args, Stdio3::Piped, None, true)?, None)?;
        if let Some(pid) = pid {
            reap_if_child(pid);
        }
        Ok(out)
    }

    /// `runc checkpoint --image-path I --work-path W [extra…] ID`. Without `--leave-running` in
    /// `extra` the container is stopped and removed by runc afterwards (its former init is reaped
    /// if it is our child). CRIU writes `dump.log`
    /// to `work_path`; both directories are created if missing.
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Io`], [`OciError::Spawn`],
    /// [`OciError::Failed`] (carrying `<work_path>/dump.log`).
    pub fn checkpoint(
        &self,
        id: &str,
        image_path: &Path,
        work_path: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        fs::create_dir_all(image_path).map_err(io_err("create directory", image_path))?;
        fs::create_dir_all(work_path).map_err(io_err("create directory", work_path))?;
        let mut args: Vec<OsString> = vec![
            "checkpoint".into(),
            "--image-path".into(),
            image_path.into(),
            "--work-path".into(),
            work_path.into(),
        ];
        args.extend(
            self.kind
                .checkpoint_restore_args()
                .iter()
                .map(OsString::from),
        );
        args.extend(extra.iter().map(OsString::from));
        args.push(id.into());
        let strace = self
            .strace
            .as_ref()
            .map(|_| work_path.join("strace-checkpoint.txt"));
        let stops = !extra
            .iter()
            .any(|a| a == "--leave-running" || a == "--pre-dump");
        let pid = if stops { self.init_pid(id) } else { None };
        let _mounts = work_mounts_on_signal(work_path);
        let out = self.run_raw(args, Stdio3::Piped, strace, true);
        if !matches!(&out, Ok(o) if o.code == Some(0)) {
            detach_mounts_under(work_path);
        }
        let out = check(out?, Some(work_path.join("dump.log")))?;
        if let Some(pid) = pid {
            reap_if_child(pid);
        }
        Ok(out)
    }

    /// `runc restore --detach --bundle B --image-path I --work-path W --pid-file P [extra…] ID`,
    /// stdio /dev/null (runc's messages via `--log`). CRIU writes `restore.log` to `work_path`
    /// (created if missing). Wrapped in strace when [`Runtime::strace`] is set.
    ///
    /// Errors: [`OciError::InvalidId`], [`OciError::Io`], [`OciError::Spawn`],
    /// [`OciError::Failed`] (carrying `<work_path>/restore.log`).
    pub fn restore(
        &self,
        id: &str,
        bundle: &Path,
        image_path: &Path,
        work_path: &Path,
        pid_file: &Path,
        extra: &[String],
    ) -> Result<RuntimeOutcome> {
        validate_id(id)?;
        fs::create_dir_all(work_path).map_err(io_err("create directory", work_path))?;
        let mut args: Vec<OsString> = vec![
            "restore".into(),
            "--detach".into(),
            "--bundle".into(),
            bundle.into(),
            "--image-path".into(),
            image_path.into(),
            "--work-path".into(),
            work_path.into(),
            "--pid-file".into(),
            pid_file.into(),
        ];
        args.extend(
            self.kind
                .checkpoint_restore_args()
                .iter()
                .map(OsString::from),
        );
        args.extend(extra.iter().map(OsString::from));
        args.push(id.into());
        let strace = self
            .strace
            .as_ref()
            .map(|_| work_path.join("strace-restore.txt"));
        let _mounts = work_mounts_on_signal(work_path);
        let out = match self.run_raw(args, Stdio3::Detached, strace, true) {
            Ok(out) => out,
            Err(e) => {
                self.discard_half_made(id);
                detach_mounts_under(work_path);
                return Err(e);
            }
        };
        if out.code != Some(0) {
            detach_mounts_under(work_path);
        }
        check(out, Some(work_path.join("restore.log")))
    }

    /// After a restore whose runtime was killed (timeout, interruption): the runtime's state
    /// directory `<root>/<id>` without a `state.json` is what runc leaves when killed before it
    /// recorded the container — `runc state` then says "does not exist" and `runc delete`
    /// cannot remove it. Its mounts are detached and it is removed; a directory with a
    /// `state.json` is left to the runtime (kill + delete).
    pub(crate) fn discard_half_made(&self, id: &str) {
        let dir = self.root.join(id);
        if dir.is_dir() && !dir.join("state.json").exists() {
            detach_mounts_under(&dir);
            let _ = fs::remove_dir_all(&dir);
        }
    }

    /// Prove the runtime no longer knows `id`: `runc state ID` reports it does not exist.
    ///
    /// Errors: [`OciError::StillExists`] ("container ID still exists (status …)"), or those of
    /// [`Runtime::state`].
    pub fn prove_gone(&self, id: &str) -> Result<()> {
        match self.state(id)? {
            None => Ok(()),
            Some(st) => Err(OciError::StillExists {
                id: id.to_string(),
                status: st.status,
                root: self.root.clone(),
            }),
        }
    }

    /// The container's init pid per `runc state`, when it is running/created/paused (> 0).
    fn init_pid(&self, id: &str) -> Option<i32> {
        match self.state(id) {
            Ok(Some(st)) if st.pid > 0 => Some(st.pid),
            _ => None,
        }
    }

    /// Global options: `--root R [--systemd-cgroup]` (runc); `--root /run/crun
    /// --cgroup-manager=cgroupfs|systemd` (crun, whose private root is bind-mounted there, see
    /// [`CrunNamespace`]). Never `--criu`: the runtime finds CRIU through its PATH.
    fn global_args(&self) -> Vec<OsString> {
        match self.kind {
            RuntimeKind::Runc => {
                let mut g: Vec<OsString> = vec!["--root".into(), self.root.clone().into()];
                if self.systemd_cgroup {
                    g.push("--systemd-cgroup".into());
                }
                g
            }
            RuntimeKind::Crun => vec![
                "--root".into(),
                CRUN_DEFAULT_ROOT.into(),
                if self.systemd_cgroup {
                    "--cgroup-manager=systemd".into()
                } else {
                    "--cgroup-manager=cgroupfs".into()
                },
            ],
        }
    }

    /// The command line up to the runtime's own verb: `strace -f -b execve -tt -o OUT` when
    /// traced, the runtime binary, and its global options when `with_globals`.
    fn argv_prefix(&self, strace_out: Option<&Path>, with_globals: bool) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        if let (Some(strace), Some(out)) = (&self.strace, strace_out) {
            argv.extend([
                strace.clone().into_os_string(),
                // Follow the runtime's forks, but detach from a process when it execs: CRIU
                // >= 4.2 forks a child that calls PTRACE_TRACEME at start-up (kerndat
                // breakpoints check) and fails when a tracer already holds it, so `criu swrk`
                // must run untraced. CRIU's own -v4 log covers it.
                "-f".into(),
                "-b".into(),
                "execve".into(),
                "-tt".into(),
                "-o".into(),
                out.as_os_str().to_os_string(),
            ]);
        }
        argv.push(self.path.clone().into_os_string());
        if with_globals {
            argv.extend(self.global_args());
        }
        argv
    }

    /// Spawn the runtime (optionally under strace), wait, capture. Never fails on a non-zero
    /// exit; only on spawn failure or I/O around the log file.
    fn run_raw(
        &self,
        args: Vec<OsString>,
        stdio: Stdio3,
        strace_out: Option<PathBuf>,
        with_globals: bool,
    ) -> Result<RuntimeOutcome> {
        let mut argv = self.argv_prefix(strace_out.as_deref(), with_globals);
        // The CRIU PATH folder, with the runtime's own symlink when its path would name the
        // process by a number (the slot's sealed copy, `/proc/<holder>/fd/<n>`): executed
        // through `<folder>/runc` with argv[0] `runc`, `ps` shows it as `runc` (crun: `crun`).
        let named = super::runtime_env::named_by_number(&self.path);
        let mut env = Vec::new();
        let exec_dir = if self.criu.is_some() || named {
            Some(CriuPathDir::new(
                self.criu.as_deref(),
                named.then_some((self.kind, self.path.as_path())),
                &mut env,
                self.owner_tag.as_deref(),
            )?)
        } else {
            None
        };
        let link = exec_dir.as_ref().and_then(|d| d.runtime_link());
        let log = match stdio {
            Stdio3::Detached => {
                // Named with this pid (and the owner tag), so one a SIGKILL leaves is found and
                // removed by its owner ([`crate::oci::sweep_stale_runc_logs`]).
                let prefix = tmp_name_prefix(RUNC_LOG_PREFIX, self.owner_tag.as_deref());
                let f = tempfile::Builder::new()
                    .prefix(&prefix)
                    .suffix(".log")
                    .tempfile()
                    .map_err(io_err("create temporary runc log in", std::env::temp_dir()))?;
                argv.push("--log".into());
                argv.push(f.path().into());
                Some(f)
            }
            Stdio3::Piped => None,
        };
        // A signal ends netprobe without unwinding: the temporary log goes with the release.
        let _log_on_signal = log.as_ref().map(|f| {
            let p = f.path().to_path_buf();
            crate::ns::cleanup::register(format!("runtime log {}", p.display()), move || {
                let _ = fs::remove_file(&p);
            })
        });
        argv.extend(args);
        let argv_str: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();

        // What is executed: `argv` (which names the runtime by its own path, as recorded), the
        // runtime's element replaced by its symlink when made.
        let mut exec = argv.clone();
        let at = argv.iter().position(|a| a == self.path.as_os_str());
        if let (Some(l), Some(i)) = (link, at) {
            exec[i] = l.as_os_str().to_os_string();
        }
        let mut cmd = Command::new(&exec[0]);
        if link.is_some() && at == Some(0) {
            use std::os::unix::process::CommandExt;
            cmd.arg0(self.kind.as_str());
        }
        cmd.args(&exec[1..]).stdin(Stdio::null()).envs(env);
        if self.kind == RuntimeKind::Crun {
            CrunNamespace::new(&self.root)?.apply(&mut cmd);
        }
        match stdio {
            Stdio3::Piped => {
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
            Stdio3::Detached => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        // The whole process tree (strace, the runtime, its `criu swrk`, anything they fork that
        // hangs holding the pipes) is bounded: killed as a group at the bound or on
        // interruption, so netprobe — and its release on interruption, which calls the runtime
        // too — never waits forever.
        let limit = runtime_timeout();
        // An interruption kills the tree, then releases: CRIU's root yard goes too.
        let _yards_on_signal = super::error::register_yard_release(&argv_str);
        let output = match crate::proc::run_tree(&mut cmd, limit, None) {
            Ok(o) => o,
            Err(crate::proc::TreeError::Spawn { source, .. })
            | Err(crate::proc::TreeError::Io { source, .. }) => {
                return Err(OciError::Spawn {
                    argv: argv_str,
                    source,
                });
            }
            Err(crate::proc::TreeError::TimedOut { .. }) => {
                let yards = super::error::release_criu_yards(&argv_str);
                return Err(OciError::Timeout {
                    log: super::error::timeout_log(log.as_ref().map(|f| f.path()), &argv_str)
                        + &yards,
                    argv: argv_str,
                    timeout_ms: limit.as_millis() as u64,
                });
            }
            Err(crate::proc::TreeError::Interrupted { .. }) => {
                return Err(OciError::Interrupted { argv: argv_str });
            }
        };
        let duration_ms = output.duration.as_millis() as u64;
        drop(exec_dir);
        let stderr = match &log {
            Some(f) => fs::read_to_string(f.path()).unwrap_or_default(),
            None => String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        Ok(RuntimeOutcome {
            argv: argv_str,
            code: output.status.code(),
            signal: std::os::unix::process::ExitStatusExt::signal(&output.status),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr,
            duration_ms,
            strace_path: strace_out.filter(|_| self.strace.is_some()),
        })
    }
}

/// Lazily unmounts (`MNT_DETACH`) everything at or below `dir`, deepest first: what a runtime or
/// CRIU killed mid-step leaves mounted there (runc's `criu-root` in its state directory, CRIU's
/// cgroup yard `.criu.cgyard.*` in its work directory).
fn detach_mounts_under(dir: &Path) {
    crate::ns::mountinfo::unmount_under(dir, |m| {
        nix::mount::umount2(m, nix::mount::MntFlags::MNT_DETACH)
    });
}

/// While a checkpoint or restore runs: on a signal, CRIU's leftover mounts in its work directory
/// are detached ([`detach_mounts_under`]) by the release, after the tree was killed.
fn work_mounts_on_signal(work_path: &Path) -> crate::ns::cleanup::Registration {
    let w = work_path.to_path_buf();
    crate::ns::cleanup::register(format!("CRIU mounts under {}", w.display()), move || {
        detach_mounts_under(&w)
    })
}

/// Turn a non-zero exit into [`OciError::Failed`] (with the CRIU log path, and CRIU's deciding
/// lines quoted from it, when given).
fn check(out: RuntimeOutcome, criu_log: Option<PathBuf>) -> Result<RuntimeOutcome> {
    if out.code == Some(0) {
        return Ok(out);
    }
    let criu_reason = criu_log.as_deref().and_then(crate::criu::quote_log);
    Err(OciError::Failed {
        argv: out.argv,
        code: out.code,
        signal: out.signal,
        stderr_tail: truncate_tail(out.stderr.trim(), STDERR_TAIL_BYTES),
        log: criu_log,
        criu_reason,
    })
}

/// Whether runc's stderr says the container is unknown ("container does not exist").
pub(crate) fn says_does_not_exist(stderr: &str) -> bool {
    stderr.contains("does not exist")
}

fn truncate_tail(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &s[start..])
}

/// Fail when `id` already exists under `runtime`'s root: netprobe never deletes a container it
/// did not create.
///
/// Errors: [`OciError::AlreadyExists`] ("a container named ID already exists under runc root R;
/// … run runc --root R delete -f ID"), or those of [`Runtime::state`].
pub fn refuse_existing(runtime: &Runtime, id: &str) -> Result<()> {
    match runtime.state(id)? {
        None => Ok(()),
        Some(_) => Err(OciError::AlreadyExists {
            id: id.to_string(),
            root: runtime.root.clone(),
        }),
    }
}

/// Read a runtime `--pid-file` (decimal pid, optional trailing newline).
///
/// Errors: [`OciError::Io`] (unreadable), [`OciError::Parse`] (not a positive integer).
pub fn read_pid_file(path: &Path) -> Result<i32> {
    let s = fs::read_to_string(path).map_err(io_err("read pid file", path))?;
    match s.trim().parse::<i32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(OciError::Parse {
            argv: vec![path.display().to_string()],
            reason: "pid file does not hold a positive integer".into(),
            output: truncate_tail(&s, 200),
        }),
    }
}
