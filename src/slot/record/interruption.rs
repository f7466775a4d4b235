//! What an interrupted slot verb leaves (a signal does not unwind): `interrupted.txt` in its
//! evidence folder — why, what to do next, the files below and the release list — the gates it
//! had evaluated (`gates-so-far.json`: `gates.json` is written only at the verb's end), the step
//! timings measured so far (`timings.json`, with `total` up to the note), `verb.json` (a finished
//! verb's shape, not ok, with `interrupted`: the signal, exit code and release list;
//! [`crate::slot::record::verb_record::VerbDoc`]), and the journal's `end` entry (not ok, naming the folder and
//! `verb.json`'s sha256). All are made from the verb's own record
//! ([`crate::slot::record::verb_record::VerbRecord`]) by the release that runs after every other release
//! ([`crate::ns::cleanup::register_note`]: last); the note says only what those releases did
//! ([`what_the_release_did`]).

use super::end_writer::EndWriter;
use crate::evidence::EvidenceDir;
use crate::slot::record::verb_record::{self as vrec, Ending, Interrupted, Recorded, VerbRecord};
use crate::slot::resources::fs_tools;
use crate::slot::resources::slot_dir::SlotPaths;
use crate::slot::state::SlotState;
use crate::slot::verb::status;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How the journal's `end` entry of an interrupted verb begins (then the signal: `SIGINT`, …);
/// `netprobe report` reads it to say "interrupted" rather than "failed".
pub const INTERRUPTED_END_PREFIX: &str = "interrupted by ";

/// The file of the gates an interrupted verb had evaluated, in order (as `gates.json`).
pub const GATES_SO_FAR_FILE: &str = crate::evidence::enclosing::SLOT_GATES_SO_FAR_FILE;

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
    /// The verb's record: gates, timings, facts, declared differences.
    pub record: VerbRecord,
    /// When the verb started (monotonic: `total` in `timings.json`).
    pub started: Instant,
    /// When the verb started (RFC 3339: `started_at` in `verb.json`).
    pub started_at: String,
}

/// Registers the note; dropped when the verb finishes.
pub(crate) fn register(n: NoteInputs) -> crate::ns::cleanup::Registration {
    let label = format!("slot {} interruption note", n.verb);
    crate::ns::cleanup::register_note(label, move || {
        let by = crate::ns::cleanup::interrupted_by().unwrap_or("a signal");
        let next = interruption_next(n.provision, &n.paths);
        let making = n
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let dir = EvidenceDir::open(&n.ev).map_err(|e| e.to_string());
        let (ours, mut rec) = n.record.claim_end();
        rec.timings
            .insert("total".into(), fs_tools::ms_since(n.started));
        let writer = EndWriter {
            verb: &n.verb,
            paths: &n.paths,
            started_at: &n.started_at,
            ev: Some(&n.ev),
        };
        let (gates_line, end_line, verb_sha) = match &dir {
            Ok(d) => {
                let (end_line, sha) = match ours {
                    true => write_end(&writer, &n, &rec, &making),
                    false => (VERB_ENDED.to_string(), None),
                };
                (gates_so_far(d, &rec), end_line, sha)
            }
            Err(_) => (String::new(), String::new(), None),
        };
        let text = format!(
            "{} {} was interrupted by {by} at {}; {}; the slot's state is as the \
             journal's last step left it ({next}){}{gates_line}{end_line}\n{}",
            crate::slot::next_step::COMMAND,
            n.verb,
            crate::evidence::now_rfc3339(),
            what_the_release_did(&crate::ns::cleanup::released_so_far()),
            in_flight_note(&making),
            crate::ns::cleanup::released_list()
        );
        let path = n.ev.join(crate::evidence::dir::INTERRUPTED_FILE);
        let wrote = dir.and_then(|d| {
            d.write(crate::evidence::dir::INTERRUPTED_FILE, text.as_bytes())
                .map_err(|e| e.to_string())
        });
        if ours {
            let detail = format!("{INTERRUPTED_END_PREFIX}{by}");
            let _ = writer.journal_end(false, &detail, verb_sha);
        }
        crate::ns::cleanup::wrote_note(&path, wrote)
    })
}

/// The note's sentence on what the signal path did, from its release list (`released`, as
/// [`crate::ns::cleanup::released_so_far`] gives it): whether a running step's process tree was
/// killed (`killed the process tree of …` entries) or none was running, whether any release ran,
/// and, when one says `FAILED`, that what it concerns may still be live, unproven. Never a
/// sentence no release produced.
pub(crate) fn what_the_release_did(released: &[String]) -> String {
    let killed = released
        .iter()
        .filter(|r| r.starts_with("killed the process tree of "))
        .count();
    let rest = released.len() - killed;
    let failed = released.iter().any(|r| r.contains("FAILED"));
    let mut s = match killed {
        0 => "no step's process was running when the signal came (none was killed)".to_string(),
        _ => "the running step's process tree was killed".to_string(),
    };
    s.push_str(&match rest {
        0 => "; nothing the verb had started was registered for release".to_string(),
        n => format!(
            "; {n} release(s) registered for what the verb had started ran, each listed below with what it found or did"
        ),
    });
    if failed {
        s.push_str(
            "; a release marked FAILED below did not prove its release: what it names may still be live, its state unproven",
        );
    }
    s
}

/// What the note says when the verb's own end had claimed `timings.json` and `verb.json` (the
/// signal came as the verb ended).
const VERB_ENDED: &str = "; the verb had begun writing its end (gates.json, timings.json, verb.json, the journal's end) when the signal came: those are its own";

/// Writes `gates-so-far.json` into `d` when any gate was evaluated: the note's sentence on it.
fn gates_so_far(d: &EvidenceDir, rec: &Recorded) -> String {
    let gates = &rec.gates.gates;
    if gates.is_empty() {
        return String::new();
    }
    let written = serde_json::to_vec_pretty(gates)
        .map_err(|e| format!("encode as JSON: {e}"))
        .and_then(|b| d.write(GATES_SO_FAR_FILE, &b).map_err(|e| e.to_string()));
    match written {
        Ok(_) => format!(
            "; the {} gate(s) it had evaluated ({} proven) are in {GATES_SO_FAR_FILE}",
            gates.len(),
            gates.iter().filter(|g| g.proven).count()
        ),
        Err(e) => format!("; its gates could not be written ({e})"),
    }
}

/// Writes the interrupted verb's `timings.json` and `verb.json` with `writer` (evidence still
/// being made: `making`): the note's sentence on them and `verb.json`'s sha256 when it was
/// written. Without a known signal (the note ran with no interruption) no `verb.json` is written.
fn write_end(
    writer: &EndWriter,
    n: &NoteInputs,
    rec: &Recorded,
    making: &[String],
) -> (String, Option<String>) {
    let mut said = match writer.timings(vrec::TIMINGS_FILE, rec) {
        Ok(_) => format!(
            "; the step timings measured so far are in {} (ms)",
            vrec::TIMINGS_FILE
        ),
        Err(e) => format!("; its timings could not be written ({e})"),
    };
    let Some(signal) = crate::ns::cleanup::interrupt_signal() else {
        said.push_str(&format!(
            "; no {} was written: no interrupting signal is recorded",
            vrec::VERB_FILE
        ));
        return (said, None);
    };
    let interrupted = Interrupted {
        signal,
        exit_code: signal.exit_code(),
        released: crate::ns::cleanup::released_so_far(),
        evidence_in_flight: making.to_vec(),
    };
    let st = SlotState::load(&n.paths.state()).ok();
    let kind = rec.rt_kind.as_ref().map(|(_, k)| *k);
    let declared = vrec::declared(st.as_ref(), &rec.extra_diffs, kind);
    let ending = Ending::Interrupted(interrupted);
    let after = vrec::VerbAfter {
        phase: st.map(|s| s.phase),
        declared: &declared,
    };
    match writer.verb_doc(ending, rec, after, None) {
        Ok(sha) => {
            said.push_str(&format!(
                "; its outcome (interrupted by {}, not ok) is in {}",
                signal.name(),
                vrec::VERB_FILE
            ));
            (said, Some(sha))
        }
        Err(e) => {
            said.push_str(&format!(
                "; its {} could not be written ({e})",
                vrec::VERB_FILE
            ));
            (said, None)
        }
    }
}

/// The interruption note's sentence on evidence still being made on its own thread when the
/// signal came ([`super::verb_run::VerbRun::ev_make_beside`]): empty when nothing was.
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
/// another slot number; any other verb, `slot status` (which step applies depends on where the
/// verb stopped — a snapshot stopped after its checkpoint has no container left to snapshot
/// again — and the note does not ask the runtime; status does).
pub(crate) fn interruption_next(provision: bool, paths: &SlotPaths) -> String {
    match (provision, crate::slot::missing_state_why(paths)) {
        (true, Some(why)) => why.trim_start_matches(": ").to_string(),
        (true, None) => status::unfinished_provision_advice(paths),
        (false, _) => format!(
            "{} (its `advice`, from the container's runtime state, the holder and the snapshot now: the verb again, another verb, or `slot cleanup`)",
            crate::slot::next_step::status_gives_next_step(paths)
        ),
    }
}
