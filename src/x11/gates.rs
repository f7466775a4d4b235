//! The display gates as data in, record out: each takes an open [`Display`] (or screenshots),
//! writes its PNGs into an evidence directory (temporary name + rename, never overwriting), and
//! returns a serializable [`GateRecord`] whose `passed` says whether the fact was proven. The slot
//! verbs decide what a failed record means (fail closed) and where the directory is.
//!
//! - provision: [`geometry_gate`] (the display answers with the profile's width, height, depth);
//! - snapshot: [`quiescence_gate`] (two screenshots `interval` apart are equal, else "screen not
//!   quiescent" with both PNGs), its second screenshot is the snapshot's reference;
//! - restore/reset: [`pixel_gate`] (pixel-equal to the reference, else a diff PNG with the count
//!   and bounding box), then [`input_gate`] (a key through XTEST changes the app's region).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::display::{Display, Geometry};
use super::error::{Result, X11Error};
use super::image::{PixelDiff, Rect, Screenshot, diff, diff_image, rect_text, region_equal};

/// One PNG a gate wrote: file name (relative to the evidence directory) and sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PngArtifact {
    /// File name inside the evidence directory, e.g. `screen-before.png`.
    pub file: String,
    /// Lower-case hex sha256 of the file's bytes.
    pub sha256: String,
}

/// What a display gate observed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GateRecord {
    /// The gate's name: `display-geometry`, `screen-quiescent`, `pixels-equal`, `input-reaches-app`.
    pub gate: String,
    /// True when the fact was proven.
    pub passed: bool,
    /// One sentence: the fact and what was observed.
    pub detail: String,
    /// The pixel diff behind the verdict, when one was computed.
    pub diff: Option<PixelDiff>,
    /// PNGs written for this gate.
    pub pngs: Vec<PngArtifact>,
    /// How long the gate took, milliseconds (monotonic clock).
    pub elapsed_ms: u64,
}

/// Writes `shot` as `dir/name` (refusing to overwrite) and returns the artifact.
///
/// Errors: [`X11Error::Io`] (including "exists": evidence is never overwritten), PNG errors.
pub fn write_artifact(dir: &Path, name: &str, shot: &Screenshot) -> Result<PngArtifact> {
    let path: PathBuf = dir.join(name);
    if path.exists() {
        return Err(X11Error::Io {
            what: "refusing to overwrite evidence",
            path,
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        });
    }
    let sha256 = shot.write_png(&path)?;
    Ok(PngArtifact {
        file: name.to_string(),
        sha256,
    })
}

/// How often the input gate looks at the app's region again after the key (a `GetImage` of
/// the region only: a few KB, well under a millisecond; the full 1920x1080 screenshot, ~10 ms,
/// is taken once, after the region changed). 2 ms: the change is seen 1 ms after it happened
/// on average (5 ms gave 2.5).
pub const INPUT_POLL: Duration = Duration::from_millis(2);

fn ms(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

/// Provision gate: the display's root window has `want`'s width, height and depth.
///
/// Errors: the X11 request failed (the caller treats it as "could not prove").
pub fn geometry_gate(d: &Display, want: Geometry) -> Result<GateRecord> {
    let t = Instant::now();
    let got = d.geometry()?;
    Ok(GateRecord {
        gate: "display-geometry".into(),
        passed: got == want,
        detail: format!(
            "display {} answers {}x{} depth {} (profile: {}x{} depth {})",
            d.path().display(),
            got.width,
            got.height,
            got.depth,
            want.width,
            want.height,
            want.depth
        ),
        diff: None,
        pngs: Vec::new(),
        elapsed_ms: ms(t),
    })
}

/// Snapshot gate: two screenshots `interval` apart must be equal. Writes
/// `<prefix>-quiescent-1.png` and `-2.png` when they differ (both pictures are the evidence of
/// "screen not quiescent"), else only `<prefix>.png` (the reference). Returns the record and the
/// reference screenshot (the second one).
///
/// Errors: X11 or PNG/IO failures.
pub fn quiescence_gate(
    d: &Display,
    interval: Duration,
    dir: &Path,
    prefix: &str,
) -> Result<(GateRecord, Screenshot)> {
    let t = Instant::now();
    let q = d.quiescence(interval)?;
    let mut pngs = Vec::new();
    let passed = q.is_quiescent();
    if passed {
        pngs.push(write_artifact(dir, &format!("{prefix}.png"), &q.second)?);
    } else {
        pngs.push(write_artifact(
            dir,
            &format!("{prefix}-quiescent-1.png"),
            &q.first,
        )?);
        pngs.push(write_artifact(
            dir,
            &format!("{prefix}-quiescent-2.png"),
            &q.second,
        )?);
    }
    let detail = if passed {
        format!("two screenshots {} ms apart are pixel-equal", q.interval_ms)
    } else {
        format!(
            "screen not quiescent: {} pixels changed within {} ms (bounding box {})",
            q.diff.differing,
            q.interval_ms,
            rect_text(q.diff.bbox)
        )
    };
    Ok((
        GateRecord {
            gate: "screen-quiescent".into(),
            passed,
            detail,
            diff: Some(q.diff.clone()),
            pngs,
            elapsed_ms: ms(t),
        },
        q.second,
    ))
}

/// Restore/reset gate: `actual` must equal `reference` pixel for pixel. Writes
/// `<prefix>.png` (the actual screen) always and `<prefix>-diff.png` (changed pixels red, the
/// rest dimmed) when they differ.
///
/// Errors: size mismatch ([`X11Error::SizeMismatch`]), PNG/IO failures.
pub fn pixel_gate(
    reference: &Screenshot,
    actual: &Screenshot,
    dir: &Path,
    prefix: &str,
) -> Result<GateRecord> {
    let t = Instant::now();
    let after = write_artifact(dir, &format!("{prefix}.png"), actual)?;
    compared(
        reference,
        actual,
        after,
        dir,
        prefix,
        t,
        "the screen equals the snapshot's pixel for pixel",
    )
}

/// The pixels-equal record of `actual` (already written as `after`) compared with `reference`
/// pixel for pixel: `<prefix>-diff.png` written when they differ; `equal` is the detail when
/// they do not. `t`: when the gate started.
fn compared(
    reference: &Screenshot,
    actual: &Screenshot,
    after: PngArtifact,
    dir: &Path,
    prefix: &str,
    t: Instant,
    equal: &str,
) -> Result<GateRecord> {
    let pd = diff(reference, actual)?;
    let mut pngs = vec![after];
    if !pd.is_equal() {
        let img = diff_image(reference, actual)?;
        pngs.push(write_artifact(dir, &format!("{prefix}-diff.png"), &img)?);
    }
    let detail = if pd.is_equal() {
        equal.to_string()
    } else {
        format!(
            "{} of {} pixels differ from the snapshot's, bounding box {}",
            pd.differing,
            pd.total,
            rect_text(pd.bbox)
        )
    };
    Ok(GateRecord {
        gate: "pixels-equal".into(),
        passed: pd.is_equal(),
        detail,
        diff: Some(pd),
        pngs,
        elapsed_ms: ms(t),
    })
}

/// Pixel gate against the reference screen as PNG bytes (`reference_png`, the snapshot's
/// `screen.png`, whose sha256 the caller proved): the actual screen is encoded (deterministic,
/// [`Screenshot::to_png`]) and written as `<prefix>.png`. When those bytes are the reference's
/// (same sha256), the screens are equal pixel for pixel without decoding the reference: PNG is
/// lossless, so the same bytes decode to the same pixels. Otherwise (different pixels, or a
/// reference another encoder wrote) the reference is decoded and compared as [`pixel_gate`]
/// does, with the diff PNG when they differ.
///
/// Errors: PNG/IO failures (also a reference that cannot be decoded); size mismatch.
pub fn pixel_gate_png(
    reference_png: &[u8],
    actual: &Screenshot,
    dir: &Path,
    prefix: &str,
) -> Result<GateRecord> {
    let t = Instant::now();
    let after = write_artifact(dir, &format!("{prefix}.png"), actual)?;
    let reference_sha = crate::evidence::sha256_hex(reference_png);
    if after.sha256 == reference_sha {
        let total = u64::from(actual.width) * u64::from(actual.height);
        return Ok(GateRecord {
            gate: "pixels-equal".into(),
            passed: true,
            detail: format!(
                "the screen equals the snapshot's pixel for pixel (its PNG is byte for byte the snapshot's screen.png, sha256 {reference_sha}: the same lossless encoding of the same {}x{} pixels)",
                actual.width, actual.height
            ),
            diff: Some(PixelDiff {
                differing: 0,
                total,
                bbox: None,
            }),
            pngs: vec![after],
            elapsed_ms: ms(t),
        });
    }
    let reference =
        Screenshot::png_from_bytes(reference_png, Path::new("screen.png (the snapshot's)"))?;
    compared(
        &reference,
        actual,
        after,
        dir,
        prefix,
        t,
        "the screen equals the snapshot's pixel for pixel (decoded and compared: its PNG bytes differ from the snapshot's screen.png, so the bytes alone did not prove it)",
    )
}

/// Input gate: sends `keysym` through XTEST and waits (polling the region every [`INPUT_POLL`],
/// at most `timeout`) until the screen inside `region` differs from `baseline`, then takes the
/// whole screen. Writes `<prefix>.png` (the screen after the key). A change outside `region` is reported in the detail but does not pass.
///
/// Errors: X11 (XTEST missing, no keycode), PNG/IO failures.
pub fn input_gate(
    d: &Display,
    keysym: u32,
    region: Rect,
    baseline: &Screenshot,
    timeout: Duration,
    dir: &Path,
    prefix: &str,
) -> Result<GateRecord> {
    let t = Instant::now();
    d.press_key(keysym)?;
    input_gate_pressed(
        d,
        keysym,
        region,
        baseline,
        KeyPressed { at: t, timeout },
        dir,
        prefix,
    )
}

/// When a key was sent and how long the input gate waits for the screen to change after it.
#[derive(Debug, Clone, Copy)]
pub struct KeyPressed {
    /// When the key went out (through [`Display::press_key`]).
    pub at: Instant,
    /// How long after `at` the gate waits for the application's region to change.
    pub timeout: Duration,
}

/// [`input_gate`] after the caller sent `keysym` itself at `pressed.at` (through
/// [`Display::press_key`], after taking `baseline`): the wait runs until `pressed.timeout` after it,
/// and the record's time counts from it. A restore sends the key as soon as the screen for
/// `pixels-equal` is read, so the application draws while that gate compares.
///
/// Errors: as [`input_gate`].
pub fn input_gate_pressed(
    d: &Display,
    keysym: u32,
    region: Rect,
    baseline: &Screenshot,
    pressed: KeyPressed,
    dir: &Path,
    prefix: &str,
) -> Result<GateRecord> {
    let KeyPressed { at: t, timeout } = pressed;
    // Only the app's region is read while waiting (a few KB per look); the whole screen once
    // after, for the evidence and the diff.
    let before = baseline.crop(region)?;
    loop {
        if d.region(region)? != before || t.elapsed() >= timeout {
            break;
        }
        std::thread::sleep(INPUT_POLL);
    }
    let shot = d.screenshot()?;
    let pd = diff(baseline, &shot)?;
    let changed_in_region = !region_equal(baseline, &shot, region)?;
    let png = write_artifact(dir, &format!("{prefix}.png"), &shot)?;
    Ok(GateRecord {
        gate: "input-reaches-app".into(),
        passed: changed_in_region,
        detail: format!(
            "key 0x{keysym:x} via XTEST: {} pixels changed (bounding box {}); app region {} {}",
            pd.differing,
            rect_text(pd.bbox),
            region,
            if changed_in_region {
                "changed"
            } else {
                "unchanged"
            }
        ),
        diff: Some(pd),
        pngs: vec![png],
        elapsed_ms: ms(t),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(w: u32, h: u32, seed: u8) -> Screenshot {
        let rgb = (0..w * h * 3)
            .map(|i| (i as u8).wrapping_mul(seed))
            .collect();
        Screenshot::new(w, h, rgb).unwrap()
    }

    /// Another encoder's bytes of the same pixels (best compression, a different PNG).
    fn other_encoding(s: &Screenshot) -> Vec<u8> {
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, s.width, s.height);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            enc.set_compression(png::Compression::High);
            let mut w = enc.write_header().unwrap();
            w.write_image_data(&s.rgb).unwrap();
        }
        out
    }

    #[test]
    fn the_same_png_bytes_prove_equal_pixels_without_decoding() {
        let d = tempfile::tempdir().unwrap();
        let s = screen(64, 48, 7);
        let reference = s.to_png().unwrap();
        let r = pixel_gate_png(&reference, &s, d.path(), "after").unwrap();
        assert!(
            r.passed && r.detail.contains("byte for byte"),
            "{}",
            r.detail
        );
        assert_eq!(r.diff.unwrap().total, 64 * 48);
        assert_eq!(r.pngs.len(), 1);
        assert_eq!(r.pngs[0].sha256, crate::evidence::sha256_hex(&reference));
    }

    #[test]
    fn other_bytes_are_decoded_equal_pixels_pass_and_a_changed_pixel_fails_with_a_diff() {
        let d = tempfile::tempdir().unwrap();
        let s = screen(64, 48, 7);
        let reference = other_encoding(&s);
        assert_ne!(reference, s.to_png().unwrap());
        let r = pixel_gate_png(&reference, &s, d.path(), "a").unwrap();
        assert!(
            r.passed && r.detail.contains("decoded and compared"),
            "{}",
            r.detail
        );
        let mut moved = s.clone();
        moved.rgb[3 * (10 * 64 + 5)] ^= 0xff;
        let r = pixel_gate_png(&s.to_png().unwrap(), &moved, d.path(), "b").unwrap();
        assert!(!r.passed, "{}", r.detail);
        assert!(
            r.detail.starts_with("1 of 3072 pixels differ"),
            "{}",
            r.detail
        );
        assert!(
            r.detail.ends_with("bounding box x 5 y 10, 1x1"),
            "{}",
            r.detail
        );
        assert_eq!(r.pngs.len(), 2, "the screen and the diff");
        assert!(d.path().join("b-diff.png").exists());
        // Another size is an error, not a pass.
        assert!(pixel_gate_png(&screen(8, 8, 3).to_png().unwrap(), &s, d.path(), "c").is_err());
    }
}
