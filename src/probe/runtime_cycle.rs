//! The OCI runtime cycle shared by the `oci` and `external-netns` rungs: bundle (read-only
//! rootfs, `sleep`, stdio on /dev/null, private `--root`), create + start, capture the netns
//! state through the container's pid, checkpoint, prove the container gone, restore, capture
//! again, kill + delete. The runtime is pointed at netprobe's CRIU through its `PATH` (see
//! [`crate::oci::Runtime`]), and the rung fails unless CRIU's own dump.log and restore.log name
//! the requested CRIU version (`Version: X` at the top of a -v4 log).
//! Files in the rung folder: `config.json`, `images/`, `images.json`, `dump.log` and
//! `restore.log` (CRIU's, the rung folder is the runtime's work path), `netstate-before.json`,
//! `netstate-after.json`, `ip-before.txt`, `ip-after.txt`, `runtime-*.json` (argv, exit code,
//! stdout, stderr, milliseconds of each runtime call), `strace-checkpoint.txt` and
//! `strace-restore.txt` with `--strace` (the runtime and its forks; CRIU itself runs untraced,
//! see [`crate::oci::Runtime`]).

use crate::criu;
use crate::evidence::result::RungName;
use crate::netlink::NetState;
use crate::oci::{self, BundleSpec, Container, NetnsSpec, Runtime, RuntimeOps};
use crate::probe::rung::{RungCtx, RungError, RungOutput, at};
use crate::probe::util;
use std::path::{Path, PathBuf};

/// Detaches every mount left below a folder when dropped or on interruption (see
/// [`util::detach_mounts_under`]).
struct DetachMountsOnDrop {
    dir: PathBuf,
    _on_signal: crate::ns::cleanup::Registration,
}

impl DetachMountsOnDrop {
    fn new(dir: PathBuf) -> Self {
        let d = dir.clone();
        let reg = crate::ns::cleanup::register(
            format!("mounts left below {}", dir.display()),
            move || {
                util::detach_mounts_under(&d);
            },
        );
        DetachMountsOnDrop {
            dir,
            _on_signal: reg,
        }
    }
}

impl Drop for DetachMountsOnDrop {
    fn drop(&mut self) {
        for m in util::detach_mounts_under(&self.dir) {
            eprintln!(
                "netprobe: detached a mount left by the runtime/CRIU: {}",
                m.display()
            );
        }
    }
}

/// The states captured around checkpoint/restore.
pub struct CycleStates {
    /// Before checkpoint.
    pub before: NetState,
    /// After restore.
    pub after: NetState,
    /// Number of files in the CRIU image.
    pub image_files: usize,
    /// Number of `netns-*.img` files in the CRIU image.
    pub netns_images: usize,
}

/// The full capture (links, addresses with flags, routes, rules, sysctls, netfilter) of the
/// container's netns, written as `netstate-<when>.json` with its side evidence.
fn capture(
    ctx: &RungCtx,
    rung: RungName,
    c: &Container,
    when: &str,
) -> Result<NetState, RungError> {
    let netns = c.netns_path().unwrap_or_default();
    crate::probe::capture::capture_and_write(ctx.evidence, rung.as_str(), &netns, when)
        .map(|(s, _)| s)
        .map_err(|e| RungError::new("state capture", e))
}

/// Runs the cycle for `rung` with the container's network namespace `netns`. `reverify` is
/// called before every namespace entry, checkpoint and restore (the holder's identity for the
/// external-netns rung); when it fails, the cycle stops closed.
///
/// Errors (phase): `rootfs`, `bundle`, `runtime create/start/state/checkpoint/restore`
/// (naming dump.log / restore.log), `container still exists`, `holder`, `state capture`.
pub fn run_cycle(
    ctx: &RungCtx,
    rung: RungName,
    netns: NetnsSpec,
    reverify: &dyn Fn() -> Result<(), crate::ns::NsError>,
    out: &mut RungOutput,
) -> Result<CycleStates, RungError> {
    let ev = ctx.evidence;
    let dir = ev.rung_dir(rung).map_err(at("evidence"))?;
    let rel = |f: &str| format!("{}/{f}", rung.as_str());
    let images = dir.join("images");
    std::fs::create_dir_all(&images).map_err(at("evidence"))?;

    // Work area: rootfs (unless given), bundle and the runtime's private --root. Mounts a
    // killed runtime/CRIU leaves (runc's criu-root, CRIU's cgroup yard in the rung folder,
    // which is its work path) are detached on every way out.
    let work = util::WorkArea::new().map_err(at("work area"))?;
    let _detach = DetachMountsOnDrop::new(dir.clone());
    out.fact("work_area", work.path().display().to_string());
    let bundle = write_bundle(ctx, &work, netns, &rel, out)?;

    let mut runtime = Runtime::new(
        ctx.runtime.clone(),
        work.path().join("runtime-root"),
        Some(ctx.criu.clone()),
    );
    if let Some(kind) = ctx.runtime_kind {
        runtime = runtime.with_kind(kind);
    }
    out.fact("runtime_kind", runtime.kind.as_str());
    if ctx.strace {
        // strace -f -b execve: the runtime and its forks; CRIU runs untraced (see oci::Runtime).
        runtime = runtime.with_strace("strace");
    }
    let id = oci::unique_container_id(&format!("netprobe-{}", rung.as_str()));
    out.fact("container_id", &id);
    let pid_file = work.path().join("container.pid");
    let mut c = Container::new(&runtime, &id, &bundle, &pid_file);
    c.refuse_existing().map_err(at("runtime state"))?;
    c.create().map_err(at("runtime create"))?;
    c.start().map_err(at("runtime start"))?;
    // The pid file runc wrote at create is the init's pid, which `start` execs in place; no
    // `runc state` needed (the holder re-verify and the state capture below fail on a dead pid).
    let pid = c.read_pid().map_err(at("runtime state (after start)"))?;
    out.fact("container_pid_before", pid);

    crate::ns::cleanup::checkpoint();
    reverify().map_err(|e| RungError::new("holder", e))?;
    // `--netns rich` content goes into the container's netns before the capture.
    let netns_path = c.netns_path().unwrap_or_default();
    crate::probe::netns_content::apply(&netns_path, ctx.netns)
        .map_err(|e| RungError::new("netns content", e))?;
    // The `ip` side view runs beside the capture (both only read the netns).
    let (before, view) = std::thread::scope(|s| {
        let view = s.spawn(move || util::ip_view(pid));
        let before = capture(ctx, rung, &c, "before");
        (before, view.join())
    });
    let before = before?;
    if let Ok(Ok(t)) = view {
        let _ = ev.write(&rel("ip-before.txt"), t.as_bytes());
    }

    crate::ns::cleanup::checkpoint();
    reverify().map_err(|e| RungError::new("holder", e))?;
    let paths = CyclePaths {
        work: work.path(),
        dir: &dir,
        rel: &rel,
        images: &images,
    };
    checkpoint(ctx, &mut c, &runtime, &paths, out)?;
    let ran = prove_criu_version(
        &dir.join("dump.log"),
        &ctx.criu_version,
        &ctx.criu,
        CriuRunBy::Runtime,
    )?;
    out.fact("criu_version_dump_log", ran);
    out.fact(
        "criu_network_lock_method",
        crate::images::inventory::lock_method_fact(&images),
    );

    crate::ns::cleanup::checkpoint();
    reverify().map_err(|e| RungError::new("holder", e))?;
    let rs = out.timed("restore", || c.restore(&images, &dir, &[]));
    let o = rs.map_err(runtime_err("runtime restore", dir.join("restore.log")))?;
    let _ = ev.write_json(&rel("runtime-restore.json"), &o);
    let ran = prove_criu_version(
        &dir.join("restore.log"),
        &ctx.criu_version,
        &ctx.criu,
        CriuRunBy::Runtime,
    )?;
    out.fact("criu_version_restore_log", ran);
    let pid = c.read_pid().map_err(at("runtime state (after restore)"))?;
    out.fact("container_pid_after", pid);
    // The restored init's own netns inode, beside the holder's (the external-netns rung asserts
    // the two files equal).
    let ns_path = std::path::PathBuf::from(format!("/proc/{pid}/ns/net"));
    let inode = crate::ns::netns_inode_of(&ns_path).map_err(at("restored netns inode"))?;
    out.fact("container_netns_inode_after", inode);
    ev.write(
        &rel("netns-inode-restored.txt"),
        format!("{inode}\n").as_bytes(),
    )
    .map_err(at("evidence"))?;
    crate::ns::cleanup::checkpoint();
    reverify().map_err(|e| RungError::new("holder", e))?;
    let (after, view) = std::thread::scope(|s| {
        let view = s.spawn(move || util::ip_view(pid));
        let after = capture(ctx, rung, &c, "after");
        (after, view.join())
    });
    if let Ok(Ok(t)) = view {
        let _ = ev.write(&rel("ip-after.txt"), t.as_bytes());
    }
    // kill + delete + `runtime state` proving it gone; if any of that failed, `runtime state`
    // alone decides.
    if c.release().is_err() {
        c.prove_gone()
            .map_err(at("container still exists after delete"))?;
    }
    let after = after?;

    image_facts(ctx, &images, &rel, before, after, out)
}

/// The image inventory (`images.json`, the `netns-*` images named) and the cycle's facts.
fn image_facts(
    ctx: &RungCtx,
    images: &Path,
    rel: &dyn Fn(&str) -> String,
    before: NetState,
    after: NetState,
    out: &mut RungOutput,
) -> Result<CycleStates, RungError> {
    let inv = criu::inventory(images).map_err(at("image inventory"))?;
    ctx.evidence
        .write_json(&rel("images.json"), &inv)
        .map_err(at("evidence"))?;
    let netns_images: Vec<String> = inv
        .iter()
        .filter(|f| f.name.starts_with("netns-"))
        .map(|f| format!("{} ({} bytes)", f.name, f.bytes))
        .collect();
    out.fact("netns_images", &netns_images);
    out.fact("image_files", inv.len());
    if let Some(rung_dir) = images.parent() {
        // Which step lost a fact: live before ↔ images ↔ live after.
        crate::probe::attribution::record(rung_dir, out);
    }
    out.fact(
        "state_byte_equal",
        before.to_canonical_json() == after.to_canonical_json(),
    );
    out.fact("lo_up_with_127_after", after.lo_up_with_127());
    Ok(CycleStates {
        before,
        after,
        image_files: inv.len(),
        netns_images: netns_images.len(),
    })
}

/// The bundle in the work area: the rootfs (`--rootfs`, else the built-in busybox one, built
/// there), read-only, `sleep 86400`, the given network namespace; `config.json` kept as
/// evidence. Returns the bundle folder.
fn write_bundle(
    ctx: &RungCtx,
    work: &util::WorkArea,
    netns: NetnsSpec,
    rel: &dyn Fn(&str) -> String,
    out: &mut RungOutput,
) -> Result<PathBuf, RungError> {
    let rootfs: PathBuf = match (&ctx.rootfs, ctx.shared_rootfs) {
        (Some(r), _) => r.clone(),
        // Built once for the run, beside its first checks (see rung::SharedRootfs).
        (None, Some(shared)) => shared.get().map_err(|e| RungError::new("rootfs", e))?,
        (None, None) => {
            let r = work.path().join("rootfs");
            oci::build_busybox_rootfs(&r).map_err(at("rootfs"))?;
            r
        }
    };
    oci::check_rootfs(&rootfs).map_err(at("rootfs"))?;
    let bundle = work.path().join("bundle");
    let spec = BundleSpec {
        rootfs,
        readonly_root: true,
        args: vec!["sleep".into(), "86400".into()],
        netns,
        resources: None,
        hostname: "netprobe".into(),
        cgroups_path: None,
    };
    let info = oci::write_bundle(&bundle, &spec).map_err(at("bundle"))?;
    ctx.evidence
        .adopt(&rel("config.json"), &info.config_path)
        .map_err(at("evidence"))?;
    out.fact("config_sha256", &info.sha256);
    Ok(bundle)
}

/// A failed runtime call as the rung's error in `phase`, pointing at CRIU's `log` when it
/// exists and the error does not name it already.
fn runtime_err(phase: &'static str, log: PathBuf) -> impl FnOnce(oci::OciError) -> RungError {
    move |e| {
        let hint = util::read_log_hint(&e.to_string(), &log);
        RungError::new(phase, format!("{e}{hint}"))
    }
}

/// The CRIU version a -v4 log names in its `Version: X (gitid …)` line (among its first 50
/// lines), e.g. `(00.000000) Version: 4.3 (gitid 0)` → `4.3`. `None` when there is none.
pub fn criu_version_in_log(text: &str) -> Option<String> {
    text.lines().take(50).find_map(|l| {
        let at = l.find("Version: ")? + "Version: ".len();
        l[at..].split_whitespace().next().map(str::to_string)
    })
}

/// Who ran CRIU, for [`prove_criu_version`]'s sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CriuRunBy {
    /// netprobe ran it itself (the criu rung).
    Netprobe,
    /// The runtime ran the first `criu` in its `PATH` (the private folder's symlink to it).
    Runtime,
}

/// Proves from CRIU's own log that the CRIU that ran is the version `criu --version` reported
/// (`want`, from the binary `criu`): the log's `Version:` line must equal `want`. Returns the
/// version seen. A binary whose `--version` names another CRIU than the one it runs (a wrapper
/// script) fails here.
///
/// Errors (phase `criu identity`): the log is missing, names no version, or another version;
/// the sentence says only what was proven: what `--version` reported and what the log says.
pub fn prove_criu_version(
    log: &Path,
    want: &str,
    criu: &Path,
    by: CriuRunBy,
) -> Result<String, RungError> {
    let text = std::fs::read_to_string(log).map_err(|e| {
        RungError::new(
            "criu identity",
            format!("cannot read {} to prove which CRIU ran: {e}", log.display()),
        )
    })?;
    match criu_version_in_log(&text) {
        Some(v) if v == want => Ok(v),
        Some(v) => Err(RungError::new(
            "criu identity",
            criu_version_mismatch(log, &v, want, criu, by),
        )),
        None => Err(RungError::new(
            "criu identity",
            format!(
                "{} names no CRIU version (no 'Version: ' line at its top): cannot prove that {} ({want}) ran",
                log.display(),
                criu.display()
            ),
        )),
    }
}

/// The sentence of a CRIU whose log names version `seen` where its `--version` said `want`.
pub fn criu_version_mismatch(
    log: &Path,
    seen: &str,
    want: &str,
    criu: &Path,
    by: CriuRunBy,
) -> String {
    let whose = match by {
        CriuRunBy::Netprobe => format!("{} reports CRIU {want} (--version)", criu.display()),
        CriuRunBy::Runtime => format!(
            "the CRIU first in the runtime's PATH, {}, reports CRIU {want} (--version)",
            criu.display()
        ),
    };
    format!(
        "{whose}, but the CRIU that ran says {seen} in its own log {}: a binary whose --version names another CRIU than the one it runs (a wrapper script?) is not the CRIU {want} requested",
        log.display()
    )
}

/// Where one runtime cycle works and writes: the work area, the rung folder, the rung-relative
/// evidence name of a file, and the images folder.
struct CyclePaths<'a> {
    /// The work area (rootfs, bundle, the runtime's `--root`).
    work: &'a Path,
    /// The rung's evidence folder.
    dir: &'a Path,
    /// `<rung>/<file>`: a file's name in the evidence folder.
    rel: &'a dyn Fn(&str) -> String,
    /// `<rung>/images`, where CRIU writes the checkpoint.
    images: &'a Path,
}

/// The checkpoint step (through a runtime whose CRIU runs under strace with `--strace`), its
/// outcome kept as `runtime-checkpoint.json`, then the container proven gone.
fn checkpoint(
    ctx: &RungCtx,
    c: &mut Container,
    runtime: &Runtime,
    paths: &CyclePaths,
    out: &mut RungOutput,
) -> Result<(), RungError> {
    let CyclePaths {
        work,
        dir,
        rel,
        images,
    } = *paths;
    let ev = ctx.evidence;
    let ck_runtime = match ctx.strace {
        true => {
            Some(criu_traced_runtime(runtime, work, dir, &ctx.criu).map_err(at("strace wrapper"))?)
        }
        false => None,
    };
    if let Some(r) = &ck_runtime {
        ev.adopt(
            &rel("criu-strace-wrapper.sh"),
            r.criu.as_deref().unwrap_or(Path::new("")),
        )
        .map_err(at("evidence"))?;
    }
    let via = ck_runtime.as_ref().map(|r| r as &dyn RuntimeOps);
    let ck = out.timed("checkpoint", || c.checkpoint(via, images, dir, &[]));
    let o = ck.map_err(runtime_err("runtime checkpoint", dir.join("dump.log")))?;
    let _ = ev.write_json(&rel("runtime-checkpoint.json"), &o);
    c.prove_gone()
        .map_err(at("container still exists after checkpoint"))
}

/// For `--strace`: the same runtime, but with `--criu` pointing at a generated wrapper (in the
/// work area) that runs the real CRIU under `strace -tt` without following forks, so the trace
/// of `criu swrk`'s main process lands in `<rung>/strace-criu-checkpoint.txt`. CRIU 4.2 and
/// later cannot run with its forks traced (its start-up probe needs PTRACE_TRACEME), and a
/// restore through the wrapper hung here, so only the checkpoint uses it. The wrapper is kept
/// in the evidence as `criu-strace-wrapper.sh`.
///
/// Errors: the wrapper cannot be written.
fn criu_traced_runtime(
    runtime: &Runtime,
    work: &Path,
    rung_dir: &Path,
    criu: &Path,
) -> std::io::Result<Runtime> {
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let criu = crate::host::find_in_path(criu).unwrap_or_else(|| criu.to_path_buf());
    let wrapper = work.join("criu-strace-wrapper.sh");
    let script = format!(
        "#!/bin/sh\n# netprobe --strace: the runtime's criu swrk for checkpoint, main process traced\n\
         exec strace -tt -o {} {} \"$@\"\n",
        quote(&rung_dir.join("strace-criu-checkpoint.txt")),
        quote(&criu)
    );
    crate::evidence::fsio::write_executable(&wrapper, script, 0o755)?;
    let mut r = runtime.clone();
    r.criu = Some(wrapper);
    Ok(r)
}
