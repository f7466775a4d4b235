//! One streaming pass over a log for many line-count queries (`grep -c -F` semantics).
//!
//! A regular file is searched through a read-only mapping of a few MiB at a time
//! ([`scan_file_mapped`]: no copy out of the page cache); a log stored compressed is decoded
//! and read in fixed chunks ([`scan_reader`]). Either way every search runs over whole lines
//! only: a line cut by a window's or chunk's end is searched with the next one. All distinct
//! needles (patterns, anchors, excludes) are compiled into one [`aho_corasick::AhoCorasick`]
//! automaton, and a SIMD searcher over one rare infix per needle finds the next line that may
//! hold a needle (`Prefilter`); only that line is then searched with an overlapping automaton to learn every
//! needle it holds, and the line is applied to every query at once (a line counts once).
//! So the cost per byte does not grow with the number of queries. Memory is the window (or
//! chunk) plus the longest line, and a line longer than [`MAX_LINE`] is an error.

use aho_corasick::{AhoCorasick, Input, MatchKind, Span, packed};
use std::io::{self, Read};
use std::path::Path;

/// Read size of [`scan_log`] for a compressed log, bytes (256 KiB: a chunk stays in L2 while
/// its candidate lines are searched again).
pub const DEFAULT_CHUNK: usize = 256 << 10;

/// Longest line the scanner accepts, bytes (64 MiB). CRIU log lines are short; a longer line
/// means the file is not a log, and scanning fails (closed) instead of growing without bound.
pub const MAX_LINE: usize = 64 << 20;

/// One query: count the lines containing `pattern` and none of `exclude`, optionally only the
/// lines strictly after the first line containing `after` and strictly before the first line
/// containing `before`.
/// With an `after` anchor that never appears the count is 0; with a `before` anchor that never
/// appears the scope runs to the end of the log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogQuery {
    /// Literal bytes to find (no newline, not empty).
    pub pattern: String,
    /// Scope start anchor (literal, no newline, not empty).
    pub after: Option<String>,
    /// Scope end anchor (literal, no newline, not empty).
    pub before: Option<String>,
    /// A matching line that also contains any of these literals is not counted (e.g. CRIU's
    /// `No netns-ct-10.img image` when counting `No netns-`).
    pub exclude: Vec<String>,
}

impl LogQuery {
    /// A query with no scope: all lines containing `pattern`.
    pub fn new(pattern: impl Into<String>) -> LogQuery {
        LogQuery {
            pattern: pattern.into(),
            after: None,
            before: None,
            exclude: Vec::new(),
        }
    }
}

/// Counts, for each query, the lines of the log at `path` matching it, in one streaming pass:
/// a regular file (no symbolic link) through [`DEFAULT_WINDOW`]-byte mappings
/// ([`scan_file_mapped`]); a log stored compressed (only `<path>.zst` there) as it decodes,
/// in [`DEFAULT_CHUNK`]-byte reads ([`crate::evidence::compressed::open_content`]).
///
/// Returns one count per query, in order. Errors: the file cannot be opened or read;
/// `InvalidInput` for an empty pattern/anchor, a newline in one, or a line over [`MAX_LINE`].
pub fn scan_log(path: &Path, queries: &[LogQuery]) -> io::Result<Vec<u64>> {
    match crate::evidence::fsio::open_regular(path, false) {
        Ok(file) => scan_file_mapped(&file, queries, DEFAULT_WINDOW),
        // Only `<path>.zst` there: scanned as it decodes.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            scan_log_with_chunk(path, queries, DEFAULT_CHUNK)
        }
        Err(e) => Err(e),
    }
}

/// Size of the file window [`scan_log`] maps at a time, bytes (4 MiB). Searching the page
/// cache through a mapping skips the copy `read(2)` makes into a buffer, which is most of a
/// single-pattern scan's cost here; a window is unmapped before the next is mapped, so the
/// resident set stays one window whatever the log's size.
pub const DEFAULT_WINDOW: usize = 4 << 20;

/// [`scan_log`]'s pass over the open regular file `file`, mapped `window` bytes at a time
/// (rounded up to whole pages; tests use one page to cross many window boundaries). A line
/// that crosses a window's end is searched in the next window, which starts at that line's
/// page; a line longer than the window doubles it, up to [`MAX_LINE`].
///
/// The file must not shrink during the scan (the logs scanned are written by processes that
/// have exited; a shrinking file would fault on the pages cut off, as any mapped reader does).
/// Returns one count per query. Errors: `fstat` or `mmap` fails; `InvalidInput` as for
/// [`scan_log`]; `window == 0`.
pub fn scan_file_mapped(
    file: &std::fs::File,
    queries: &[LogQuery],
    window: usize,
) -> io::Result<Vec<u64>> {
    if window == 0 {
        return Err(invalid("window size 0".into()));
    }
    let mut matcher = compile(queries)?;
    if queries.is_empty() {
        return Ok(Vec::new());
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut window = window.div_ceil(page) * page;
    let len = file.metadata()?.len();
    let mut pos: u64 = 0; // start of the first line not yet searched
    while pos < len && !matcher.all_done() {
        let off = pos - pos % page as u64;
        let skip = (pos - off) as usize;
        let map_len = (len - off).min(window as u64) as usize;
        // SAFETY: a read-only private mapping of a regular file; see the doc above on the
        // file shrinking meanwhile.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(off)
                .len(map_len)
                .populate()
                .map(file)?
        };
        let region = &map[skip..];
        if off + map_len as u64 == len {
            // The window reaches the end of the file: everything left, last line included.
            matcher.region(region);
            break;
        }
        match memchr::memrchr(b'\n', region) {
            Some(i) => {
                matcher.region(&region[..=i]);
                pos += i as u64 + 1;
            }
            None if region.len() > MAX_LINE => {
                return Err(invalid(format!(
                    "a line is longer than {MAX_LINE} bytes; not a log"
                )));
            }
            None => window *= 2,
        }
    }
    Ok(matcher.qs.iter().map(|q| q.count).collect())
}

/// [`scan_log`] with an explicit read size in bytes (≥ 1; tests use tiny ones such as 7).
///
/// Errors: as [`scan_log`]; `InvalidInput` for `chunk == 0`.
pub fn scan_log_with_chunk(
    path: &Path,
    queries: &[LogQuery],
    chunk: usize,
) -> io::Result<Vec<u64>> {
    // A log stored compressed (`<path>.zst`) is scanned as it decodes.
    let file = crate::evidence::compressed::open_content(path, false)?;
    scan_reader(file, queries, chunk)
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn check_needle(kind: &str, s: &str) -> io::Result<()> {
    if s.is_empty() {
        return Err(invalid(format!("empty {kind} in log query")));
    }
    if s.contains('\n') {
        return Err(invalid(format!(
            "{kind} {s:?} contains a newline; log queries match within one line"
        )));
    }
    Ok(())
}

/// The compiled queries and the per-line bookkeeping of one scan.
struct Matcher {
    /// Finds the next line that may hold a needle (see [`Prefilter`]).
    candidates: Prefilter,
    /// Lists every needle in one candidate line, overlapping ones included (a pattern that is
    /// a substring of another, a pattern equal to an anchor).
    all: AhoCorasick,
    /// Per needle: the number of the last candidate line it occurred in (0 = none yet).
    seen_in: Vec<u64>,
    /// Number of the current candidate line (starts at 1).
    line_no: u64,
    /// Per needle: it was seen on an earlier line (only read for anchors).
    anchor_seen: Vec<bool>,
    /// Needle ids used as anchors.
    anchors: Vec<usize>,
    qs: Vec<Query>,
}

impl Matcher {
    fn has(&self, needle: usize) -> bool {
        self.seen_in[needle] == self.line_no
    }

    /// Applies one line (`line`, no newline needed) that holds at least one needle.
    fn line(&mut self, line: &[u8]) {
        self.line_no += 1;
        let no = self.line_no;
        for m in self.all.find_overlapping_iter(line) {
            self.seen_in[m.pattern().as_usize()] = no;
        }
        for i in 0..self.qs.len() {
            let q = &self.qs[i];
            if q.done {
                continue;
            }
            if q.before.is_some_and(|b| self.has(b)) {
                // The first line holding the end anchor: out of scope, and so is the rest.
                self.qs[i].done = true;
                continue;
            }
            let in_scope = q.after.is_none_or(|a| self.anchor_seen[a]);
            if in_scope && self.has(q.pattern) && !q.exclude.iter().any(|&x| self.has(x)) {
                self.qs[i].count += 1;
            }
        }
        // Anchors take effect from the next line on (scopes are strictly after/before).
        for &a in &self.anchors {
            if self.seen_in[a] == no {
                self.anchor_seen[a] = true;
            }
        }
    }

    fn all_done(&self) -> bool {
        !self.qs.is_empty() && self.qs.iter().all(|q| q.done)
    }

    /// Counts matches in one region of whole lines (`region` ends with a newline, except the
    /// last line of a file without one). Returns early once every query is done.
    fn region(&mut self, region: &[u8]) {
        let len = region.len();
        let mut pos = 0usize; // always at the start of a line
        while pos < len {
            let Some(m) = self.candidates.find(region, pos) else {
                return;
            };
            let p = m.start();
            let start = memchr::memrchr(b'\n', &region[pos..p]).map_or(pos, |i| pos + i + 1);
            let end = memchr::memchr(b'\n', &region[m.end()..]).map_or(len, |i| m.end() + i + 1);
            self.line(&region[start..end]);
            if self.all_done() {
                return;
            }
            pos = end;
        }
    }
}

struct Query {
    pattern: usize,
    after: Option<usize>,
    before: Option<usize>,
    exclude: Vec<usize>,
    count: u64,
    done: bool,
}

/// Compiles `queries` into one [`Matcher`] over their distinct needles.
fn compile(queries: &[LogQuery]) -> io::Result<Matcher> {
    let mut needles: Vec<&str> = Vec::new();
    let mut anchors: Vec<usize> = Vec::new();
    let mut qs: Vec<Query> = Vec::with_capacity(queries.len());
    for q in queries {
        check_needle("pattern", &q.pattern)?;
        let pattern = intern(&q.pattern, &mut needles);
        let after = anchor("after anchor", &q.after, &mut needles, &mut anchors)?;
        let before = anchor("before anchor", &q.before, &mut needles, &mut anchors)?;
        let mut exclude = Vec::new();
        for x in &q.exclude {
            check_needle("exclude", x)?;
            exclude.push(intern(x, &mut needles));
        }
        qs.push(Query {
            pattern,
            after,
            before,
            exclude,
            count: 0,
            done: false,
        });
    }
    let build = |kind: MatchKind| {
        AhoCorasick::builder()
            .match_kind(kind)
            .build(&needles)
            .map_err(|e| invalid(format!("log query needles: {e}")))
    };
    Ok(Matcher {
        candidates: Prefilter::new(&needles)?,
        all: build(MatchKind::Standard)?,
        seen_in: vec![0; needles.len()],
        line_no: 0,
        anchor_seen: vec![false; needles.len()],
        anchors,
        qs,
    })
}

/// Finds lines that may hold a needle: one short, rare "filter" infix per needle (needles that
/// contain another needle need none), searched with the SIMD "Teddy" searcher of
/// `aho_corasick::packed` (256-bit when the CPU has AVX2). Every line holding a needle holds
/// its filter, so no line is missed; a line holding only a filter is searched in full and
/// applies nothing. Why infixes: Teddy fingerprints the first 3 bytes of each literal, and a
/// needle's prefix can be frequent (`Dump…` starts many CRIU lines) while an infix (`NET`) is
/// rare; measured on the bench's CRIU-style log, rare infixes run ~1.5x faster than the full
/// needles through the same searcher.
enum Prefilter {
    /// A single filter: `memchr::memmem` (its rare-byte-pair SIMD loop beats Teddy for one
    /// literal: ~1.5x here).
    One(memchr::memmem::Finder<'static>),
    /// The packed SIMD searcher over the filters.
    Packed(packed::Searcher),
    /// Fallback when no packed searcher can be built (e.g. no SSSE3): an automaton over the
    /// filters.
    Automaton(AhoCorasick),
}

/// Length of a filter infix, bytes: Teddy fingerprints 3 bytes; the rest is verified by the
/// searcher and cuts false candidates.
const FILTER_LEN: usize = 6;

/// Heuristic rank of a byte in CRIU logs (lower = rarer): uppercase letters are rare,
/// punctuation other than `( ) . : / -` fairly rare, digits, hex letters, `x` (in `0x…`),
/// space and common lowercase letters frequent.
fn byte_rank(b: u8) -> u32 {
    match b {
        b'A'..=b'Z' => 1,
        b'g' | b'j' | b'k' | b'q' | b'v' | b'w' | b'y' | b'z' => 2,
        b'(' | b')' | b'.' | b':' | b'/' | b'-' => 3,
        b'0'..=b'9' | b'a'..=b'f' | b'x' | b' ' | b'\t' => 5,
        b'h' | b'i' | b'l' | b'm' | b'n' | b'o' | b'p' | b'r' | b's' | b't' | b'u' => 4,
        _ => 2,
    }
}

/// The rarest `FILTER_LEN`-byte infix of `needle` by the summed [`byte_rank`] of its first 3
/// bytes (the Teddy fingerprint); the whole needle when shorter.
fn filter_of(needle: &[u8]) -> &[u8] {
    if needle.len() <= FILTER_LEN {
        return needle;
    }
    let start = (0..=needle.len() - FILTER_LEN)
        .min_by_key(|&i| needle[i..i + 3].iter().map(|&b| byte_rank(b)).sum::<u32>())
        .unwrap_or(0);
    &needle[start..start + FILTER_LEN]
}

impl Prefilter {
    fn new(needles: &[&str]) -> io::Result<Prefilter> {
        let mut filters: Vec<&[u8]> = Vec::new();
        for (i, n) in needles.iter().enumerate() {
            // A needle holding another needle is covered by that one's filter.
            let covered = needles
                .iter()
                .enumerate()
                .any(|(j, m)| j != i && n.contains(m) && (n.len() > m.len() || j < i));
            if covered {
                continue;
            }
            let f = filter_of(n.as_bytes());
            if !filters.contains(&f) {
                filters.push(f);
            }
        }
        if let [one] = filters[..] {
            return Ok(Prefilter::One(
                memchr::memmem::Finder::new(one).into_owned(),
            ));
        }
        let mut cfg = packed::Config::new();
        cfg.match_kind(packed::MatchKind::LeftmostFirst);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            cfg.only_teddy_256bit(Some(true));
        }
        if let Some(s) = cfg.builder().extend(&filters).build() {
            return Ok(Prefilter::Packed(s));
        }
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&filters)
            .map(Prefilter::Automaton)
            .map_err(|e| invalid(format!("log query needles: {e}")))
    }

    /// The first filter match in `region[pos..]`.
    fn find(&self, region: &[u8], pos: usize) -> Option<aho_corasick::Match> {
        match self {
            Prefilter::One(f) => f
                .find(&region[pos..])
                .map(|i| aho_corasick::Match::must(0, pos + i..pos + i + f.needle().len())),
            Prefilter::Packed(s) => s.find_in(region, Span::from(pos..region.len())),
            Prefilter::Automaton(a) => a.find(Input::new(region).span(pos..region.len())),
        }
    }
}

/// [`scan_log`] over any reader (a file, a byte slice), reading `chunk` bytes at a time.
///
/// Errors: read errors of `reader`; `InvalidInput` as for [`scan_log`].
pub fn scan_reader<R: Read>(
    mut reader: R,
    queries: &[LogQuery],
    chunk: usize,
) -> io::Result<Vec<u64>> {
    if chunk == 0 {
        return Err(invalid("chunk size 0".into()));
    }
    let mut matcher = compile(queries)?;
    if queries.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf: Vec<u8> = vec![0u8; chunk];
    let mut carry = 0usize; // bytes of an incomplete line at buf[..carry]
    loop {
        if buf.len() < carry + chunk {
            if carry > MAX_LINE {
                return Err(invalid(format!(
                    "a line is longer than {MAX_LINE} bytes; not a log"
                )));
            }
            buf.resize(carry + chunk, 0);
        }
        let n = loop {
            match reader.read(&mut buf[carry..carry + chunk]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        let filled = carry + n;
        if n == 0 {
            // EOF: the carried bytes are the last line (no trailing newline).
            if carry > 0 {
                matcher.region(&buf[..carry]);
            }
            break;
        }
        // Whole lines end at the last newline of the new bytes.
        match memchr::memrchr(b'\n', &buf[carry..filled]) {
            Some(i) => {
                let end = carry + i + 1;
                matcher.region(&buf[..end]);
                buf.copy_within(end..filled, 0);
                carry = filled - end;
            }
            None => carry = filled,
        }
        if matcher.all_done() {
            break;
        }
    }
    Ok(matcher.qs.iter().map(|q| q.count).collect())
}

/// Interns an optional anchor `s` into `needles` and records its id in `anchors`.
fn anchor<'q>(
    kind: &str,
    s: &'q Option<String>,
    needles: &mut Vec<&'q str>,
    anchors: &mut Vec<usize>,
) -> io::Result<Option<usize>> {
    let Some(s) = s else { return Ok(None) };
    check_needle(kind, s)?;
    let id = intern(s, needles);
    if !anchors.contains(&id) {
        anchors.push(id);
    }
    Ok(Some(id))
}

/// Index of `s` in `v`, appending it if new.
fn intern<'q>(s: &'q str, v: &mut Vec<&'q str>) -> usize {
    v.iter().position(|n| *n == s).unwrap_or_else(|| {
        v.push(s);
        v.len() - 1
    })
}
