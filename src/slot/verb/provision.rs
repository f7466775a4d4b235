//! `provision`: a fresh slot only. The profile parsed first (a bad file leaves nothing, not even a
//! new state dir), then gates (state dir, the profile's image pin, CRIU
//! config, binaries, probe evidence) — none creates anything; then the slot folder, image, overlay, holder,
//! `config.json` and container, each step guarded (released on failure or panic) until the
//! ready gates pass and the slot state records it all.

use crate::evidence::now_rfc3339;
use crate::ns::{self, Holder, HolderOptions};
use crate::oci::{self, BundleSpec, Container, NetnsSpec, write_bundle};
use crate::slot::JournalEvent;
use crate::slot::error::StepId;
use crate::slot::error::{SlotError, StepError};
use crate::slot::gate::guest_net;
use crate::slot::gate::image_unchanged;
use crate::slot::gate::provision_gates;
use crate::slot::gate::publish_gates;
use crate::slot::gate::pure_checks;
use crate::slot::gate::readiness;
use crate::slot::gate::shared_gates::{self, holder_gate, mkdirs};
use crate::slot::gate::{GateId, PROVISION_CREATE_GATES, PROVISION_GATES};
use crate::slot::profile_record::{self, ImageSource};
use crate::slot::record::evidence_writes;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::resources::cgroups;
use crate::slot::resources::fs_tools::timed;
use crate::slot::resources::mounts;
use crate::slot::resources::partition;
use crate::slot::resources::published_ports;
use crate::slot::resources::published_ports::PublishedPort;
use crate::slot::resources::sealed_binaries;
use crate::slot::resources::slot_dir;
use crate::slot::resources::state_dir::{self, StateDirUse};
use crate::slot::state::*;
use crate::slot::{SLOT_RESOURCES, Verb};
use serde_json::json;
use std::fs;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Instant;

/// Runs `provision`.
pub(crate) fn provision(run: &mut VerbRun) -> Result<(String, Option<SlotState>), SlotError> {
    // The profile first: a bad file or field fails fast (exit 2) before the state directory is
    // created and before any host check.
    let parsed = profile_record::parse(run)?;
    // Published ports next: a bad --publish is usage (exit 2), a taken host port a host
    // refusal (exit 3), both before the state directory is touched; the listeners are bound
    // now and handed to the holder.
    let (published, listeners) = publish_gate(run, parsed.as_ref())?;
    let r = state_dir::check_state_dir(&run.paths.state_dir, StateDirUse::Create);
    run.gate(GateId::StateDir, r)?;
    let prof = profile_record::load_gate(run, parsed)?;
    shared_gates::criu_config_gate(run, true)?;
    let (rt_pin, cr_pin) = provision_gates::binary_gates(run)?;
    let probe = provision_gates::probe_gate(run, &rt_pin, &cr_pin)?;
    let (src, record) = match &prof {
        Some((lp, src)) => (src.clone(), profile_record::record(lp)),
        None => image_from_flags(run)?,
    };
    // Only an explicit --profile shapes config.json; the built-in default keeps today's bytes.
    let resources = match (&prof, run.args.profile.is_some()) {
        (Some((lp, _)), true) => profile_record::resources(&lp.profile.resources),
        _ => SLOT_RESOURCES,
    };
    let rt_version = rt_pin.version.clone().unwrap_or_default();
    // An explicit --profile's `cgroup_driver` when --cgroup-driver is not given.
    let profile_driver = match (&prof, run.args.profile.is_some()) {
        (Some((lp, _)), true) => lp.profile.cgroup_driver,
        _ => None,
    };
    let mut cgroup = cgroups::provision_gate(run, &rt_version, profile_driver)?;

    // Every check above created nothing; the slot directory is created only now.
    let marker = create_slot_dir(run)?;

    let (cgroups_path, unit) = cgroups::cgroups_path(&run.paths, &marker.id, cgroup.driver.driver);
    cgroup.unit = unit;
    let mut st = SlotState {
        schema_version: STATE_SCHEMA_VERSION,
        slot: run.paths.slot,
        owner_id: marker.id.clone(),
        phase: Phase::Provisioning,
        created_at: now_rfc3339(),
        updated_at: String::new(),
        container_id: run.paths.container_id(),
        runtime_root: run.paths.runtime_root(),
        cgroups_path,
        runtime: rt_pin,
        criu: cr_pin,
        probe_gate: probe,
        image: None,
        overlay: None,
        holder: None,
        holder_netns_cookie: None,
        config_sha256: None,
        resources,
        cgroup: Some(cgroup),
        profile: Some(record),
        published_ports: published,
        snapshot: None,
        restores: 0,
        last_verb: Some("provision".into()),
        last_ok: false,
    };
    st.phase = Phase::after(Verb::Provision, VerbEnd::Began, st.phase);
    run.save(&mut st)?;
    run.journal(JournalEvent::Step, true, "state written: provisioning");
    let r = provision_steps(run, &mut st, &src, listeners);
    finish(run, st, r)
}

/// The slot's published ports ([`published_ports::effective`]: the profile's and `--publish`,
/// checked against the ports the profile serves), then gate `host-ports-free`: each host port
/// bound and listening ([`published_ports::bind_all`]). Returns the records and the listeners
/// (in that order), both empty without published ports.
///
/// Errors: usage (exit 2) for a bad `--publish`, naming the flag and the fix; the failed
/// `host-ports-free` gate (exit 3) naming the port and the process listening on it.
fn publish_gate(
    run: &mut VerbRun,
    parsed: Option<&crate::profile::LoadedProfile>,
) -> Result<(Vec<PublishedPort>, Vec<std::net::TcpListener>), SlotError> {
    let builtin = crate::profile::builtin_default();
    let (profile, what) = match (parsed, &run.args.image) {
        (Some(lp), _) => (Some(&lp.profile), format!("profile {}", lp.profile.name)),
        (None, None) => (
            Some(&builtin.profile),
            format!("the built-in profile {}", builtin.profile.name),
        ),
        (None, Some(_)) => (
            None,
            format!("--image (its /{})", guest_net::GUEST_PORT_FILE),
        ),
    };
    let image_dir = run.args.image.clone().filter(|p| p.is_dir());
    let ports = published_ports::effective(profile, image_dir.as_deref(), &what, &run.args.publish)
        .map_err(|e| SlotError::usage(&run.args.slot, e.to_string()))?;
    if ports.is_empty() {
        return Ok((ports, Vec::new()));
    }
    match published_ports::bind_all(&ports) {
        Ok(l) => {
            let named: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
            let d = format!("bound and listening: {}", named.join(", "));
            run.gate(GateId::HostPortsFree, Ok(d))?;
            Ok((ports, l))
        }
        Err(e) => Err(run.fail(GateId::HostPortsFree, e.to_string())),
    }
}

/// Clears the gates before `slot-create`, creates the slot directory with its owner marker
/// (gate `slot-fresh`: fails when the directory is there) and enters it. Returns the marker.
fn create_slot_dir(run: &mut VerbRun) -> Result<slot_dir::OwnerMarker, SlotError> {
    run.clear(StepId::SlotCreate, &PROVISION_GATES)?;
    let marker = match slot_dir::create_slot(&run.paths) {
        Ok(m) => {
            let d = format!(
                "{} created (mkdir), marker id {}",
                run.paths.root.display(),
                m.id
            );
            run.gate(GateId::SlotFresh, Ok(d))?;
            m
        }
        Err(slot_dir::CreateSlotError::Exists(d)) => {
            let way_out = crate::slot::verb::status::existing_slot_way_out(&run.paths);
            return Err(run.fail(GateId::SlotFresh, format!("{d}: {way_out}")));
        }
        Err(slot_dir::CreateSlotError::Io {
            detail,
            source,
            removed,
        }) => {
            // A state directory that cannot take a new folder or file is refused as at entry.
            let sd = &run.paths.state_dir;
            let Some(fs) = evidence_writes::state_dir_refused(sd, &source) else {
                return Err(run.step_err(StepId::SlotCreate, detail));
            };
            let left = match removed {
                true => format!(
                    "nothing of this attempt is left (slot {} is not used up)",
                    run.paths.slot
                ),
                false => format!(
                    "{} is left behind: once it is writable, move it away (it holds no state) or provision another slot number",
                    run.paths.root.display()
                ),
            };
            let d = format!(
                "{detail}: the slot folder cannot be made; {fs}, then provision again; {left}"
            );
            return Err(run.fail(GateId::StateDir, d));
        }
    };
    run.enter_slot()?;
    Ok(marker)
}

/// Ends `provision` on the outcome `r` of [`provision_steps`]: the phase after success or
/// failure; on success the state saved (an error if it cannot be), on failure the state saved
/// as it is left (no holder, the overlay's `mounted` as found) and `r`'s error returned.
fn finish(
    run: &mut VerbRun,
    mut st: SlotState,
    r: Result<String, SlotError>,
) -> Result<(String, Option<SlotState>), SlotError> {
    let end = match &r {
        Ok(_) => VerbEnd::Succeeded,
        Err(_) => VerbEnd::Failed {
            container_gone: true,
        },
    };
    st.phase = Phase::after(Verb::Provision, end, st.phase);
    match r {
        Ok(summary) => {
            st.last_ok = true;
            run.save(&mut st)?;
            Ok((summary, Some(st)))
        }
        Err(e) => {
            // The guards inside provision_steps have released what was started.
            st.holder = None;
            if let Some(o) = st.overlay.as_mut() {
                o.mounted = mounts::is_mounted(&o.merged);
            }
            let _ = st.save(&run.paths.state());
            Err(e)
        }
    }
}

/// `--image` (and `--image-sha256`) without `--profile`: the image gate, then the image source
/// and the built-in default profile recorded with this image (fact `profile`).
fn image_from_flags(run: &mut VerbRun) -> Result<(ImageSource, ProfileRecord), SlotError> {
    let kind = ImageKind::of(run.args.image.as_deref());
    let stat = image_gate(run, kind)?;
    let src = ImageSource {
        kind,
        path: run.args.image.clone(),
        sha256: run.args.image_sha256.clone(),
        partition: partition::Partition::Auto,
        stat,
    };
    let img = src.path.clone().unwrap_or_default();
    let abs = fs::canonicalize(&img).unwrap_or(img);
    let r = profile_record::record_for_image_flags(kind, &abs, src.sha256.as_deref());
    run.fact(
        "profile",
        json!({"name": r.name, "source": null, "sha256": r.sha256, "image_from_flags": true}),
    );
    Ok((src, r))
}

/// `image-sha256` (qcow2) or `image-present` (directory); nothing for the embedded image.
/// Returns the qcow2's `stat` taken before its hash (proven unchanged once it is exported:
/// [`image_unchanged::qcow2_stat_held`]).
fn image_gate(
    run: &mut VerbRun,
    kind: ImageKind,
) -> Result<Option<sealed_binaries::FileStat>, SlotError> {
    let Some(img) = run.args.image.clone() else {
        return Ok(None);
    };
    match kind {
        ImageKind::Embedded => Ok(None),
        ImageKind::Qcow2 => {
            let want = run.args.image_sha256.clone().unwrap_or_default();
            let t = Instant::now();
            let stat = sealed_binaries::source_stat(&img).ok();
            let r = match pure_checks::file_sha256(&img) {
                Ok(h) if h == want => Ok(format!("{} sha256 {h}", img.display())),
                Ok(h) => Err(format!(
                    "{} sha256 {h} != --image-sha256 {want}",
                    img.display()
                )),
                Err(e) => Err(e),
            };
            run.took("image-sha256", t);
            run.gate(GateId::ImageSha256, r).map(|()| stat)
        }
        ImageKind::Directory => {
            let r = match fs::metadata(&img) {
                Ok(m) if m.is_dir() => Ok(format!("{} is a directory, used as-is", img.display())),
                Ok(_) => Err(format!(
                    "{} is neither a directory nor a .qcow2 file",
                    img.display()
                )),
                Err(e) => Err(format!("{}: {e}", img.display())),
            };
            run.gate(GateId::ImagePresent, r).map(|()| None)
        }
    }
}

/// What provision started, each released on drop (failure, panic; fields drop in order: the
/// overlay first, the FUSE export last) until [`Started::keep`]. A signal does not unwind, so
/// each is also registered for release on an interruption ([`Started::on_signal`]).
#[derive(Default)]
struct Started {
    on_signal: Vec<crate::ns::cleanup::Registration>,
    overlay: Option<mounts::MountGuard>,
    lower: Option<mounts::MountGuard>,
    loop_dev: Option<mounts::LoopGuard>,
    qsd: Option<mounts::QsdGuard>,
}

impl Started {
    /// Registers `release` of `what` for an interruption ([`crate::ns::cleanup`]; newest first,
    /// so the overlay goes before the image mount, the loop device and the FUSE export under
    /// it); its error, if any, is added to the release list. Dropped by [`Started::keep`].
    fn on_signal(
        &mut self,
        what: String,
        release: impl FnOnce() -> Result<(), mounts::MountError> + Send + 'static,
    ) {
        let r = crate::ns::cleanup::register_reporting(what, move || {
            release().err().map(|e| format!("FAILED: {e}"))
        });
        self.on_signal.push(r);
    }

    fn keep(self) {
        for g in [self.overlay, self.lower].into_iter().flatten() {
            g.disarm();
        }
        if let Some(g) = self.loop_dev {
            g.disarm();
        }
        if let Some(g) = self.qsd {
            g.disarm();
        }
    }
}

fn provision_steps(
    run: &mut VerbRun,
    st: &mut SlotState,
    src: &ImageSource,
    listeners: Vec<std::net::TcpListener>,
) -> Result<String, SlotError> {
    let p = run.paths.clone();
    mkdirs(
        run,
        &[
            p.image_dir(),
            p.overlay_dir(),
            p.bundle(),
            p.rootfs(),
            p.runtime_root(),
        ],
    )?;
    let mut started = Started::default();
    let t = Instant::now();
    let image = mount_image(run, st, src, &mut started)?;
    run.took("image", t);
    run.fact_json("image", &image);
    st.image = Some(image.clone());
    run.save(st)?;

    // Overlay: lower = image, upper/work per run, the profile's options.
    let t = Instant::now();
    let options = st
        .profile
        .as_ref()
        .map(|r| r.profile.overlay.clone())
        .unwrap_or_default()
        .effective();
    let ov = OverlayState {
        merged: p.rootfs(),
        run: 1,
        mounted: false,
        options,
        volatile: false,
    };
    let (upper, work) = (ov.upper(&p.overlay_dir(), 1), ov.work(&p.overlay_dir(), 1));
    mkdirs(run, &[upper.clone(), work.clone()])?;
    run.fact("overlay_options", ov.options.join(","));
    let (g, refused) =
        mounts::mount_overlay_volatile(&image.lower, &upper, &work, &ov.merged, &ov.options)
            .map_err(|e| run.step_err(StepId::Overlay, e))?;
    let volatile = crate::slot::gate::shared_gates::volatile_fact(run, refused);
    let merged = ov.merged.clone();
    started.on_signal(format!("overlay {}", merged.display()), move || {
        mounts::unmount(&merged)
    });
    started.overlay = Some(g);
    st.overlay = Some(OverlayState {
        mounted: true,
        volatile,
        ..ov
    });
    run.save(st)?;
    run.took("overlay", t);

    let holder = start_holder(run, st, listeners)?;
    let sha = write_config(run, st, holder.identity().netns_path())?;
    let id = start_container(run, st)?;
    let holder = holder.detach();
    started.keep();
    Ok(format!(
        "provisioned: container {id} running in holder pid {} netns {}, config.json sha256 {sha}",
        holder.pid, holder.netns_inode
    ))
}

/// The image as the overlay's read-only lower: the embedded rootfs built in the slot, a
/// directory as it is, or a qcow2 through its FUSE export, a loop device and a read-only mount.
fn mount_image(
    run: &mut VerbRun,
    st: &mut SlotState,
    src: &ImageSource,
    started: &mut Started,
) -> Result<ImageState, SlotError> {
    let kind = src.kind;
    let image_dir = run.paths.image_dir();
    let canonical = |run: &VerbRun| {
        let img = src.path.clone().unwrap_or_default();
        fs::canonicalize(&img).map_err(|e| run.step_err(StepId::Image, StepError::io(img)(e)))
    };
    match kind {
        ImageKind::Embedded => {
            let dir = image_dir.join("rootfs");
            oci::build_busybox_rootfs(&dir).map_err(|e| run.step_err(StepId::Image, e))?;
            return with_manifest(run, ImageState::plain_directory(kind, dir));
        }
        ImageKind::Directory => {
            let dir = canonical(run)?;
            return with_manifest(run, ImageState::plain_directory(kind, dir));
        }
        ImageKind::Qcow2 => {}
    }
    let file = canonical(run)?;
    let export = image_dir.join("export.raw");
    let lower = image_dir.join("lower");
    mkdirs(run, std::slice::from_ref(&lower))?;
    let mut img = ImageState {
        kind,
        source: file.clone(),
        sha256: src.sha256.clone(),
        lower: lower.clone(),
        export_file: Some(export.clone()),
        qsd_pid: None,
        loop_device: None,
        fstype: None,
        partition: None,
        manifest: None,
        file_stat: None,
    };
    let q = mounts::qsd_start(
        &file,
        &export,
        &image_dir.join("qsd.pid"),
        &run.ev_path("qemu-storage-daemon.log"),
    )
    .map_err(|e| run.step_err(StepId::FuseExport, e))?;
    img.qsd_pid = Some(q.pid);
    let (pid, file) = (q.pid, q.export_file.clone());
    started.on_signal(
        format!(
            "FUSE export {} (qemu-storage-daemon pid {pid})",
            file.display()
        ),
        move || mounts::qsd_stop(pid, &file),
    );
    started.qsd = Some(q);
    // The bytes exported are the ones hashed to the pin: the same stat as before the hash.
    let held = image_unchanged::qcow2_stat_held(&img.source, src.stat)
        .map_err(|e| run.step_err(StepId::Image, e))?;
    img.file_stat = Some(held);
    st.image = Some(img.clone());
    run.save(st)?;
    let (l, part) = mounts::loop_attach_partition(&export, &src.partition)
        .map_err(|e| run.step_err(StepId::LoopAttach, e))?;
    img.loop_device = Some(l.device.clone());
    img.partition = part;
    let dev = l.device.clone();
    let (d, back) = (dev.clone(), export.clone());
    started.on_signal(format!("loop device {}", d.display()), move || {
        mounts::loop_detach(&d, Some(&back))
    });
    started.loop_dev = Some(l);
    st.image = Some(img.clone());
    run.save(st)?;
    let (g, fstype) =
        mounts::mount_ro(&dev, &lower).map_err(|e| run.step_err(StepId::ImageMount, e))?;
    let l = lower.clone();
    started.on_signal(format!("image mount {}", l.display()), move || {
        mounts::unmount(&l)
    });
    started.lower = Some(g);
    img.fstype = Some(fstype);
    Ok(img)
}

/// A directory image (`embedded`, `directory`: the overlay's lower used in place) with its
/// metadata manifest taken now, its listing written to `slot-N/image-manifest.json`
/// ([`image_unchanged::record_manifest`]; timing `image-manifest`).
fn with_manifest(run: &mut VerbRun, mut img: ImageState) -> Result<ImageState, SlotError> {
    let t = Instant::now();
    let m = image_unchanged::record_manifest(&img.lower, &run.paths.image_manifest())
        .map_err(|e| run.step_err(StepId::ImageManifest, e))?;
    run.took("image-manifest", t);
    img.manifest = Some(m);
    Ok(img)
}

/// The holder (`netprobe __holder --lo-up`), its identity proven by the handshake and /proc
/// before `holder.json`, owning the published ports' `listeners` (`--publish FD:GUEST_PORT`,
/// in `st.published_ports`' order; netprobe's copies are closed once it runs). The returned
/// [`Holder`] kills it on drop until detached.
fn start_holder(
    run: &mut VerbRun,
    st: &mut SlotState,
    listeners: Vec<std::net::TcpListener>,
) -> Result<Holder, SlotError> {
    let t = Instant::now();
    let exe = run.args.holder_exe.clone().unwrap_or_else(ns::default_exe);
    let sealed = seal_binaries(run, st)?;
    let keep: Vec<_> = sealed.iter().map(|s| s.fd.as_fd()).collect();
    let opts = HolderOptions {
        exe: exe.clone(),
        lo_up: true,
    };
    let publish: Vec<_> = listeners
        .iter()
        .zip(&st.published_ports)
        .map(|(l, p)| (l.as_fd(), p.guest_port))
        .collect();
    let holder = Holder::spawn_publishing(&opts, &keep, &publish)
        .map_err(|e| run.step_err(StepId::Holder, e))?;
    drop(keep);
    drop(sealed);
    drop(publish);
    // The holder owns the listening sockets now.
    drop(listeners);
    if !st.published_ports.is_empty() {
        run.fact_json("published_ports", &st.published_ports);
    }
    let hid = *holder.identity();
    st.holder = Some(hid);
    let cookie =
        ns::netns_cookie_of(&hid.netns_path()).map_err(|e| run.step_err(StepId::Holder, e))?;
    st.holder_netns_cookie = Some(cookie);
    run.save(st)?;
    holder_gate(run, st, "writing holder.json")?;
    let own_ns = ns::own_netns_inode().map_err(|e| run.step_err(StepId::Holder, e))?;
    run.gate(
        GateId::HolderPrivateNetns,
        if hid.netns_inode != own_ns {
            Ok(format!("holder netns {} != host {own_ns}", hid.netns_inode))
        } else {
            Err("holder shares netprobe's netns".into())
        },
    )?;
    let hj = json!({
        "schema_version": 1,
        "pid": hid.pid,
        "start_time": hid.start_time,
        "netns_inode": hid.netns_inode,
        "netns_cookie": cookie,
        "netns_path": hid.netns_path().display().to_string(),
        "exe": exe.display().to_string(),
        "created_at": now_rfc3339(),
    });
    crate::evidence::validate_holder(&hj)
        .map_err(|e| run.step_err(StepId::HolderJson, StepError::Schema(e)))?;
    let hj_bytes = serde_json::to_vec_pretty(&hj)
        .map_err(|e| run.step_err(StepId::HolderJson, StepError::encode("holder.json", e)))?;
    let path = run.paths.holder();
    crate::evidence::replace_atomic(&path, &hj_bytes)
        .map_err(|e| run.step_err(StepId::HolderJson, StepError::io(&path)(e)))?;
    run.ev_write("holder.json", &hj_bytes);
    run.fact("holder", hj);
    run.took("holder", t);
    Ok(holder)
}

/// The sealed copies of the runtime and CRIU ([`crate::slot::resources::sealed_binaries`]) the holder is to keep, their
/// records in `st` and the fact `sealed_binaries`. A copy that cannot be made (no memfd, no
/// sealing) is recorded as such and the later verbs re-hash that file instead.
///
/// Errors: a binary whose bytes no longer hash to the pin its gate just recorded.
fn seal_binaries(
    run: &mut VerbRun,
    st: &mut SlotState,
) -> Result<Vec<sealed_binaries::Sealed>, SlotError> {
    use sealed_binaries::{SealError, seal};
    let mut made = Vec::new();
    let mut facts = serde_json::Map::new();
    for (name, pin) in [("runtime", &mut st.runtime), ("criu", &mut st.criu)] {
        match seal(&pin.path, name, &pin.sha256) {
            Ok(s) => {
                facts.insert(name.into(), json!(s.record));
                pin.sealed = Some(s.record.clone());
                made.push(s);
            }
            Err(e @ SealError::Changed { .. }) => {
                return Err(run.step_err(StepId::SealedCopy, StepError::Tool(e.to_string())));
            }
            Err(e) => {
                pin.sealed = None;
                facts.insert(
                    name.into(),
                    json!(format!(
                        "not made ({e}): every later verb re-hashes the file"
                    )),
                );
            }
        }
    }
    run.fact("sealed_binaries", serde_json::Value::Object(facts));
    Ok(made)
}

/// `config.json` (oci-spec): network namespace by the holder's path, the slot's resources; its
/// sha256 recorded and proven by the `config-hash` gate.
fn write_config(
    run: &mut VerbRun,
    st: &mut SlotState,
    netns: PathBuf,
) -> Result<String, SlotError> {
    let p = run.paths.clone();
    let profile = match (&st.profile, run.args.profile.is_some()) {
        (Some(r), true) => Some(r.profile.clone()),
        _ => None,
    };
    let bs = BundleSpec {
        rootfs: p.rootfs(),
        readonly_root: false,
        args: vec!["/bin/sh".into(), "/init.sh".into()],
        netns: NetnsSpec::Path(netns),
        resources: Some(st.resources),
        hostname: format!("slot-{}", p.slot),
        cgroups_path: Some(st.cgroups_path.clone()),
    };
    let info = match &profile {
        Some(pr) => profile_record::write_bundle(&p.bundle(), &bs, pr)
            .map_err(|e| run.step_err(StepId::ConfigJson, e))?,
        None => write_bundle(&p.bundle(), &bs).map_err(|e| run.step_err(StepId::ConfigJson, e))?,
    };
    let sha = info.sha256;
    st.config_sha256 = Some(sha.clone());
    run.save(st)?;
    let r = pure_checks::config_hash(&p.bundle(), st);
    run.gate(GateId::ConfigHash, r)?;
    run.fact("config_sha256", sha.clone());
    if let Ok(b) = fs::read(p.config()) {
        run.ev_write("config.json", &b);
    }
    Ok(sha)
}

/// The container: proven absent, holder re-verified, then create + start (guarded: killed and
/// deleted on failure or panic until disarmed), then the ready gates.
fn start_container(run: &mut VerbRun, st: &mut SlotState) -> Result<String, SlotError> {
    let p = run.paths.clone();
    let rt = run.runtime(st, &st.runtime.path, &st.criu.path);
    // Detected just now (cached for this verb); recorded for the later verbs.
    st.runtime.kind = Some(run.runtime_kind(&st.runtime.path));
    let id = st.container_id.clone();
    let mut c = Container::new(&*rt, &id, p.bundle(), p.root.join("container.pid"));
    let r = c.refuse_existing();
    run.rt_log("state (refuse existing)", r.as_ref());
    run.gate(
        GateId::ContainerAbsent,
        r.map(|_| format!("runtime state {id}: does not exist"))
            .map_err(|e| e.to_string()),
    )?;
    holder_gate(run, st, "runtime create")?;
    run.clear(StepId::RuntimeCreate, &PROVISION_CREATE_GATES)?;
    // Runs after the container's own release (registered later, released first).
    let _cgroup_dirs = cgroups::on_signal_remove_dirs(st);
    let t = Instant::now();
    let r = c.create();
    run.rt_log("create", r.as_ref());
    r.map_err(|e| run.step_err(StepId::RuntimeCreate, e))?;
    let r = c.start();
    run.rt_log("start", r.as_ref());
    r.map_err(|e| run.step_err(StepId::RuntimeStart, e))?;
    run.took("create-start", t);
    // The guest checks are the readiness checks, in the profile's order, once the container is
    // proven in the holder's netns.
    shared_gates::ready_gates(run, st, "provision", None, None, || {
        let ((r, how), ms) = timed(|| c.state_quick());
        (r, ms, how)
    })?;
    let pid = run
        .fact_of("provision_container_pid")
        .and_then(|v| v.as_i64())
        .unwrap_or(0) as i32;
    let h = st
        .holder
        .ok_or_else(|| run.step_err(StepId::Readiness, StepError::Missing("no holder recorded")))?;
    readiness::run_checks(run, st, &h, pid)?;
    publish_gates::published_gate(run, st, "provision")?;
    c.disarm();
    Ok(id)
}
