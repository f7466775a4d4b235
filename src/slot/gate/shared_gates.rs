//! The gates and steps several verbs share: CRIU config, binaries, `config.json` + holder, the
//! container proven gone, and the ready gates (lo, guest server, container in the holder's
//! netns, cgroup limits).

use super::guest_net;
use super::pure_checks;
use crate::host;
use crate::netlink::NetState;
use crate::ns::ProcessIdentity;
use crate::oci::{self, ContainerState, OciError, RuntimeOps};
use crate::slot::JournalEvent;
use crate::slot::error::SlotError;
use crate::slot::error::StepId;
use crate::slot::gate::GateId;
use crate::slot::gate::Observed;
use crate::slot::gate::{NotProven, ObservedWith};
use crate::slot::record::evidence_writes;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::cgroups;
use crate::slot::resources::fs_tools;
use crate::slot::resources::sealed_binaries;
use crate::slot::state::{ImageKind, SlotState};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The `criu-config-absent` gate (blocking: a host refusal; else recorded).
pub(crate) fn criu_config_gate(run: &mut VerbRun, blocking: bool) -> Result<(), SlotError> {
    let r = match host::refuse_criu_config() {
        Ok(()) => Ok("none of /etc/criu/default.conf, ~/.criu/default.conf, /etc/criu/runc.conf, $CRIU_CONFIG_FILE".into()),
        Err(e) => Err(e.to_string()),
    };
    run.gate_or_record(GateId::CriuConfigAbsent, blocking, r)
}

/// The sealed copy ([`crate::slot::resources::sealed_binaries`]) a verb runs for one binary: the holder's pid and the
/// copy's record; else why the file is hashed instead.
type SealedUse = Result<(i32, sealed_binaries::SealedCopy), &'static str>;

/// Per binary (runtime, CRIU): its sealed copy when `state.json` records one, the recorded
/// holder is alive with its identity and no `--runtime`/`--criu` names another file (a verb
/// after a crash, whose holder is gone, runs and re-hashes the files on disk).
fn sealed_use(run: &VerbRun, st: &SlotState) -> (SealedUse, SealedUse) {
    let holder = match st.holder {
        None => Err("no holder recorded"),
        Some(h) if pure_checks::holder(st).is_ok() => Ok(h.pid),
        Some(_) => Err("the holder that keeps its sealed copy is gone"),
    };
    let of = |given: bool, flag: &'static str, pin: &crate::slot::state::BinaryPin| -> SealedUse {
        if given {
            return Err(flag);
        }
        let pid = holder?;
        pin.sealed
            .clone()
            .map(|s| (pid, s))
            .ok_or("state.json records no sealed copy")
    };
    (
        of(
            run.args.runtime.is_some(),
            "--runtime names this file",
            &st.runtime,
        ),
        of(run.args.criu.is_some(), "--criu names this file", &st.criu),
    )
}

/// The runtime and CRIU paths this verb uses: the holder's sealed copies
/// (`/proc/<holder pid>/fd/<n>`) where [`sealed_use`] allows, else `--runtime`/`--criu` if
/// given, else the ones recorded at provision (either way checked by [`binary_gates`]).
pub(crate) fn binary_paths(run: &VerbRun, st: &SlotState) -> (PathBuf, PathBuf) {
    let (s_rt, s_cr) = sealed_use(run, st);
    paths_of(run, st, &s_rt, &s_cr)
}

/// [`binary_paths`] from [`sealed_use`]'s answer (one answer for a gate and what it returns).
fn paths_of(
    run: &VerbRun,
    st: &SlotState,
    s_rt: &SealedUse,
    s_cr: &SealedUse,
) -> (PathBuf, PathBuf) {
    let path = |s: &SealedUse, given: &Option<PathBuf>, recorded: &PathBuf| match s {
        Ok((pid, rec)) => sealed_binaries::exec_path(*pid, rec),
        Err(_) => given.clone().unwrap_or(recorded.clone()),
    };
    (
        path(s_rt, &run.args.runtime, &st.runtime.path),
        path(s_cr, &run.args.criu, &st.criu.path),
    )
}

/// One binary's pin (`flag`: `runtime` or `criu`): with a sealed copy, the record must be this
/// binary's (memfd name `netprobe-<flag>`, the pin's sha256), [`sealed_binaries::prove`], and the
/// recorded file compared by `stat` (re-hashed only when that differs); else the file at
/// `path` hashed whole, the detail saying why.
fn pin_proof(
    path: &Path,
    sealed: SealedUse,
    pin: &crate::slot::state::BinaryPin,
    flag: &str,
) -> ObservedWith<(String, Option<sealed_binaries::FileStat>)> {
    let (pid, rec) = match sealed {
        Ok(s) => s,
        Err(why) => {
            return pure_checks::binary_pin(path, pure_checks::file_sha256(path), pin)
                .map(|d| (format!("{d} (hashed whole: {why})"), None))
                .map_err(|e| NotProven(format!("{e} (hashed whole: {why})")));
        }
    };
    let src = &pin.path;
    let ran = prove_copy(pid, &rec, pin, flag).map_err(|e| {
        format!(
            "{e}: the sealed copy of {} the holder was given at provision is not proven (to run the file on disk instead, hashed whole, name it with --{flag})",
            src.display()
        )
    })?;
    let way_out = |e: String| {
        format!(
            "{e}; the sealed copy the holder keeps is intact ({ran}): to run it all the same, name it with --{flag} {} (hashed whole), or put the file back",
            sealed_binaries::exec_path(pid, &rec).display()
        )
    };
    let before = sealed_binaries::source_stat(src).map_err(|e| way_out(e.to_string()))?;
    if before == rec.source {
        return Ok((
            format!(
                "{ran}; copied from {} sha256 {}, which is unchanged since (device, inode, size, mtime, ctime; not re-hashed)",
                src.display(),
                pin.sha256
            ),
            None,
        ));
    }
    let d = pure_checks::binary_pin(src, pure_checks::file_sha256(src), pin).map_err(way_out)?;
    // The same stat before and after the hash: these bytes are the pin's at that stat.
    let after = sealed_binaries::source_stat(src)
        .ok()
        .filter(|a| *a == before);
    Ok((
        format!(
            "{ran}; {} changed by stat since it was recorded, re-hashed: {d}",
            src.display()
        ),
        after,
    ))
}

/// The sealed copy `rec` kept by the holder `pid` is this binary's (memfd name
/// `netprobe-<flag>`, the pin's sha256) and proven ([`sealed_binaries::prove`]).
///
/// Errors: a sentence naming what differs.
fn prove_copy(
    pid: i32,
    rec: &sealed_binaries::SealedCopy,
    pin: &crate::slot::state::BinaryPin,
    flag: &str,
) -> Observed {
    if rec.name != format!("netprobe-{flag}") || rec.sha256 != pin.sha256 {
        return Err(format!(
            "state.json's sealed copy of {} is {} with sha256 {}, not netprobe-{flag} with the pin's {}",
            pin.path.display(),
            rec.name,
            rec.sha256,
            pin.sha256
        ));
    }
    sealed_binaries::prove(pid, rec)
}

/// For `slot status`: each binary's sealed copy (runtime, CRIU) proven now, as the
/// `runtime-binary`/`criu-binary` gates prove it; `None` when `state.json` records no copy.
/// `Ok` carries the copy's exec path and the proof.
pub(crate) fn sealed_copies_now(st: &SlotState) -> [Option<ObservedWith<(PathBuf, String)>>; 2] {
    let one = |pin: &crate::slot::state::BinaryPin, flag: &str| {
        let rec = pin.sealed.as_ref()?;
        Some(match st.holder {
            Some(h) if pure_checks::holder(st).is_ok() => prove_copy(h.pid, rec, pin, flag)
                .map(|d| (sealed_binaries::exec_path(h.pid, rec), d))
                .map_err(NotProven),
            _ => Err(NotProven("the holder that keeps it is gone".to_string())),
        })
    };
    [one(&st.runtime, "runtime"), one(&st.criu, "criu")]
}

/// Runtime and CRIU binaries: same sha256 as recorded at provision. With the holder's sealed
/// copies ([`binary_paths`]) the copies are proven and the files on disk compared by `stat`;
/// otherwise — and for a `--runtime`/`--criu` given to a later verb, which replaces the
/// recorded path only if its sha256 is the recorded one — the two files are hashed on two
/// threads at once (whole files; about 15 MB together).
pub(crate) fn binary_gates(
    run: &mut VerbRun,
    st: &SlotState,
    blocking: bool,
    criu_blocking: bool,
) -> Result<(PathBuf, PathBuf), SlotError> {
    let (s_rt, s_cr) = sealed_use(run, st);
    let (rt, cr) = paths_of(run, st, &s_rt, &s_cr);
    let (r_rt, r_cr) = std::thread::scope(|s| {
        let criu = s.spawn(|| pin_proof(&cr, s_cr, &st.criu, "criu"));
        let runtime = pin_proof(&rt, s_rt, &st.runtime, "runtime");
        let criu = criu
            .join()
            .unwrap_or_else(|_| Err(NotProven(format!("hashing {} panicked", cr.display()))));
        (runtime, criu)
    });
    let split = |r: ObservedWith<(String, Option<_>)>| match r {
        Ok((d, stat)) => (Ok(d), stat),
        Err(e) => (Err(String::from(e)), None),
    };
    let ((r_rt, s_rt), (r_cr, s_cr)) = (split(r_rt), split(r_cr));
    run.gate_or_record(GateId::RuntimeBinaryPinned, blocking, r_rt)?;
    run.gate_or_record(GateId::CriuBinaryPinned, criu_blocking, r_cr)?;
    run.refreshed = sealed_binaries::SourceRefresh {
        runtime: s_rt,
        criu: s_cr,
    };
    Ok((rt, cr))
}

/// Re-verifies the holder right before a namespace entry, checkpoint, restore or ready check.
pub(crate) fn holder_gate(
    run: &mut VerbRun,
    st: &SlotState,
    before: &str,
) -> Result<ProcessIdentity, SlotError> {
    let r = pure_checks::holder(st).map(|d| format!("{d} (before {before})"));
    run.gate(GateId::HolderIdentity, r)?;
    st.holder.ok_or_else(|| {
        run.step_err(
            StepId::Holder,
            crate::slot::error::StepError::Missing("no holder recorded"),
        )
    })
}

/// The gates snapshot, restore and reset share: CRIU config, binaries, config hash, holder.
/// Returns the runtime of the proven binaries.
pub(crate) fn common_gates(
    run: &mut VerbRun,
    st: &SlotState,
) -> Result<Box<dyn RuntimeOps>, SlotError> {
    let t = Instant::now();
    criu_config_gate(run, true)?;
    run.took("gate-criu-config", t);
    let t = Instant::now();
    let (rt, cr) = binary_gates(run, st, true, true)?;
    run.took("gate-binaries", t);
    let t = Instant::now();
    let r = pure_checks::config_hash(&run.paths.bundle(), st);
    run.gate(GateId::ConfigHash, r)?;
    let r = crate::slot::profile_record::profile_hash(st);
    run.gate(GateId::ProfileHash, r)?;
    let r = pure_checks::holder(st);
    run.gate(GateId::HolderIdentity, r)?;
    run.took("gate-config-holder", t);
    Ok(run.runtime(st, &rt, &cr))
}

/// Container status per `runtime state`: `Ok(None)` = proven absent.
///
/// Errors: the runtime's `state` failed.
pub(crate) fn container_status(rt: &dyn RuntimeOps, id: &str) -> Result<Option<String>, OciError> {
    rt.state(id).map(|o| o.map(|s| s.status))
}

/// [`container_status`] decided in-process where netprobe decides it as the runtime does
/// ([`RuntimeOps::state_quick`]: runc's `state.json`), else by `runtime state`.
pub(crate) fn container_status_quick(
    rt: &dyn RuntimeOps,
    id: &str,
) -> Result<Option<String>, OciError> {
    rt.state_quick(id).0.map(|o| o.map(|s| s.status))
}

/// What a verb knows of its container before it stops it.
pub(crate) struct ContainerBefore {
    /// The runtime's `state` answer ([`container_status`]): `Ok(None)` = absent.
    pub answer: Result<Option<String>, OciError>,
    /// The runtime root's proof of absence, when there is one (no `<root>/<id>` entry).
    pub absent: Option<String>,
}

/// Kills and deletes the container if present (kill, delete --force, prove gone), retried for
/// up to 10 s, then proves it gone via `runtime state`.
pub(crate) fn stop_container_proven(
    run: &mut VerbRun,
    rt: &dyn RuntimeOps,
    id: &str,
) -> Result<(), SlotError> {
    let answer = container_status(rt, id);
    stop_container_proven_from(
        run,
        rt,
        id,
        ContainerBefore {
            answer,
            absent: None,
        },
    )
}

/// [`stop_container_proven`] from a `runtime state` answer (`before`) this verb already has,
/// queried while it held the slot lock. If that answer is "does not exist" it is the proof:
/// only a verb holding the slot lock creates a container in the slot's private runtime root,
/// so nothing can have created one since. Otherwise the container is stopped and a new
/// `runtime state` proves it gone.
pub(crate) fn stop_container_proven_from(
    run: &mut VerbRun,
    rt: &dyn RuntimeOps,
    id: &str,
    before: ContainerBefore,
) -> Result<(), SlotError> {
    let ContainerBefore {
        answer: before,
        absent,
    } = before;
    if let Ok(None) = &before {
        let proof = match absent {
            Some(p) => format!("{p}: no container {id} under the runtime root"),
            None => format!("runtime state {id}: does not exist"),
        };
        return run.gate(
            GateId::ContainerStopped,
            Ok(format!(
                "{proof} (seen under the slot lock; nothing to stop)"
            )),
        );
    }
    if let Ok(Some(_)) = &before {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = rt.release(id, None);
            run.rt_log(
                &format!(
                    "{} kill + delete --force + state (ContainerGuard::release)",
                    rt.binary().display()
                ),
                r.as_ref(),
            );
            if r.is_ok() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let r = match container_status(rt, id) {
        Ok(None) => Ok(format!(
            "runtime state {id}: does not exist (before: {})",
            match before {
                Ok(Some(s)) => s,
                Ok(None) => "absent".into(),
                Err(e) => e.to_string(),
            }
        )),
        Ok(Some(s)) => Err(format!("runtime state {id}: still {s}")),
        Err(e) => Err(e.to_string()),
    };
    run.gate(GateId::ContainerStopped, r)
}

/// The `lo-up-127` gate over a captured state.
pub(crate) fn lo_gate(run: &mut VerbRun, cap: &NetState) -> Result<(), SlotError> {
    let d = guest_net::lo_detail(cap);
    run.gate(
        GateId::LoUp127,
        if cap.lo_up_with_127() { Ok(d) } else { Err(d) },
    )
}

/// The guest server port: a profile's `network.guest_port` (not for a record made from `--image`
/// flags); else [`oci::INIT_HTTP_PORT`] for the embedded image, else the one the image declares
/// in [`guest_net::GUEST_PORT_FILE`], if any.
pub(crate) fn guest_port(st: &SlotState) -> Option<u16> {
    if let Some(p) = st.profile.as_ref().filter(|p| !p.image_from_flags) {
        return p.profile.network.guest_port;
    }
    let img = st.image.as_ref()?;
    if img.kind == ImageKind::Embedded {
        return Some(oci::INIT_HTTP_PORT);
    }
    let t = fs::read_to_string(img.lower.join(guest_net::GUEST_PORT_FILE)).ok()?;
    t.trim().parse::<u16>().ok().filter(|p| *p > 0)
}

/// The `guest-http` check ([`guest_net::http_check_in_netns`]) started on a thread of its own by
/// [`start_guest_check`], so that it runs beside the network capture and the net-fidelity
/// comparison; [`ready_gates`] records its answer in the gate's place.
pub(crate) struct GuestStarted {
    /// Port, path and the thread (the check's answer and its milliseconds); `None` when the
    /// image declares no guest server.
    check: Option<GuestThread>,
}

/// Port, path and the thread of a started guest check.
type GuestThread = (u16, String, std::thread::JoinHandle<(Observed, u64)>);

/// Starts the `guest-http` check of the slot's guest server (port, path, status and timeout
/// from [`crate::slot::profile_record::guest_check`]) in holder `h`'s netns, on a new thread. Read-only
/// for the slot (one new TCP connection to the guest).
pub(crate) fn start_guest_check(st: &SlotState, h: &ProcessIdentity) -> GuestStarted {
    let check =
        crate::slot::profile_record::guest_check(st).map(|(port, path, status, timeout)| {
            let (netns, p) = (h.netns_path(), path.clone());
            let thread = std::thread::spawn(move || {
                fs_tools::timed(|| {
                    guest_net::http_check_in_netns(&netns, port, &p, status, timeout)
                })
            });
            (port, path, thread)
        });
    GuestStarted { check }
}

/// Records `guest-http` from a started check (its duration as timing `<when>-guest-http`), or
/// "not applicable" when the image declares no guest server.
fn guest_gate(
    run: &mut VerbRun,
    h: &ProcessIdentity,
    started: GuestStarted,
    when: &str,
) -> Result<(), SlotError> {
    let Some((port, path, thread)) = started.check else {
        run.record(
            GateId::GuestHttp,
            Err(format!(
                "not applicable: the image declares no guest server (/{} or the profile's network.guest_port)",
                guest_net::GUEST_PORT_FILE
            )),
        );
        return Ok(());
    };
    let (r, ms) = thread
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
    run.timing(&format!("{when}-guest-http"), ms);
    run.gate(GateId::GuestHttp, guest_detail(r, h, port, &path))
}

/// The `guest-http` gate's detail: the check's answer line with port, path and the netns inode.
fn guest_detail(r: Observed, h: &ProcessIdentity, port: u16, path: &str) -> Observed {
    r.map(|l| {
        format!(
            "127.0.0.1:{port} GET {path}: {l} (new connection from a thread in netns {})",
            h.netns_inode
        )
    })
}

/// The `guest-http` gate: `GET path` on 127.0.0.1:`port` from a thread in holder `h`'s netns
/// must answer `status` within `timeout` ([`guest_net::http_check_in_netns`]); the detail names the
/// netns inode.
///
/// Errors: the gate's error when it is not proven.
pub(crate) fn guest_http_gate(
    run: &mut VerbRun,
    h: &ProcessIdentity,
    port: u16,
    path: &str,
    status: u16,
    timeout: std::time::Duration,
) -> Result<(), SlotError> {
    let r = guest_net::http_check_in_netns(&h.netns_path(), port, path, status, timeout);
    run.gate(GateId::GuestHttp, guest_detail(r, h, port, path))
}

/// The container's `runtime state` answer and how long the query took (ms).
pub(crate) type StateAnswer = (Result<Option<ContainerState>, OciError>, u64, String);

/// The network state of holder `h`'s namespace ([`crate::ns::capture_netstate_compared`]: the
/// state the gates compare), its time recorded under `timing` (milliseconds). What the capture
/// saw beside the compared state is written into the verb's evidence, as the rungs do:
/// `netfilter[-<when>].txt` (the raw iptables-save / ip6tables-save / nft output) and
/// `sysctls-other[-<when>].json` (the sysctls CRIU does not save; read on a thread of its own
/// right after the compared capture, beside the gates that follow it, so off the verb's
/// critical path — `sysctls-other[-<when>].error.txt` says why when they cannot be read),
/// `<when>` being `timing` without its `netstate-capture` suffix.
///
/// Errors: step `netstate-capture` could not run.
pub(crate) fn holder_netstate(
    run: &mut VerbRun,
    h: &ProcessIdentity,
    timing: &str,
) -> Result<NetState, SlotError> {
    let netns = h.netns_path();
    let cap = run.time(timing, || crate::ns::capture_netstate_compared(&netns));
    let (state, extras) = cap.map_err(|e| run.step_err(StepId::NetstateCapture, e))?;
    let when = timing
        .strip_suffix("netstate-capture")
        .unwrap_or(timing)
        .trim_end_matches('-');
    let sfx = if when.is_empty() {
        String::new()
    } else {
        format!("-{when}")
    };
    run.ev_write_beside(
        &format!("netfilter{sfx}.txt"),
        extras.netfilter_text().into(),
    );
    let what = format!("sysctls-other{sfx}.json");
    run.ev_make_beside(&what, move || {
        vec![match crate::ns::unsaved_sysctls_in(&netns) {
            Ok(m) => (
                format!("sysctls-other{sfx}.json"),
                serde_json::to_string_pretty(&m)
                    .unwrap_or_else(|_| "{}".into())
                    .into(),
            ),
            Err(e) => (
                format!("sysctls-other{sfx}.error.txt"),
                format!("the sysctls CRIU does not save were not read: {e}\n").into(),
            ),
        }]
    });
    Ok(state)
}

/// Ready gates: lo UP with 127.0.0.1/8 in the container's netns, the guest server answers 200
/// from inside the namespace (when `guest` holds the check the caller started with
/// [`start_guest_check`]; provision passes `None` and runs its guest checks afterwards as the
/// profile's readiness checks, [`super::readiness`]), the container runs in the holder's netns (runtime state), cgroup
/// limits read back (v1 or v2 files; with the systemd driver also from the scope unit,
/// [`cgroups::limits_gates`]). Returns the captured network state.
///
/// `state` yields the container's `runtime state`, how long that query took (ms) and how it was
/// decided (runc's `state.json` read in-process, or the runtime run:
/// [`crate::oci::RuntimeOps::state_quick`]; in the gate's detail, the fact
/// `<when>_runtime_state_source` and `runtime.log`); the caller may have started it on another
/// thread so it overlaps the in-process checks before it.
/// `captured`: the holder's network state when the caller has just captured it (restore and
/// reset, for net-fidelity), so it is not captured a second time; `None` captures it here.
pub(crate) fn ready_gates(
    run: &mut VerbRun,
    st: &mut SlotState,
    when: &str,
    captured: Option<NetState>,
    guest: Option<GuestStarted>,
    state: impl FnOnce() -> StateAnswer,
) -> Result<NetState, SlotError> {
    let h = holder_gate(run, st, &format!("{when} ready checks"))?;
    let cap = match captured {
        Some(c) => c,
        None => holder_netstate(run, &h, &format!("{when}-netstate-capture"))?,
    };
    run.ev_write(
        &format!("netstate-{when}.json"),
        cap.to_canonical_json().as_bytes(),
    );
    lo_gate(run, &cap)?;
    if let Some(started) = guest {
        guest_gate(run, &h, started, when)?;
    }

    // Container in the holder's netns, limits from its cgroup.
    let t = Instant::now();
    let (state, query_ms, how) = state();
    run.took(&format!("{when}-runtime-state"), t);
    run.timing(&format!("{when}-runtime-state-query"), query_ms);
    run.rt_log("state", state.as_ref().map(|_| &how));
    run.fact(&format!("{when}_runtime_state_source"), how.as_str());
    let state = state.map_err(|e| run.step_err(StepId::RuntimeState, e))?;
    let pid = state.as_ref().map(|s| s.pid).unwrap_or(0);
    let status = state
        .as_ref()
        .map(|s| s.status.clone())
        .unwrap_or_else(|| "absent".into());
    // Both inodes side by side, as facts and in the gate's detail, compared here.
    let r = match ProcessIdentity::read(pid) {
        Ok(c) => {
            run.fact(&format!("{when}_container_netns_inode"), c.netns_inode);
            run.fact(&format!("{when}_holder_netns_inode"), h.netns_inode);
            let same = c.netns_inode == h.netns_inode;
            let d = format!(
                "runtime state {status} ({how}), init pid {pid}, netns inode {} (container init's) {} {} (holder's)",
                c.netns_inode,
                if same { "==" } else { "!=" },
                h.netns_inode
            );
            if status == "running" && same {
                Ok(d)
            } else {
                Err(d)
            }
        }
        Err(e) => Err(format!("status {status} ({how}): {e}")),
    };
    run.gate(GateId::ContainerInHolderNetns, r)?;
    run.fact(&format!("{when}_container_pid"), pid);
    let t = Instant::now();
    let r = cgroups::limits_gates(run, st, pid, when);
    run.took(&format!("{when}-cgroup-readback"), t);
    r?;
    Ok(cap)
}

/// Creates folders. Errors: the folder that could not be created.
pub(crate) fn mkdirs(run: &VerbRun, dirs: &[PathBuf]) -> Result<(), SlotError> {
    for d in dirs {
        fs::create_dir_all(d).map_err(|e| {
            // A folder of the verb's evidence (CRIU's work folder) is evidence not written.
            if let Some(rel) = run.ev.as_deref().and_then(|ev| d.strip_prefix(ev).ok()) {
                let file = format!("{}/", rel.display());
                let u = evidence_writes::Unwritten::io(&file, "create", &e);
                run.unwritten.push(u);
            }
            run.step_err(StepId::Mkdir, crate::slot::error::StepError::io(d)(e))
        })?;
    }
    Ok(())
}

/// Records how the overlay was mounted ([`crate::slot::resources::mounts::mount_overlay_volatile`]): fact
/// `overlay_volatile` (bool) and, when the kernel refused `volatile`, fact
/// `overlay_volatile_refused` with the refused mount's message. Returns whether `volatile` is
/// on.
pub(crate) fn volatile_fact(run: &mut VerbRun, refused: Option<String>) -> bool {
    run.fact("overlay_volatile", refused.is_none());
    match refused {
        Some(m) => {
            run.fact("overlay_volatile_refused", m);
            false
        }
        None => true,
    }
}

/// Interrupted or failed snapshots: a snapshot is complete only after its rename, so a
/// `snapshot.tmp-*` folder is never evidence and never used; nothing runs in it any more (the
/// verb that made it has ended: the slot lock, inherited by the runtime and CRIU, is ours).
/// Removed by cleanup and by the next snapshot that completes, recorded in fact
/// `stale_snapshot_tmp_removed` and a journal step. Returns the summary suffix.
pub(crate) fn remove_stale_snapshots(run: &mut VerbRun, problems: &mut Vec<String>) -> String {
    let mut removed = Vec::new();
    for name in pure_checks::stale_tmp(&run.paths.root) {
        match fs_tools::remove_tree_same_fs(&run.paths.root.join(&name)) {
            Ok(()) => removed.push(name),
            Err(e) => problems.push(format!("stale {name} not removed: {e}")),
        }
    }
    let detail = if removed.is_empty() {
        String::new()
    } else {
        let d = format!(
            "removed the interrupted snapshot folder(s) {} (never evidence: a snapshot is complete only after its rename)",
            removed.join(", ")
        );
        run.journal(JournalEvent::Step, true, &d);
        format!("; {d}")
    };
    run.fact("stale_snapshot_tmp_removed", removed);
    detail
}
