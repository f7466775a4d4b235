//! Shared by the `netprobe matrix` tests (root, real runtimes and CRIUs): the binaries, the
//! schema-checked load of `matrix.json`, the prerequisite check, a run against a baseline.
#![allow(dead_code)]

pub use super::cli;
pub use cli::{netprobe, text};
use netprobe::matrix::model::{MatrixResult, validate_matrix};
use std::path::Path;

pub const RUNC: &str = "/opt/runc-1.4.3/sbin/runc";
pub const CRUN: &str = "/opt/crun-1.28/bin/crun";
pub const CRIU_4_2: &str = "/opt/criu-4.2.1/sbin/criu";
pub const CRIU_4_3: &str = "/opt/criu-4.3/sbin/criu";

pub fn load(dir: &Path) -> MatrixResult {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("matrix.json")).unwrap()).unwrap();
    validate_matrix(&v).expect("matrix.json validates against its schema");
    serde_json::from_value(v).unwrap()
}

/// Root and the binaries `bins` are there (a missing prerequisite fails, never skips).
pub fn require(bins: &[&str]) {
    super::require_root();
    for b in bins {
        assert!(
            Path::new(b).is_file(),
            "{b} missing: run sudo bash host/setup.sh"
        );
    }
}

/// `netprobe matrix --runtime RUNTIME --criu CRIU 4.3 --baseline BASELINE --evidence EVIDENCE`.
pub fn matrix_against(
    runtime: &str,
    baseline: &std::path::Path,
    evidence: &std::path::Path,
) -> std::process::Output {
    netprobe(&[
        "matrix",
        "--runtime",
        runtime,
        "--criu",
        CRIU_4_3,
        "--baseline",
        baseline.to_str().unwrap(),
        "--evidence",
        evidence.to_str().unwrap(),
    ])
}
