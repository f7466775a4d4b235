//! The log scanner against a naive line-by-line reference (grep -c -F semantics).

use netprobe::assert::{LogQuery, scan_file_mapped, scan_log, scan_log_with_chunk, scan_reader};
use std::io::Write;

/// Reference: split into lines, apply scope, count lines containing the pattern.
fn naive(log: &[u8], q: &LogQuery) -> u64 {
    let text = String::from_utf8_lossy(log);
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    if text.is_empty() {
        lines.clear();
    }
    let start = match &q.after {
        None => 0,
        Some(a) => match lines.iter().position(|l| l.contains(a.as_str())) {
            Some(i) => i + 1,
            None => return 0,
        },
    };
    let end = match &q.before {
        None => lines.len(),
        Some(b) => lines
            .iter()
            .position(|l| l.contains(b.as_str()))
            .unwrap_or(lines.len()),
    };
    if start >= end {
        return 0;
    }
    lines[start..end]
        .iter()
        .filter(|l| l.contains(q.pattern.as_str()))
        .filter(|l| !q.exclude.iter().any(|x| l.contains(x.as_str())))
        .count() as u64
}

fn q(pattern: &str, after: Option<&str>, before: Option<&str>) -> LogQuery {
    LogQuery {
        pattern: pattern.into(),
        after: after.map(Into::into),
        before: before.map(Into::into),
        exclude: vec![],
    }
}

/// A small deterministic PRNG (xorshift) so the test needs no crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// CRIU-flavoured synthetic lines (written here, not copied from any real log).
fn gen_log(rng: &mut Rng, lines: usize) -> Vec<u8> {
    let pieces = [
        "(00.001) Dump NET namespace info 4026532 via 1234",
        "(00.002) \tLD: Got link 1, type 772",
        "(00.002) \tLD: Got link 2, type 1 LD: Got link",
        "(00.003) Dumping netns links",
        "(00.004) net: Running ip addr save",
        "(00.005) No netns-12.img image",
        "(00.005) No netns-ct-12.img image No netns-",
        "(00.008) Restoring netns Dump NET namespace info",
        "(00.006) inherit fd extRootNetNS key",
        "(00.007) Restoring netns",
        "",
        "LD: Got",
        "link",
    ];
    let mut out = Vec::new();
    for _ in 0..lines {
        let p = pieces[rng.below(pieces.len() as u64) as usize];
        // random filler before/after so matches land everywhere relative to chunk edges
        let pre = rng.below(4) as usize;
        out.extend(std::iter::repeat_n(b'x', pre));
        out.extend_from_slice(p.as_bytes());
        let post = rng.below(3) as usize;
        out.extend(std::iter::repeat_n(b' ', post));
        out.push(b'\n');
    }
    if rng.below(2) == 0 {
        // no trailing newline on the last line
        out.pop();
    }
    out
}

fn all_queries() -> Vec<LogQuery> {
    vec![
        q("LD: Got link", None, None),
        q("LD: Got link", Some("Dump NET namespace info"), None),
        q(
            "LD: Got link 1, type 772",
            Some("Dump NET namespace info"),
            None,
        ),
        q("LD: Got link", None, Some("Restoring netns")),
        q(
            "LD: Got link",
            Some("Dump NET namespace info"),
            Some("Restoring netns"),
        ),
        q("No netns-", None, None),
        q("extRootNetNS", Some("Dumping netns links"), None),
        q("x", None, None),
        q("never-there", None, None),
        q("link", Some("never-there"), None),
        q("link", None, Some("never-there")),
        // Overlapping needles: a pattern that is a substring of another pattern or anchor,
        // a pattern equal to its own anchor, anchors equal to each other, excludes that
        // overlap the pattern or equal it.
        q("LD: Got", None, None),
        q("Got link", Some("LD: Got link 1"), None),
        q(
            "Dump NET namespace info",
            Some("Dump NET namespace info"),
            None,
        ),
        q("Restoring netns", None, Some("Restoring netns")),
        q("Restoring", Some("Restoring netns"), None),
        q("link", Some("LD: Got link"), Some("LD: Got link 2")),
        q("netns", Some("Restoring netns"), Some("Restoring netns")),
        qx("LD: Got link", &["Got link 2"]),
        qx("No netns-", &["No netns-1"]),
        qx("link", &["link"]),
        qx("LD: Got", &["LD: Got link", "xLD"]),
    ]
}

fn qx(pattern: &str, exclude: &[&str]) -> LogQuery {
    LogQuery {
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        ..q(pattern, None, None)
    }
}

#[test]
fn tiny_chunks_match_naive_reference_on_generated_logs() {
    let _baton = crate::common::baton(module_path!());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let queries = all_queries();
    for round in 0..60 {
        let n = 1 + rng.below(300) as usize;
        let log = gen_log(&mut rng, n);
        let want: Vec<u64> = queries.iter().map(|q| naive(&log, q)).collect();
        for chunk in [1usize, 2, 3, 7, 13, 64, 4096] {
            let got = scan_reader(&log[..], &queries, chunk).unwrap();
            assert_eq!(got, want, "round {round}, chunk {chunk}");
        }
    }
}

#[test]
fn pattern_twice_on_one_line_counts_once() {
    let _baton = crate::common::baton(module_path!());
    let log = b"LD: Got link LD: Got link\nnothing\nLD: Got link\n";
    let got = scan_reader(&log[..], &[q("LD: Got link", None, None)], 7).unwrap();
    assert_eq!(got, vec![2]);
}

#[test]
fn scopes_after_and_before() {
    let _baton = crate::common::baton(module_path!());
    let log = b"LD: Got link 0\nDump NET namespace info 1 via 2 LD: Got link\n\
                LD: Got link 1\nLD: Got link 2\nRestoring\nLD: Got link 3\nDump NET namespace info again\nLD: Got link 4\n";
    let queries = [
        q("LD: Got link", None, None),
        // strictly after the FIRST anchor line (the anchor line itself is excluded)
        q("LD: Got link", Some("Dump NET namespace info"), None),
        // strictly before the first line containing the end anchor
        q("LD: Got link", None, Some("Restoring")),
        q(
            "LD: Got link",
            Some("Dump NET namespace info"),
            Some("Restoring"),
        ),
        // end anchor before the start anchor: empty scope
        q("LD: Got link", Some("Restoring"), Some("Dump NET")),
        // missing start anchor: nothing counts
        q("LD: Got link", Some("absent"), None),
    ];
    for chunk in [5, 7, 1 << 20] {
        let got = scan_reader(&log[..], &queries, chunk).unwrap();
        assert_eq!(got, vec![6, 4, 4, 2, 0, 0], "chunk {chunk}");
    }
}

#[test]
fn scan_log_reads_files_and_fails_on_missing() {
    let _baton = crate::common::baton(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dump.log");
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(b"a\nDump NET namespace info\n\tLD: Got link 1, type 772\n")
        .unwrap();
    drop(f);
    let queries = [q(
        "LD: Got link 1, type 772",
        Some("Dump NET namespace info"),
        None,
    )];
    assert_eq!(scan_log(&p, &queries).unwrap(), vec![1]);
    assert_eq!(scan_log_with_chunk(&p, &queries, 3).unwrap(), vec![1]);
    let err = scan_log(&dir.path().join("nope.log"), &queries).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn bad_queries_are_refused() {
    let _baton = crate::common::baton(module_path!());
    for bad in [
        q("", None, None),
        q("a\nb", None, None),
        q("a", Some(""), None),
    ] {
        let err = scan_reader(&b"a\n"[..], &[bad], 4).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    }
    assert!(scan_reader(&b"a\n"[..], &[q("a", None, None)], 0).is_err());
}

#[test]
fn empty_log_counts_zero() {
    let _baton = crate::common::baton(module_path!());
    let got = scan_reader(&b""[..], &all_queries(), 7).unwrap();
    assert!(got.iter().all(|&n| n == 0));
}

#[test]
fn exclude_skips_lines_with_an_excluded_literal() {
    let _baton = crate::common::baton(module_path!());
    let log = b"a No netns-10.img image\nb No netns-ct-10.img image\nc No netns-exp-10.img image\nNo netns-9.img image No netns-ct-\n";
    let mut query = q("No netns-", None, None);
    query.exclude = vec!["netns-ct-".into(), "netns-exp-".into()];
    for chunk in [1, 2, 7, 4096] {
        let n = scan_reader(&log[..], std::slice::from_ref(&query), chunk).unwrap();
        assert_eq!(n, vec![1], "chunk {chunk}");
        assert_eq!(naive(log, &query), 1);
    }
}

#[test]
fn mapped_windows_match_naive_reference_across_page_boundaries() {
    let _baton = crate::common::baton(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let queries = all_queries();
    for round in 0..12 {
        let n = 1 + rng.below(3000) as usize;
        let mut log = gen_log(&mut rng, n);
        if round % 3 == 0 {
            // A line longer than several pages: the window grows to hold it.
            let at = log.len() / 2;
            let long: Vec<u8> = std::iter::repeat_n(b'y', 3 * 4096 + 17)
                .chain(*b"LD: Got link 1, type 772\n")
                .collect();
            log.splice(at..at, long);
        }
        let p = dir.path().join(format!("dump-{round}.log"));
        std::fs::write(&p, &log).unwrap();
        let want: Vec<u64> = queries.iter().map(|q| naive(&log, q)).collect();
        let f = std::fs::File::open(&p).unwrap();
        for window in [1usize, 4096, 3 * 4096, 1 << 20] {
            let got = scan_file_mapped(&f, &queries, window).unwrap();
            assert_eq!(got, want, "round {round}, window {window}");
        }
        assert_eq!(scan_log(&p, &queries).unwrap(), want, "round {round}");
    }
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, b"").unwrap();
    let got = scan_log(&empty, &queries).unwrap();
    assert!(got.iter().all(|&n| n == 0));
    let f = std::fs::File::open(&empty).unwrap();
    assert!(scan_file_mapped(&f, &queries, 0).is_err());
}
