//! stdout for every command (the CLI's and the library's handlers: `images`, `matrix`): a closed stdout (EPIPE, e.g. `netprobe slot status … | head`) is
//! not an error. The reader wanted no more, so the rest of the output is dropped quietly and the
//! command ends with its own exit code; any other write error is reported once on stderr.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout (and a newline when `newline`), flushed. Never panics.
pub fn emit(text: &str, newline: bool) {
    emit_bytes(text.as_bytes(), newline);
}

/// [`emit`] of bytes (a file copied to stdout in blocks, whatever their UTF-8 boundaries).
fn emit_bytes(bytes: &[u8], newline: bool) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    let r = o
        .write_all(bytes)
        .and_then(|()| if newline { o.write_all(b"\n") } else { Ok(()) })
        .and_then(|()| o.flush());
    if let Err(e) = r {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("netprobe: writing to stdout: {e}");
        }
    }
}

/// Copies `r` to stdout in 64 KiB blocks (a written table printed without holding it whole),
/// tolerating a closed stdout like [`raw`].
///
/// Errors: reading `r`.
pub fn copy(mut r: impl std::io::Read) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        emit_bytes(&buf[..n], false);
    }
}

/// `println!` that tolerates a closed stdout.
pub fn line(text: impl AsRef<str>) {
    emit(text.as_ref(), true);
}

/// `print!` that tolerates a closed stdout.
pub fn raw(text: impl AsRef<str>) {
    emit(text.as_ref(), false);
}
