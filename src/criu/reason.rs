//! CRIU's reason for a failure, quoted from its own log (`dump.log` / `restore.log`): the
//! `Error (file:line): …` lines and the few lines just before each, with their line numbers —
//! the way runc quotes CRIU's log on a failed checkpoint/restore since runc#3816.
//!
//! Line shape (CRIU 4.x, `-v4`): `(00.012345) Error (criu/sk-inet.c:188): inet: Connected TCP
//! socket, consider using --tcp-established option.`; a restore's forked tasks prefix their own
//! pid: `pie: 12: Error (criu/…)`.

use std::path::Path;

/// Lines quoted before each `Error (` line.
pub const CONTEXT_LINES: usize = 3;

/// At most this many lines are quoted (the first errors are the deciding ones; later ones are
/// usually the unwinding that follows).
pub const MAX_LINES: usize = 12;

/// One quoted log line: 1-based line number and its text (lossy UTF-8, trailing `\r` removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// 1-based line number in the log file.
    pub number: usize,
    /// The line's text.
    pub text: String,
}

/// `Error (` lines CRIU logs and goes on after, in every successful dump and restore too: not
/// its reason when another error is there. Each: a substring of the line, and why.
pub const NOT_FATAL: &[(&str, &str)] = &[(
    "rlimit: Can't setup RLIMIT_NOFILE",
    "criu/util.c rlimit_unlimit_nofile(): CRIU could not raise its own open-files limit and continues (logged by every successful dump and restore on this machine kind)",
)];

/// The deciding lines of a CRIU log: every line holding `Error (` — but one of [`NOT_FATAL`]
/// when another is there —, each preceded by up to [`CONTEXT_LINES`] lines, in file order,
/// without repeats, at most [`MAX_LINES`] lines. Empty when the log holds no `Error (` line.
/// Found with `memchr::memmem` (one pass over the bytes).
pub fn deciding_lines(log: &[u8]) -> Vec<LogLine> {
    let finder = memchr::memmem::Finder::new(b"Error (");
    // Line start offsets, computed once (memchr over the newlines).
    let mut starts = vec![0usize];
    starts.extend(memchr::memchr_iter(b'\n', log).map(|i| i + 1));
    let line_of = |off: usize| starts.partition_point(|&s| s <= off) - 1;
    let line_text = |l: usize| {
        let end = starts
            .get(l + 1)
            .map_or(log.len(), |&e| e.saturating_sub(1));
        &log[starts[l]..end.max(starts[l])]
    };
    let not_fatal = |l: usize| {
        let t = line_text(l);
        NOT_FATAL
            .iter()
            .any(|(s, _)| memchr::memmem::find(t, s.as_bytes()).is_some())
    };
    let errors: Vec<usize> = finder.find_iter(log).map(line_of).collect();
    let fatal: Vec<usize> = errors.iter().copied().filter(|&l| !not_fatal(l)).collect();
    let chosen = if fatal.is_empty() { errors } else { fatal };
    let mut wanted: Vec<usize> = Vec::new();
    for l in chosen {
        let from = l.saturating_sub(CONTEXT_LINES);
        for i in from..=l {
            if wanted.last().is_none_or(|&last| i > last) {
                wanted.push(i);
            }
        }
        if wanted.len() >= MAX_LINES {
            break;
        }
    }
    wanted.truncate(MAX_LINES);
    wanted
        .into_iter()
        .map(|i| {
            let end = starts.get(i + 1).map_or(log.len(), |&e| e - 1);
            let text = String::from_utf8_lossy(&log[starts[i]..end.max(starts[i])]);
            LogLine {
                number: i + 1,
                text: text.trim_end_matches('\r').to_string(),
            }
        })
        .collect()
}

/// The deciding lines of the CRIU log at `path`, rendered for a message:
/// `"CRIU's reason (PATH):\n  1234: (00.01) Error (…): …\n  …"` — or, when its only errors are
/// [`NOT_FATAL`] ones, a head saying they are not the reason. `None` when the log cannot be read
/// or holds no `Error (` line.
pub fn quote_log(path: &Path) -> Option<String> {
    let bytes = crate::evidence::read_recorded(path).ok()?;
    let lines = deciding_lines(&bytes);
    if lines.is_empty() {
        return None;
    }
    // Only errors CRIU logs and goes on after (its run may well have succeeded): quoted, but
    // never called its reason.
    let fatal = lines
        .iter()
        .any(|l| l.text.contains("Error (") && !NOT_FATAL.iter().any(|(n, _)| l.text.contains(n)));
    let mut s = if fatal {
        format!("CRIU's reason ({}):", path.display())
    } else {
        format!(
            "CRIU's log ({}) holds no error of its own, only one it logs and goes on after in every successful run (not the reason: look at the runtime's own message):",
            path.display()
        )
    };
    for l in lines {
        s.push_str(&format!("\n  {}: {}", l.number, l.text));
    }
    if let Some(d) = no_space_diagnosis(&bytes, path) {
        s.push_str(&format!("\n{d}"));
    }
    Some(s)
}

/// When the log says a write found no space (`No space left on device`, ENOSPC): the first such
/// line, and the space free now on the filesystem of the log's folder (`statvfs`, bytes
/// available to root's unprivileged callers: `f_bavail × f_frsize`), with the fix.
fn no_space_diagnosis(log: &[u8], path: &Path) -> Option<String> {
    let off = memchr::memmem::find(log, b"No space left on device")?;
    let line = memchr::memchr_iter(b'\n', &log[..off]).count() + 1;
    let dir = path.parent().unwrap_or(Path::new("."));
    let free = match nix::sys::statvfs::statvfs(dir) {
        Ok(v) => format!(
            "{} bytes free now",
            v.blocks_available().saturating_mul(v.fragment_size())
        ),
        Err(e) => format!("its free space unknown: statvfs: {e}"),
    };
    Some(format!(
        "diagnosis: a write failed with ENOSPC (line {line}: No space left on device): the filesystem CRIU writes its images and logs to is full (that of {}: {free}); free space there, then run again",
        dir.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_with_context_and_line_numbers() {
        let log = b"(0.1) a\n(0.2) b\n(0.3) c\n(0.4) d\n(0.5) Error (criu/sk-inet.c:188): inet: Connected TCP socket, consider using --tcp-established option.\n(0.6) e\n(0.7) Error (criu/cr-dump.c:2100): Dumping FAILED.\n";
        let l = deciding_lines(log);
        let nums: Vec<usize> = l.iter().map(|x| x.number).collect();
        assert_eq!(nums, [2, 3, 4, 5, 6, 7]);
        assert!(l[3].text.contains("Connected TCP socket"));
        assert!(l[5].text.ends_with("Dumping FAILED."));
    }

    #[test]
    fn a_not_fatal_error_is_quoted_only_when_it_is_the_only_one() {
        let rl = "(0.1) Error (criu/util.c:1532): rlimit: Can't setup RLIMIT_NOFILE for self: Operation not permitted\n";
        let l = deciding_lines(rl.as_bytes());
        assert_eq!(l.len(), 1, "{l:?}");
        let log = format!(
            "{rl}(0.2) a\n(0.3) b\n(0.4) c\n(0.5) d\n(0.6) Error (criu/image.c:9): write: No space left on device\n"
        );
        let l = deciding_lines(log.as_bytes());
        let nums: Vec<usize> = l.iter().map(|x| x.number).collect();
        assert_eq!(nums, [3, 4, 5, 6], "{l:?}");
        // Quoted alone, it is not called CRIU's reason (trial 21: runc failed after a CRIU
        // restore that succeeded, and the message blamed this line).
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("restore.log");
        std::fs::write(&p, rl).unwrap();
        let q = quote_log(&p).unwrap();
        assert!(
            q.starts_with("CRIU's log (")
                && q.contains("holds no error of its own")
                && !q.contains("CRIU's reason"),
            "{q}"
        );
        std::fs::write(&p, &log).unwrap();
        assert!(quote_log(&p).unwrap().starts_with("CRIU's reason ("));
    }

    #[test]
    fn a_full_disk_is_diagnosed_with_the_line_and_the_free_space() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("dump.log");
        std::fs::write(
            &p,
            b"(0.1) x\n(0.2) Error (criu/image.c:9): write: No space left on device\n",
        )
        .unwrap();
        let q = quote_log(&p).unwrap();
        let diag = q.lines().last().unwrap();
        assert!(
            diag.starts_with(
                "diagnosis: a write failed with ENOSPC (line 2: No space left on device)"
            ) && diag.contains(&format!("that of {}: ", d.path().display()))
                && diag.contains(" bytes free now); free space there, then run again"),
            "{q}"
        );
        std::fs::write(&p, b"(0.2) Error (criu/x.c:1): other\n").unwrap();
        assert!(!quote_log(&p).unwrap().contains("diagnosis"));
    }

    #[test]
    fn no_error_no_lines_and_bounded() {
        assert!(deciding_lines(b"(0.1) fine\n(0.2) Warn (x): y\n").is_empty());
        let many: String = (0..100).map(|i| format!("Error (x:{i}): e\n")).collect();
        assert_eq!(deciding_lines(many.as_bytes()).len(), MAX_LINES);
        // Last line without a newline; first line an error.
        let l = deciding_lines(b"Error (a:1): first\nx\nError (b:2): last");
        assert_eq!(l.len(), 3);
        assert_eq!(l[2].text, "Error (b:2): last");
        assert_eq!(l[0].number, 1);
    }
}
