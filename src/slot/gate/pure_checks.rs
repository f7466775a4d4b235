//! The slot's pure checks: each takes paths and recorded facts and returns a gate detail
//! (`Ok` proven, `Err` not), touching nothing but what it reads, so each is unit-tested over
//! temporary folders without root: usage, config hash, holder identity, binary pin, snapshot
//! completeness, probe evidence. The verbs turn their results into gates ([`crate::slot::GateId`]).

use crate::criu::inventory::ImageFile;
use crate::evidence::result::{RungName, Status as RungStatus, VerdictCode};
use crate::evidence::{read_result, sha256_file, sha256_hex};
use crate::oci::{config_sha256, read_bundle_spec};
use crate::slot::JournalEvent;
use crate::slot::error::SlotError;
use crate::slot::gate::Observed;
use crate::slot::gate::ObservedWith;
use crate::slot::next_step::{self, CLEANUP_AND_PROVISION_ANOTHER};
use crate::slot::record::journal;
use crate::slot::resources::slot_dir;
use crate::slot::state::{BinaryPin, ImageKind, SlotState};
use crate::slot::{SlotArgs, Verb};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// What `--image` needs, said after each image refusal.
const IMAGE_FIX: &str =
    "give --image an existing root filesystem directory, or a .qcow2 disk with --image-sha256";

/// A provision's arguments that break a rule clap cannot check (exit 2); each message names
/// the flag and the fix.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// `--state-dir` is inside a folder netprobe wrote.
    #[error(
        "--state-dir {}: refusing a state directory inside {what} {} (it holds {marker}): \
         netprobe never writes into existing evidence, and the files of a slot added there \
         would break it; choose a folder outside it",
        state_dir.display(),
        folder.display()
    )]
    StateDirInEvidence {
        /// The state directory.
        state_dir: PathBuf,
        /// What the enclosing folder is.
        what: &'static str,
        /// The enclosing folder.
        folder: PathBuf,
        /// The file that marks it.
        marker: &'static str,
    },
    /// The enclosing folders could not be checked.
    #[error(transparent)]
    Evidence(crate::evidence::EvidenceError),
    /// `--image` cannot be read.
    #[error("--image {}: {source}; {IMAGE_FIX}", image.display())]
    ImageUnreadable {
        /// The image path.
        image: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A `.qcow2` `--image` that is not a regular file.
    #[error("--image {} is not a regular file (a .qcow2 disk is one); {IMAGE_FIX}", .0.display())]
    ImageNotAFile(PathBuf),
    /// A directory `--image` that is not a directory.
    #[error("--image {} is neither a directory nor a .qcow2 file; {IMAGE_FIX}", .0.display())]
    ImageNotADirectory(PathBuf),
    /// `--reason` without `--no-probe-gate`.
    #[error(
        "--reason is recorded only with --no-probe-gate (it says why the probe gate is skipped): drop --reason, or skip the gate with --no-probe-gate --reason TEXT instead of --probe-evidence"
    )]
    ReasonWithoutOverride,
    /// `--no-probe-gate` with a missing or blank `--reason`.
    #[error("--no-probe-gate needs --reason TEXT (recorded in the slot); it must not be blank")]
    BlankReason,
    /// A `.qcow2` `--image` without `--image-sha256`.
    #[error("a .qcow2 --image must be pinned with --image-sha256")]
    Qcow2Unpinned,
    /// `--image-sha256` with an image that is not a `.qcow2`.
    #[error("--image-sha256 applies to a .qcow2 image only")]
    PinWithoutQcow2,
}

/// The argument rules of a provision that hold however [`SlotArgs`] was built (the CLI's clap
/// subcommands already enforce which verb takes which flag, `--no-probe-gate` against
/// `--probe-evidence` and the `--image-sha256` format): the override reason
/// ([`probe_gate_reason`]) and the qcow2 pin ([`image_pin`]). Other verbs ignore the
/// provision-only fields.
///
/// Errors: a usage [`SlotError`] (exit 2) naming the flag and the fix.
pub fn usage_checks(a: &SlotArgs, raw: &str) -> Result<(), SlotError> {
    if a.verb != Verb::Provision {
        return Ok(());
    }
    let reason = if a.no_probe_gate {
        probe_gate_reason(a.reason.as_deref())
    } else {
        reason_without_override(a.reason.as_deref())
    };
    reason
        .and_then(|()| image_pin(a.image.as_deref(), a.image_sha256.as_deref()))
        .and_then(|()| image_exists(a.image.as_deref()))
        .and_then(|()| state_dir_outside_evidence(&a.state_dir))
        .map_err(|m| SlotError::usage(raw, m.to_string()))
}

/// A state directory must not be made inside a folder netprobe wrote — a run's or a matrix's
/// evidence, a slot verb's evidence folder, a slot folder or another state directory
/// ([`crate::evidence::enclosing::refuse_inside_evidence`]): the files a slot adds there are
/// files that folder's record does not list (`netprobe verify` of a run then fails it).
/// Errors: the usage message naming the folder, the file that marks it and the fix.
pub fn state_dir_outside_evidence(state_dir: &Path) -> Result<(), UsageError> {
    use crate::evidence::EvidenceError;
    match crate::evidence::enclosing::refuse_inside_evidence(state_dir, None) {
        Err(EvidenceError::InsideEvidence {
            folder,
            what,
            marker,
            ..
        }) => Err(UsageError::StateDirInEvidence {
            state_dir: state_dir.to_path_buf(),
            what,
            folder,
            marker,
        }),
        Err(e) => Err(UsageError::Evidence(e)),
        Ok(()) => Ok(()),
    }
}

/// An `--image` must be there before anything is made: a directory (a root filesystem used
/// as-is), or a regular file for a `.qcow2` disk (its pin is checked by the `image-sha256` gate).
/// Errors: the usage message naming the path, what is wrong and what to give instead.
pub fn image_exists(image: Option<&Path>) -> Result<(), UsageError> {
    let Some(img) = image else { return Ok(()) };
    let qcow2 = ImageKind::of(Some(img)) == ImageKind::Qcow2;
    match std::fs::metadata(img) {
        Err(source) => Err(UsageError::ImageUnreadable {
            image: img.to_path_buf(),
            source,
        }),
        Ok(m) if qcow2 && !m.is_file() => Err(UsageError::ImageNotAFile(img.to_path_buf())),
        Ok(m) if !qcow2 && !m.is_dir() => Err(UsageError::ImageNotADirectory(img.to_path_buf())),
        Ok(_) => Ok(()),
    }
}

/// `--reason` without `--no-probe-gate` would be recorded nowhere (the probe gate is not
/// skipped). Errors: the usage message naming both ways out.
pub fn reason_without_override(reason: Option<&str>) -> Result<(), UsageError> {
    match reason {
        None => Ok(()),
        Some(_) => Err(UsageError::ReasonWithoutOverride),
    }
}

/// `--no-probe-gate` needs a non-blank `--reason` (it is recorded in the slot). Errors: the
/// usage message.
pub fn probe_gate_reason(reason: Option<&str>) -> Result<(), UsageError> {
    if reason.map(str::trim).unwrap_or("").is_empty() {
        return Err(UsageError::BlankReason);
    }
    Ok(())
}

/// The qcow2 pin rule: a `.qcow2` `--image` must be pinned with `--image-sha256`, and a pin is
/// only for a `.qcow2` image (the format of the pin is the CLI's, and a pin that does not
/// match fails the image gate). Errors: the usage message.
pub fn image_pin(image: Option<&Path>, sha256: Option<&str>) -> Result<(), UsageError> {
    let Some(img) = image else { return Ok(()) };
    match (
        ImageKind::of(Some(img)) == ImageKind::Qcow2,
        sha256.is_some(),
    ) {
        (true, false) => Err(UsageError::Qcow2Unpinned),
        (false, true) => Err(UsageError::PinWithoutQcow2),
        _ => Ok(()),
    }
}

/// The sha256 of a file, as a gate detail error when it cannot be read.
pub fn file_sha256(path: &Path) -> Observed {
    sha256_file(path)
        .map(|(h, _)| h)
        .map_err(|e| format!("cannot hash {}: {e}", path.display()))
}

/// A binary at `path` (hashed as `hashed`) still has the sha256 recorded at provision in `pin`.
pub fn binary_pin(path: &Path, hashed: Observed, pin: &BinaryPin) -> Observed {
    match hashed {
        Ok(h) if h == pin.sha256 => Ok(format!("{}: sha256 {h}", path.display())),
        Ok(h) => Err(format!(
            "{}: sha256 {h} != {} recorded at provision for {} (binary swapped?)",
            path.display(),
            pin.sha256,
            pin.path.display()
        )),
        Err(e) => Err(e),
    }
}

/// `config.json` in `bundle` has the hash recorded at provision, and (read back with oci-spec)
/// its network namespace is still the recorded holder's `/proc/<pid>/ns/net`.
pub fn config_hash(bundle: &Path, st: &SlotState) -> Observed {
    let Some(want) = &st.config_sha256 else {
        return Err("no config.json sha256 recorded (provision did not finish)".into());
    };
    let h = config_sha256(bundle).map_err(|e| e.to_string())?;
    if &h != want {
        return Err(format!(
            "config.json sha256 {h} != {want} recorded at provision (tampered): the container would run with another spec than the one provision proved; put back the provisioned config.json, or {CLEANUP_AND_PROVISION_ANOTHER}"
        ));
    }
    let spec = read_bundle_spec(bundle).map_err(|e| e.to_string())?;
    let netns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|n| {
            n.iter()
                .find(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::Network)
        })
        .and_then(|n| n.path().clone());
    match (&st.holder, netns) {
        (Some(hd), Some(p)) if p == hd.netns_path() => Ok(format!(
            "sha256 {h}; network namespace {} (the holder's)",
            p.display()
        )),
        (None, _) => Ok(format!("sha256 {h}; no holder recorded")),
        (Some(hd), p) => Err(format!(
            "config.json names network namespace {p:?}, not the holder's {}",
            hd.netns_path().display()
        )),
    }
}

/// The recorded holder is alive with the recorded pid, start time and netns inode.
pub fn holder(st: &SlotState) -> Observed {
    let Some(h) = &st.holder else {
        return Err("no holder recorded".into());
    };
    h.verify().map_err(|e| e.to_string()).map(|_| {
        format!(
            "pid {} start time {} netns inode {}",
            h.pid, h.start_time, h.netns_inode
        )
    })
}

/// The holder words of a cleanup that finds no holder recorded in `state.json`: when an
/// earlier cleanup of the slot ended ok having released one (the newest journal `end` of a
/// cleanup whose summary begins `slot clean (holder pid …`), that cleanup's time and words;
/// else `no holder recorded`.
pub fn no_holder_detail(paths: &slot_dir::SlotPaths) -> String {
    let journal = journal::journal_read(&paths.journal());
    let released = journal.iter().rev().find_map(|e| {
        let rest = (e.verb == "cleanup" && e.event == JournalEvent::End && e.ok)
            .then(|| e.detail.strip_prefix("slot clean ("))??;
        let words = rest.find("); ").map_or(rest, |i| &rest[..i]);
        words
            .starts_with("holder pid ")
            .then(|| (e.at.clone(), words))
    });
    match released {
        Some((at, words)) => format!(
            "no holder to stop: the earlier cleanup that ended at {at} released it ({words}), and state.json records none since"
        ),
        None => "no holder recorded".to_string(),
    }
}

/// The interrupted snapshot folders (`snapshot.tmp-*`) in the slot folder `root`, sorted.
pub fn stale_tmp(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("snapshot.tmp-"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The `snapshot-complete` gate: the snapshot `st` references (in the slot folder `root`) has a
/// manifest, every checkpoint file as recorded (by the `stat` recorded when it was hashed, else
/// by BLAKE3 when the manifest records it for every file, else by sha256:
/// [`crate::slot::gate::checkpoint_images::checkpoint_images`]), the network state with its recorded hash, the
/// reference screen (`screen.png`, a profile with a display) with the sha256 recorded in
/// `state.json` and in the manifest, and a saved upper. Returns the snapshot folder and the
/// detail.
pub fn snapshot_complete(root: &Path, st: &SlotState) -> ObservedWith<(PathBuf, String)> {
    let Some(s) = &st.snapshot else {
        let tmps = stale_tmp(root);
        return Err(format!(
            "no complete snapshot recorded (run {} first){}",
            next_step::bare("snapshot"),
            if tmps.is_empty() {
                String::new()
            } else {
                format!(" (interrupted, never used: {})", tmps.join(", "))
            }
        )
        .into());
    };
    let dir = root.join(&s.dir);
    let retake = format!(
        "this snapshot cannot be used: while the container runs ({}), {} takes a new one; otherwise {CLEANUP_AND_PROVISION_ANOTHER}",
        next_step::bare("status"),
        next_step::bare("snapshot")
    );
    if !dir.is_dir() {
        return Err(format!(
            "the snapshot folder {} that state.json records is gone (moved or deleted; nothing netprobe does removes a recorded snapshot); {retake}",
            dir.display()
        ).into());
    }
    let mbytes = crate::evidence::read_recorded(&dir.join("manifest.json"))
        .map_err(|e| format!("{}/manifest.json: {e}; {retake}", dir.display()))?;
    match &s.manifest_sha256 {
        None => {
            return Err(format!(
                "state.json records no sha256 of {}/manifest.json nor of its saved upper (a snapshot taken before they were recorded): not proven; {retake}",
                dir.display()
            ).into());
        }
        Some(want) if *want != sha256_hex(&mbytes) => {
            return Err(format!(
                "{}/manifest.json has sha256 {}, recorded {want}: the manifest changed since the snapshot; {retake}",
                dir.display(),
                sha256_hex(&mbytes)
            ).into());
        }
        Some(_) => {}
    }
    let m: Value = serde_json::from_slice(&mbytes)
        .map_err(|e| format!("{}/manifest.json: {e}; {retake}", dir.display()))?;
    let net = crate::evidence::read_recorded_text(&dir.join("netstate.json"))
        .map_err(|e| format!("{}/netstate.json: {e}; {retake}", dir.display()))?;
    if sha256_hex(net.as_bytes()) != s.netstate_sha256 || m["netstate_sha256"] != s.netstate_sha256
    {
        return Err(format!(
            "{}/netstate.json has sha256 {}, state.json records {} and the manifest {}: the recorded network state changed since the snapshot; {retake}",
            dir.display(),
            sha256_hex(net.as_bytes()),
            s.netstate_sha256,
            m["netstate_sha256"]
        ).into());
    }
    let files: Vec<ImageFile> = serde_json::from_value(m["checkpoint_files"].clone())
        .map_err(|e| format!("manifest checkpoint_files: {e}"))?;
    let images = crate::slot::gate::checkpoint_images::checkpoint_images(
        &dir.join("checkpoint"),
        &files,
        s.checkpoint_stats.as_deref(),
    )
    .map_err(|e| format!("{e}; {retake}"))?;
    let screen = match &s.screen {
        None => String::new(),
        Some(a) => {
            let (now, _) = crate::evidence::sha256_recorded(&dir.join(&a.file))
                .map_err(|e| format!("{}/{}: {e}; {retake}", dir.display(), a.file))?;
            if now != a.sha256 || m["screen"]["sha256"] != a.sha256.as_str() {
                return Err(format!(
                    "{} has sha256 {now}, recorded {} (state.json) and {} (manifest.json): the reference screen changed since the snapshot; unless the snapshot's own screen.png is put back, {retake}",
                    a.file, a.sha256, m["screen"]["sha256"]
                ).into());
            }
            format!(", {} sha256 {now}", a.file)
        }
    };
    let upper = saved_upper(&dir, s.upper.as_ref(), &m).map_err(|e| format!("{e}; {retake}"))?;
    Ok((
        dir.clone(),
        format!(
            "{}: manifest (sha256 as recorded), {images}, netstate{screen} and the saved upper ({upper}) verified",
            dir.display(),
        ),
    ))
}

/// The saved upper of the snapshot folder `dir` proven unchanged: its tree digest now equals the
/// one `state.json` recorded (`want`) and the manifest's. Returns the detail.
fn saved_upper(dir: &Path, want: Option<&crate::evidence::TreeDigest>, m: &Value) -> Observed {
    let Some(want) = want else {
        return Err("state.json records no digest of the saved upper".into());
    };
    let upper = dir.join("upper");
    let now = crate::evidence::tree_digest(&upper)
        .map_err(|e| format!("the snapshot's saved upper cannot be hashed: {e}"))?;
    if now != *want || m["upper"]["sha256"] != want.sha256.as_str() {
        return Err(format!(
            "{} has tree sha256 {} ({} entries, {} bytes), recorded {} ({} entries, {} bytes) in state.json and {} in manifest.json: the saved upper changed since the snapshot ({})",
            upper.display(),
            now.sha256,
            now.entries,
            now.bytes,
            want.sha256,
            want.entries,
            want.bytes,
            m["upper"]["sha256"],
            upper_paths_differing(&upper, m)
        ));
    }
    Ok(format!(
        "tree sha256 {}, {} entries, {} bytes",
        now.sha256, now.entries, now.bytes
    ))
}

/// Which paths of the tree at `tree` differ from the per-path listing the snapshot's manifest
/// `m` recorded (`upper_entries`, [`crate::evidence::tree_listing`]): a sentence for a refusal
/// (`against manifest.json's listing: changed ./etc/a; added ./evil`), or why it cannot be told
/// (no listing recorded, the tree unreadable). Diagnostic only: the digests decide.
pub(crate) fn upper_paths_differing(tree: &Path, m: &Value) -> String {
    let recorded: Vec<crate::evidence::TreeEntry> =
        match serde_json::from_value(m["upper_entries"].clone()) {
            Ok(l) => l,
            Err(_) => return "manifest.json records no per-path listing of the saved upper: the paths that differ cannot be named".into(),
        };
    match crate::evidence::tree_listing(tree) {
        Ok((_, now)) => format!(
            "against manifest.json's listing: {}",
            crate::evidence::listing_diff(&recorded, &now)
        ),
        Err(e) => format!("the paths that differ cannot be named: {e}"),
    }
}

/// Proves the probe verdict from the evidence in `dir`, never from what `netprobe-result.json`
/// says alone: [`crate::probe::verify::verify`] re-checks every artifact's sha256, re-runs the
/// assertions, recomputes the verdict and requires every file of the folder to be one of the
/// hashed artifacts; then the recomputed verdict must be a passing one, external-netns must
/// pass, and the probe must have run the same runtime and CRIU binaries (sha256) as this
/// provision. Returns the verdict and the gate detail, or the first mismatch.
pub fn probe_evidence(
    dir: &Path,
    rt: &BinaryPin,
    cr: &BinaryPin,
) -> ObservedWith<(VerdictCode, String)> {
    let shown = dir.display();
    let v = crate::probe::verify::verify(dir).map_err(|e| format!("{shown}: {e}"))?;
    if !v.reproduced() {
        let first = v.mismatches.first().cloned().unwrap_or_else(|| {
            format!(
                "verdict: recorded {}, the evidence gives {}",
                v.recorded.code, v.verdict.code
            )
        });
        return Err(format!(
            "{shown}: the evidence does not reproduce the recorded result (as `netprobe verify` \
             reports): {first}"
        )
        .into());
    }
    let res = read_result(dir).map_err(|e| format!("{shown}: {e}"))?;
    let code = v.verdict.code;
    if !matches!(
        code,
        VerdictCode::RuntimeEmptyNs | VerdictCode::RuntimePreservesNetns
    ) {
        return Err(format!(
            "{shown}: verdict {code} (recomputed from the evidence), need runtime-empty-ns or \
             runtime-preserves-netns"
        )
        .into());
    }
    let ext = res.rung(RungName::ExternalNetns).map(|r| r.status);
    if ext != Some(RungStatus::Pass) {
        return Err(format!("{shown}: external-netns rung status {ext:?}, need pass").into());
    }
    for (what, ran, now) in [
        ("runtime", res.host.runtime.as_ref(), rt),
        ("CRIU", res.host.criu.as_ref(), cr),
    ] {
        let sha = ran.map(|b| b.sha256.as_str()).unwrap_or_default();
        if sha != now.sha256 {
            let flag = if what == "CRIU" {
                "--criu"
            } else {
                "--runtime"
            };
            let probe_path = ran.map(|b| b.path.as_str()).unwrap_or("(none recorded)");
            return Err(format!(
                "{shown}: probe ran {what} {probe_path} sha256 {sha:?}, the slot would run {} \
                 sha256 {}; fix: provision with `{flag} {}`, or probe the slot's binary \
                 (`netprobe run {flag} {}`)",
                now.path.display(),
                now.sha256,
                ran.map_or_else(|| probe_path.to_string(), |b| crate::shell::arg(&b.path)),
                crate::shell::arg(&now.path)
            )
            .into());
        }
    }
    Ok((
        code,
        format!(
            "{shown}: verified ({} artifacts sha256-checked, {} assertions re-run), verdict {code} \
             recomputed, external-netns pass, runtime and CRIU sha256 match",
            v.artifacts, v.assertions
        ),
    ))
}

#[cfg(test)]
pub(crate) mod tests;
