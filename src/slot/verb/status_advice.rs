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
#[path = "status_advice_unit_tests.rs"]
mod tests;
