//! Evidence: a fresh evidence directory, atomic writes, the artifact list with sha256, the
//! result model (serde) and its JSON Schema validation.

pub mod result;
