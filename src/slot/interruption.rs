//! What an interrupted slot verb leaves (a signal does not unwind): `interrupted.txt` in its
//! evidence folder — why, what to do next and the release list — the gates it had evaluated
//! (`gates-so-far.json`: `gates.json` is written only at the verb's end, read from the verb's
//! own record, [`super::verb_record::VerbRecord`]), and the journal's `end` entry (not ok). Written by the release after the step's process tree was killed and
//! what the verb had started was released ([`crate::ns::cleanup::register_note`]: last).

use super::layout::{self, SlotPaths};
use super::verb_record::VerbRecord;
use crate::evidence::EvidenceDir;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The file of the gates an interrupted verb had evaluated, in order (as `gates.json`).
pub const GATES_SO_FAR_FILE: &str = "gates-so-far.json";

/// What the note is made of, shared with the running verb.
pub(crate) struct NoteInputs {
    /// The verb's evidence folder.
    pub ev: PathBuf,
    /// The verb as written in evidence.
    pub verb: String,
    /// The verb is `provision` (what to do next differs).
    pub provision: bool,
    /// The slot's paths.
    pub paths: SlotPaths,
    /// Evidence files still being made on their own threads.
    pub in_flight: Arc<Mutex<Vec<String>>>,
    /// The verb's record: the gates evaluated so far, in order.
    pub record: VerbRecord,
}

/// Registers the note; dropped when the verb finishes.
pub(crate) fn register(n: NoteInputs) -> crate::ns::cleanup::Registration {
    let label = format!("slot {} interruption note", n.verb);
    crate::ns::cleanup::register_note(label, move || {
        let by = crate::ns::cleanup::interrupted_by().unwrap_or("a signal");
        let next = interruption_next(n.provision, &n.paths);
        let making = in_flight_note(&n.in_flight.lock().unwrap_or_else(|p| p.into_inner()));
        let dir = EvidenceDir::open(&n.ev).map_err(|e| e.to_string());
        let gates = n.record.lock().gates.gates.clone();
        let gates_line = match (&dir, gates.is_empty()) {
            (_, true) => String::new(),
            (Ok(d), false) => {
                let bytes = serde_json::to_vec_pretty(&gates).unwrap_or_default();
                match d.write(GATES_SO_FAR_FILE, &bytes) {
                    Ok(_) => format!(
                        "; the {} gate(s) it had evaluated ({} proven) are in {GATES_SO_FAR_FILE}",
                        gates.len(),
                        gates.iter().filter(|g| g.proven).count()
                    ),
                    Err(e) => format!("; its gates could not be written ({e})"),
                }
            }
            (Err(_), false) => String::new(),
        };
        let text = format!(
            "netprobe slot {} was interrupted by {by} at {}; the step's process tree was \
             killed and what the verb had started released (listed below); the slot's state \
             is as the journal's last step left it ({next}){making}{gates_line}\n{}",
            n.verb,
            crate::evidence::now_rfc3339(),
            crate::ns::cleanup::released_list()
        );
        let path = n.ev.join(crate::evidence::dir::INTERRUPTED_FILE);
        let wrote = dir.and_then(|d| {
            d.write(crate::evidence::dir::INTERRUPTED_FILE, text.as_bytes())
                .map_err(|e| e.to_string())
        });
        let _ = layout::journal_append(
            &n.paths.journal(),
            &n.verb,
            "end",
            false,
            &format!("interrupted by {by}"),
        );
        crate::ns::cleanup::wrote_note(&path, wrote)
    })
}

/// The interruption note's sentence on evidence still being made on its own thread when the
/// signal came ([`super::run::VerbRun::ev_make_beside`]): empty when nothing was.
pub(crate) fn in_flight_note(making: &[String]) -> String {
    if making.is_empty() {
        return String::new();
    }
    format!(
        "; evidence still being made beside the verb when the signal came, so possibly missing from this folder: {}",
        making.join(", ")
    )
}

/// What an interrupted verb's note tells to do next, decided when the note is written (after
/// the release): a provision stopped before it wrote `state.json` left nothing a cleanup could
/// release (the `slot-state` gate's words); a provision stopped later, `slot cleanup` then
/// another slot number; any other verb, run it again or clean up.
pub(crate) fn interruption_next(provision: bool, paths: &SlotPaths) -> String {
    match (provision, super::missing_state_why(paths)) {
        (true, Some(why)) => why.trim_start_matches(": ").to_string(),
        (true, None) => super::status::unfinished_provision_advice(paths),
        (false, _) => "run the verb again, or `slot cleanup`".to_string(),
    }
}
