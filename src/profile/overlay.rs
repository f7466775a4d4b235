//! The `[overlay]` table: mount options of the container's root filesystem overlay (lower = the
//! image, upper/work = the slot's per-run directories, both set by netprobe).
//!
//! Only overlayfs options that change how the overlay behaves are accepted (kernel
//! `Documentation/filesystems/overlayfs.rst`, `fs/overlayfs/params.c` in 6.x): `index`,
//! `nfs_export`, `redirect_dir`, `metacopy`, `xino`, `uuid`. The directories are netprobe's.
//! Checked here, before the kernel sees them: unknown options and values, a repeated option,
//! `nfs_export=on` without `index=on` and `nfs_export=on` with `metacopy=on` (both refused by
//! the kernel's `ovl_fs_params_verify`).
//!
//! Why it matters (ARCHITECTURE.md section 5, docs/GUIDE.md "GNOME"): with `index=off` overlayfs cannot
//! decode file handles, so CRIU dumps an inotify watch on the overlay by path (irmap) and may
//! fail with `fsnotify: Can't dump that handle`; `index=on,nfs_export=on` lets CRIU open the
//! watch by handle.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{ProfileError, Result};

/// Today's (and the default) overlay options: `index=off`.
pub const DEFAULT_OVERLAY_OPTIONS: [&str; 1] = ["index=off"];

/// Each accepted option and its accepted values.
pub const KNOWN_OPTIONS: [(&str, &[&str]); 6] = [
    ("index", &["on", "off"]),
    ("nfs_export", &["on", "off"]),
    ("redirect_dir", &["on", "off", "follow", "nofollow"]),
    ("metacopy", &["on", "off"]),
    ("xino", &["on", "off", "auto"]),
    ("uuid", &["on", "off", "null", "auto"]),
];

/// The `[overlay]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlaySpec {
    /// `NAME=value` overlayfs options appended after `lowerdir=…,upperdir=…,workdir=…`, e.g.
    /// `["index=on", "nfs_export=on"]`. Default [`DEFAULT_OVERLAY_OPTIONS`]; when `index` is not
    /// named, `index=off` is added (the kernel's own default depends on its build).
    #[serde(default = "default_options")]
    pub options: Vec<String>,
}

fn default_options() -> Vec<String> {
    DEFAULT_OVERLAY_OPTIONS
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl Default for OverlaySpec {
    fn default() -> Self {
        OverlaySpec {
            options: default_options(),
        }
    }
}

impl OverlaySpec {
    /// The options the slot mounts with: [`OverlaySpec::options`] in order, plus `index=off`
    /// when `index` is not named.
    pub fn effective(&self) -> Vec<String> {
        let mut v = self.options.clone();
        if !v.iter().any(|o| o.split('=').next() == Some("index")) {
            v.push("index=off".into());
        }
        v
    }
}

fn bad(name: &Path, problem: String, fix: &str) -> ProfileError {
    ProfileError::Field {
        path: name.to_path_buf(),
        field: "overlay.options".into(),
        problem,
        fix: fix.into(),
    }
}

const FIX_KNOWN: &str = "use only index=, nfs_export=, redirect_dir=, metacopy=, xino=, uuid= \
     (overlayfs); e.g. options = [\"index=on\", \"nfs_export=on\"], or remove [overlay] for today's \
     index=off";

/// Checks `[overlay] options` (see the module docs).
///
/// Errors: [`ProfileError::Field`] `overlay.options` naming the option and the fix.
pub fn validate(o: &OverlaySpec, name: &Path) -> Result<()> {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for opt in &o.options {
        let (k, v) = opt.split_once('=').unwrap_or((opt.as_str(), ""));
        if matches!(k, "lowerdir" | "upperdir" | "workdir" | "datadir") {
            return Err(bad(
                name,
                format!(
                    "{opt:?}: the overlay's directories are netprobe's (the image and the slot's per-run upper)"
                ),
                "remove it; give only behaviour options such as index=on",
            ));
        }
        if k == "volatile" {
            return Err(bad(
                name,
                format!(
                    "{opt:?}: the slot mounts its overlay volatile itself (state.json overlay.volatile)"
                ),
                "remove it",
            ));
        }
        let Some((_, values)) = KNOWN_OPTIONS.iter().find(|(n, _)| *n == k) else {
            return Err(bad(
                name,
                format!("{opt:?} is not an overlay option netprobe knows"),
                FIX_KNOWN,
            ));
        };
        if !values.contains(&v) {
            return Err(bad(
                name,
                format!("{opt:?}: {k} takes one of {}", values.join(", ")),
                FIX_KNOWN,
            ));
        }
        if seen.iter().any(|(s, _)| *s == k) {
            return Err(bad(
                name,
                format!("{k} is given twice"),
                "give each option once",
            ));
        }
        seen.push((k, v));
    }
    let val = |k: &str| seen.iter().find(|(s, _)| *s == k).map(|(_, v)| *v);
    if val("nfs_export") == Some("on") && val("index") != Some("on") {
        return Err(bad(
            name,
            "nfs_export=on needs index=on (the kernel refuses it otherwise)".into(),
            "add \"index=on\"",
        ));
    }
    if val("nfs_export") == Some("on") && val("metacopy") == Some("on") {
        return Err(bad(
            name,
            "nfs_export=on and metacopy=on conflict (the kernel refuses both)".into(),
            "drop metacopy=on",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(o: &[&str]) -> OverlaySpec {
        OverlaySpec {
            options: o.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn default_is_index_off_and_index_off_is_added_when_not_named() {
        assert_eq!(OverlaySpec::default().effective(), ["index=off"]);
        assert_eq!(spec(&[]).effective(), ["index=off"]);
        assert_eq!(spec(&["xino=off"]).effective(), ["xino=off", "index=off"]);
        assert_eq!(
            spec(&["index=on", "nfs_export=on"]).effective(),
            ["index=on", "nfs_export=on"]
        );
    }

    #[test]
    fn known_options_pass_and_bad_ones_name_the_field_and_the_fix() {
        let n = Path::new("/p.toml");
        for ok in [
            &["index=on", "nfs_export=on"][..],
            &["index=off"],
            &[
                "redirect_dir=nofollow",
                "metacopy=on",
                "xino=auto",
                "uuid=null",
            ],
            &[],
        ] {
            validate(&spec(ok), n).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        for (bad, says) in [
            (&["index=maybe"][..], "index takes one of on, off"),
            (&["colour=on"], "not an overlay option"),
            (&["index"], "index takes one of"),
            (&["upperdir=/x"], "directories are netprobe's"),
            (&["volatile"], "mounts its overlay volatile itself"),
            (&["index=on", "index=off"], "given twice"),
            (&["nfs_export=on"], "needs index=on"),
            (&["index=off", "nfs_export=on"], "needs index=on"),
            (&["index=on", "nfs_export=on", "metacopy=on"], "conflict"),
        ] {
            let e = validate(&spec(bad), n).unwrap_err().to_string();
            assert!(
                e.contains("overlay.options") && e.contains(says) && e.contains("fix:"),
                "{bad:?}: {e}"
            );
        }
    }
}
