//! The probe ladder: one file per rung, the runner (order, evidence, strace wrapping), the
//! verdict, and `verify`.

pub mod attribution;
pub mod attribution_diff;
pub mod attribution_view;
pub mod capture;
pub mod clock_bounds;
pub mod criu_rung;
pub mod external_netns;
pub mod kernel;
pub mod ladder_error;
pub mod netns_content;
pub mod oci_rung;
pub mod rederive;
pub mod rederive_result;
pub mod rung;
pub mod runner;
pub mod runtime_cycle;
pub mod stale;
pub mod util;
pub mod verdict;
pub mod verify;
