//! The display gates of a slot whose profile has a `[display]` (ARCHITECTURE.md section 5):
//! netprobe speaks X11 to the guest's display itself ([`crate::x11`]) through the socket under
//! `/proc/<container init pid>/root` (the guest's `/tmp` may be a tmpfs only its mount
//! namespace sees).
//!
//! - provision: `display-geometry` (the display comes up within the readiness timeout and
//!   answers with the profile's geometry and depth);
//! - snapshot, before the checkpoint: `screen-quiescent` (two screenshots 250 ms apart equal,
//!   else refused with both PNGs), then `app-drawn` (the profile's input region not one
//!   colour); the reference is stored as `screen.png` in the snapshot;
//! - restore/reset, after the network gate: `pixels-equal` against the snapshot's screen (fail
//!   closed with `screen-after-diff.png`, the count and bounding box), then `input-reaches-app`.
//!
//! Every PNG lands in the verb's evidence folder with its sha256 in `display-gates.json` (written
//! once per verb, with every record of the verb) and in the verb's facts (`display_gates`).

use crate::profile::DisplaySpec;
use crate::slot::error::StepId;
use crate::slot::error::{SlotError, StepError};
use crate::slot::gate::GateId;
use crate::slot::gate::Observed;
use crate::slot::record::evidence_writes;
use crate::slot::record::evidence_writes::Unwritten;
use crate::slot::record::verb_run::VerbRun;
use crate::slot::state::SlotState;
use crate::x11::{
    self, Display, GateRecord, Geometry, PngArtifact, Rect, ScreenBuffers, Screenshot, X11Error,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The quiescence interval of the snapshot gate, milliseconds.
pub const QUIESCENCE_MS: u64 = 250;
/// How long a later verb waits for the display socket to accept (it was up at provision).
const LATER_CONNECT: Duration = Duration::from_secs(10);
/// How long the input gate waits for the app's region to change.
const INPUT_TIMEOUT: Duration = Duration::from_secs(5);
/// The snapshot's reference screen, inside the snapshot folder.
pub const SNAPSHOT_SCREEN: &str = "screen.png";

/// The slot profile's `[display]`, when it has one.
pub(crate) fn spec(st: &SlotState) -> Option<DisplaySpec> {
    st.profile.as_ref().and_then(|p| p.profile.display)
}

/// The display socket of the container whose init is `pid`.
pub fn socket_of(pid: i32, number: u32) -> PathBuf {
    x11::socket_under_root(Path::new(&format!("/proc/{pid}/root")), number)
}

fn ev_dir(run: &VerbRun) -> PathBuf {
    run.ev_path("display-gates.json")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn connect(
    run: &mut VerbRun,
    id: GateId,
    pid: i32,
    n: u32,
    t: Duration,
) -> Result<Display, SlotError> {
    let sock = socket_of(pid, n);
    Display::connect(&sock, t).map_err(|e| {
        let fix = match e {
            X11Error::NotASocket { .. } => {
                "the guest's /tmp/.X11-unix/X<N> must be the X server's socket; check display.number"
            }
            _ => {
                "check that the image's init starts the X server on display.number (see the container's logs); raise readiness_timeout_ms if it is slow"
            }
        };
        run.fail(id, format!("display :{n} at {}: {e}; fix: {fix}", sock.display()))
    })
}

fn keep(run: &mut VerbRun, recs: &[&GateRecord]) {
    // Through a `Value`: its keys are sorted, in the file as in the fact.
    match serde_json::to_value(recs) {
        Ok(v) => {
            run.ev_write_json("display-gates.json", &v);
            run.fact("display_gates", v);
        }
        Err(e) => run
            .unwritten
            .push(Unwritten::encode("display-gates.json", &e)),
    }
}

fn gate_of(run: &mut VerbRun, id: GateId, r: &GateRecord) -> Result<(), SlotError> {
    let files: Vec<String> = r
        .pngs
        .iter()
        .map(|p| format!("{} (sha256 {})", p.file, p.sha256))
        .collect();
    let d = if files.is_empty() {
        r.detail.clone()
    } else {
        format!("{}; {}", r.detail, files.join(", "))
    };
    if r.passed {
        run.gate(id, Ok(d))
    } else {
        Err(run.fail(id, d))
    }
}

/// Step `display` could not run because of `e`; a PNG the gate could not write into the
/// verb's evidence folder is recorded as not written too ([`VerbRun::unwritten`]).
fn x11_err(run: &VerbRun, e: X11Error) -> SlotError {
    if let (X11Error::Io { what, path, source }, Some(ev)) = (&e, run.ev.as_deref())
        && let Ok(rel) = path.strip_prefix(ev)
    {
        // `Screenshot::write_png` writes `NAME.png.tmp`, then renames it to `NAME.png`.
        let rel = rel.to_string_lossy();
        let file = rel.strip_suffix(".tmp").unwrap_or(&rel);
        run.unwritten
            .push(evidence_writes::Unwritten::io(file, what, source));
    }
    run.step_err(StepId::Display, StepError::Tool(e.to_string()))
}

/// provision (a readiness check, [`super::readiness`]): waits at most `timeout` (what is left
/// of the readiness budget) for the display of the container `pid` and proves its geometry.
/// Nothing when the profile has no display.
///
/// Errors: a failed `display-geometry` gate (never came up, not a socket, wrong geometry).
pub(crate) fn provision_gate(
    run: &mut VerbRun,
    st: &SlotState,
    pid: i32,
    timeout: Duration,
) -> Result<(), SlotError> {
    let Some(ds) = spec(st) else { return Ok(()) };
    let t = std::time::Instant::now();
    let d = connect(run, GateId::DisplayGeometry, pid, ds.number, timeout)?;
    let want = Geometry {
        width: ds.width,
        height: ds.height,
        depth: ds.depth,
    };
    let r = x11::geometry_gate(&d, want).map_err(|e| x11_err(run, e))?;
    run.took("display-geometry", t);
    keep(run, &[&r]);
    gate_of(run, GateId::DisplayGeometry, &r)
}

/// snapshot, before the checkpoint: the `screen-quiescent` gate on the container `pid`; on
/// success the reference screen is copied into `snap_tmp/screen.png` and returned (to be
/// recorded in the snapshot). Nothing when the profile has no display.
///
/// Errors: "screen not quiescent" (both PNGs in the evidence), X11 or I/O failures.
pub(crate) fn snapshot_gate(
    run: &mut VerbRun,
    st: &SlotState,
    pid: i32,
    snap_tmp: &Path,
) -> Result<Option<PngArtifact>, SlotError> {
    let Some(ds) = spec(st) else { return Ok(None) };
    let t = std::time::Instant::now();
    let d = connect(run, GateId::ScreenQuiescent, pid, ds.number, LATER_CONNECT)?;
    // Through the socket only: the X server about to be checkpointed never maps a memfd of
    // netprobe's (MIT-SHM), whatever the timing of its clean-up after this connection closes.
    d.disable_shm();
    let dir = ev_dir(run);
    let interval = Duration::from_millis(QUIESCENCE_MS);
    let (r, shot) =
        x11::quiescence_gate(&d, interval, &dir, "screen").map_err(|e| x11_err(run, e))?;
    run.took("screen-quiescent", t);
    keep(run, &[&r]);
    gate_of(run, GateId::ScreenQuiescent, &r)?;
    if let Some(inp) = ds.input {
        let region = Rect {
            x: inp.x,
            y: inp.y,
            width: inp.width,
            height: inp.height,
        };
        let sock = socket_of(pid, ds.number);
        run.gate(GateId::AppDrawn, app_drawn(&shot, region, &sock))?;
    }
    let a = x11::write_artifact(snap_tmp, SNAPSHOT_SCREEN, &shot).map_err(|e| x11_err(run, e))?;
    Ok(Some(a))
}

/// The `app-drawn` gate of the snapshot's reference screen `shot`: the profile's input region
/// holds more than one colour. A region of one colour is what an application whose window is
/// not mapped yet leaves (e.g. Tk stalled before its first map): a reference like that would
/// let `pixels-equal` pass on an empty screen and `input-reaches-app` on the window appearing
/// rather than on the key.
fn app_drawn(shot: &Screenshot, region: Rect, socket: &Path) -> Observed {
    match x11::region_other_pixels(shot, region) {
        None => Err(format!(
            "display.input region {region} lies outside the {}x{} screen: fix the profile",
            shot.width, shot.height
        )),
        Some((0, [r, g, b])) => Err(format!(
            "display.input region {region} of the screen is one colour (#{r:02x}{g:02x}{b:02x}): the application's window is not drawn there: either it is not mapped yet (wait until it is, then snapshot again), or the profile's `display.input` region {region} is not where the application draws (compare it with screen.png in this verb's evidence, the screen seen, and fix the region in the slot profile). If it stays unmapped, the application may be waiting for an X event (the desktop image's Tk app can stall so at start-up under load): one key that draws nothing wakes it, e.g. `ln -s {} /tmp/.X11-unix/X99 && DISPLAY=:99 xdotool key shift; rm /tmp/.X11-unix/X99` (xdotool from Debian's package)",
            crate::shell::arg(socket)
        )),
        Some((n, _)) => Ok(format!(
            "display.input region {region}: {n} of {} pixels differ from its first pixel's colour",
            u64::from(region.width.min(shot.width.saturating_sub(region.x)))
                * u64::from(region.height.min(shot.height.saturating_sub(region.y)))
        )),
    }
}

/// restore/reset, after the network gate: `pixels-equal` against the snapshot's
/// `screen.png` (copied into the evidence as `screen-snapshot.png`), then `input-reaches-app`
/// when the profile names an input probe. Nothing when the profile has no display.
///
/// `bufs`: whole-screen memory prepared while the X server was restored ([`prepare_buffers`]),
/// used for the two whole-screen images. The input probe's key is sent as soon as the screen
/// for `pixels-equal` has been read (before that screen is compared), so the application
/// draws while the pixel gate works; `input-reaches-app` is still recorded only after
/// `pixels-equal` passed, and a restore whose pixel gate fails is stopped anyway.
///
/// Errors: a failed gate (diff PNG, count and bounding box in the detail), X11 or I/O failures.
pub(crate) fn restored_gates(
    run: &mut VerbRun,
    st: &SlotState,
    pid: i32,
    snap_dir: &Path,
    bufs: Option<ScreenBuffers>,
) -> Result<(), SlotError> {
    let Some(ds) = spec(st) else { return Ok(()) };
    let t = std::time::Instant::now();
    let reference = proven_reference(run, st, snap_dir)?;
    let dir = ev_dir(run);
    let before = copy_reference(run, &reference, &dir)?;
    let d = connect(run, GateId::PixelsEqual, pid, ds.number, LATER_CONNECT)?;
    if let Some(b) = bufs {
        if let Some(e) = b.shm_error() {
            run.fact("display_buffers_error", e);
        }
        d.adopt_buffers(b);
    }
    let shot = d.screenshot().map_err(|e| x11_err(run, e))?;
    // The key goes out now; its gate waits below, after pixels-equal passed.
    let key = ds
        .input
        .and_then(|inp| x11::ascii_keysym(inp.key))
        .map(|k| (k, std::time::Instant::now(), d.press_key(k)));
    run.fact("display_images", d.image_transfer());
    let mut px = x11::pixel_gate_png(&reference, &shot, &dir, "screen-after")
        .map_err(|e| x11_err(run, e))?;
    px.pngs.insert(0, before);
    // The verb's own word: "the screen after reset" at reset.
    px.detail = format!("the screen after {}: {}", run.verb(), px.detail);
    run.took("pixels-equal", t);
    if let Some((k, _, sent)) = &key {
        // Said either way: when pixels-equal fails, the key reached the guest all the same.
        run.fact(
            "display_input_key_sent",
            match sent {
                Ok(()) => format!(
                    "keysym 0x{k:x} sent through XTEST once the screen for pixels-equal was read, before that gate was decided"
                ),
                Err(e) => format!("keysym 0x{k:x} could not be sent: {e}"),
            },
        );
    }
    // A signal seen during the pixel gate stops the verb before the input gate's wait.
    crate::ns::cleanup::checkpoint();
    // `display-gates.json` is written once, with every record of this verb (evidence is never
    // overwritten): after the pixel gate when it failed or there is no input probe, else after
    // the input gate.
    let input = ds.input.filter(|_| px.passed);
    let Some(inp) = input else {
        keep(run, &[&px]);
        return gate_of(run, GateId::PixelsEqual, &px);
    };
    gate_of(run, GateId::PixelsEqual, &px)?;
    match input_gate(run, &d, inp, key, &shot, &dir) {
        Ok(r) => {
            keep(run, &[&px, &r]);
            gate_of(run, GateId::InputReachesApp, &r)
        }
        Err(e) => {
            keep(run, &[&px]);
            Err(e)
        }
    }
}

/// The snapshot's `screen.png`, read once and proven against the sha256 `state.json` records
/// for it (`snapshot-complete` proved the file; these are the bytes compared and copied).
///
/// Errors: gate `pixels-equal` when the file cannot be read or its sha256 differs.
fn proven_reference(
    run: &mut VerbRun,
    st: &SlotState,
    snap_dir: &Path,
) -> Result<Vec<u8>, SlotError> {
    let want = st
        .snapshot
        .as_ref()
        .and_then(|s| s.screen.as_ref())
        .map(|a| a.sha256.as_str());
    let path = snap_dir.join(SNAPSHOT_SCREEN);
    crate::evidence::read_recorded(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| {
            let sha = crate::evidence::sha256_hex(&b);
            match want {
                Some(w) if w == sha => Ok(b),
                _ => Err(format!(
                    "read with sha256 {sha}, not the {} that state.json records",
                    want.unwrap_or("(none)")
                )),
            }
        })
        .map_err(|e| {
            run.fail(
                GateId::PixelsEqual,
                format!(
                    "the snapshot has no readable {SNAPSHOT_SCREEN} ({}): {e}",
                    path.display()
                ),
            )
        })
}

/// Whole-screen memory for the restore gates of a slot with a display: prepared on a thread
/// (started here, joined by the returned handle, also on drop) while the runtime restores the
/// container; `None` without a display. See [`crate::x11::ScreenBuffers`].
pub(crate) fn prepare_buffers(st: &SlotState) -> Option<PreparedBuffers> {
    let ds = spec(st)?;
    let (w, h) = (ds.width, ds.height);
    // Two whole-screen images: pixels-equal's screen, and the input gate's screen after the key.
    Some(PreparedBuffers(Some(std::thread::spawn(move || {
        ScreenBuffers::prepare(w, h, 2)
    }))))
}

/// The thread preparing [`ScreenBuffers`] ([`prepare_buffers`]); joined by [`Self::join`], or
/// on drop when a failed restore never used them.
pub(crate) struct PreparedBuffers(Option<std::thread::JoinHandle<ScreenBuffers>>);

impl PreparedBuffers {
    /// The buffers (waiting for the thread); `None` if it panicked.
    pub(crate) fn join(mut self) -> Option<ScreenBuffers> {
        self.0.take().and_then(|h| h.join().ok())
    }
}

impl Drop for PreparedBuffers {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// The snapshot's reference PNG (`bytes`, as proven) written into the verb's evidence as
/// `screen-snapshot.png` (atomic, never overwriting; same sha256 as the snapshot's file).
///
/// Errors: step `display` could not run (the write failed).
fn copy_reference(run: &VerbRun, bytes: &[u8], dir: &Path) -> Result<PngArtifact, SlotError> {
    const NAME: &str = "screen-snapshot.png";
    let a = run.ev_write_artifact(NAME, bytes).ok_or_else(|| {
        let why = format!("{NAME} could not be written into {}", dir.display());
        run.step_err(StepId::Display, StepError::Tool(why))
    })?;
    Ok(PngArtifact {
        file: a.path,
        sha256: a.sha256,
    })
}

/// `input-reaches-app`: the profile's key through XTEST must change its region of `shot`.
/// `key`: the keysym, when it was sent, and how the sending went (sent by the caller as soon as
/// `shot` was read); `None` when the probe's key is not printable ASCII.
fn input_gate(
    run: &mut VerbRun,
    d: &Display,
    inp: crate::profile::InputProbe,
    key: Option<(u32, std::time::Instant, Result<(), X11Error>)>,
    shot: &Screenshot,
    dir: &Path,
) -> Result<GateRecord, SlotError> {
    let t = std::time::Instant::now();
    let Some((key, pressed, sent)) = key else {
        return Err(run.fail(
            GateId::InputReachesApp,
            format!("display.input.key {:?} is not printable ASCII", inp.key),
        ));
    };
    sent.map_err(|e| x11_err(run, e))?;
    let region = Rect {
        x: inp.x,
        y: inp.y,
        width: inp.width,
        height: inp.height,
    };
    let r = x11::input_gate_pressed(
        d,
        key,
        region,
        shot,
        x11::KeyPressed {
            at: pressed,
            timeout: INPUT_TIMEOUT,
        },
        dir,
        "screen-input",
    )
    .map_err(|e| x11_err(run, e))?;
    run.took("input-reaches-app", t);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_region_of_one_colour_is_not_drawn() {
        let (w, h) = (40u32, 30u32);
        let mut shot = Screenshot::new(w, h, vec![0; (w * h * 3) as usize]).unwrap();
        let region = Rect {
            x: 10,
            y: 5,
            width: 20,
            height: 10,
        };
        // Black everywhere (an unmapped window over the root's background): refused.
        let e = app_drawn(&shot, region, Path::new("/proc/1/root/tmp/.X11-unix/X0")).unwrap_err();
        assert!(
            e.contains("one colour (#000000)")
                && e.contains("snapshot again")
                && e.contains("ln -s /proc/1/root/tmp/.X11-unix/X0 /tmp/.X11-unix/X99"),
            "{e}"
        );
        // A drawn pixel outside the region changes nothing; inside it, the gate passes.
        shot.rgb[0] = 255;
        assert!(app_drawn(&shot, region, Path::new("/proc/1/root/tmp/.X11-unix/X0")).is_err());
        let i = ((7 * w + 12) * 3) as usize;
        shot.rgb[i..i + 3].copy_from_slice(&[255, 255, 255]);
        let d = app_drawn(&shot, region, Path::new("/proc/1/root/tmp/.X11-unix/X0")).unwrap();
        assert_eq!(
            d,
            "display.input region x 10 y 5, 20x10: 1 of 200 pixels differ from its first pixel's colour"
        );
        // A region outside the screen is the profile's mistake.
        let off = Rect {
            x: 50,
            y: 0,
            width: 5,
            height: 5,
        };
        assert!(
            app_drawn(&shot, off, Path::new("/proc/1/root/tmp/.X11-unix/X0"))
                .unwrap_err()
                .contains("outside the 40x30 screen")
        );
    }
}
