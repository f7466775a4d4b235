//! Pins are data: `host/pins.toml` (embedded) names the runtime and CRIU of the reference setup.
//! [`check_pins`] compares observed binaries with them; [`pin_differences`] turns mismatches into
//! the declared-difference sentences that accompany every number (ARCHITECTURE.md section 4).

use super::binary::program_name;
use crate::evidence::result::{BinaryFacts, HostFacts, PinCheck};
use serde::Deserialize;

/// The text of `host/pins.toml`, embedded at build time.
pub const PINS_TOML: &str = include_str!("../../host/pins.toml");

/// One pin of `host/pins.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Pin {
    /// Program name for sentences (`runc`, `CRIU`).
    pub name: String,
    /// Pinned version, compared for string equality with the parsed version.
    pub version: String,
    /// Pinned lower-case hex sha256, if any.
    pub sha256: Option<String>,
    /// Pinned size in bytes, if any.
    pub bytes: Option<u64>,
}

/// The whole of `host/pins.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Pins {
    /// The OCI runtime pin.
    pub runtime: Pin,
    /// The CRIU pin.
    pub criu: Pin,
}

/// Parses the embedded [`PINS_TOML`]. Panics only if the embedded file is malformed, which the
/// unit test `pins_parse` rules out at build-test time.
pub fn pins() -> Pins {
    toml::from_str(PINS_TOML).expect("host/pins.toml is valid (checked by tests)")
}

/// Compares `criu` and (when given) `runtime` with [`pins`]: one [`PinCheck`] named `criu`, then
/// one named `runtime`. `matches` is true only when the version and every pinned sha256/bytes
/// equal the observed ones.
pub fn check_pins(criu: &BinaryFacts, runtime: Option<&BinaryFacts>) -> Vec<PinCheck> {
    let p = pins();
    let mut out = vec![check_one("criu", &p.criu, criu)];
    if let Some(rt) = runtime {
        out.push(check_one("runtime", &p.runtime, rt));
    }
    out
}

/// One [`PinCheck`] of the binary `seen` against `pin` (named `name`: `criu` or `runtime`);
/// `matches` as in [`check_pins`]. `verify` also uses it with the pin values a result of
/// another netprobe version recorded.
pub fn check_one(name: &str, pin: &Pin, seen: &BinaryFacts) -> PinCheck {
    // The bytes must be proven by a sha256: the pin's own, or the one set-up recorded for the
    // binary it installed at this path. `--version` text alone proves nothing (a script can
    // print any version).
    let hash_proven = pin.sha256.is_some()
        || seen
            .installed_sha256
            .as_ref()
            .is_some_and(|s| s.eq_ignore_ascii_case(&seen.sha256));
    let matches = pin.version == seen.version
        && hash_proven
        && seen.script_interpreter.is_none()
        && pin
            .sha256
            .as_ref()
            .is_none_or(|s| s.eq_ignore_ascii_case(&seen.sha256))
        && pin.bytes.is_none_or(|b| b == seen.bytes);
    PinCheck {
        name: name.to_string(),
        pinned_version: pin.version.clone(),
        pinned_sha256: pin.sha256.clone(),
        pinned_bytes: pin.bytes,
        observed_version: seen.version.clone(),
        observed_sha256: seen.sha256.clone(),
        observed_bytes: seen.bytes,
        installed_sha256: seen.installed_sha256.clone(),
        matches,
    }
}

/// One declared-difference sentence per non-matching check, without the path (a [`PinCheck`]
/// does not carry it), e.g. `runtime is version 1.1.5+ds1 (sha256 1a2b…, 9,999 bytes), not the
/// pinned runc 1.5.2 (sha256 599f…, 10,866,512 bytes)`. Prefer [`pin_differences_with_paths`]
/// when the [`HostFacts`] are at hand.
pub fn pin_differences(checks: &[PinCheck]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| !c.matches)
        .map(|c| sentence(c, &format!("{} is version", c.name)))
        .collect()
}

/// As [`pin_differences`], naming the binary's path and program from `host`, e.g. `runtime
/// /usr/bin/runc is runc 1.1.5+ds1 (sha256 1a2b…, 9,999 bytes), not the pinned runc 1.5.2
/// (sha256 599f…, 10,866,512 bytes)`. Falls back to the [`pin_differences`] wording for a check
/// whose binary is absent from `host`.
pub fn pin_differences_with_paths(checks: &[PinCheck], host: &HostFacts) -> Vec<String> {
    checks
        .iter()
        .filter(|c| !c.matches)
        .map(|c| {
            let facts = match c.name.as_str() {
                "criu" => host.criu.as_ref(),
                "runtime" => host.runtime.as_ref(),
                _ => None,
            };
            let subject = match facts {
                Some(f) => format!("{} {} is {}", c.name, f.path, program_name(f)),
                None => format!("{} is version", c.name),
            };
            sentence(c, &subject)
        })
        .collect()
}

fn sentence(c: &PinCheck, subject: &str) -> String {
    let p = pins();
    let pinned_name = match c.name.as_str() {
        "criu" => p.criu.name,
        "runtime" => p.runtime.name,
        other => other.to_string(),
    };
    let mut pinned_detail = Vec::new();
    if let Some(s) = &c.pinned_sha256 {
        pinned_detail.push(format!("sha256 {}", short_sha(s)));
    }
    if let Some(b) = c.pinned_bytes {
        pinned_detail.push(format!("{} bytes", thousands(b)));
    }
    let pinned_detail = if pinned_detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", pinned_detail.join(", "))
    };
    format!(
        "{subject} {} (sha256 {}, {} bytes), not the pinned {pinned_name} {}{pinned_detail}{}",
        c.observed_version,
        short_sha(&c.observed_sha256),
        thousands(c.observed_bytes),
        c.pinned_version,
        unproven(c),
    )
}

/// Why a check whose version and pinned fields agree is still no match: no sha256 proves the
/// bytes. Empty otherwise.
fn unproven(c: &PinCheck) -> String {
    let fields_agree = c.observed_version == c.pinned_version
        && c.pinned_sha256.is_none()
        && c.pinned_bytes.is_none_or(|b| b == c.observed_bytes);
    if !fields_agree {
        return String::new();
    }
    match &c.installed_sha256 {
        Some(s) if !s.eq_ignore_ascii_case(&c.observed_sha256) => format!(
            ": set-up recorded sha256 {} for the binary it installed at this path (netprobe-install.json), not this one's",
            short_sha(s)
        ),
        Some(_) => ": it is not an ELF executable".to_string(),
        None => ": only its --version says so; the pin names no sha256 and no netprobe-install.json of set-up records this binary's".to_string(),
    }
}

/// What `host/install-pins.sh` (or `install-runc.sh`) records in `<prefix>/netprobe-install.json`
/// beside a binary it installed at `<prefix>/{bin,sbin}/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct InstallRecord {
    /// The `[debian.NAME]` pin (or `operator-release`).
    pub pin: String,
    /// Debian package name.
    pub package: String,
    /// The version host/pins.toml pins.
    pub pinned_version: String,
    /// The version installed (the newest the suite served when the pin was gone).
    pub installed_version: String,
    /// The suite it came from (`experimental`, `sid`, …; `release` for an operator's release).
    pub suite: String,
    /// The binary installed (`<prefix>/sbin/criu`, …).
    #[serde(default)]
    pub binary: Option<String>,
    /// Lower-case hex sha256 of the binary as installed (after `patchelf`); absent in records
    /// of a set-up before it was recorded (re-run `host/setup.sh`).
    #[serde(default)]
    pub binary_sha256: Option<String>,
}

/// The install record beside `binary` (`<binary>/../../netprobe-install.json`), if any.
pub fn install_record(binary: &std::path::Path) -> Option<InstallRecord> {
    let prefix = binary.parent()?.parent()?;
    let text = std::fs::read_to_string(prefix.join("netprobe-install.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The sha256 set-up recorded for the binary it installed at `binary` (the install record's
/// `binary_sha256`, when its `binary` is this path); `None` otherwise.
pub fn installed_sha256(binary: &std::path::Path) -> Option<String> {
    let r = install_record(binary)?;
    (r.binary.as_deref() == Some(&*binary.to_string_lossy()))
        .then_some(r.binary_sha256)
        .flatten()
}

/// One declared difference per binary of `host` that is not an ELF executable but a `#!`
/// script, e.g. `criu /tmp/w/criu is not an ELF executable but a script run by /bin/sh: the
/// version and sha256 recorded are the script's, not those of the program it runs`.
pub fn script_differences(host: &HostFacts) -> Vec<String> {
    [("criu", host.criu.as_ref()), ("runtime", host.runtime.as_ref())]
        .into_iter()
        .filter_map(|(name, f)| {
            let f = f?;
            let i = f.script_interpreter.as_ref()?;
            Some(format!(
                "{name} {} is not an ELF executable but a script run by {i}: the version and sha256 recorded are the script's, not those of the program it runs",
                f.path
            ))
        })
        .collect()
}

/// One declared difference per binary of `host` whose install record says set-up installed
/// another version than host/pins.toml pins (the archive stopped serving the pin), e.g.
/// `runtime /opt/runc-1.4.4/sbin/runc: set-up installed Debian runc 1.4.4+ds1-1 from
/// experimental, not the pinned 1.4.3+ds1-1 (the suite no longer serves it)`.
pub fn install_record_differences(host: &HostFacts) -> Vec<String> {
    [("criu", host.criu.as_ref()), ("runtime", host.runtime.as_ref())]
        .into_iter()
        .filter_map(|(name, f)| {
            let f = f?;
            let r = install_record(std::path::Path::new(&f.path))?;
            (r.installed_version != r.pinned_version).then(|| {
                format!(
                    "{name} {}: set-up installed Debian {} {} from {}, not the pinned {} (the suite no longer serves it; see host/pins.toml)",
                    f.path, r.package, r.installed_version, r.suite, r.pinned_version
                )
            })
        })
        .collect()
}

/// The first 4 hex digits of a sha256 followed by `…` (the full value is in the pin checks).
pub fn short_sha(s: &str) -> String {
    let head: String = s.chars().take(4).collect();
    format!("{head}…")
}

/// `n` with `,` thousands separators: `10866512` → `10,866,512`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn pins_parse() {
        let p = super::pins();
        assert_eq!(p.runtime.version, "1.5.2");
        assert_eq!(p.runtime.bytes, Some(10_866_512));
        assert_eq!(p.criu.version, "4.3");
        assert_eq!(p.criu.sha256, None);
    }
}
