//! Container ids: runc's id rule ([`validate_id`]) and fresh ids for the probe's containers
//! ([`unique_container_id`]); re-exported by [`super::runtime`].

use super::bundle::now_nanos;
use super::error::{OciError, Result};

/// runc's id rule (`^[\w+-\.]+$`): non-empty, ASCII letters, digits and `_+-.`.
pub(crate) fn validate_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(OciError::InvalidId { id: id.to_string() })
    }
}

/// A fresh container id `<prefix>-<pid>-<nanos since epoch>`, valid for runc: characters of
/// `prefix` outside `[A-Za-z0-9_+.-]` become `-`, and an empty prefix becomes "netprobe".
pub fn unique_container_id(prefix: &str) -> String {
    let mut p: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if p.is_empty() {
        p = "netprobe".into();
    }
    format!("{p}-{}-{}", std::process::id(), now_nanos())
}
