//! The systemd side of the systemd cgroup driver: the `cgroupsPath` runc expects
//! (`slice:prefix:name`), the transient scope unit it makes of it (`<prefix>-<name>.scope` in
//! `<slice>`), the unit's limit properties read back with `systemctl show`, and the scope's
//! removal at cleanup.
//!
//! Sources: runc(8) `--systemd-cgroup`; systemd.resource-control(5): `CPUQuota=` is stored as
//! `CPUQuotaPerSecUSec` (µs of CPU time per second of wall time, printed as a time span such as
//! `4s`, `500ms`, `1s 500ms`, or `infinity`), `MemoryMax=`/`MemorySwapMax=` bytes or `infinity`;
//! systemctl(1) `show --property=…` prints `KEY=VALUE` lines.

use std::collections::BTreeMap;
use std::process::Command;

use super::error::{CgroupError, Result, UnitValueError};
use crate::oci::Resources;

/// A systemd `cgroupsPath` for runc's `--systemd-cgroup`: `slice:prefix:name`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SystemdCgroupsPath {
    /// The slice, e.g. `system.slice`.
    pub slice: String,
    /// The unit name prefix, e.g. `netprobe`.
    pub prefix: String,
    /// The unit name, e.g. `slot-0-1a2b3c4d`.
    pub name: String,
}

impl SystemdCgroupsPath {
    /// Validate the three parts: the slice ends in `.slice`; prefix and name are non-empty and
    /// use only `[A-Za-z0-9_.-]` (no `:` or `/`: they become a unit name).
    ///
    /// Errors: [`CgroupError::BadSystemdPath`] naming the part.
    pub fn new(slice: &str, prefix: &str, name: &str) -> Result<Self> {
        let bad = |part: &str, reason: &str| CgroupError::BadSystemdPath {
            part: part.into(),
            reason: reason.into(),
        };
        let ok_chars = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        };
        if !slice.ends_with(".slice") || !ok_chars(slice) {
            return Err(bad(slice, "a slice unit name ending in .slice"));
        }
        for p in [prefix, name] {
            if !ok_chars(p) {
                return Err(bad(p, "non-empty, only letters, digits, '_', '.', '-'"));
            }
        }
        Ok(Self {
            slice: slice.into(),
            prefix: prefix.into(),
            name: name.into(),
        })
    }

    /// The slot's path: `system.slice:netprobe:slot-N-<id8>` (unique per slot lifetime, as the
    /// cgroupfs path `/netprobe/slot-N-<id8>`).
    pub fn for_slot(slot: u32, owner_id: &str) -> Self {
        let id = &owner_id[..owner_id.len().min(8)];
        Self::new("system.slice", "netprobe", &format!("slot-{slot}-{id}"))
            .expect("slot ids are [0-9a-f]")
    }

    /// `slice:prefix:name`, the value of `linux.cgroupsPath`.
    pub fn to_cgroups_path(&self) -> String {
        format!("{}:{}:{}", self.slice, self.prefix, self.name)
    }

    /// The scope unit runc creates: `<prefix>-<name>.scope`.
    pub fn unit(&self) -> String {
        format!("{}-{}.scope", self.prefix, self.name)
    }

    /// The unit's cgroup relative to the v2 root, as `/proc/PID/cgroup`'s `0::` line shows it
    /// for a top-level slice: `/<slice>/<unit>` (nested slices `a-b.slice` live under
    /// `a.slice/a-b.slice`).
    pub fn cgroup(&self) -> String {
        let stem = self.slice.trim_end_matches(".slice");
        let mut parts = Vec::new();
        let mut acc = String::new();
        for piece in stem.split('-').filter(|p| !p.is_empty()) {
            if !acc.is_empty() {
                acc.push('-');
            }
            acc.push_str(piece);
            parts.push(format!("{acc}.slice"));
        }
        if parts.is_empty() {
            parts.push(self.slice.clone());
        }
        format!("/{}/{}", parts.join("/"), self.unit())
    }
}

/// The properties `systemctl show` is asked for.
pub const UNIT_PROPERTIES: &[&str] = &[
    "Id",
    "LoadState",
    "ActiveState",
    "ControlGroup",
    "CPUQuotaPerSecUSec",
    "MemoryMax",
    "MemorySwapMax",
];

/// A unit's limits as systemd holds them, with the raw `systemctl show` lines (evidence).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnitLimits {
    /// The unit.
    pub unit: String,
    /// `LoadState` (`loaded`, `not-found`, …).
    pub load_state: String,
    /// `ActiveState` (`active`, `inactive`, …).
    pub active_state: String,
    /// `ControlGroup`, e.g. `/system.slice/netprobe-slot-0-1a2b3c4d.scope` (empty when none).
    pub control_group: String,
    /// `CPUQuotaPerSecUSec` in µs per second; None = `infinity`.
    pub cpu_quota_per_sec_us: Option<u64>,
    /// `MemoryMax` bytes; None = `infinity`.
    pub memory_max: Option<u64>,
    /// `MemorySwapMax` bytes; None = `infinity`.
    pub memory_swap_max: Option<u64>,
    /// Every `KEY=VALUE` line read, in order.
    pub raw: Vec<String>,
}

/// Parse a systemd time span as printed by `systemctl show` (`4s`, `500ms`, `1s 500ms`,
/// `1min 30s`, `250us`, `0`) into µs; `infinity` → None.
///
/// Errors: [`UnitValueError`], naming the token.
pub fn parse_timespan_us(s: &str) -> std::result::Result<Option<u64>, UnitValueError> {
    let s = s.trim();
    if s == "infinity" {
        return Ok(None);
    }
    let mut total: u64 = 0;
    for tok in s.split_whitespace() {
        let split = tok
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(tok.len());
        let (num, unit) = tok.split_at(split);
        let mult: f64 = match unit {
            "" | "us" | "usec" | "µs" => 1.0,
            "ms" | "msec" => 1e3,
            "s" | "sec" => 1e6,
            "min" | "m" => 60e6,
            "h" | "hr" => 3600e6,
            "d" => 86400e6,
            _ => return Err(UnitValueError::UnknownTimeUnit(tok.into())),
        };
        let n: f64 = num
            .parse()
            .map_err(|_| UnitValueError::BadNumber(tok.into()))?;
        total += (n * mult).round() as u64;
    }
    if s.is_empty() {
        return Err(UnitValueError::EmptyTimeSpan);
    }
    Ok(Some(total))
}

fn parse_bytes(v: &str) -> std::result::Result<Option<u64>, UnitValueError> {
    match v.trim() {
        "infinity" => Ok(None),
        n => n
            .parse::<u64>()
            .map(Some)
            .map_err(|_| UnitValueError::BadByteCount(n.into())),
    }
}

impl UnitLimits {
    /// Parse `systemctl show --property=… UNIT` output (`KEY=VALUE` lines).
    ///
    /// Errors: [`CgroupError::UnitProperty`] for a missing property or an unparsable value.
    pub fn parse(unit: &str, text: &str) -> Result<Self> {
        let raw: Vec<String> = text.lines().map(str::to_string).collect();
        let map: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let get = |k: &str| {
            map.get(k)
                .copied()
                .ok_or_else(|| CgroupError::UnitProperty {
                    unit: unit.into(),
                    property: k.into(),
                    reason: "missing from systemctl show".into(),
                })
        };
        let prop_err = |k: &str, reason: UnitValueError| CgroupError::UnitProperty {
            unit: unit.into(),
            property: k.into(),
            reason: reason.to_string(),
        };
        let cpu = parse_timespan_us(get("CPUQuotaPerSecUSec")?)
            .map_err(|r| prop_err("CPUQuotaPerSecUSec", r))?;
        let mem = parse_bytes(get("MemoryMax")?).map_err(|r| prop_err("MemoryMax", r))?;
        let swap = parse_bytes(get("MemorySwapMax")?).map_err(|r| prop_err("MemorySwapMax", r))?;
        Ok(Self {
            unit: unit.into(),
            load_state: get("LoadState")?.into(),
            active_state: get("ActiveState")?.into(),
            control_group: map.get("ControlGroup").copied().unwrap_or("").into(),
            cpu_quota_per_sec_us: cpu,
            memory_max: mem,
            memory_swap_max: swap,
            raw,
        })
    }

    /// What the unit should hold for `want` (runc's systemd manager: `CPUQuotaPerSecUSec =
    /// quota * 1s / period`, rounded up to 10 ms; `MemoryMax = memory`; `MemorySwapMax = swap -
    /// memory`): `(property, expected, observed)` for each, None = infinity.
    pub fn expected(&self, want: &Resources) -> [(&'static str, Option<u64>, Option<u64>); 3] {
        let exp_cpu = (want.cpu_quota > 0 && want.cpu_period > 0).then(|| {
            let us = (want.cpu_quota as u64) * 1_000_000 / want.cpu_period;
            us.div_ceil(10_000) * 10_000
        });
        let exp_mem = (want.memory_limit >= 0).then_some(want.memory_limit as u64);
        let exp_swap = (want.memory_swap >= 0 && want.memory_limit >= 0)
            .then(|| (want.memory_swap - want.memory_limit).max(0) as u64);
        [
            ("CPUQuotaPerSecUSec", exp_cpu, self.cpu_quota_per_sec_us),
            ("MemoryMax", exp_mem, self.memory_max),
            ("MemorySwapMax", exp_swap, self.memory_swap_max),
        ]
    }

    /// Compare with `want` (see [`UnitLimits::expected`]); the unit must be loaded and active.
    /// Ok/Err carry one line with every property read; Err names each property that differs.
    pub fn check(&self, want: &Resources) -> std::result::Result<String, String> {
        let obs = format!(
            "unit {} ({} {}, cgroup {}): {}",
            self.unit,
            self.load_state,
            self.active_state,
            self.control_group,
            self.raw.join(" ")
        );
        let mut bad: Vec<String> = self
            .expected(want)
            .iter()
            .filter(|(_, e, o)| e != o)
            .map(|(k, e, o)| format!("{k} {} expected {}", show(*o), show(*e)))
            .collect();
        if self.load_state != "loaded" || self.active_state != "active" {
            bad.insert(0, "expected loaded active".into());
        }
        if bad.is_empty() {
            Ok(obs)
        } else {
            Err(format!("{obs}; {} (for {want:?})", bad.join(", ")))
        }
    }
}

fn show(v: Option<u64>) -> String {
    v.map_or_else(|| "infinity".into(), |n| n.to_string())
}

/// The `systemctl set-property` assignment for a property of [`UnitLimits::expected`].
fn assignment(property: &str, v: Option<u64>) -> String {
    match (property, v) {
        ("CPUQuotaPerSecUSec", Some(us)) => format!("CPUQuota={}%", us.div_ceil(10_000)),
        ("CPUQuotaPerSecUSec", None) => "CPUQuota=".into(),
        (k, Some(n)) => format!("{k}={n}"),
        (k, None) => format!("{k}=infinity"),
    }
}

/// Make the unit carry every limit of `want` that the runtime left out:
/// `systemctl set-property --runtime UNIT K=V` for each property of `current` that differs
/// (e.g. runc 1.1.5 writes `memory.swap.max = 0` into the cgroup but leaves the unit's
/// `MemorySwapMax=infinity`, so systemd would put swap back when it re-applies the unit, e.g. at
/// `daemon-reload`). Returns one line per property set (`MemorySwapMax: infinity -> 0`), empty
/// when the unit already matched.
///
/// Errors: [`CgroupError::Systemctl`].
pub fn align_unit(current: &UnitLimits, want: &Resources) -> Result<Vec<String>> {
    let mut done = Vec::new();
    for (k, e, o) in current.expected(want) {
        if e == o {
            continue;
        }
        let a = assignment(k, e);
        let out = systemctl(&["set-property", "--runtime", &current.unit, &a])?;
        if !out.status.success() {
            return Err(CgroupError::Systemctl {
                argv: format!("systemctl set-property --runtime {} {a}", current.unit),
                detail: String::from_utf8_lossy(&out.stderr).trim().into(),
            });
        }
        done.push(format!("{k}: {} -> {} ({a})", show(o), show(e)));
    }
    Ok(done)
}

/// `systemctl daemon-reload`: systemd reloads its units and re-applies their cgroup properties.
///
/// Errors: [`CgroupError::Systemctl`].
pub fn daemon_reload() -> Result<()> {
    let out = systemctl(&["daemon-reload"])?;
    if out.status.success() {
        Ok(())
    } else {
        Err(CgroupError::Systemctl {
            argv: "systemctl daemon-reload".into(),
            detail: String::from_utf8_lossy(&out.stderr).trim().into(),
        })
    }
}

fn systemctl(args: &[&str]) -> Result<std::process::Output> {
    let argv = format!("systemctl {}", args.join(" "));
    Command::new("systemctl")
        .args(args)
        .env("SYSTEMD_PAGER", "")
        .output()
        .map_err(|e| CgroupError::Systemctl {
            argv,
            detail: e.to_string(),
        })
}

/// `systemctl show --property=<UNIT_PROPERTIES> UNIT`, parsed. A unit systemd does not know is
/// returned with `LoadState=not-found` (systemctl exits 0 for it).
///
/// Errors: [`CgroupError::Systemctl`] (not runnable, non-zero exit), [`CgroupError::UnitProperty`].
pub fn show_unit(unit: &str) -> Result<UnitLimits> {
    let props = format!("--property={}", UNIT_PROPERTIES.join(","));
    let out = systemctl(&["show", "--no-pager", &props, unit])?;
    if !out.status.success() {
        return Err(CgroupError::Systemctl {
            argv: format!("systemctl show {props} {unit}"),
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    UnitLimits::parse(unit, &String::from_utf8_lossy(&out.stdout))
}

/// What [`remove_scope`] did and found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScopeRemoval {
    /// The unit.
    pub unit: String,
    /// The unit's state before: `LoadState ActiveState`.
    pub before: String,
    /// Whether `systemctl stop` was needed (the runtime had not removed it).
    pub stopped: bool,
    /// The unit's state after (`not-found inactive` when gone).
    pub after: String,
}

/// Make sure the scope is gone at cleanup: when systemd still knows it (loaded, or failed),
/// `systemctl stop` and `systemctl reset-failed` it; then prove it `not-found`/`inactive`. The
/// runtime's `delete` normally stops the scope itself; this is the backstop and the proof.
///
/// Errors: [`CgroupError::Systemctl`] when a command fails or the unit is still known after.
pub fn remove_scope(unit: &str) -> Result<ScopeRemoval> {
    let b = show_unit(unit)?;
    let before = format!("{} {}", b.load_state, b.active_state);
    let known = b.load_state != "not-found" || b.active_state != "inactive";
    if known {
        let out = systemctl(&["stop", unit])?;
        if !out.status.success() {
            return Err(CgroupError::Systemctl {
                argv: format!("systemctl stop {unit}"),
                detail: String::from_utf8_lossy(&out.stderr).trim().into(),
            });
        }
        let _ = systemctl(&["reset-failed", unit]);
    }
    let a = show_unit(unit)?;
    let after = format!("{} {}", a.load_state, a.active_state);
    if a.active_state != "inactive" || !a.control_group.is_empty() {
        return Err(CgroupError::Systemctl {
            argv: format!("systemctl show {unit}"),
            detail: format!(
                "the scope is still there after stop: {after}, cgroup {:?}",
                a.control_group
            ),
        });
    }
    Ok(ScopeRemoval {
        unit: unit.into(),
        before,
        stopped: known,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW: &str = "Id=netprobe-slot-0-1a2b3c4d.scope\nLoadState=loaded\nActiveState=active\nControlGroup=/system.slice/netprobe-slot-0-1a2b3c4d.scope\nCPUQuotaPerSecUSec=4s\nMemoryMax=4294967296\nMemorySwapMax=0\n";
    const WANT: Resources = Resources {
        cpu_quota: 400_000,
        cpu_period: 100_000,
        memory_limit: 4 << 30,
        memory_swap: 4 << 30,
    };

    #[test]
    fn cgroups_path_unit_and_cgroup() {
        let p = SystemdCgroupsPath::for_slot(3, "1a2b3c4d5e6f");
        assert_eq!(p.to_cgroups_path(), "system.slice:netprobe:slot-3-1a2b3c4d");
        assert_eq!(p.unit(), "netprobe-slot-3-1a2b3c4d.scope");
        assert_eq!(p.cgroup(), "/system.slice/netprobe-slot-3-1a2b3c4d.scope");
        let n = SystemdCgroupsPath::new("machine-np.slice", "x", "y").unwrap();
        assert_eq!(n.cgroup(), "/machine.slice/machine-np.slice/x-y.scope");
    }

    #[test]
    fn bad_parts_are_refused() {
        for (s, p, n) in [
            ("system", "a", "b"),
            ("system.slice", "a:b", "c"),
            ("system.slice", "a", ""),
        ] {
            let e = SystemdCgroupsPath::new(s, p, n).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{e}");
        }
    }

    #[test]
    fn timespans() {
        assert_eq!(parse_timespan_us("4s").unwrap(), Some(4_000_000));
        assert_eq!(parse_timespan_us("500ms").unwrap(), Some(500_000));
        assert_eq!(parse_timespan_us("1s 500ms").unwrap(), Some(1_500_000));
        assert_eq!(parse_timespan_us("1min 30s").unwrap(), Some(90_000_000));
        assert_eq!(parse_timespan_us("250us").unwrap(), Some(250));
        assert_eq!(parse_timespan_us("1.5s").unwrap(), Some(1_500_000));
        assert_eq!(parse_timespan_us("infinity").unwrap(), None);
        assert!(parse_timespan_us("4 parsecs").is_err());
        assert!(parse_timespan_us("").is_err());
    }

    #[test]
    fn unit_limits_match_resources() {
        let u = UnitLimits::parse("netprobe-slot-0-1a2b3c4d.scope", SHOW).unwrap();
        assert_eq!(u.cpu_quota_per_sec_us, Some(4_000_000));
        assert_eq!((u.memory_max, u.memory_swap_max), (Some(4 << 30), Some(0)));
        let ok = u.check(&WANT).unwrap();
        assert!(
            ok.contains("MemorySwapMax=0") && ok.contains("CPUQuotaPerSecUSec=4s"),
            "{ok}"
        );
        // Swap allowed where none was asked: a mismatch.
        let swap = SHOW.replace("MemorySwapMax=0", "MemorySwapMax=infinity");
        let e = UnitLimits::parse("u", &swap)
            .unwrap()
            .check(&WANT)
            .unwrap_err();
        assert!(e.contains("MemorySwapMax infinity expected 0"), "{e}");
        assert!(!e.contains("MemoryMax 4294967296 expected"), "{e}");
        // A stopped unit does not pass even with the right numbers.
        let gone = SHOW.replace("ActiveState=active", "ActiveState=inactive");
        let e = UnitLimits::parse("u", &gone)
            .unwrap()
            .check(&WANT)
            .unwrap_err();
        assert!(e.contains("expected loaded active"), "{e}");
    }

    #[test]
    fn assignments_for_set_property() {
        assert_eq!(
            assignment("CPUQuotaPerSecUSec", Some(4_000_000)),
            "CPUQuota=400%"
        );
        assert_eq!(
            assignment("CPUQuotaPerSecUSec", Some(130_000)),
            "CPUQuota=13%"
        );
        assert_eq!(assignment("MemorySwapMax", Some(0)), "MemorySwapMax=0");
        assert_eq!(assignment("MemoryMax", None), "MemoryMax=infinity");
    }

    #[test]
    fn cpu_quota_rounds_up_to_10ms_like_runc() {
        let want = Resources {
            cpu_quota: 12_345,
            cpu_period: 100_000,
            ..WANT
        };
        let show = SHOW.replace("CPUQuotaPerSecUSec=4s", "CPUQuotaPerSecUSec=130ms");
        assert!(UnitLimits::parse("u", &show).unwrap().check(&want).is_ok());
    }

    #[test]
    fn missing_or_bad_property_is_named() {
        let e = UnitLimits::parse("u", "LoadState=loaded\n").unwrap_err();
        assert!(e.to_string().contains("CPUQuotaPerSecUSec"), "{e}");
        let bad = SHOW.replace("MemoryMax=4294967296", "MemoryMax=lots");
        let e = UnitLimits::parse("u", &bad).unwrap_err();
        assert!(
            e.to_string().contains("MemoryMax") && e.to_string().contains("lots"),
            "{e}"
        );
    }
}
