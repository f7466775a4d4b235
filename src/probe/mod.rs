//! The probe ladder: one file per rung, the runner and the verdict.
