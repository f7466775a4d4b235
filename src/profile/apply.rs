//! A profile applied to an OCI runtime spec (oci-spec [`Spec`]), after
//! [`crate::oci::build_spec`] has set what the slot decides (rootfs, network namespace,
//! hostname, cgroupsPath): process (args, env, cwd, user, capabilities, noNewPrivileges),
//! seccomp/AppArmor (none), resources (cpu, memory, swap; the devices rules are kept), tmpfs
//! mounts and the `/dev/shm` size.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{
    Capability, LinuxCapabilities, LinuxCpuBuilder, LinuxMemoryBuilder, Mount, Spec, User,
};

use super::error::{ProfileError, Result};
use super::model::Profile;

/// `PATH` netprobe gives a container unless the profile's env sets one (same as
/// [`crate::oci::bundle::CONTAINER_PATH_ENV`]).
pub const DEFAULT_PATH_ENV: &str = crate::oci::bundle::CONTAINER_PATH_ENV;

fn err(field: &str, problem: String) -> ProfileError {
    ProfileError::Field {
        path: PathBuf::from("<profile>"),
        field: field.into(),
        problem,
        fix: "correct the profile (see evidence-schema/slot-profile.schema.json)".into(),
    }
}

/// Applies `p` to `spec` in place:
/// - `process.args`, `process.env` (`PATH=…` first unless the profile sets `PATH`), `cwd`,
///   `user` (uid, gid, additionalGids), capabilities (bounding = effective = permitted = the
///   profile's set; inheritable and ambient empty), `noNewPrivileges`, no AppArmor profile;
/// - `linux.seccomp` removed; `linux.resources` cpu quota/period, memory limit and
///   `swap = limit + swap_bytes` (-1 stays -1), the existing devices rules kept;
/// - one `tmpfs` mount per `mounts.tmpfs` (nosuid, nodev, `mode=`, `size=` when given),
///   replacing a mount at the same destination; `/dev/shm`'s `size=` option set when
///   `mounts.dev_shm_bytes` is given.
///
/// The cgroup driver is not part of `config.json`: it is a runtime flag (see
/// [`systemd_cgroups_path`] for the path format the systemd driver needs).
///
/// Errors: [`ProfileError::Field`] for a capability name that does not parse, or an oci-spec
/// builder error.
pub fn apply_profile(spec: &mut Spec, p: &Profile) -> Result<()> {
    let mut process = spec.process().clone().unwrap_or_default();
    process.set_args(Some(p.process.args.clone()));
    let mut env = Vec::new();
    if !p.process.env.iter().any(|e| e.starts_with("PATH=")) {
        env.push(DEFAULT_PATH_ENV.to_string());
    }
    env.extend(p.process.env.iter().cloned());
    process.set_env(Some(env));
    process.set_cwd(PathBuf::from(&p.process.cwd));
    let mut user = User::default();
    user.set_uid(p.process.user.uid);
    user.set_gid(p.process.user.gid);
    if !p.process.user.additional_gids.is_empty() {
        user.set_additional_gids(Some(p.process.user.additional_gids.clone()));
    }
    process.set_user(user);
    let mut set = HashSet::new();
    for c in &p.security.capabilities {
        let cap = parse_capability(c).ok_or_else(|| {
            err(
                "security.capabilities",
                format!("{c:?} is not a capability"),
            )
        })?;
        set.insert(cap);
    }
    let mut caps = LinuxCapabilities::default();
    caps.set_bounding(Some(set.clone()));
    caps.set_effective(Some(set.clone()));
    caps.set_permitted(Some(set));
    caps.set_inheritable(Some(HashSet::new()));
    caps.set_ambient(Some(HashSet::new()));
    process.set_capabilities(Some(caps));
    process.set_no_new_privileges(Some(p.security.no_new_privileges));
    process.set_apparmor_profile(None);
    spec.set_process(Some(process));

    let mut linux = spec.linux().clone().unwrap_or_default();
    linux.set_seccomp(None);
    let mut res = linux.resources().clone().unwrap_or_default();
    let r = &p.resources;
    res.set_cpu(Some(
        LinuxCpuBuilder::default()
            .quota(r.cpu_quota)
            .period(r.cpu_period)
            .build()
            .map_err(|e| err("resources", e.to_string()))?,
    ));
    let swap = r.memory_swap();
    res.set_memory(Some(
        LinuxMemoryBuilder::default()
            .limit(r.memory_bytes)
            .swap(swap)
            .build()
            .map_err(|e| err("resources", e.to_string()))?,
    ));
    linux.set_resources(Some(res));
    spec.set_linux(Some(linux));

    apply_mounts(spec, p);
    Ok(())
}

fn apply_mounts(spec: &mut Spec, p: &Profile) {
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    for t in &p.mounts.tmpfs {
        let dest = Path::new(&t.path);
        mounts.retain(|m| m.destination() != dest);
        let mut opts = vec![
            "nosuid".to_string(),
            "nodev".to_string(),
            format!("mode={}", t.mode),
        ];
        if let Some(sz) = t.size_bytes {
            opts.push(format!("size={sz}"));
        }
        let mut m = Mount::default();
        m.set_destination(dest.to_path_buf());
        m.set_typ(Some("tmpfs".into()));
        m.set_source(Some(PathBuf::from("tmpfs")));
        m.set_options(Some(opts));
        mounts.push(m);
    }
    if let Some(sz) = p.mounts.dev_shm_bytes {
        for m in mounts
            .iter_mut()
            .filter(|m| m.destination() == Path::new("/dev/shm"))
        {
            let mut opts: Vec<String> = m
                .options()
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|o| !o.starts_with("size="))
                .collect();
            opts.push(format!("size={sz}"));
            m.set_options(Some(opts));
        }
    }
    spec.set_mounts(Some(mounts));
}

/// A capability by its `CAP_…` name (capabilities(7), as in `config.json`); None otherwise.
pub fn parse_capability(name: &str) -> Option<Capability> {
    name.strip_prefix("CAP_")?.parse().ok()
}

/// The `linux.cgroupsPath` runc's systemd cgroup driver (`--systemd-cgroup`) expects:
/// `slice:prefix:name`, here `system.slice:netprobe:<id>`.
pub fn systemd_cgroups_path(id: &str) -> String {
    format!("system.slice:netprobe:{id}")
}
