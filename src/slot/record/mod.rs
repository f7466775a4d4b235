//! A verb's record: the verb's context ([`verb_run::VerbRun`]: enter, lock, evidence folder,
//! timings, facts), what it has recorded so far ([`verb_record`]), the slot journal
//! ([`journal`]), its checked evidence writes ([`evidence_writes`], compressed or referred at
//! the end: [`evidence_compress`], [`evidence_refer`]), the one end writer ([`end_writer`]) used
//! by the verb's end ([`verb_end`]) and its interruption note ([`interruption`]), and the
//! sentences it prints only from gates that ran ([`gate_claims`]).

pub(super) mod end_writer;
pub(super) mod evidence_compress;
pub(super) mod evidence_refer;
pub(super) mod evidence_writes;
pub(super) mod gate_claims;
pub(super) mod incomplete_evidence;
pub mod interruption;
pub mod journal;
pub(super) mod verb_end;
pub mod verb_record;
pub(super) mod verb_run;
pub(super) mod verb_run_evidence;
