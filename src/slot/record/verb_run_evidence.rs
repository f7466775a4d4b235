//! [`VerbRun`]'s writes into its evidence folder (`evidence/NNNN-verb/`): one file at a time
//! ([`VerbRun::ev_write`], atomic, never overwriting), files made on threads beside the verb
//! ([`VerbRun::ev_write_beside`], joined by [`VerbRun::finish`]) and the runtime's steps
//! appended to `runtime.log` ([`VerbRun::rt_log`]). A write that fails is recorded
//! ([`super::evidence_writes`]), never dropped.

use super::verb_run::VerbRun;
use crate::evidence::result::Artifact;
use crate::evidence::{EvidenceDir, now_rfc3339};
use crate::oci::OciError;
use crate::slot::record::evidence_writes::Unwritten;
use crate::slot::record::verb_record::VerbRecord;
use std::fs;
use std::io::Write;
use std::path::PathBuf;

/// The runtime steps of a verb, appended one by one ([`VerbRun::rt_log`]).
const RUNTIME_LOG: &str = "runtime.log";

impl VerbRun<'_> {
    /// A path in this verb's evidence folder (the temporary folder before it is opened).
    pub fn ev_path(&self, name: &str) -> PathBuf {
        self.ev
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(name)
    }

    /// [`VerbRun::ev_write`] on a thread of its own, for evidence beside a gate's facts that the
    /// gate does not read (the raw netfilter text, the sysctls CRIU does not save): its atomic
    /// write and fsync stay off the verb's critical path. [`VerbRun::finish`] waits for it, so the
    /// folder is complete when the verb ends, also when it fails.
    pub fn ev_write_beside(&mut self, name: &str, bytes: Vec<u8>) {
        let file = name.to_string();
        self.ev_make_beside(name, move || vec![(file, bytes)]);
    }

    /// [`VerbRun::ev_write_beside`] of files whose bytes are made on that thread too: `make`
    /// returns (file name, bytes) pairs, each written atomically (never overwriting). For
    /// evidence read after a gate's facts that no gate reads (the sysctls CRIU does not save,
    /// read beside the gates that follow the compared capture). `what` names what is made
    /// (a file name) for an interruption note until it is written. Nothing runs without an
    /// evidence folder.
    pub fn ev_make_beside(
        &mut self,
        what: &str,
        make: impl FnOnce() -> Vec<(String, Vec<u8>)> + Send + 'static,
    ) {
        let Some(d) = self.ev.clone() else {
            return;
        };
        let unwritten = self.unwritten.clone();
        let rec = self.rec.clone();
        self.spawn_beside(what, move || {
            let files = make();
            for (name, bytes) in files {
                let name = rec.claim_name(&name);
                if let Err(e) = EvidenceDir::open(&d).and_then(|dir| dir.write(&name, &bytes)) {
                    unwritten.push(Unwritten::of(&name, &e));
                }
            }
        });
    }

    /// Runs `job` (evidence work beside the verb) on a thread of its own, joined by
    /// [`VerbRun::finish`]; `what` (a file name) is named by an interruption note until `job`
    /// returns.
    pub(crate) fn spawn_beside(&mut self, what: &str, job: impl FnOnce() + Send + 'static) {
        let what = what.to_string();
        let in_flight = self.in_flight.clone();
        in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(what.clone());
        self.pending.push(std::thread::spawn(move || {
            job();
            let mut v = in_flight.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = v.iter().position(|w| *w == what) {
                v.remove(i);
            }
        }));
    }

    /// The verb's record (gates, timings, facts), shared: for threads beside the verb that
    /// record facts.
    pub(crate) fn record_handle(&self) -> VerbRecord {
        self.rec.clone()
    }

    /// What [`VerbRun::ev_make_beside`] threads are still making (for tests).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> Vec<String> {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Writes one file of this verb's evidence folder through [`EvidenceDir::write`] (atomic,
    /// never overwrites). A name this verb already wrote is qualified instead of refused
    /// ([`VerbRecord::claim_name`]: `x-2.txt`, fact `evidence_renamed`), so two steps that
    /// write the same name never collide. A write that fails is recorded
    /// ([`VerbRun::unwritten`]): the verb goes on, and fails at its end naming the file
    /// ([`super::evidence_writes`]). Nothing is written before the evidence folder exists.
    pub fn ev_write(&self, name: &str, bytes: &[u8]) {
        let _ = self.ev_write_artifact(name, bytes);
    }

    /// [`VerbRun::ev_write`] of `value` as pretty JSON; a value that cannot be encoded is
    /// recorded as not written ([`VerbRun::unwritten`]), as a failed write is.
    pub fn ev_write_json<T: serde::Serialize + ?Sized>(&self, name: &str, value: &T) {
        match serde_json::to_vec_pretty(value) {
            Ok(bytes) => self.ev_write(name, &bytes),
            Err(e) if self.ev.is_some() => self.unwritten.push(Unwritten::encode(name, &e)),
            Err(_) => {}
        }
    }

    /// [`VerbRun::ev_write`], returning the file's [`Artifact`] (its sha256) when written.
    pub fn ev_write_artifact(&self, name: &str, bytes: &[u8]) -> Option<Artifact> {
        let d = self.ev.as_ref()?;
        let name = self.rec.claim_name(name);
        match EvidenceDir::open(d).and_then(|dir| dir.write(&name, bytes)) {
            Ok(a) => Some(a),
            Err(e) => {
                self.unwritten.push(Unwritten::of(&name, &e));
                None
            }
        }
    }

    /// Appends one runtime step to `runtime.log` in this verb's evidence folder: `what` and,
    /// for an invocation, its argv, exit code, duration and stderr / `--log` text. An append
    /// that fails is recorded ([`VerbRun::unwritten`]).
    pub fn rt_log<T: RtLogged>(&self, what: &str, r: Result<&T, &OciError>) {
        let body = match r {
            Ok(o) => o.logged(),
            Err(e) => format!("FAILED: {e}"),
        };
        if self.ev.is_none() {
            return;
        }
        let appended = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.ev_path(RUNTIME_LOG))
            .and_then(|mut f| writeln!(f, "[{}] {what}: {}", now_rfc3339(), body.trim_end()));
        if let Err(e) = appended {
            self.unwritten
                .push(Unwritten::io(RUNTIME_LOG, "append", &e));
        }
    }
}

/// What [`VerbRun::rt_log`] writes for a successful runtime step.
pub(crate) trait RtLogged {
    fn logged(&self) -> String;
}

impl RtLogged for crate::oci::RuntimeOutcome {
    fn logged(&self) -> String {
        let exit = match self.code {
            Some(c) => format!("exit code {c}"),
            None => "killed by a signal".to_string(),
        };
        format!(
            "{} -> {exit} in {} ms\n{}",
            self.argv.join(" "),
            self.duration_ms,
            self.stderr
        )
    }
}

impl RtLogged for String {
    fn logged(&self) -> String {
        self.clone()
    }
}

impl RtLogged for () {
    fn logged(&self) -> String {
        "ok".into()
    }
}
