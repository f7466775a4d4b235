//! OCI bundle: `config.json` generated with the oci-spec crate, written atomically, hashed.

use std::fs;
use std::path::{Path, PathBuf};

use crate::evidence::sha256_hex;
use oci_spec::runtime::{
    LinuxCpuBuilder, LinuxDeviceCgroupBuilder, LinuxMemoryBuilder, LinuxNamespaceBuilder,
    LinuxNamespaceType, LinuxResourcesBuilder, Root, Spec, User,
};

use super::error::{OciError, Result, io_err};

/// File name of the runtime spec inside a bundle directory (OCI runtime spec, "bundle").
pub const CONFIG_JSON: &str = "config.json";

/// The container's network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetnsSpec {
    /// A fresh namespace created by the runtime (`{"type":"network"}` without a path). runc then
    /// tells CRIU it is empty (`empty_ns = CLONE_NEWNET`): not dumped, not restored.
    Private,
    /// Join the namespace at this path (`{"type":"network","path":…}`), e.g.
    /// `/proc/<holder>/ns/net`. runc then checkpoints it as external (`extRootNetNS`) and on
    /// restore hands it to CRIU by inherit-fd; the path must still exist at restore.
    Path(PathBuf),
}

/// cgroup resources for the container (OCI `linux.resources`). Serializable so that a caller
/// can record what it asked for (the slot driver keeps it in `state.json`, field names as here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resources {
    /// CFS quota in microseconds per period (`cpu.quota`), e.g. 400000 for 4 CPUs; -1 unlimited.
    pub cpu_quota: i64,
    /// CFS period in microseconds (`cpu.period`), e.g. 100000.
    pub cpu_period: u64,
    /// Memory limit in bytes (`memory.limit`), e.g. 4 GiB = 4294967296; -1 unlimited.
    pub memory_limit: i64,
    /// Memory + swap limit in bytes (`memory.swap`); equal to `memory_limit` means no swap.
    pub memory_swap: i64,
}

/// Everything netprobe varies in a bundle's `config.json`; the rest is oci-spec's default
/// (`Spec::default()`, close to `runc spec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleSpec {
    /// Host path of the container's root filesystem; made absolute (canonicalised) in
    /// `root.path`. Must exist.
    pub rootfs: PathBuf,
    /// `root.readonly`: mount the rootfs read-only in the container.
    pub readonly_root: bool,
    /// `process.args`: argv of the container's init, e.g. `["sleep", "1000"]`. Must not be empty.
    pub args: Vec<String>,
    /// The network namespace: private or joined by path.
    pub netns: NetnsSpec,
    /// cgroup limits, or None for none.
    pub resources: Option<Resources>,
    /// `hostname` inside the container's UTS namespace.
    pub hostname: String,
    /// `linux.cgroupsPath`, or None to let the runtime choose (runc/cgroupfs: `/<id>`).
    pub cgroups_path: Option<String>,
}

/// What [`write_bundle`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleInfo {
    /// `<bundle_dir>/config.json`.
    pub config_path: PathBuf,
    /// Lower-case hex sha256 of the exact bytes of config.json.
    pub sha256: String,
}

/// `PATH` inside the container.
pub const CONTAINER_PATH_ENV: &str =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Build the OCI [`Spec`] for `spec` (no file I/O except canonicalising the rootfs path).
///
/// Starts from `Spec::default()` (oci-spec 0.10: default mounts, masked/readonly paths, the
/// runc-spec capability set AUDIT_WRITE/KILL/NET_BIND_SERVICE, RLIMIT_NOFILE 1024,
/// noNewPrivileges) and sets: process args, terminal false, cwd `/`, env `PATH`, user 0:0;
/// root {path, readonly}; hostname; namespaces pid, ipc, uts, mount, network (with `path` for
/// [`NetnsSpec::Path`]) — no user and no cgroup namespace; devices cgroup deny-all (runc adds
/// its default allow list); resources when given; no seccomp; cgroupsPath when given.
///
/// Errors: [`OciError::BadSpec`] (empty args, rootfs missing, relative netns path),
/// [`OciError::Spec`] (oci-spec builder).
pub fn build_spec(bundle_dir: &Path, spec: &BundleSpec) -> Result<Spec> {
    let bad = |reason: String| OciError::BadSpec {
        bundle: bundle_dir.to_path_buf(),
        reason,
    };
    let spec_err = |source| OciError::Spec {
        path: bundle_dir.join(CONFIG_JSON),
        source,
    };
    if spec.args.is_empty() {
        return Err(bad(
            "args is empty; give the container's command, e.g. [\"sleep\", \"1000\"]".into(),
        ));
    }
    let rootfs = fs::canonicalize(&spec.rootfs).map_err(|e| {
        bad(format!(
            "rootfs {} cannot be resolved ({e}); pass an existing rootfs directory",
            spec.rootfs.display()
        ))
    })?;
    if let NetnsSpec::Path(p) = &spec.netns
        && !p.is_absolute()
    {
        return Err(bad(format!(
            "network namespace path {} is relative; pass an absolute path such as /proc/<pid>/ns/net",
            p.display()
        )));
    }

    let mut oci = Spec::default();
    oci.set_hostname(Some(spec.hostname.clone()));

    let mut process = oci.process().clone().unwrap_or_default();
    process.set_args(Some(spec.args.clone()));
    process.set_terminal(Some(false));
    process.set_cwd(PathBuf::from("/"));
    process.set_env(Some(vec![CONTAINER_PATH_ENV.to_string()]));
    let mut user = User::default();
    user.set_uid(0);
    user.set_gid(0);
    process.set_user(user);
    oci.set_process(Some(process));

    let mut root = Root::default();
    root.set_path(rootfs);
    root.set_readonly(Some(spec.readonly_root));
    oci.set_root(Some(root));

    let mut linux = oci.linux().clone().unwrap_or_default();
    let mut namespaces = Vec::new();
    for typ in [
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
    ] {
        namespaces.push(
            LinuxNamespaceBuilder::default()
                .typ(typ)
                .build()
                .map_err(spec_err)?,
        );
    }
    let mut net = LinuxNamespaceBuilder::default().typ(LinuxNamespaceType::Network);
    if let NetnsSpec::Path(p) = &spec.netns {
        net = net.path(p.clone());
    }
    namespaces.push(net.build().map_err(spec_err)?);
    linux.set_namespaces(Some(namespaces));
    linux.set_seccomp(None);
    linux.set_cgroups_path(spec.cgroups_path.as_ref().map(PathBuf::from));

    let deny_all = LinuxDeviceCgroupBuilder::default()
        .allow(false)
        .access("rwm")
        .build()
        .map_err(spec_err)?;
    let mut resources = LinuxResourcesBuilder::default().devices(vec![deny_all]);
    if let Some(r) = spec.resources {
        resources = resources
            .cpu(
                LinuxCpuBuilder::default()
                    .quota(r.cpu_quota)
                    .period(r.cpu_period)
                    .build()
                    .map_err(spec_err)?,
            )
            .memory(
                LinuxMemoryBuilder::default()
                    .limit(r.memory_limit)
                    .swap(r.memory_swap)
                    .build()
                    .map_err(spec_err)?,
            );
    }
    linux.set_resources(Some(resources.build().map_err(spec_err)?));
    oci.set_linux(Some(linux));
    Ok(oci)
}

/// Write `<bundle_dir>/config.json` for `spec` (see [`build_spec`] for its content) and return
/// its path and sha256.
///
/// The bytes are deterministic (capability sets sorted), so the same spec gives the same sha256.
/// `bundle_dir` is created if missing. The file is written to a temporary name in the same
/// directory, fsynced and renamed over `config.json`, so a reader never sees a partial file.
///
/// Errors: those of [`build_spec`]; [`OciError::Json`]; [`OciError::Io`].
pub fn write_bundle(bundle_dir: &Path, spec: &BundleSpec) -> Result<BundleInfo> {
    let oci = build_spec(bundle_dir, spec)?;
    write_spec(bundle_dir, &oci)
}

/// Writes an already built (and possibly edited, e.g. by [`crate::profile::apply_profile`])
/// `oci` spec as `<bundle_dir>/config.json`, exactly as [`write_bundle`] does (capability sets
/// sorted, pretty JSON + newline, atomic replace).
///
/// Errors: [`OciError::Io`] (folder or file), [`OciError::Json`].
pub fn write_spec(bundle_dir: &Path, oci: &Spec) -> Result<BundleInfo> {
    fs::create_dir_all(bundle_dir).map_err(io_err("create directory", bundle_dir))?;
    let config_path = bundle_dir.join(CONFIG_JSON);
    let json_err = |source| OciError::Json {
        path: config_path.clone(),
        source,
    };
    let mut value = serde_json::to_value(oci).map_err(json_err)?;
    sort_capability_sets(&mut value);
    let mut bytes = serde_json::to_vec_pretty(&value).map_err(json_err)?;
    bytes.push(b'\n');
    crate::evidence::replace_atomic(&config_path, &bytes).map_err(io_err("write", &config_path))?;
    Ok(BundleInfo {
        config_path,
        sha256: sha256_hex(&bytes),
    })
}

/// Lower-case hex sha256 of `<bundle_dir>/config.json` as it is on disk now.
///
/// Errors: [`OciError::Io`] when the file cannot be read.
pub fn config_sha256(bundle_dir: &Path) -> Result<String> {
    let path = bundle_dir.join(CONFIG_JSON);
    let bytes = fs::read(&path).map_err(io_err("read", &path))?;
    Ok(sha256_hex(&bytes))
}

/// Parse `<bundle_dir>/config.json` back into an oci-spec [`Spec`].
///
/// Errors: [`OciError::Io`] (unreadable), [`OciError::Json`] (not an OCI spec).
pub fn read_bundle_spec(bundle_dir: &Path) -> Result<Spec> {
    let path = bundle_dir.join(CONFIG_JSON);
    let bytes = fs::read(&path).map_err(io_err("read", &path))?;
    serde_json::from_slice(&bytes).map_err(|source| OciError::Json { path, source })
}

/// oci-spec keeps capability sets in a `HashSet`, whose order changes from run to run; sort each
/// `process.capabilities.<set>` array so the same spec always yields the same bytes and hash.
fn sort_capability_sets(value: &mut serde_json::Value) {
    let Some(caps) = value
        .pointer_mut("/process/capabilities")
        .and_then(|c| c.as_object_mut())
    else {
        return;
    };
    for set in caps.values_mut() {
        if let Some(arr) = set.as_array_mut() {
            arr.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
    }
}

pub(crate) use crate::evidence::unix_nanos as now_nanos;
