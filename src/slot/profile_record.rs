//! The slot profile in the slot driver (`slot provision --profile FILE`): loaded and
//! its image verified before anything is created, recorded in `state.json` with its sha256
//! ([`ProfileRecord`]) and re-checked on every verb (`profile-hash`), applied to `config.json`
//! ([`crate::profile::apply_profile`]), and asked for the guest check (port, HTTP path, status).
//!
//! A provision without `--profile` records the built-in default profile
//! ([`crate::profile::builtin_default`]) — with `--image X` the default with its image replaced
//! ([`record_for_image_flags`], `image_from_flags` in `state.json`) — but writes today's
//! `config.json` unchanged.

use super::error::SlotError;
use super::gate::shared_gates;
use super::gate::{GateId, Observed};
use super::record::verb_run::VerbRun;
use super::resources::partition::Partition;
use super::state::{ImageKind, ProfileRecord, SlotState};
use crate::oci::{self, BundleInfo, BundleSpec, Resources};
use crate::profile::{self, Image, LoadedProfile, PartitionSel, Readiness, ResourceLimits};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where provision takes its image from: the `--image` flags or a profile's `[image]`.
#[derive(Debug, Clone)]
pub(crate) struct ImageSource {
    /// Embedded, directory or qcow2.
    pub kind: ImageKind,
    /// The directory or `.qcow2` (None: embedded).
    pub path: Option<PathBuf>,
    /// The verified sha256 of a qcow2.
    pub sha256: Option<String>,
    /// Which partition of a qcow2 holds the root filesystem.
    pub partition: Partition,
    /// A qcow2's `stat` taken before it was hashed to its pin (`None` for the other kinds, or
    /// when it could not be taken: provision then refuses the image once it is exported).
    pub stat: Option<super::resources::sealed_binaries::FileStat>,
}

/// provision's profile parse, before the state directory is touched: `--profile FILE` loaded
/// (its TOML, keys and fields checked), so a bad file leaves nothing behind — not even a new
/// state directory. `None` without `--profile`.
///
/// Errors: a usage [`SlotError`] (exit 2) naming the file, the key and the fix.
pub(crate) fn parse(run: &VerbRun) -> Result<Option<LoadedProfile>, SlotError> {
    let Some(path) = run.args.profile.clone() else {
        return Ok(None);
    };
    let abs = std::fs::canonicalize(&path).unwrap_or(path);
    profile::load(&abs)
        .map(Some)
        .map_err(|e| SlotError::usage(&run.args.slot, e.to_string()))
}

/// provision's profile gate: the profile [`parse`] loaded has its image verified
/// (`image-present` / `image-sha256`, exit 1 on a pin mismatch) before anything is created.
/// Without `--profile`: the built-in default when no `--image` is given (its image is built in
/// the slot), else `None` (the `--image` flags, which provision records with
/// [`record_for_image_flags`]).
///
/// Errors: a usage [`SlotError`] (missing image), a failed `image-sha256` gate (pin mismatch).
pub(crate) fn load_gate(
    run: &mut VerbRun,
    parsed: Option<LoadedProfile>,
) -> Result<Option<(LoadedProfile, ImageSource)>, SlotError> {
    let Some(lp) = parsed else {
        if run.args.image.is_some() {
            return Ok(None);
        }
        let lp = profile::builtin_default();
        let src = image_source(&lp, None);
        return Ok(Some((lp, src)));
    };
    // A qcow2's stat before its hash: provision proves the exported file still has it.
    let stat = match &lp.profile.image {
        Image::Qcow2 { path, .. } => super::resources::sealed_binaries::source_stat(path).ok(),
        _ => None,
    };
    let checked = profile::verify_image(&lp);
    let id = match lp.profile.image {
        Image::Qcow2 { .. } => GateId::ImageSha256,
        _ => GateId::ImagePresent,
    };
    let check = match checked {
        Ok(c) => c,
        Err(e) if e.exit_code() == 1 => return Err(run.fail(id, e.to_string())),
        Err(e) => return Err(SlotError::usage(&run.args.slot, e.to_string())),
    };
    let detail = match (&check.path, &check.sha256) {
        (Some(p), Some(h)) => format!("{} sha256 {h} (profile pin)", p.display()),
        (Some(p), None) => format!("{} is a directory, used as-is", p.display()),
        _ => "embedded image".into(),
    };
    run.gate(id, Ok(detail))?;
    run.fact(
        "profile",
        serde_json::json!({"name": lp.profile.name, "source": abs_display(&lp), "sha256": lp.sha256}),
    );
    let src = ImageSource {
        stat,
        ..image_source(&lp, check.sha256)
    };
    Ok(Some((lp, src)))
}

fn abs_display(lp: &LoadedProfile) -> String {
    lp.source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "<built-in>".into())
}

fn image_source(lp: &LoadedProfile, sha256: Option<String>) -> ImageSource {
    match &lp.profile.image {
        Image::Embedded => ImageSource {
            kind: ImageKind::Embedded,
            path: None,
            sha256: None,
            partition: Partition::Auto,
            stat: None,
        },
        Image::Directory { path } => ImageSource {
            kind: ImageKind::Directory,
            path: Some(path.clone()),
            sha256: None,
            partition: Partition::Auto,
            stat: None,
        },
        Image::Qcow2 {
            path, partition, ..
        } => ImageSource {
            kind: ImageKind::Qcow2,
            path: Some(path.clone()),
            sha256,
            partition: partition_of(partition),
            stat: None,
        },
    }
}

/// The mount layer's [`Partition`] for a profile's `image.partition`.
pub(crate) fn partition_of(sel: &PartitionSel) -> Partition {
    match sel {
        PartitionSel::Number(n) => Partition::Number(*n),
        s if s.is_auto() => Partition::Auto,
        PartitionSel::Name(n) => Partition::Label(n.clone()),
    }
}

/// The record kept in `state.json`.
pub(crate) fn record(lp: &LoadedProfile) -> ProfileRecord {
    ProfileRecord {
        name: lp.profile.name.clone(),
        source: lp.source.clone(),
        sha256: lp.sha256.clone(),
        profile: lp.profile.clone(),
        image_from_flags: false,
    }
}

/// `provision --image X` without `--profile`: the built-in default profile with its image
/// replaced by `X` (a directory, or a qcow2 pinned by `--image-sha256`, root filesystem found
/// automatically) and without the embedded image's server facts (`network.guest_port` and its
/// `tcp` readiness check: the image declares its server in `/etc/netprobe-guest-port`),
/// recorded with `image_from_flags`. Its sha256 stays the built-in text's (the `profile-hash`
/// gate re-proves that); `config.json` keeps today's bytes.
pub(crate) fn record_for_image_flags(
    kind: ImageKind,
    path: &Path,
    sha256: Option<&str>,
) -> ProfileRecord {
    let base = profile::builtin_default();
    let mut p = base.profile.clone();
    p.image = match kind {
        ImageKind::Embedded => Image::Embedded,
        ImageKind::Directory => Image::Directory {
            path: path.to_path_buf(),
        },
        ImageKind::Qcow2 => Image::Qcow2 {
            path: path.to_path_buf(),
            sha256: sha256.map(str::to_string),
            sha256_file: None,
            partition: PartitionSel::default(),
        },
    };
    p.network.guest_port = None;
    p.readiness.retain(|r| !matches!(r, Readiness::Tcp { .. }));
    ProfileRecord {
        name: base.profile.name.clone(),
        source: None,
        sha256: base.sha256,
        profile: p,
        image_from_flags: true,
    }
}

/// A profile's cgroup limits as the slot's [`Resources`] (cgroup v1 units; `memory.swap` is
/// memory + swap), what the `cgroup-limits` gate reads back.
pub(crate) fn resources(r: &ResourceLimits) -> Resources {
    Resources {
        cpu_quota: r.cpu_quota,
        cpu_period: r.cpu_period,
        memory_limit: r.memory_bytes,
        memory_swap: r.memory_swap(),
    }
}

/// The `profile-hash` gate: the profile file still has the recorded sha256 (the built-in
/// default: this netprobe's built-in text has it). A slot without a profile record (provisioned
/// with `--image` flags) proves it trivially and says so.
pub(crate) fn profile_hash(st: &SlotState) -> Observed {
    let Some(p) = &st.profile else {
        return Ok(
            "no profile recorded (provisioned with --image flags by an older netprobe)".into(),
        );
    };
    let now = match &p.source {
        None => profile::builtin_default().sha256,
        Some(f) => crate::evidence::sha256_file(f)
            .map(|(h, _)| h)
            .map_err(|e| format!("profile {}: {e}", f.display()))?,
    };
    let name = p
        .source
        .as_ref()
        .map(|f| f.display().to_string())
        .unwrap_or_else(|| "<built-in>".into());
    let name = if p.image_from_flags {
        format!("{name} (with the --image image)")
    } else {
        name
    };
    if now == p.sha256 {
        Ok(format!("profile {name} sha256 {now} (recorded)"))
    } else {
        Err(format!(
            "profile {name} sha256 {now} != recorded {}; the profile changed since provision (provision a new slot)",
            p.sha256
        ))
    }
}

/// Why a profile's `config.json` could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The base spec could not be built or written.
    #[error(transparent)]
    Oci(#[from] oci::OciError),
    /// The profile could not be applied to it.
    #[error(transparent)]
    Profile(#[from] profile::ProfileError),
}

/// `config.json` for a profile: [`oci::build_spec`] (rootfs, netns, hostname, cgroupsPath),
/// then [`profile::apply_profile`] (process, capabilities, resources, mounts), written with
/// [`oci::write_spec`].
///
/// Errors: the oci or profile error.
pub(crate) fn write_bundle(
    bundle: &Path,
    spec: &BundleSpec,
    lp: &profile::Profile,
) -> Result<BundleInfo, BundleError> {
    let mut s = oci::build_spec(bundle, spec)?;
    profile::apply_profile(&mut s, lp)?;
    Ok(oci::write_spec(bundle, &s)?)
}

/// The guest server check: `(port, path, status, timeout)`. A profile's first `http` readiness
/// check (within its `readiness_timeout_ms`), else `GET /` → 200 on its `network.guest_port`;
/// without a profile, the [`shared_gates::guest_port`] convention with 20 s. `None`: no server.
pub(crate) fn guest_check(st: &SlotState) -> Option<(u16, String, u16, Duration)> {
    let port = shared_gates::guest_port(st)?;
    let Some(p) = &st.profile else {
        return Some((port, "/".into(), 200, Duration::from_secs(20)));
    };
    let timeout = Duration::from_millis(
        p.profile
            .readiness_timeout_ms
            .max(profile::READINESS_TIMEOUT_FLOOR_MS),
    );
    let http = p.profile.readiness.iter().find_map(|r| match r {
        Readiness::Http { port, path, status } => Some((*port, path.clone(), *status)),
        _ => None,
    });
    Some(match http {
        Some((port, path, status)) => (port, path, status, timeout),
        None => (port, "/".into(), 200, timeout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slot::gate::pure_checks::tests::state_with_self_holder;

    fn state(dir: &Path) -> SlotState {
        let sh = Path::new("/bin/sh");
        state_with_self_holder(dir, sh, sh)
    }

    #[test]
    fn profile_hash_proves_the_recorded_file_and_refuses_a_changed_one() {
        let d = tempfile::tempdir().unwrap();
        let mut st = state(d.path());
        assert!(profile_hash(&st).unwrap().contains("no profile recorded"));
        let lp = profile::builtin_default();
        st.profile = Some(record(&lp));
        assert!(profile_hash(&st).unwrap().contains("<built-in>"));
        let f = d.path().join("p.toml");
        std::fs::write(&f, profile::BUILTIN_DEFAULT_TOML).unwrap();
        let lp = profile::load(&f).unwrap();
        st.profile = Some(record(&lp));
        assert!(profile_hash(&st).is_ok());
        std::fs::write(&f, format!("{}\n", profile::BUILTIN_DEFAULT_TOML)).unwrap();
        let e = profile_hash(&st).unwrap_err();
        assert!(e.contains("changed since provision"), "{e}");
        std::fs::remove_file(&f).unwrap();
        assert!(profile_hash(&st).is_err());
    }

    #[test]
    fn builtin_profile_gives_the_slot_resources_and_guest_check() {
        let lp = profile::builtin_default();
        assert_eq!(
            resources(&lp.profile.resources),
            crate::slot::SLOT_RESOURCES
        );
        let d = tempfile::tempdir().unwrap();
        let mut st = state(d.path());
        st.profile = Some(record(&lp));
        let (port, path, status, _) = guest_check(&st).unwrap();
        assert_eq!((port, path.as_str(), status), (5000, "/", 200));
    }

    #[test]
    fn desktop_profile_names_its_partition_and_health_check() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/desktop.toml");
        let lp = profile::load(&p).unwrap();
        let Image::Qcow2 { partition, .. } = &lp.profile.image else {
            panic!("qcow2 expected")
        };
        assert_eq!(partition_of(partition), Partition::Label("root".into()));
        assert_eq!(partition_of(&PartitionSel::Number(2)), Partition::Number(2));
        assert_eq!(partition_of(&PartitionSel::default()), Partition::Auto);
        let d = tempfile::tempdir().unwrap();
        let mut st = state(d.path());
        st.profile = Some(record(&lp));
        let (port, path, status, t) = guest_check(&st).unwrap();
        assert_eq!((port, path.as_str(), status), (5000, "/health", 200));
        assert_eq!(t, Duration::from_secs(120));
    }

    #[test]
    fn image_flags_map_onto_the_default_profile_with_the_image_replaced() {
        let d = tempfile::tempdir().unwrap();
        let mut st = state(d.path());
        let img = d.path().join("img");
        std::fs::create_dir_all(img.join("etc")).unwrap();
        let r = record_for_image_flags(ImageKind::Directory, &img, None);
        let def = profile::builtin_default();
        assert!(r.image_from_flags && r.source.is_none());
        assert_eq!(
            (r.name.as_str(), r.sha256.as_str()),
            ("embedded-busybox", def.sha256.as_str())
        );
        assert_eq!(r.profile.image, Image::Directory { path: img.clone() });
        assert_eq!(r.profile.network.guest_port, None);
        assert!(r.profile.readiness.is_empty(), "{:?}", r.profile.readiness);
        assert_eq!(r.profile.process, def.profile.process);
        assert_eq!(r.profile.resources, def.profile.resources);
        assert_eq!(r.profile.overlay.effective(), ["index=off"]);
        st.profile = Some(r.clone());
        assert!(
            profile_hash(&st)
                .unwrap()
                .contains("with the --image image")
        );
        // The image's own declaration decides the guest server, as before.
        st.image = Some(crate::slot::state::ImageState::plain_directory(
            ImageKind::Directory,
            img.clone(),
        ));
        assert_eq!(guest_check(&st), None);
        std::fs::write(
            img.join(crate::slot::gate::guest_net::GUEST_PORT_FILE),
            "8081\n",
        )
        .unwrap();
        assert_eq!(guest_check(&st).map(|c| c.0), Some(8081));
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["image_from_flags"], true);
        let q = record_for_image_flags(
            ImageKind::Qcow2,
            Path::new("/i.qcow2"),
            Some(&"a".repeat(64)),
        );
        let Image::Qcow2 {
            sha256, partition, ..
        } = &q.profile.image
        else {
            panic!("qcow2 expected")
        };
        assert_eq!(
            (sha256.as_deref(), partition.is_auto()),
            (Some("a".repeat(64).as_str()), true)
        );
        // A --profile record does not carry the flag in state.json.
        let j = serde_json::to_value(record(&def)).unwrap();
        assert!(j.get("image_from_flags").is_none(), "{j}");
    }
}
