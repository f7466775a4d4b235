//! `slot status`'s `advice`: for a slot whose last verb did not finish (interrupted or failed),
//! which verb it was — from the newest evidence folder (`evidence/NNNN-verb`, with
//! `interrupted.txt` or its `verb.json`) — and the one command that moves the slot on, chosen
//! from what is true now (the container's runtime state, processes it left, whether a complete
//! snapshot exists), not from the phase alone. Also for a slot whose phase says its container
//! runs (ready, running) while the runtime has none, and for any phase but clean where
//! processes are left beside a container the runtime lost. The phases whose next step is
//! obvious get none.

use crate::slot::GateId;
use crate::slot::error::FailedAt;
use crate::slot::resources::slot_dir::SlotPaths;
use crate::slot::state::Phase;
use std::path::Path;

/// What status saw that the advice depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    /// `runtime state` says running.
    Running,
    /// `runtime state` says it does not exist, and no process is left in its cgroup or beside
    /// the holder in the slot's netns.
    Absent,
    /// `runtime state` says it does not exist, but processes are left (or it cannot be told):
    /// a container the runtime lost track of (`live.left_processes`).
    AbsentWithLeft,
    /// `runtime state` says stopped: the container's init has exited (killed, or it ended).
    Stopped,
    /// `runtime state` says paused: frozen (a checkpoint killed before it thawed it).
    Paused,
    /// Another status, or it could not be asked.
    Other,
}

impl Container {
    /// From the status document's `live.container.status`.
    pub(crate) fn from_status(s: &str) -> Self {
        match s {
            "running" => Container::Running,
            "absent" => Container::Absent,
            "stopped" => Container::Stopped,
            "paused" => Container::Paused,
            _ => Container::Other,
        }
    }

    /// From the status document's `live`: `live.container.status`, and for an absent container
    /// whether `live.left_processes` proves none left (else [`Container::AbsentWithLeft`]).
    pub(crate) fn from_live(live: &super::status_doc::LiveFacts) -> Self {
        let none_left = live
            .left_processes
            .as_ref()
            .is_some_and(|l| l.cgroup.none && l.netns.none);
        match Self::from_status(&live.container.status) {
            Container::Absent if !none_left => Container::AbsentWithLeft,
            c => c,
        }
    }
}

/// The verbs' evidence folders under `evidence` (`NNNN-<verb>`), oldest first (by name: the
/// sequence number); none when it cannot be read.
pub(crate) fn verb_folders(evidence: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(evidence)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The newest verb evidence folder's verb and how it ended: `(verb, "was interrupted" | "failed"
/// | "finished" | "did not record its end")`, or `None` when there is none.
pub(crate) fn last_verb(evidence: &Path) -> Option<(String, &'static str, String)> {
    let d = verb_folders(evidence).pop()?;
    let name = d.file_name()?.to_string_lossy().into_owned();
    let verb = name.split_once('-').map(|(_, v)| v.to_string())?;
    let how = if d.join(crate::evidence::dir::INTERRUPTED_FILE).is_file() {
        "was interrupted"
    } else {
        match crate::evidence::read_recorded(&d.join("verb.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        {
            Some(v) if v["ok"] == true => "finished",
            // The note writes verb.json before interrupted.txt: a verb.json that says so stands.
            Some(v) if v["interrupted"].is_object() => "was interrupted",
            Some(_) => "failed",
            None => "did not record its end",
        }
    };
    Some((verb, how, d.display().to_string()))
}

/// The gate a verb's `verb.json` in evidence folder `dir` says it failed (`error.gate`), if any.
/// A name netprobe does not write counts as none.
fn failed_gate(dir: &str) -> Option<FailedAt> {
    let b = crate::evidence::read_recorded(&Path::new(dir).join("verb.json")).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&b).ok()?;
    v["error"]["gate"].as_str().and_then(FailedAt::from_name)
}

/// The advice for `phase`, or `None` when the next step is the obvious one (ready, checkpointed,
/// running, clean). `holder`: the holder's pid when it is alive (named in commands), None when
/// it is gone; `last`: [`last_verb`]; `snapshot_complete`: the `snapshot-complete` check passes
/// now.
pub(crate) fn advice(
    phase: Phase,
    p: &SlotPaths,
    container: Container,
    holder: Option<i32>,
    snapshot_complete: bool,
    last: Option<(String, &'static str, String)>,
) -> Option<String> {
    let what = match &last {
        Some((verb, how, dir)) => format!("the last verb, {verb}, {how} (evidence {dir})"),
        None => "no verb evidence was found".to_string(),
    };
    let gate = last.as_ref().and_then(|(_, _, dir)| failed_gate(dir));
    let s = Seen {
        phase,
        p,
        container,
        holder,
        snapshot_complete,
        what,
        gate,
    };
    // Whatever the phase (but provision's and clean): without its holder the slot's network
    // namespace cannot be re-proven, so nothing can be restored into it.
    if holder.is_none()
        && !matches!(
            phase,
            Phase::Provisioning | Phase::ProvisionFailed | Phase::Clean | Phase::Cleaning
        )
    {
        return Some(s.holder_gone());
    }
    match phase {
        Phase::Provisioning | Phase::ProvisionFailed => Some(s.provision_unfinished()),
        Phase::Clean => None,
        Phase::Cleaning => Some(s.unfinished(s.cleaning())),
        Phase::Checkpointed | Phase::Ready | Phase::Running
            if container == Container::AbsentWithLeft =>
        {
            Some(format!(
                "phase {}: {}; {}",
                s.phase_name(),
                s.left(),
                s.what
            ))
        }
        Phase::Checkpointed => s.checkpointed(),
        Phase::Ready | Phase::Running => s.runs_by_phase(),
        Phase::Snapshotting | Phase::SnapshotFailed => Some(s.unfinished(s.snapshotting())),
        Phase::Restoring | Phase::RestoreFailed => Some(s.unfinished(s.restoring())),
    }
}

/// What [`advice`] decides on: its inputs, with the last verb described (`what`) and the gate
/// its `verb.json` says it failed (`gate`).
struct Seen<'a> {
    phase: Phase,
    p: &'a SlotPaths,
    container: Container,
    holder: Option<i32>,
    snapshot_complete: bool,
    what: String,
    gate: Option<FailedAt>,
}

impl Seen<'_> {
    /// The command line of slot verb `verb` for this slot.
    fn cmd(&self, verb: &str) -> String {
        crate::slot::next_step::on_slot(verb, self.p)
    }

    /// The phase as `state.json` spells it.
    fn phase_name(&self) -> String {
        self.phase.name()
    }

    /// The way out when nothing can be restored: cleanup, then another slot.
    fn give_up(&self) -> String {
        format!(
            "nothing can be restored: {} releases what is left; then provision another slot number",
            self.cmd("cleanup")
        )
    }

    /// Processes left by a container the runtime lost track of: stop them, then cleanup.
    fn left(&self) -> String {
        format!(
            "the runtime has no container, but processes are left in its cgroup or beside the holder in the slot's network namespace, or that cannot be told (`live.left_processes` names them): a container it lost track of; restore, reset and cleanup refuse while they run (gates cgroup-empty, netns-empty): stop them as the detail says, then {}",
            self.cmd("cleanup")
        )
    }

    /// The advice of a verb that did not finish, `next` being its next step.
    fn unfinished(&self, next: String) -> String {
        format!(
            "a verb did not finish (phase {}): {}; {next}",
            self.phase_name(),
            self.what
        )
    }

    /// Any phase but provision's and clean, without the holder: only cleanup can run.
    fn holder_gone(&self) -> String {
        format!(
            "phase {}: the holder is gone (`live.holder`), so the slot's network namespace cannot be re-proven and no verb but cleanup can run: {} releases what is left; then provision another slot number; {}",
            self.phase_name(),
            self.cmd("cleanup"),
            self.what
        )
    }

    /// Phases provisioning and provision-failed: what status says of an unfinished provision.
    fn provision_unfinished(&self) -> String {
        format!(
            "provision did not finish (phase {}); {}",
            self.phase_name(),
            crate::slot::verb::status::unfinished_provision_advice(self.p)
        )
    }

    /// Phase cleaning: cleanup again, after what the gate it stopped at says, if any.
    fn cleaning(&self) -> String {
        match &self.gate {
            Some(g) => format!(
                "it stopped at gate {g}: do what its message in the evidence says (e.g. stop the processes it names), then {} again releases what is left",
                self.cmd("cleanup")
            ),
            None => format!(
                "{} again releases what is left (each release is proven, a second run is harmless)",
                self.cmd("cleanup")
            ),
        }
    }

    /// Phase checkpointed: none with a complete snapshot, else give up.
    fn checkpointed(&self) -> Option<String> {
        if self.snapshot_complete {
            return None;
        }
        Some(format!(
            "phase checkpointed, but the snapshot is not complete (`snapshot.detail`): {}; {}",
            self.give_up(),
            self.what
        ))
    }

    /// Phases ready and running (no processes left): none while the container runs; else what
    /// to do with a paused, stopped or absent container.
    fn runs_by_phase(&self) -> Option<String> {
        let (phase, p) = (self.phase_name(), self.p);
        match self.container {
            Container::Paused => Some(format!(
                "phase {phase} says the container runs, but it is paused (frozen: `live.container`): the slot's runtime (`runtime.path` in state.json) with `--root {} resume {}` thaws it; or {} restores the snapshot",
                crate::shell::arg(p.runtime_root()),
                p.container_id(),
                self.cmd("reset")
            )),
            Container::Stopped => {
                let next = if self.snapshot_complete {
                    format!("{} removes it and restores the snapshot", self.cmd("reset"))
                } else {
                    self.give_up()
                };
                Some(format!(
                    "phase {phase} says the container runs, but it has stopped (its init exited: `live.container`): {next}"
                ))
            }
            Container::Absent => {
                let next = if self.snapshot_complete {
                    format!("{} brings the snapshot back", self.cmd("restore"))
                } else {
                    self.give_up()
                };
                Some(format!(
                    "phase {phase} says the container runs, but the runtime has no container (`live.container`; `live.left_processes` shows none left): {}; {next}",
                    self.what
                ))
            }
            Container::Running | Container::AbsentWithLeft | Container::Other => None,
        }
    }

    /// Phases snapshotting and snapshot-failed: the next step by the container's state now.
    fn snapshotting(&self) -> String {
        let p = self.p;
        match self.container {
            Container::Running => format!(
                "the container still runs: {} takes the snapshot again",
                self.cmd("snapshot")
            ),
            Container::Absent if self.snapshot_complete => format!(
                "the container is gone; the previous complete snapshot is kept: {} brings it back",
                self.cmd("restore")
            ),
            Container::Absent => {
                format!(
                    "the container is gone and no complete snapshot exists; {}",
                    self.give_up()
                )
            }
            Container::AbsentWithLeft => self.left(),
            Container::Paused => format!(
                "the container is paused (frozen by the checkpoint that was stopped: `live.container`): the slot's runtime (`runtime.path` in state.json) with `--root {} resume {}` thaws it, then {} takes the snapshot again",
                crate::shell::arg(p.runtime_root()),
                p.container_id(),
                self.cmd("snapshot")
            ),
            Container::Stopped | Container::Other => format!(
                "the container's state is not known (see `live.container`); {} once it is absent, or {}",
                self.cmd("restore"),
                self.cmd("cleanup")
            ),
        }
    }

    /// Phases restoring and restore-failed: the next step by the container's state, the
    /// snapshot and the gate the restore failed.
    fn restoring(&self) -> String {
        match (self.container, self.snapshot_complete) {
            (Container::AbsentWithLeft, _) => self.left(),
            (_, false) => format!(
                "no complete snapshot is left to restore; {}",
                self.give_up()
            ),
            _ if self.gate == Some(FailedAt::Gate(GateId::NetFidelity)) => format!(
                "its restored network state differed from the snapshot's (gate net-fidelity; the change is in netstate-diff.txt of its evidence): the namespace is the holder's and outlives every restore, so restoring again meets the same change — undo it in the namespace (e.g. `nsenter --net=/proc/{}/ns/net ip …`, as the diff names), then {}; or {}",
                self.holder.unwrap_or_default(),
                self.cmd("reset"),
                self.cmd("cleanup")
            ),
            // A reset that could not prove the container it stopped gone restored nothing.
            (
                Container::Running | Container::Other | Container::Paused | Container::Stopped,
                true,
            ) if self.gate == Some(FailedAt::Gate(GateId::ContainerStopped)) => {
                format!(
                    "it could not prove the container it stopped gone (gate container-stopped; its message in the evidence says why), so nothing was restored and the container that was there may still run (see `live.container`): {} stops it and restores the snapshot again",
                    self.cmd("reset")
                )
            }
            (Container::Running, true) => format!(
                "a container runs but the restore's gates did not all pass: {} stops it and restores the snapshot again",
                self.cmd("reset")
            ),
            (Container::Absent, true) => format!(
                "the container is gone: {} restores the snapshot",
                self.cmd("restore")
            ),
            (Container::Stopped, true) => format!(
                "the container has stopped (its init exited: `live.container`): {} removes it and restores the snapshot",
                self.cmd("reset")
            ),
            (Container::Other | Container::Paused, true) => format!(
                "the container's state is not known (see `live.container`): {} stops whatever runs and restores the snapshot",
                self.cmd("reset")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> SlotPaths {
        SlotPaths::new(Path::new("/var/lib/np"), 3)
    }

    #[test]
    fn each_unfinished_phase_names_a_command_that_applies_now() {
        let last = || {
            Some((
                "reset".to_string(),
                "was interrupted",
                "/e/0004-reset".to_string(),
            ))
        };
        let a = |ph, c, s| advice(ph, &paths(), c, Some(1234), s, last()).unwrap();
        let r = a(Phase::Restoring, Container::Absent, true);
        assert!(
            r.contains("phase restoring") && r.contains("reset, was interrupted"),
            "{r}"
        );
        assert!(
            r.contains("`netprobe slot restore --slot 3 --state-dir /var/lib/np`"),
            "{r}"
        );
        let r = a(Phase::RestoreFailed, Container::Running, true);
        assert!(r.contains("netprobe slot reset --slot 3"), "{r}");
        let r = a(Phase::Restoring, Container::Absent, false);
        assert!(
            r.contains("netprobe slot cleanup") && r.contains("another slot number"),
            "{r}"
        );
        let r = a(Phase::Snapshotting, Container::Running, true);
        assert!(r.contains("netprobe slot snapshot --slot 3"), "{r}");
        let r = a(Phase::SnapshotFailed, Container::Absent, true);
        assert!(
            r.contains("previous complete snapshot") && r.contains("slot restore"),
            "{r}"
        );
        let r = a(Phase::SnapshotFailed, Container::Absent, false);
        assert!(r.contains("slot cleanup"), "{r}");
        // A checkpoint killed before it thawed the container: resume it, then snapshot again.
        assert_eq!(Container::from_status("paused"), Container::Paused);
        let r = a(Phase::Snapshotting, Container::Paused, false);
        assert!(
            r.contains("is paused")
                && r.contains("resume netprobe-slot-3")
                && r.contains("netprobe slot snapshot --slot 3"),
            "{r}"
        );
        let r = a(Phase::Cleaning, Container::Other, false);
        assert!(
            r.contains("slot cleanup --slot 3") && r.contains("again"),
            "{r}"
        );
        let r = a(Phase::Provisioning, Container::Other, false);
        assert!(r.contains("never re-provisioned in place"), "{r}");
        for ph in [
            Phase::Ready,
            Phase::Checkpointed,
            Phase::Running,
            Phase::Clean,
        ] {
            assert_eq!(
                advice(ph, &paths(), Container::Running, Some(1234), true, last()),
                None
            );
        }
    }

    #[test]
    fn a_container_the_runtime_lost_is_named_in_every_phase_that_expects_one() {
        let last = || Some(("reset".to_string(), "failed", "/e/0004-reset".to_string()));
        let a = |ph, c, s| advice(ph, &paths(), c, Some(1234), s, last());
        // Phase running, the runtime has none, nothing left: restore (or give up).
        let r = a(Phase::Running, Container::Absent, true).unwrap();
        assert!(r.contains("phase running says the container runs"), "{r}");
        assert!(
            r.contains("reset, failed") && r.contains("slot restore --slot 3"),
            "{r}"
        );
        let r = a(Phase::Ready, Container::Absent, false).unwrap();
        assert!(r.contains("slot cleanup --slot 3"), "{r}");
        // Processes left: named as a lost container, whatever the phase.
        for ph in [
            Phase::Running,
            Phase::Ready,
            Phase::Checkpointed,
            Phase::RestoreFailed,
            Phase::SnapshotFailed,
        ] {
            let r = a(ph, Container::AbsentWithLeft, true).unwrap();
            assert!(
                r.contains("live.left_processes") && r.contains("netns-empty"),
                "{ph:?}: {r}"
            );
        }
        assert_eq!(a(Phase::Checkpointed, Container::Absent, true), None);
        assert_eq!(a(Phase::Clean, Container::AbsentWithLeft, true), None);
    }

    #[test]
    fn states_the_user_must_act_on_get_advice() {
        let d = tempfile::tempdir().unwrap();
        let failed_at = |verb: &str, gate: &str| {
            let dir = d.path().join(format!("0009-{verb}"));
            std::fs::create_dir_all(&dir).unwrap();
            let doc = serde_json::json!({"ok": false, "error": {"gate": gate}});
            std::fs::write(dir.join("verb.json"), doc.to_string()).unwrap();
            Some((verb.to_string(), "failed", dir.display().to_string()))
        };
        // (phase, container, holder alive, snapshot complete, last verb) -> advice
        let at = |ph, c, holder: bool, snap, last| {
            advice(ph, &paths(), c, holder.then_some(1234), snap, last).unwrap()
        };
        let has = |r: &str, words: &[&str]| {
            assert!(words.iter().all(|w| r.contains(w)), "{words:?}: {r}");
        };
        // The holder gone: only cleanup, whatever the phase.
        let r = at(Phase::Running, Container::Running, false, true, None);
        has(&r, &["the holder is gone", "slot cleanup --slot 3"]);
        // The container's init exited: reset.
        let r = at(Phase::Running, Container::Stopped, true, true, None);
        has(&r, &["it has stopped", "slot reset --slot 3"]);
        // Paused (frozen by hand, or by a tool): resume, or reset.
        let r = at(Phase::Running, Container::Paused, true, true, None);
        has(
            &r,
            &[
                "it is paused",
                "resume netprobe-slot-3",
                "slot reset --slot 3",
            ],
        );
        // Checkpointed with no complete snapshot: nothing to restore.
        let r = at(Phase::Checkpointed, Container::Absent, true, false, None);
        has(&r, &["snapshot is not complete", "slot cleanup"]);
        // A cleanup stopped at a gate: do what it says first.
        let last = failed_at("cleanup", "netns-empty");
        let r = at(Phase::Cleaning, Container::Absent, true, true, last);
        has(&r, &["stopped at gate netns-empty"]);
        // A reset whose stop was not proven: nothing restored, reset again.
        let last = failed_at("reset", "container-stopped");
        let r = at(Phase::RestoreFailed, Container::Running, true, true, last);
        has(
            &r,
            &[
                "gate container-stopped",
                "nothing was restored",
                "slot reset --slot 3",
            ],
        );
        assert!(!r.contains("the restore's gates did not all pass"), "{r}");
        // A restore that met a changed network state: restoring again meets it again.
        let last = failed_at("reset", "net-fidelity");
        let r = at(Phase::RestoreFailed, Container::Absent, true, true, last);
        has(
            &r,
            &[
                "net-fidelity",
                "undo it in the namespace",
                "/proc/1234/ns/net",
            ],
        );
    }

    #[test]
    fn left_processes_turn_an_absent_container_into_a_lost_one() {
        let facts = |v: serde_json::Value| -> super::super::status_doc::LiveFacts {
            serde_json::from_value(v).unwrap()
        };
        let live = |none_cg: bool, none_ns: bool| {
            facts(serde_json::json!({"container": {"status": "absent"},
                "left_processes": {"cgroup": {"none": none_cg}, "netns": {"none": none_ns}}}))
        };
        assert_eq!(Container::from_live(&live(true, true)), Container::Absent);
        assert_eq!(
            Container::from_live(&live(true, false)),
            Container::AbsentWithLeft
        );
        assert_eq!(
            Container::from_live(&live(false, true)),
            Container::AbsentWithLeft
        );
        // Not told: fail closed.
        let untold = facts(serde_json::json!({"container": {"status": "absent"}}));
        assert_eq!(Container::from_live(&untold), Container::AbsentWithLeft);
        let running =
            facts(serde_json::json!({"container": {"status": "running"}, "left_processes": null}));
        assert_eq!(Container::from_live(&running), Container::Running);
    }

    #[test]
    fn the_newest_verb_folder_says_how_it_ended() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(last_verb(&d.path().join("none")), None);
        let mk = |n: &str| {
            let p = d.path().join(n);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let p = mk("0001-provision");
        std::fs::write(p.join("verb.json"), r#"{"ok":true}"#).unwrap();
        assert_eq!(last_verb(d.path()).unwrap().1, "finished");
        let p = mk("0002-snapshot");
        std::fs::write(p.join("verb.json"), r#"{"ok":false}"#).unwrap();
        let (verb, how, _) = last_verb(d.path()).unwrap();
        assert_eq!((verb.as_str(), how), ("snapshot", "failed"));
        let p = mk("0003-reset");
        std::fs::write(p.join("interrupted.txt"), "SIGINT").unwrap();
        assert_eq!(last_verb(d.path()).unwrap().1, "was interrupted");
        mk("0004-cleanup");
        assert_eq!(last_verb(d.path()).unwrap().1, "did not record its end");
        // An interrupted verb's verb.json says so, also when interrupted.txt is missing.
        let p = mk("0005-restore");
        let doc = r#"{"ok":false,"error":null,"interrupted":{"signal":"SIGTERM","exit_code":143}}"#;
        std::fs::write(p.join("verb.json"), doc).unwrap();
        assert_eq!(last_verb(d.path()).unwrap().1, "was interrupted");
    }
}
