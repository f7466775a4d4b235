//! CRIU's network lock in the holder's network namespace after a restore or reset that did not
//! finish: CRIU locks the namespace (on dump, and again on restore) and unlocks it only at the
//! end of a successful restore. A CRIU killed by an interruption, or a restore that failed,
//! leaves the lock behind, and each lock adds jumps the next restore's own unlock cannot all
//! remove — the retry then fails closed at `net-fidelity`. Once the container is stopped, the
//! lock is removed here as CRIU's own unlock does ([`crate::netlink::criu_unlock`]), inside the
//! holder's netns, only when a capture shows it; what was removed is recorded in the verb's
//! evidence (`criu-lock-released-<step>.txt`, [`LockStep`]), and for an interruption in the
//! release list.
//!
//! A verb killed with SIGKILL runs none of that: a first `slot snapshot` killed during its
//! checkpoint leaves the runtime and CRIU to finish the dump without netprobe, and a finished
//! dump keeps the lock (CRIU unlocks after a dump only when it failed or left the tasks
//! running; `cr_dump_finish`). So `slot status` looks for it ([`look`]: `live.criu_network_lock`),
//! `slot cleanup` records whether it was there ([`at_cleanup`]), and a restore or reset whose
//! slot was not left `checkpointed` by a complete snapshot removes any lock before the runtime
//! restore and proves it gone, else refuses (gate `no-criu-lock`, [`before_restore`]).

use crate::evidence::EvidenceDir;
use crate::netlink::criu_unlock::{Unlocked, unlock_here};
use crate::ns::ProcessIdentity;
use crate::ns::cleanup::Registration;
use crate::slot::JournalEvent;
use crate::slot::error::SlotError;
use crate::slot::gate::GateId;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::state::{Phase, SlotState};
use std::path::PathBuf;

/// The step that removes CRIU's lock, naming its evidence file: a verb may run more than one
/// (a restore that removes a stale lock before the runtime restore, then fails and removes the
/// lock its CRIU left), and each writes its own file, so none collides with another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockStep {
    /// Before a restore's or reset's runtime restore ([`before_restore`]).
    BeforeRestore,
    /// Before a snapshot's capture ([`before_capture`]).
    BeforeCapture,
    /// After a failed restore, reset or checkpoint ([`after_failure`]).
    AfterFailure,
    /// On the signal path of an interrupted verb ([`on_signal`]).
    OnSignal,
}

impl LockStep {
    /// The evidence file naming what this step found and removed:
    /// `criu-lock-released-<step>.txt`.
    pub const fn file(self) -> &'static str {
        match self {
            LockStep::BeforeRestore => "criu-lock-released-before-restore.txt",
            LockStep::BeforeCapture => "criu-lock-released-before-capture.txt",
            LockStep::AfterFailure => "criu-lock-released-after-failure.txt",
            LockStep::OnSignal => "criu-lock-released-on-signal.txt",
        }
    }

    /// Every step, in the order a verb may run them.
    pub const ALL: [LockStep; 4] = [
        LockStep::BeforeCapture,
        LockStep::BeforeRestore,
        LockStep::AfterFailure,
        LockStep::OnSignal,
    ];
}

/// The prefix every lock evidence file's name starts with ([`LockStep::file`]).
pub const EVIDENCE_PREFIX: &str = "criu-lock-released-";

/// Why CRIU's network lock was not removed from a holder's netns.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The holder is not the recorded process: nothing was run.
    #[error("holder {holder} not proven ({source}): its netns was left alone")]
    NotProven {
        /// The recorded holder.
        holder: ProcessIdentity,
        /// Why it is not proven.
        #[source]
        source: crate::ns::NsError,
    },
    /// The thread joined another netns than the holder's.
    #[error("joined netns inode {found}, not the holder's {want}")]
    WrongNetns {
        /// The inode joined.
        found: u64,
        /// The holder's.
        want: u64,
    },
    /// The joined netns' inode could not be read.
    #[error(transparent)]
    Inode(crate::ns::NsError),
    /// The removal there failed ([`unlock_here`]).
    #[error(transparent)]
    Unlock(crate::netlink::UnlockError),
    /// The holder's netns could not be entered.
    #[error("enter the netns of holder {holder}: {source}")]
    Enter {
        /// The recorded holder.
        holder: ProcessIdentity,
        /// The error.
        #[source]
        source: crate::ns::NsError,
    },
}

/// Removes CRIU's network lock from the netns of holder `h`: the holder is re-verified (pid,
/// start time, netns inode), the calling thread joins its netns (proven to be that inode), and
/// [`unlock_here`] runs there.
///
/// Errors: the holder is not the recorded one (nothing is run), the netns cannot be entered,
/// or [`unlock_here`]'s error.
pub fn release(h: &ProcessIdentity) -> Result<Unlocked, ReleaseError> {
    h.verify()
        .map_err(|source| ReleaseError::NotProven { holder: *h, source })?;
    let want = h.netns_inode;
    crate::ns::run_in_netns(&h.netns_path(), || {
        match crate::ns::own_netns_inode() {
            Ok(i) if i == want => {}
            Ok(found) => return Err(ReleaseError::WrongNetns { found, want }),
            Err(e) => return Err(ReleaseError::Inode(e)),
        }
        unlock_here().map_err(ReleaseError::Unlock)
    })
    .map_err(|source| ReleaseError::Enter { holder: *h, source })?
}

/// Whether CRIU's network lock is in a holder's netns now ([`LockNow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockPresence {
    /// A capture there shows part of CRIU's lock ([`crate::netlink::netfilter::criu_lock`]).
    Present,
    /// A capture there shows none of it.
    Absent,
    /// Not looked at: the holder is not the recorded one, or its netns could not be entered or
    /// its ruleset captured (the detail says which).
    Unknown,
}

/// What one look at a holder's netns found of CRIU's network lock: `slot status`'s
/// `live.criu_network_lock` and `slot cleanup`'s fact `criu_network_lock_at_cleanup`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LockNow {
    /// Present, absent or unknown.
    pub status: LockPresence,
    /// The evidence line: each part of the lock found (e.g. `iptables: chain CRIU in table
    /// filter`) and how the ruleset was read, or why it was not.
    pub detail: String,
}

/// Looks for CRIU's network lock in the netns of holder `h`, changing nothing: the holder is
/// re-verified (pid, start time, netns inode), the calling thread joins its netns (proven to be
/// that inode) and captures the ruleset there ([`crate::netlink::netfilter::capture`]: without a
/// process when `NETLINK_NETFILTER` proves that nothing filters, else `iptables-save`,
/// `ip6tables-save` and `nft list ruleset`).
pub fn look(h: &ProcessIdentity) -> LockNow {
    let unknown = |detail: String| LockNow {
        status: LockPresence::Unknown,
        detail,
    };
    if let Err(e) = h.verify() {
        return unknown(format!(
            "holder {h} not proven ({e}): its netns was not entered"
        ));
    }
    let want = h.netns_inode;
    let seen = crate::ns::run_in_netns(&h.netns_path(), || {
        match crate::ns::own_netns_inode() {
            Ok(i) if i == want => {}
            Ok(i) => return Err(format!("joined netns inode {i}, not the holder's {want}")),
            Err(e) => return Err(e.to_string()),
        }
        crate::netlink::netfilter::capture().map_err(|e| e.to_string())
    });
    let (state, raw) = match seen {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return unknown(format!("netns of holder pid {}: {e}", h.pid)),
        Err(e) => return unknown(format!("enter the netns of holder {h}: {e}")),
    };
    let parts = crate::netlink::netfilter::criu_lock(&state);
    let how = match raw.no_tables {
        Some(_) => "NETLINK_NETFILTER dumps: no table there filters anything",
        None => "iptables-save, ip6tables-save and nft list ruleset",
    };
    match parts.is_empty() {
        true => LockNow {
            status: LockPresence::Absent,
            detail: format!("none in the netns of holder pid {} ({how})", h.pid),
        },
        false => LockNow {
            status: LockPresence::Present,
            detail: format!(
                "{} in the netns of holder pid {} ({how})",
                parts.join(", "),
                h.pid
            ),
        },
    }
}

/// Before the runtime restore of a restore or reset (the container proven absent or stopped,
/// the holder just re-verified): a lock in the holder's netns is removed and proven gone, else
/// the restore is refused (gate `no-criu-lock`). `prev` is the phase the verb found.
///
/// Not looked for when `prev` is `checkpointed`: a complete snapshot's dump left it there, and
/// the restore of that snapshot is CRIU's own way out of it (it locks again, then unlocks at
/// its end; `net-fidelity` fails closed on anything of it left). In every other phase a lock
/// is a verb's that did not finish — a dump or restore killed with SIGKILL, a snapshot that
/// failed after its dump — and not the snapshot's: CRIU's restore would not remove it (an
/// nftables `CRIU-<id>` table of another dump), or adds a jump its unlock cannot all remove.
///
/// Errors: the gate's failure (the holder not proven, its ruleset not read, or part of the
/// lock still there after the removal: named).
pub(crate) fn before_restore(
    run: &mut VerbRun,
    h: &ProcessIdentity,
    prev: Phase,
) -> Result<(), SlotError> {
    if prev == Phase::Checkpointed {
        run.fact(
            "criu_lock_before_restore",
            "not looked for: phase checkpointed, so any lock is the dump's of the snapshot restored now, which CRIU's restore unlocks at its end (net-fidelity fails closed on what is left)",
        );
        return Ok(());
    }
    let t = std::time::Instant::now();
    let seen = look(h);
    let r = match seen.status {
        LockPresence::Absent => Ok(seen.detail),
        LockPresence::Unknown => Err(format!("not proven absent: {}", seen.detail)),
        LockPresence::Present => {
            let r = release(h);
            run.ev_write(
                LockStep::BeforeRestore.file(),
                evidence_text(h, &r).as_bytes(),
            );
            match r {
                Ok(u) => {
                    let d = format!(
                        "CRIU's network lock found in the holder's netns before the restore (phase {}): {}",
                        prev.name(),
                        u.summary()
                    );
                    run.journal(JournalEvent::Step, true, &d);
                    run.fact("criu_lock_released_before_restore", u.found);
                    Ok(d)
                }
                Err(e) => {
                    run.fact("criu_lock_left", e.to_string());
                    Err(format!(
                        "{} found before the restore and not removed: {e}; the restore would run into CRIU's lock",
                        seen.detail
                    ))
                }
            }
        }
    };
    run.took("gate-criu-lock", t);
    run.gate(GateId::NoCriuLock, r)
}

/// At cleanup, before the holder is stopped: whether CRIU's lock is in its netns
/// ([`look`]), recorded as fact `criu_network_lock_at_cleanup` (and a journal step when it is
/// present or unknown). Nothing is removed: the namespace is the holder's, which cleanup stops
/// next, and `netns-empty` proved no other process in it. Returns a sentence for the verb's
/// summary when the lock was there, `None` otherwise (no holder recorded: not looked for).
pub(crate) fn at_cleanup(run: &mut VerbRun, st: &SlotState) -> Option<String> {
    let h = st.holder?;
    let seen = look(&h);
    run.fact_json("criu_network_lock_at_cleanup", &seen);
    let said = match seen.status {
        LockPresence::Absent => return None,
        LockPresence::Present => format!(
            "CRIU's network lock was in the holder's netns at cleanup ({}): not removed, the namespace is the holder's, stopped by this cleanup, and netns-empty proved no other process in it",
            seen.detail
        ),
        LockPresence::Unknown => format!(
            "CRIU's network lock in the holder's netns at cleanup: not known ({})",
            seen.detail
        ),
    };
    run.journal(JournalEvent::Step, true, &said);
    (seen.status == LockPresence::Present).then_some(said)
}

/// Records fact `criu_network_lock_method`: the lock method the dump in `images` recorded
/// ([`crate::images::inventory::lock_method_fact`]; CRIU's logs do not name it, and its restore
/// takes it from that image).
pub(crate) fn lock_method_fact(run: &mut VerbRun, images: &std::path::Path) {
    run.fact(
        "criu_network_lock_method",
        crate::images::inventory::lock_method_fact(images),
    );
}

/// The text of a [`LockStep::file`].
fn evidence_text(h: &ProcessIdentity, r: &Result<Unlocked, ReleaseError>) -> String {
    let mut t = format!(
        "CRIU's network lock in the netns of holder {h}, after the container was stopped, at {}\n",
        crate::evidence::now_rfc3339()
    );
    match r {
        Ok(u) => {
            t.push_str(&format!("result: {}\n", u.summary()));
            for f in &u.found {
                t.push_str(&format!("found: {f}\n"));
            }
            for c in &u.commands {
                t.push_str(&format!("ran: {c}\n"));
            }
        }
        Err(e) => t.push_str(&format!("FAILED: {e}\n")),
    }
    t
}

/// On the signal path (no verb to record it): writes [`LockStep::OnSignal`]'s file in `ev` (atomic, never
/// overwrites); the release list's sentence says when it could not be.
fn write_evidence_on_signal(
    ev: Option<&PathBuf>,
    h: &ProcessIdentity,
    r: &Result<Unlocked, ReleaseError>,
) -> String {
    let Some(d) = ev else {
        return String::new();
    };
    let file = LockStep::OnSignal.file();
    match EvidenceDir::open(d).and_then(|dir| dir.write(file, evidence_text(h, r).as_bytes())) {
        Ok(_) => String::new(),
        Err(e) => format!(" ({file} not written: {e})"),
    }
}

/// Registers the removal of CRIU's lock from holder `h`'s netns for an interruption
/// ([`crate::ns::cleanup::register_reporting`]). Register it before the runtime restore: the
/// container it registers is then released first (newest first), and the lock removed after.
pub fn on_signal(h: ProcessIdentity, ev: Option<PathBuf>) -> Registration {
    crate::ns::cleanup::register_reporting(
        format!("CRIU's network lock in the netns of holder pid {}", h.pid),
        move || {
            if let Err(e) = h.verify() {
                return Some(format!("not checked: holder not proven ({e})"));
            }
            let r = release(&h);
            let unwritten = write_evidence_on_signal(ev.as_ref(), &h, &r);
            Some(match r {
                Ok(u) => format!("{}{unwritten}", u.summary()),
                Err(e) => format!("FAILED: {e}{unwritten}"),
            })
        },
    )
}

/// Before a snapshot records the network state of holder `h`'s netns, which shows CRIU's lock
/// (left by a checkpoint or restore of this slot that did not finish, e.g. killed with
/// SIGKILL): removes it, recording fact `criu_lock_released_before_capture` (or
/// `criu_lock_left`), the evidence file and a journal step. The snapshot's `no-criu-lock` gate
/// then decides on a new capture.
pub(crate) fn before_capture(run: &mut VerbRun, h: &ProcessIdentity) {
    let r = release(h);
    run.ev_write(
        LockStep::BeforeCapture.file(),
        evidence_text(h, &r).as_bytes(),
    );
    match r {
        Ok(u) => {
            let d = format!(
                "CRIU's network lock found in the holder's netns before the capture: {}",
                u.summary()
            );
            run.journal(JournalEvent::Step, true, &d);
            run.fact("criu_lock_released_before_capture", u.found);
        }
        Err(e) => {
            run.journal(
                JournalEvent::Step,
                false,
                &format!("CRIU's network lock in the holder's netns not removed: {e}"),
            );
            run.fact("criu_lock_left", e.to_string());
        }
    }
}

/// After a failed restore or reset whose container is stopped, or a failed checkpoint: removes CRIU's lock from the
/// recorded holder's netns (not entered when the holder is not proven: fact
/// `criu_lock_not_checked`), recording fact `criu_lock_released` (or `criu_lock_left`), the
/// evidence file and a journal step. Returns a note for the verb's error when the lock could
/// not be removed.
pub(crate) fn after_failure(run: &mut VerbRun, st: &SlotState) -> Option<String> {
    let h = st.holder?;
    if let Err(e) = h.verify() {
        // Its netns is not entered (the restore's own holder gate says why).
        run.fact(
            "criu_lock_not_checked",
            format!("holder {h} not proven: {e}"),
        );
        return None;
    }
    let r = release(&h);
    run.ev_write(
        LockStep::AfterFailure.file(),
        evidence_text(&h, &r).as_bytes(),
    );
    match r {
        Ok(u) if u.found.is_empty() => None,
        Ok(u) => {
            let d = format!("CRIU's network lock in the holder's netns: {}", u.summary());
            run.journal(JournalEvent::Step, true, &d);
            run.fact("criu_lock_released", u.found);
            None
        }
        Err(e) => {
            let d = format!("CRIU's network lock in the holder's netns not removed: {e}");
            run.journal(JournalEvent::Step, false, &d);
            run.fact("criu_lock_left", e.to_string());
            Some(format!(
                "; {d} (the next restore fails closed at net-fidelity until it is gone)"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each removal step writes a file of its own: a verb that runs two of them (a restore that
    /// removes a stale lock, then fails and removes its CRIU's) never writes one name twice.
    #[test]
    fn every_step_names_its_own_evidence_file() {
        let mut names: Vec<&str> = LockStep::ALL.iter().map(|s| s.file()).collect();
        assert!(
            names
                .iter()
                .all(|n| n.starts_with(EVIDENCE_PREFIX) && n.ends_with(".txt"))
        );
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LockStep::ALL.len(), "{names:?}");
    }
}
