//! The slot verbs, one file each (`slot VERB`): `provision`, `snapshot`, `restore`
//! (restore and reset), `cleanup`, `status` (with its `advice` in [`status_advice`]) and
//! `prune`. Each runs inside a [`super::record::verb_run::VerbRun`] and evaluates its gates
//! ([`super::gate`]) before its first destructive step.

pub(super) mod cleanup;
pub(super) mod provision;
pub mod prune;
pub(super) mod reset_upper;
pub(super) mod restore;
pub(super) mod snapshot;
pub(super) mod status;
pub(super) mod status_advice;
#[cfg(test)]
pub(super) mod status_advice_tests;
pub(super) mod status_doc;
