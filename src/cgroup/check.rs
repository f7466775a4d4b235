//! `netprobe cgroup check`: prove on this host that a container started through the chosen cgroup
//! driver gets the slot's limits, read back from the cgroup files (v1 or v2) and — with the
//! systemd driver — from the scope unit, and that nothing is left after cleanup (container gone,
//! scope gone, cgroup directories gone). The building block the slot's `cgroup-limits` gate and
//! cleanup use, runnable on its own (e.g. inside the test VM, host/vm/).

use std::path::Path;

use super::driver::{CgroupDriver, DriverChoice, ManageCgroupsMode};
use super::limits::{LimitReadback, read_limits};
use super::mode::{CgroupHost, CgroupMode};
use super::systemd::{
    ScopeRemoval, SystemdCgroupsPath, UnitLimits, align_unit, daemon_reload, remove_scope,
    show_unit,
};
use crate::evidence::EvidenceDir;
use crate::oci::{self, BundleSpec, ContainerGuard, NetnsSpec, Resources, Runtime};

/// The slot's limits (DESIGN.md §5): 4 CPUs (400000/100000 µs), 4 GiB, no swap.
pub const SLOT_RESOURCES: Resources = Resources {
    cpu_quota: 400_000,
    cpu_period: 100_000,
    memory_limit: 4 << 30,
    memory_swap: 4 << 30,
};

/// A fact and whether it held, with what was observed (one line, naming the files/properties).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Check {
    /// Stable name, e.g. `limits-from-files`.
    pub name: String,
    /// Whether the fact held.
    pub pass: bool,
    /// What was observed.
    pub observed: String,
}

/// Everything `netprobe cgroup check` found (written as `cgroup-check.json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    /// The host's cgroup mode.
    pub mode: CgroupMode,
    /// The driver and why.
    pub driver: DriverChoice,
    /// The runtime's `--version` first line.
    pub runtime_version: String,
    /// The container id used.
    pub container_id: String,
    /// `linux.cgroupsPath` written to config.json.
    pub cgroups_path: String,
    /// CRIU's `--manage-cgroups-mode` for this driver and why (recorded; no C/R runs here).
    pub manage_cgroups_mode: ManageCgroupsMode,
    /// Why that mode.
    pub manage_cgroups_reason: String,
    /// The limits asked for.
    pub asked: Resources,
    /// Read back from the cgroup files.
    pub limits: Option<LimitReadback>,
    /// The unit as the runtime created it (systemd driver).
    pub unit_as_created: Option<UnitLimits>,
    /// Properties the runtime left out and netprobe set (`systemctl set-property --runtime`),
    /// e.g. `MemorySwapMax: infinity -> 0 (MemorySwapMax=0)`.
    pub unit_aligned: Vec<String>,
    /// The unit after alignment, as checked (systemd driver).
    pub unit: Option<UnitLimits>,
    /// With `daemon_reload`: the files after a `systemctl daemon-reload` with the unit as the
    /// runtime created it (before alignment): what systemd does to limits the unit lacks.
    pub limits_after_reload_unaligned: Option<LimitReadback>,
    /// With `daemon_reload`: the files after a second reload, after alignment (checked).
    pub limits_after_reload: Option<LimitReadback>,
    /// Facts seen that are not checks (one line each).
    pub findings: Vec<String>,
    /// The scope's removal (systemd driver).
    pub scope_removal: Option<ScopeRemoval>,
    /// The checks, in order.
    pub checks: Vec<Check>,
    /// All checks passed.
    pub pass: bool,
}

/// Run the check with `runtime` (binary) under file-system `root` (`/` live), writing
/// `cgroup-check.json` and the bundle's `config.json` into the fresh evidence directory
/// `evidence`. The container runs `sleep 1000` on the embedded busybox rootfs in a private
/// netns; it is killed and deleted on every path (guard), and with the systemd driver its scope
/// is stopped if the runtime left it.
///
/// With the systemd driver the unit is read as the runtime made it, then every limit the runtime
/// left out of it is set on the unit ([`align_unit`]) and the unit checked; with
/// `reload` a `systemctl daemon-reload` before and after that alignment shows what systemd
/// re-applies (it reloads every unit: meant for test hosts such as the VM).
///
/// Errors (anyhow, with context): the host has no usable cgroups (exit class 3 via
/// [`super::CgroupError`]), systemd asked where it is not pid 1, the runtime fails. A limit
/// mismatch or a leftover is not an error: it is a failed [`Check`] (`pass: false`).
pub fn run_check(
    root: &Path,
    runtime: &Path,
    requested: Option<CgroupDriver>,
    reload: bool,
    evidence: &Path,
) -> anyhow::Result<CheckReport> {
    use anyhow::Context;
    let host = CgroupHost::detect(root)?;
    host.require_limit_controllers()?;
    let choice = DriverChoice::choose(root, requested)?;
    let ev = EvidenceDir::create(evidence).context("evidence directory")?;
    let work = tempfile::Builder::new()
        .prefix("netprobe-cgcheck-")
        .tempdir()
        .context("temporary directory")?;
    let id = oci::unique_container_id("netprobe-cgcheck");
    let short = id.trim_start_matches("netprobe-").to_string();
    let (cgroups_path, unit_path) = match choice.driver {
        CgroupDriver::Systemd => {
            let p = SystemdCgroupsPath::new("system.slice", "netprobe", &short)?;
            (p.to_cgroups_path(), Some(p))
        }
        // Top level, no shared parent: runc leaves the parents it creates.
        CgroupDriver::Cgroupfs => (format!("/{id}"), None),
    };
    let bundle = write_check_bundle(work.path(), &cgroups_path)?;
    ev.adopt("config.json", &bundle.join(oci::CONFIG_JSON))?;
    let rt = Runtime::new(runtime, work.path().join("runc-root"), None)
        .with_systemd_cgroup(choice.driver == CgroupDriver::Systemd);
    let version = rt
        .version()?
        .stdout
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    let (mcg, mcg_reason) = ManageCgroupsMode::for_driver(choice.driver, &version);

    let mut checks = Vec::new();
    let mut guard = ContainerGuard::new(&rt, id.clone());
    let pid_file = work.path().join("pid");
    rt.create(&id, &bundle, &pid_file)?;
    let pid = oci::read_pid_file(&pid_file)?;
    guard.set_pid(pid);
    rt.start(&id)?;
    let limits = read_limits(&host, pid)?;
    let r = limits.check(&SLOT_RESOURCES);
    checks.push(check("limits-from-files", r));
    let mut sd = SystemdPart::default();
    if let Some(p) = &unit_path {
        sd = systemd_checks(&host, pid, p, reload, &limits, &mut checks)?;
    }

    // Cleanup: kill + delete (the guard), prove gone, scope gone, cgroup dirs gone.
    guard.release()?;
    rt.prove_gone(&id)?;
    let scope_removal = match &unit_path {
        Some(p) => {
            let s = remove_scope(&p.unit())?;
            checks.push(check(
                "scope-removed",
                if s.stopped {
                    Err(format!(
                        "the runtime left the scope ({}); stopped it: {}",
                        s.before, s.after
                    ))
                } else {
                    Ok(format!("{}: {} after delete", s.unit, s.after))
                },
            ));
            Some(s)
        }
        None => None,
    };
    checks.push(check("cgroup-dirs-removed", limits.dirs_gone()));
    let pass = checks.iter().all(|c| c.pass);
    let report = CheckReport {
        mode: host.mode,
        driver: choice,
        runtime_version: version,
        container_id: id,
        cgroups_path,
        manage_cgroups_mode: mcg,
        manage_cgroups_reason: mcg_reason,
        asked: SLOT_RESOURCES,
        limits: Some(limits),
        unit_as_created: sd.as_created,
        unit_aligned: sd.aligned,
        unit: sd.unit,
        limits_after_reload_unaligned: sd.reload_unaligned,
        limits_after_reload: sd.reload_aligned,
        findings: sd.findings,
        scope_removal,
        checks,
        pass,
    };
    ev.write_json("cgroup-check.json", &report)?;
    Ok(report)
}

/// The busybox rootfs and a bundle running `sleep 1000` read-only with [`SLOT_RESOURCES`] in
/// `cgroups_path`, under `work`; returns the bundle directory.
fn write_check_bundle(work: &Path, cgroups_path: &str) -> anyhow::Result<std::path::PathBuf> {
    let rootfs = work.join("rootfs");
    oci::build_busybox_rootfs(&rootfs)?;
    let bundle = work.join("bundle");
    std::fs::create_dir_all(&bundle)?;
    oci::write_bundle(
        &bundle,
        &BundleSpec {
            rootfs,
            readonly_root: true,
            args: vec!["sleep".into(), "1000".into()],
            netns: NetnsSpec::Private,
            resources: Some(SLOT_RESOURCES),
            hostname: "cgcheck".into(),
            cgroups_path: Some(cgroups_path.into()),
        },
    )?;
    Ok(bundle)
}

#[derive(Default)]
struct SystemdPart {
    as_created: Option<UnitLimits>,
    aligned: Vec<String>,
    unit: Option<UnitLimits>,
    reload_unaligned: Option<LimitReadback>,
    reload_aligned: Option<LimitReadback>,
    findings: Vec<String>,
}

/// The unit's checks: in the unit's cgroup, (reload,) align, limits from the unit, (reload and
/// re-read the files).
fn systemd_checks(
    host: &CgroupHost,
    pid: i32,
    p: &SystemdCgroupsPath,
    reload: bool,
    limits: &LimitReadback,
    checks: &mut Vec<Check>,
) -> anyhow::Result<SystemdPart> {
    let mut sd = SystemdPart::default();
    let u0 = show_unit(&p.unit())?;
    let want = p.cgroup();
    let in_scope = limits.files[0]
        .value
        .lines()
        .any(|l| l == format!("0::{want}"));
    checks.push(check(
        "process-in-unit-cgroup",
        if in_scope && u0.control_group == want {
            Ok(format!(
                "/proc/{pid}/cgroup has 0::{want}; ControlGroup={want}"
            ))
        } else {
            Err(format!(
                "/proc/{pid}/cgroup {:?}, ControlGroup={:?}, expected {want}",
                limits.files[0].value, u0.control_group
            ))
        },
    ));
    if let Err(e) = u0.check(&SLOT_RESOURCES) {
        sd.findings
            .push(format!("the unit as the runtime created it: {e}"));
    }
    if reload {
        daemon_reload()?;
        let l = read_limits(host, pid)?;
        if let Err(e) = l.check(&SLOT_RESOURCES) {
            sd.findings.push(format!(
                "after systemctl daemon-reload with the runtime's unit, the cgroup files no longer hold the limits: {e}"
            ));
        }
        sd.reload_unaligned = Some(l);
    }
    sd.aligned = align_unit(&u0, &SLOT_RESOURCES)?;
    let u = show_unit(&p.unit())?;
    checks.push(check("limits-from-unit", u.check(&SLOT_RESOURCES)));
    if reload {
        daemon_reload()?;
        let l = read_limits(host, pid)?;
        checks.push(check(
            "limits-after-daemon-reload",
            l.check(&SLOT_RESOURCES),
        ));
        sd.reload_aligned = Some(l);
    }
    sd.as_created = Some(u0);
    sd.unit = Some(u);
    Ok(sd)
}

fn check(name: &str, r: Result<String, String>) -> Check {
    let (pass, observed) = match r {
        Ok(o) => (true, o),
        Err(o) => (false, o),
    };
    Check {
        name: name.into(),
        pass,
        observed,
    }
}
