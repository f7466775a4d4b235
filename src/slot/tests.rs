//! Unit tests of the verbs over a temporary slot with the recording fake runtime
//! ([`crate::oci::container::fake::RecordingRuntime`]), without root: every gate and every
//! cleared destructive step is traced in order next to the fake's runtime calls, so a gate moved
//! after the step it protects fails these tests.

use super::gate::pure_checks::tests::{bundle_for, snapshot_for, state_with_self_holder};
use super::gate::*;
use super::record::verb_run::{SlotEnv, VerbRun};
use super::resources::slot_dir::{self, SlotPaths};
use super::resources::state_dir::{self, StateDirUse};
use super::state::*;
use super::{SlotArgs, SlotError, SlotOutcome, StepId, Verb, run_with};
use crate::oci::container::fake::{Events, RecordingRuntime};
use crate::oci::{RuntimeKind, RuntimeOps};
use std::fs;
use std::path::{Path, PathBuf};

pub(super) struct Fixture {
    _tmp: tempfile::TempDir,
    pub(super) sd: PathBuf,
    pub(super) paths: SlotPaths,
}

/// An existing slot 1 whose holder is this test process, with binaries (two small files),
/// `config.json`, a directory image (`image/` beside the state dir) with its manifest,
/// optionally a complete snapshot, and no overlay.
pub(super) fn existing(snapshot: bool, phase: Phase) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
    let paths = SlotPaths::new(&sd, 1);
    let marker = slot_dir::create_slot(&paths).unwrap();
    let (rt, cr) = (tmp.path().join("runc"), tmp.path().join("criu"));
    fs::write(&rt, b"fake runtime").unwrap();
    fs::write(&cr, b"fake criu").unwrap();
    let mut st = state_with_self_holder(&paths.root, &rt, &cr);
    st.owner_id = marker.id;
    st.phase = phase;
    st.runtime_root = paths.runtime_root();
    st.container_id = paths.container_id();
    bundle_for(&mut st, &paths.bundle(), &paths.rootfs());
    st.cgroup = Some(super::resources::leftover_procs::tests::fake_cgroup(
        tmp.path(),
        "",
    ));
    // The self-holder alone in its namespace, as the `netns-empty` gate reads it.
    let me = tmp.path().join(format!("fakeproc/{}", std::process::id()));
    fs::create_dir_all(me.join("ns")).unwrap();
    fs::create_dir_all(me.join("net")).unwrap();
    std::os::unix::fs::symlink("/proc/self/ns/net", me.join("ns/net")).unwrap();
    std::os::unix::fs::symlink("/proc/self/net/dev", me.join("net/dev")).unwrap();
    let img = tmp.path().join("image");
    fs::create_dir_all(img.join("var/www")).unwrap();
    fs::write(img.join("var/www/index.html"), b"hello\n").unwrap();
    let mut image = ImageState::plain_directory(ImageKind::Directory, img.clone());
    image.manifest =
        Some(super::gate::image_unchanged::record_manifest(&img, &paths.image_manifest()).unwrap());
    st.image = Some(image);
    if snapshot {
        snapshot_for(&mut st, &paths.root);
    }
    st.save(&paths.state()).unwrap();
    Fixture {
        _tmp: tmp,
        sd,
        paths,
    }
}

impl Fixture {
    fn state(&self) -> SlotState {
        SlotState::load(&self.paths.state()).unwrap()
    }
    pub(super) fn edit(&self, f: impl FnOnce(&mut SlotState)) {
        let mut st = self.state();
        f(&mut st);
        st.save(&self.paths.state()).unwrap();
    }
}

type Make = Box<dyn Fn(&Path, &Path, &Path, RuntimeKind, bool, &str) -> Box<dyn RuntimeOps> + Sync>;

/// A recording fake runtime (every runtime a verb builds shares its events and status).
fn fake(status: Option<&str>) -> (Events, Make) {
    let events = Events::default();
    let fake = RecordingRuntime::new(events.clone(), status);
    let make: Make = Box::new(
        move |_: &Path,
              _: &Path,
              _: &Path,
              _: RuntimeKind,
              _: bool,
              _: &str|
              -> Box<dyn RuntimeOps> { Box::new(fake.clone()) },
    );
    (events, make)
}

/// The fake environment for the slot in state dir `sd` (made by [`existing`]: its `fakeproc`
/// beside `sd`).
fn fake_env<'e>(events: &Events, make: &'e Make, sd: &Path) -> SlotEnv<'e> {
    SlotEnv {
        make_runtime: &**make,
        require_root: false,
        trace: Some(events.clone()),
        proc_root: sd.parent().unwrap().join("fakeproc"),
    }
}

/// `e` is a refusal with exit code `code` at gate `gate` (the error's text in the message).
pub(super) fn assert_refused(e: &SlotError, code: i32, gate: &str) {
    assert_eq!(
        (e.exit_code(), e.gate.as_deref()),
        (code, Some(gate)),
        "{e}"
    );
}

/// Runs `verb` with the fake (container `status`); returns the result and the trace.
pub(super) fn drive(
    verb: Verb,
    sd: &Path,
    status: Option<&str>,
    edit: impl FnOnce(&mut SlotArgs),
) -> (Result<SlotOutcome, SlotError>, Vec<String>) {
    let (events, make) = fake(status);
    let env = fake_env(&events, &make, sd);
    let mut args = SlotArgs::new(verb, "1", sd);
    edit(&mut args);
    let r = run_with(&args, &env);
    let trace = events.lock().unwrap().clone();
    (r, trace)
}

fn pos(trace: &[String], event: &str) -> usize {
    trace
        .iter()
        .position(|e| e == event)
        .unwrap_or_else(|| panic!("no {event:?} in {trace:#?}"))
}

/// The runtime calls that change a container.
pub(super) fn destructive(e: &str) -> bool {
    ["create", "start", "checkpoint", "restore", "kill", "delete"]
        .iter()
        .any(|v| e.starts_with(&format!("runtime {v} ")))
}

/// Every gate of `required` was evaluated before the event at `at`.
fn gates_before(trace: &[String], required: &[GateId], at: usize) {
    for g in required {
        let i = pos(trace, &format!("gate {}", g.name()));
        assert!(
            i < at,
            "gate {} after {:?}: {trace:#?}",
            g.name(),
            trace[at]
        );
    }
}

#[test]
fn reset_kills_only_after_every_reset_gate() {
    let f = existing(true, Phase::Running);
    let (r, trace) = drive(Verb::Reset, &f.sd, Some("running"), |_| {});
    let kill = trace.iter().position(|e| destructive(e)).expect("a kill");
    assert!(trace[kill].starts_with("runtime kill"), "{trace:#?}");
    gates_before(&trace, &RESET_GATES, kill);
    assert!(pos(&trace, "step container-stop") < kill);
    assert!(pos(&trace, "gate container-stopped") > kill);
    // The phase saying a restore is under way is on disk before the stop (an interruption or
    // a failure after it never leaves phase running over a stopped container), once.
    let began = pos(&trace, "state restoring");
    assert!(pos(&trace, "step container-stop") < began && began < kill);
    assert_eq!(trace.iter().filter(|e| *e == "state restoring").count(), 1);
    // No overlay recorded in the fixture: the verb stops at its next step, having begun.
    let e = r.unwrap_err();
    assert_refused(&e, 4, "overlay");
    assert_eq!(f.state().phase, Phase::Restoring);
}

/// A reset whose gates after the stop fail (`cgroup-empty`: a process left in the container's
/// cgroup) has stopped the container: phase restore-failed, saved `restoring` before the stop,
/// never `running` over a stopped container; a reset that found no container to stop changes
/// no phase.
#[test]
fn a_reset_failing_after_its_stop_leaves_restore_failed() {
    let f = existing(true, Phase::Running);
    let tmp = f.paths.state_dir.parent().unwrap().to_path_buf();
    f.edit(|st| {
        st.cgroup = Some(super::resources::leftover_procs::tests::fake_cgroup(
            &tmp, "31493\n",
        ))
    });
    let (r, trace) = drive(Verb::Reset, &f.sd, Some("running"), |_| {});
    assert_refused(&r.unwrap_err(), 1, "cgroup-empty");
    let kill = pos(&trace, "runtime kill netprobe-slot-1 KILL");
    assert!(pos(&trace, "state restoring") < kill, "{trace:#?}");
    assert!(pos(&trace, "state restore-failed") > kill, "{trace:#?}");
    assert_eq!(f.state().phase, Phase::RestoreFailed);
    // The same refusal with no container to stop: nothing changed, the phase is kept.
    let (r, trace) = drive(Verb::Reset, &f.sd, None, |_| {});
    assert_refused(&r.unwrap_err(), 1, "cgroup-empty");
    assert!(!trace.iter().any(|e| e.starts_with("state ")), "{trace:#?}");
    assert_eq!(f.state().phase, Phase::RestoreFailed);
}

#[test]
fn a_failed_gate_stops_reset_before_any_runtime_change() {
    let f = existing(true, Phase::Running);
    let cfg = f.paths.config();
    let mut text = fs::read_to_string(&cfg).unwrap();
    text.push('\n');
    fs::write(&cfg, text).unwrap();
    let (r, trace) = drive(Verb::Reset, &f.sd, Some("running"), |_| {});
    let e = r.unwrap_err();
    assert_refused(&e, 1, "config-hash");
    assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
    assert!(!trace.iter().any(|e| e.starts_with("step ")), "{trace:#?}");
    assert_eq!(f.state().phase, Phase::Running);
    // Without a snapshot, reset fails on snapshot-complete, again before any change.
    let f = existing(false, Phase::Running);
    let (r, trace) = drive(Verb::Reset, &f.sd, Some("running"), |_| {});
    assert_eq!(r.unwrap_err().gate.as_deref(), Some("snapshot-complete"));
    assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
}

/// A file of the directory image edited after provision: snapshot, restore and reset refuse at
/// `image-unchanged`, naming the file, before any step or runtime change; the phase is kept.
#[test]
fn an_image_edited_after_provision_stops_every_verb_before_its_first_step() {
    for (verb, phase, status) in [
        (Verb::Snapshot, Phase::Running, Some("running")),
        (Verb::Restore, Phase::Checkpointed, None),
        (Verb::Reset, Phase::Running, Some("running")),
    ] {
        let f = existing(true, phase);
        let html = f
            .paths
            .state_dir
            .parent()
            .unwrap()
            .join("image/var/www/index.html");
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&html, b"CHANGED\n").unwrap();
        let (r, trace) = drive(verb, &f.sd, status, |_| {});
        let e = r.unwrap_err();
        assert_eq!(
            (e.exit_code(), e.gate.as_deref()),
            (1, Some("image-unchanged")),
            "{verb:?}: {e}"
        );
        assert!(
            e.message
                .contains("changed ./var/www/index.html (size 6 → 8, mtime, ctime)"),
            "{e}"
        );
        assert!(
            !trace.iter().any(|e| destructive(e)),
            "{verb:?}: {trace:#?}"
        );
        assert!(!trace.iter().any(|e| e.starts_with("step ")), "{trace:#?}");
        assert_eq!(f.state().phase, phase);
        assert!(f.paths.root.join("snapshot-t").is_dir());
    }
}

#[test]
fn restore_clears_its_step_after_every_restore_gate_and_refuses_a_live_container() {
    let f = existing(true, Phase::Checkpointed);
    let (r, trace) = drive(Verb::Restore, &f.sd, None, |_| {});
    let step = pos(&trace, "step restore");
    gates_before(&trace, &RESTORE_GATES, step);
    assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
    assert_eq!(r.unwrap_err().gate.as_deref(), Some("overlay"));

    let f = existing(true, Phase::Running);
    let (r, trace) = drive(Verb::Restore, &f.sd, Some("running"), |_| {});
    let e = r.unwrap_err();
    assert_refused(&e, 1, "container-absent");
    assert!(e.message.contains("use reset"), "{e}");
    assert!(
        !trace
            .iter()
            .any(|e| destructive(e) || e.starts_with("step "))
    );
    assert_eq!(f.state().phase, Phase::Running);
}

/// The runtime has no container (its root entry gone) but the container's cgroup still holds
/// processes: restore and reset refuse before any change, naming the pids.
#[test]
fn a_container_the_runtime_lost_track_of_blocks_restore_and_reset() {
    for (verb, phase) in [
        (Verb::Restore, Phase::Checkpointed),
        (Verb::Reset, Phase::Running),
    ] {
        let f = existing(true, phase);
        let tmp = f.paths.state_dir.parent().unwrap().to_path_buf();
        f.edit(|st| {
            st.cgroup = Some(super::resources::leftover_procs::tests::fake_cgroup(
                &tmp, "31493\n",
            ))
        });
        let (r, trace) = drive(verb, &f.sd, None, |_| {});
        let e = r.unwrap_err();
        assert_eq!(
            (e.exit_code(), e.gate.as_deref()),
            (1, Some("cgroup-empty")),
            "{verb:?}: {e}"
        );
        assert!(e.message.contains("processes 31493 still run"), "{e}");
        assert!(
            !trace.iter().any(|e| destructive(e)),
            "{verb:?}: {trace:#?}"
        );
        assert!(!trace.iter().any(|e| e == "step restore"), "{trace:#?}");
    }
}

#[test]
fn snapshot_never_checkpoints_an_unmounted_overlay() {
    let f = existing(false, Phase::Ready);
    let merged = f.paths.rootfs();
    f.edit(|st| {
        st.overlay = Some(OverlayState {
            merged,
            run: 1,
            mounted: true,
            options: vec!["index=off".into()],
            volatile: true,
        })
    });
    let (r, trace) = drive(Verb::Snapshot, &f.sd, Some("running"), |_| {});
    let e = r.unwrap_err();
    assert_eq!(e.gate.as_deref(), Some("overlay-mounted"), "{e}");
    assert!(pos(&trace, "gate container-running") < pos(&trace, "gate overlay-mounted"));
    assert!(!trace.iter().any(|e| destructive(e)), "{trace:#?}");
    assert_eq!(f.state().phase, Phase::Ready);
    // A stopped container: container-running fails first.
    let (r, _) = drive(Verb::Snapshot, &f.sd, Some("stopped"), |_| {});
    assert_eq!(r.unwrap_err().gate.as_deref(), Some("container-running"));
    // No container (a second snapshot after the first checkpointed it): the way on is named.
    let (r, _) = drive(Verb::Snapshot, &f.sd, None, |_| {});
    let e = r.unwrap_err();
    assert_eq!(e.gate.as_deref(), Some("container-running"));
    assert!(
        e.to_string().contains("the runtime has no such container")
            && e.to_string().contains("no snapshot exists"),
        "{e}"
    );
    let f = existing(true, Phase::Checkpointed);
    let (r, _) = drive(Verb::Snapshot, &f.sd, None, |_| {});
    let e = r.unwrap_err();
    assert!(
        e.to_string()
            .contains("run `netprobe slot restore` (or `reset`) first"),
        "{e}"
    );
}

#[test]
fn cleanup_stops_the_container_before_unmounting_and_ends_clean() {
    let f = existing(true, Phase::Running);
    // No holder, and no cgroup to prove released (the fake runtime removes none).
    f.edit(|st| {
        st.holder = None;
        st.cgroup = None;
    });
    fs::create_dir(f.paths.root.join("snapshot.tmp-x")).unwrap();
    let (r, trace) = drive(Verb::Cleanup, &f.sd, Some("running"), |_| {});
    let o = r.unwrap_or_else(|e| panic!("{e}"));
    let kill = trace.iter().position(|e| destructive(e)).expect("a kill");
    gates_before(&trace, &CLEANUP_GATES, kill);
    assert!(pos(&trace, "step cleanup") < kill);
    let unmount = pos(&trace, "step unmount");
    gates_before(&trace, &UNMOUNT_GATES, unmount);
    assert_eq!(o.phase, Some(Phase::Clean));
    assert!(o.summary.contains("snapshot.tmp-x"), "{}", o.summary);
    assert!(!f.paths.root.join("snapshot.tmp-x").exists());
    // The recorded facts do not block: a tampered config.json is recorded, not fatal.
    let g = o.gates.iter().find(|g| g.name == "config-hash").unwrap();
    assert!(!g.blocking);
    // A clean slot refuses every verb but cleanup and status.
    let (r, trace) = drive(Verb::Snapshot, &f.sd, Some("running"), |_| {});
    assert_eq!(r.unwrap_err().gate.as_deref(), Some("slot-not-clean"));
    assert!(!trace.iter().any(|e| destructive(e)));
}

#[test]
fn provision_creates_nothing_before_its_gates() {
    let tmp = tempfile::tempdir().unwrap();
    let sd = tmp.path().join("state");
    state_dir::check_state_dir(&sd, StateDirUse::Create).unwrap();
    // A folder that is not ours where the slot would go: slot-fresh fails after every gate.
    fs::create_dir(sd.join("slot-1")).unwrap();
    // Two tiny stand-ins that answer `--version` as runc and CRIU do.
    let script = |name: &str, line: &str| {
        let p = tmp.path().join(name);
        crate::evidence::fsio::write_executable(&p, format!("#!/bin/sh\necho '{line}'\n"), 0o755)
            .unwrap();
        p
    };
    let (rt, cr) = (
        script("runc", "runc version 1.1.5"),
        script("criu", "Version: 4.2.1"),
    );
    let (r, trace) = drive(Verb::Provision, &sd, None, |a| {
        a.no_probe_gate = true;
        a.reason = Some("unit test".into());
        a.allow_script_binaries = Some("unit test stand-ins".into());
        a.runtime = Some(rt);
        a.criu = Some(cr);
    });
    let e = r.unwrap_err();
    assert_eq!(e.gate.as_deref(), Some("slot-fresh"), "{e}");
    // No state and no journal: nothing was made there, so nothing can leak by moving it.
    assert!(
        e.message
            .contains("never re-provisioned in place: its state.json cannot be read")
            && e.message.contains("nothing to release or restore"),
        "{e}"
    );
    let step = pos(&trace, "step slot-create");
    gates_before(&trace, &PROVISION_GATES, step);
    assert!(
        !trace.iter().any(|e| e.starts_with("runtime ")),
        "{trace:#?}"
    );
    assert_eq!(fs::read_dir(sd.join("slot-1")).unwrap().count(), 0);
}

#[test]
fn a_bad_profile_fails_before_the_binary_and_probe_gates() {
    let d = tempfile::tempdir().unwrap();
    let sd = d.path().join("state");
    let bad = d.path().join("bad.toml");
    fs::write(
        &bad,
        format!("{}colour = 1\n", crate::profile::BUILTIN_DEFAULT_TOML),
    )
    .unwrap();
    let (r, trace) = drive(Verb::Provision, &sd, None, |a| {
        a.profile = Some(bad.clone());
        a.runtime = Some("/nonexistent/runc".into());
        a.criu = Some("/nonexistent/criu".into());
    });
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
    assert!(e.to_string().contains("colour"), "{e}");
    for g in ["runtime-binary", "criu-binary", "probe-verdict"] {
        assert!(
            !trace.iter().any(|t| t.contains(g)),
            "{g} ran before the profile was loaded: {trace:#?}"
        );
    }
    assert!(!sd.join("slot-1").exists());
}

#[test]
fn declared_differences_name_the_slots_image() {
    let f = existing(false, Phase::Running);
    let (events, make) = fake(None);
    let env = fake_env(&events, &make, &f.sd);
    let args = SlotArgs::new(Verb::Status, "1", &f.sd);
    let run = VerbRun::new(&args, "1".into(), f.paths.clone(), &env);
    let mut st = f.state();
    st.image = Some(crate::slot::state::ImageState::plain_directory(
        ImageKind::Embedded,
        f.paths.root.join("image/rootfs"),
    ));
    let embedded = super::EMBEDDED_IMAGE_DIFFERENCE.to_string();
    assert!(run.declared(Some(&st)).contains(&embedded));
    assert!(run.declared(None).contains(&embedded));
    st.image.as_mut().unwrap().kind = ImageKind::Qcow2;
    st.image.as_mut().unwrap().source = "/x/gnome.qcow2".into();
    let lp = crate::profile::parse(
        &crate::profile::BUILTIN_DEFAULT_TOML.replace("embedded-busybox", "gnome"),
        Path::new("/p.toml"),
        Path::new("/"),
    )
    .unwrap();
    st.profile = Some(super::profile_record::record(&lp));
    let d = run.declared(Some(&st));
    assert!(!d.contains(&embedded), "{d:#?}");
    assert!(
        d.iter()
            .any(|l| l.ends_with("rootfs: qcow2 /x/gnome.qcow2 (profile gnome).")),
        "{d:#?}"
    );
    st.profile = Some(super::profile_record::record_for_image_flags(
        ImageKind::Qcow2,
        Path::new("/x/gnome.qcow2"),
        None,
    ));
    assert!(
        run.declared(Some(&st))
            .iter()
            .any(|l| l.ends_with("(--image).")),
    );
}

/// Evidence made on a thread of its own is named while it is being made (an interruption note
/// then says it may be missing), and no longer once written; `finish` joins it.
#[test]
fn evidence_made_beside_the_verb_is_named_until_written() {
    let f = existing(false, Phase::Running);
    let (events, make) = fake(None);
    let env = fake_env(&events, &make, &f.sd);
    let args = SlotArgs::new(Verb::Reset, "1", &f.sd);
    let mut run = VerbRun::new(&args, "1".into(), f.paths.clone(), &env);
    let ev = tempfile::tempdir().unwrap();
    run.ev = Some(ev.path().to_path_buf());
    let (go, wait) = std::sync::mpsc::channel::<()>();
    run.ev_make_beside("slow.json", move || {
        let _ = wait.recv();
        vec![("slow.json".to_string(), b"{}".to_vec())]
    });
    assert_eq!(run.in_flight(), vec!["slow.json".to_string()]);
    assert_eq!(
        super::record::interruption::in_flight_note(&run.in_flight()),
        "; evidence still being made beside the verb when the signal came, so possibly missing from this folder: slow.json"
    );
    go.send(()).unwrap();
    let _ = run.finish(Ok(("done".into(), None)));
    assert!(ev.path().join("slow.json").is_file());
    assert_eq!(super::record::interruption::in_flight_note(&[]), "");
}

#[test]
fn a_step_cleared_before_its_gate_fails_closed() {
    let f = existing(false, Phase::Running);
    let (events, make) = fake(None);
    let env = fake_env(&events, &make, &f.sd);
    let args = SlotArgs::new(Verb::Reset, "1", &f.sd);
    let mut run = VerbRun::new(&args, "1".into(), f.paths.clone(), &env);
    run.gate(GateId::ConfigHash, Ok("proven".into())).unwrap();
    let e = run
        .clear(
            StepId::ContainerStop,
            &[GateId::ConfigHash, GateId::SnapshotComplete],
        )
        .unwrap_err();
    assert_eq!(e.exit_code(), 4);
    assert!(e.to_string().contains("snapshot-complete"), "{e}");
    run.gate(GateId::SnapshotComplete, Ok("proven".into()))
        .unwrap();
    run.clear(
        StepId::ContainerStop,
        &[GateId::ConfigHash, GateId::SnapshotComplete],
    )
    .unwrap();
}

#[test]
fn every_required_gate_is_evaluated_by_its_verb() {
    // The lists name only gates some verb evaluates with the same fact.
    for v in Verb::ALL {
        for g in GateId::required_before(v) {
            assert!(GateId::ALL.contains(g));
        }
    }
}

/// The kinds every runtime the verb built was made for, and the verb's `runtime_kind_from` fact.
fn kinds_and_source(f: &Fixture, verb: Verb) -> (Vec<RuntimeKind>, String) {
    let events = Events::default();
    let kinds = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (k2, fake) = (kinds.clone(), RecordingRuntime::new(events.clone(), None));
    let make: Make = Box::new(
        move |_: &Path,
              _: &Path,
              _: &Path,
              k: RuntimeKind,
              _: bool,
              _: &str|
              -> Box<dyn RuntimeOps> {
            k2.lock().unwrap().push(k);
            Box::new(fake.clone())
        },
    );
    let env = fake_env(&events, &make, &f.sd);
    let e = run_with(&SlotArgs::new(verb, "1", &f.sd), &env).unwrap_err();
    let ev = e.evidence.clone().expect("evidence folder");
    let doc: serde_json::Value =
        serde_json::from_slice(&fs::read(ev.join("verb.json")).unwrap()).unwrap();
    let from = doc["facts"]["runtime_kind_from"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let k = kinds.lock().unwrap().clone();
    (k, from)
}

#[test]
fn the_runtime_kind_recorded_at_provision_is_taken_without_running_version() {
    // The fixture's runtime is a plain file named `runc`: `--version` cannot run, so detection
    // would guess runc from the name. Recorded as crun, crun it is, and the fact says why.
    let f = existing(true, Phase::Checkpointed);
    f.edit(|st| st.runtime.kind = Some(RuntimeKind::Crun));
    let (kinds, from) = kinds_and_source(&f, Verb::Restore);
    assert!(
        !kinds.is_empty() && kinds.iter().all(|k| *k == RuntimeKind::Crun),
        "{kinds:?}"
    );
    assert!(
        from.starts_with("state.json runtime.kind") && from.ends_with("(gate runtime-binary)"),
        "{from}"
    );
    // Not recorded (a state written before the field): detected per verb, as before.
    let f = existing(true, Phase::Checkpointed);
    let (kinds, from) = kinds_and_source(&f, Verb::Restore);
    assert!(kinds.iter().all(|k| *k == RuntimeKind::Runc), "{kinds:?}");
    assert!(from.contains("guessed runc from the file name"), "{from}");
}

#[test]
fn the_binaries_difference_names_each_binary_against_its_pin() {
    let f = existing(false, Phase::Running);
    let (events, make) = fake(None);
    let env = fake_env(&events, &make, &f.sd);
    let args = SlotArgs::new(Verb::Status, "1", &f.sd);
    let run = VerbRun::new(&args, "1".into(), f.paths.clone(), &env);
    let mut st = f.state();
    let pins = crate::host::pins::pins();
    st.runtime.version = Some("1.1.5+ds1".into());
    st.criu.version = Some(pins.criu.version.clone());
    let d = run.declared(Some(&st));
    let line = d
        .iter()
        .find(|l| l.starts_with("Binaries are those recorded at provision"))
        .unwrap_or_else(|| panic!("{d:#?}"));
    assert!(
        line.contains(&format!(
            "version 1.1.5+ds1, sha256 {}): not the reference arm's pin (runc {})",
            st.runtime.sha256, pins.runtime.version
        )),
        "{line}"
    );
    // CRIU's pin names a version only: the same version is the pin, and said so.
    assert!(
        line.contains(&format!(
            "): the reference arm's pin (CRIU {})",
            pins.criu.version
        )),
        "{line}"
    );
}
