//! CRIU's network lock in the holder's network namespace after a restore or reset that did not
//! finish: CRIU locks the namespace (on dump, and again on restore) and unlocks it only at the
//! end of a successful restore. A CRIU killed by an interruption, or a restore that failed,
//! leaves the lock behind, and each lock adds jumps the next restore's own unlock cannot all
//! remove — the retry then fails closed at `net-fidelity`. Once the container is stopped, the
//! lock is removed here as CRIU's own unlock does ([`crate::netlink::criu_unlock`]), inside the
//! holder's netns, only when a capture shows it; what was removed is recorded in the verb's
//! evidence (`criu-lock-released.txt`), and for an interruption in the release list.

use super::run::VerbRun;
use super::state::SlotState;
use crate::evidence::EvidenceDir;
use crate::netlink::criu_unlock::{Unlocked, unlock_here};
use crate::ns::ProcessIdentity;
use crate::ns::cleanup::Registration;
use std::path::PathBuf;

/// The evidence file naming what was found and removed.
pub const EVIDENCE_FILE: &str = "criu-lock-released.txt";

/// Removes CRIU's network lock from the netns of holder `h`: the holder is re-verified (pid,
/// start time, netns inode), the calling thread joins its netns (proven to be that inode), and
/// [`unlock_here`] runs there.
///
/// Errors: the holder is not the recorded one (nothing is run), the netns cannot be entered,
/// or [`unlock_here`]'s error.
pub fn release(h: &ProcessIdentity) -> Result<Unlocked, String> {
    h.verify()
        .map_err(|e| format!("holder {h} not proven ({e}): its netns was left alone"))?;
    let want = h.netns_inode;
    crate::ns::run_in_netns(&h.netns_path(), || {
        match crate::ns::own_netns_inode() {
            Ok(i) if i == want => {}
            Ok(i) => return Err(format!("joined netns inode {i}, not the holder's {want}")),
            Err(e) => return Err(e.to_string()),
        }
        unlock_here()
    })
    .map_err(|e| format!("enter the netns of holder {h}: {e}"))?
}

/// The text of [`EVIDENCE_FILE`].
fn evidence_text(h: &ProcessIdentity, r: &Result<Unlocked, String>) -> String {
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

/// On the signal path (no verb to record it): writes [`EVIDENCE_FILE`] in `ev` (atomic, never
/// overwrites); the release list's sentence says when it could not be.
fn write_evidence_on_signal(
    ev: Option<&PathBuf>,
    h: &ProcessIdentity,
    r: &Result<Unlocked, String>,
) -> String {
    let Some(d) = ev else {
        return String::new();
    };
    match EvidenceDir::open(d)
        .and_then(|dir| dir.write(EVIDENCE_FILE, evidence_text(h, r).as_bytes()))
    {
        Ok(_) => String::new(),
        Err(e) => format!(" ({EVIDENCE_FILE} not written: {e})"),
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
    run.ev_write(EVIDENCE_FILE, evidence_text(h, &r).as_bytes());
    match r {
        Ok(u) => {
            let d = format!(
                "CRIU's network lock found in the holder's netns before the capture: {}",
                u.summary()
            );
            run.journal("step", true, &d);
            run.fact("criu_lock_released_before_capture", u.found);
        }
        Err(e) => {
            run.journal(
                "step",
                false,
                &format!("CRIU's network lock in the holder's netns not removed: {e}"),
            );
            run.fact("criu_lock_left", e);
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
    run.ev_write(EVIDENCE_FILE, evidence_text(&h, &r).as_bytes());
    match r {
        Ok(u) if u.found.is_empty() => None,
        Ok(u) => {
            let d = format!("CRIU's network lock in the holder's netns: {}", u.summary());
            run.journal("step", true, &d);
            run.fact("criu_lock_released", u.found);
            None
        }
        Err(e) => {
            let d = format!("CRIU's network lock in the holder's netns not removed: {e}");
            run.journal("step", false, &d);
            run.fact("criu_lock_left", e);
            Some(format!(
                "; {d} (the next restore fails closed at net-fidelity until it is gone)"
            ))
        }
    }
}
