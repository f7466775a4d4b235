//! The probe ladder: one file per rung, the runner (order, evidence, strace wrapping) and the
//! verdict.

pub mod verdict;
