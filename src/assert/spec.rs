//! `probes/<rung>.toml`: what a rung must show, as data.
//!
//! ```toml
//! rung = "criu"
//! question = "Does CRIU itself dump and restore a network namespace faithfully?"
//!
//! [[assertion]]
//! id = "link-dumped-after-netns"   # unique in the file; [a-z0-9-]
//! role = "pass"                    # "pass" decides the rung; any other name is a signature
//! description = "CRIU dumped at least one link of the netns"
//! kind = "log"                     # count LINES containing `pattern` in `log`
//! log = "dump.log"                 # relative to the rung folder
//! pattern = "LD: Got link"
//! after = "Dump NET namespace info" # optional: only lines after the first line containing it
//! before = "..."                    # optional: only lines before the first line containing it
//! exclude = ["...", "..."]           # optional: a line that also contains one of these is not counted
//! count = { min = 1 }               # eq | min | max | min + max
//!
//! [[assertion]]
//! kind = "files"                   # files matching `glob` (wildcards `*`, `?` in the last part)
//! glob = "images/netns-*.img"
//! count = { eq = 1 }
//! bytes = { max = 64 }             # optional: bound on the size of every match
//!
//! [[assertion]]
//! kind = "netstate"                # a NetState JSON file of the rung
//! file = "netstate-after.json"
//! check = "lo-up-127"              # lo UP with 127.0.0.1/8 ...
//! expect = true                    # ... is (true) / is not (false) the case
//! # or: check = "equals", other = "netstate-before.json"  (byte-for-byte)
//! # or: check = "no-criu-lock"    (no CRIU chain / CRIU-… table in its netfilter)
//!
//! [[assertion]]
//! kind = "equal-files"             # two files of the rung hold the same bytes
//! file = "netns-inode-restored.txt"
//! other = "netns-inode-holder.txt"
//! ```

use crate::assert::scan::LogQuery;
use crate::evidence::result::RungName;
use serde::Deserialize;
use std::path::Path;

/// The role that decides a rung's status.
pub const PASS_ROLE: &str = "pass";

/// A probe specification could not be loaded. Every variant names the file (and the
/// assertion and key where it applies).
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The text is not TOML or does not have the expected keys/types (message names the key
    /// and line).
    #[error("{file}: {message}; see the format in src/assert/spec.rs")]
    Toml {
        /// The file name (e.g. `probes/criu.toml`).
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A key holds a value that is not allowed.
    #[error("{file}: {at}: key `{key}`: {problem}")]
    Key {
        /// The file name.
        file: String,
        /// Where: `top level` or `assertion #N ("id")`.
        at: String,
        /// The key.
        key: &'static str,
        /// What is wrong and what is allowed.
        problem: String,
    },
    /// The spec file could not be read.
    #[error("cannot read probe spec {file}: {source}; check the path")]
    Read {
        /// The path.
        file: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Bounds on a count or size. At least one of the fields is set; `eq` excludes `min`/`max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bound {
    /// Exactly this many.
    pub eq: Option<u64>,
    /// At least this many.
    pub min: Option<u64>,
    /// At most this many.
    pub max: Option<u64>,
}

impl Bound {
    /// Whether `n` satisfies every set field.
    pub fn holds(&self, n: u64) -> bool {
        self.eq.is_none_or(|e| n == e)
            && self.min.is_none_or(|m| n >= m)
            && self.max.is_none_or(|m| n <= m)
    }

    /// Readable form, e.g. `== 0`, `>= 1`, `>= 1 and <= 3`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(e) = self.eq {
            parts.push(format!("== {e}"));
        }
        if let Some(m) = self.min {
            parts.push(format!(">= {m}"));
        }
        if let Some(m) = self.max {
            parts.push(format!("<= {m}"));
        }
        parts.join(" and ")
    }

    fn check(&self) -> Result<(), BoundError> {
        match (self.eq, self.min, self.max) {
            (None, None, None) => Err(BoundError::Empty),
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(BoundError::EqWithRange),
            (_, Some(lo), Some(hi)) if lo > hi => Err(BoundError::Inverted { lo, hi }),
            _ => Ok(()),
        }
    }
}

/// What is wrong with a [`Bound`] (becomes the `problem` of a [`SpecError::Key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BoundError {
    /// None of `eq`, `min`, `max`.
    #[error("needs one of eq, min, max (e.g. {{ min = 1 }})")]
    Empty,
    /// `eq` together with `min` or `max`.
    #[error("eq cannot be combined with min or max")]
    EqWithRange,
    /// `min` above `max`.
    #[error("min {lo} > max {hi}")]
    Inverted {
        /// `min`.
        lo: u64,
        /// `max`.
        hi: u64,
    },
}

/// What a netstate assertion checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetStateCheck {
    /// "A link named `lo` is up and has inet 127.0.0.1/8" equals `expect`.
    LoUp127 {
        /// The expected truth value.
        expect: bool,
    },
    /// No part of CRIU's network lock (a `CRIU` chain in iptables/ip6tables/nftables, an
    /// nftables `CRIU-…` table) is in the file's `netfilter` (issue 14).
    NoCriuLock,
    /// The file equals `other` (relative to the rung folder) byte for byte.
    Equals {
        /// The other NetState file.
        other: String,
    },
}

/// The check an assertion performs (paths relative to the rung folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Count lines of `log` matching `query`; the count must satisfy `count`.
    Log {
        /// The log file (e.g. `dump.log`).
        log: String,
        /// Pattern and scope.
        query: LogQuery,
        /// Bound on the number of matching lines.
        count: Bound,
    },
    /// Files matching `glob`: their number must satisfy `count` and, if set, the size in
    /// bytes of every match must satisfy `bytes`.
    Files {
        /// Glob relative to the rung folder; `*`/`?` only in the last component.
        glob: String,
        /// Bound on the number of matches.
        count: Bound,
        /// Bound on each match's size in bytes.
        bytes: Option<Bound>,
    },
    /// `file` and `other` (relative to the rung folder) hold the same bytes, e.g. the restored
    /// container init's netns inode and the holder's.
    EqualFiles {
        /// The first file.
        file: String,
        /// The file it must equal.
        other: String,
    },
    /// A check of the NetState JSON `file`.
    NetState {
        /// The NetState file (e.g. `netstate-after.json`).
        file: String,
        /// What to check.
        check: NetStateCheck,
    },
}

/// One assertion of a rung.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionSpec {
    /// Stable id, unique within the rung, `[a-z0-9-]+`.
    pub id: String,
    /// `pass`, or a signature name read by the verdict (e.g. `empty-ns`).
    pub role: String,
    /// Human-readable statement.
    pub description: String,
    /// What is checked.
    pub check: Check,
}

/// A rung's probe specification: its question and assertions, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// The rung.
    pub rung: RungName,
    /// The question the rung answers.
    pub question: String,
    /// Assertions, in file order; at least one has role `pass`.
    pub assertions: Vec<AssertionSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    rung: String,
    question: String,
    #[serde(default)]
    assertion: Vec<RawAssertion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAssertion {
    id: String,
    role: String,
    description: String,
    kind: String,
    log: Option<String>,
    pattern: Option<String>,
    after: Option<String>,
    before: Option<String>,
    #[serde(default)]
    exclude: Vec<String>,
    count: Option<Bound>,
    glob: Option<String>,
    bytes: Option<Bound>,
    file: Option<String>,
    check: Option<String>,
    expect: Option<bool>,
    other: Option<String>,
}

const BUILTIN: [(RungName, &str, &str); 4] = [
    (
        RungName::Kernel,
        "probes/kernel.toml",
        include_str!("../../probes/kernel.toml"),
    ),
    (
        RungName::Criu,
        "probes/criu.toml",
        include_str!("../../probes/criu.toml"),
    ),
    (
        RungName::Oci,
        "probes/oci.toml",
        include_str!("../../probes/oci.toml"),
    ),
    (
        RungName::ExternalNetns,
        "probes/external-netns.toml",
        include_str!("../../probes/external-netns.toml"),
    ),
];

impl ProbeSpec {
    /// The spec embedded from `probes/<rung>.toml` at build time.
    ///
    /// Errors: as [`ProbeSpec::from_toml`] (tests prove the embedded files parse), or
    /// [`SpecError::Key`] if the file declares another rung.
    pub fn builtin(rung: RungName) -> Result<ProbeSpec, SpecError> {
        let (_, file, text) = BUILTIN
            .iter()
            .find(|(r, _, _)| *r == rung)
            .copied()
            .unwrap_or((rung, "probes/?.toml", ""));
        let spec = ProbeSpec::from_toml(file, text)?;
        if spec.rung != rung {
            return Err(SpecError::Key {
                file: file.into(),
                at: "top level".into(),
                key: "rung",
                problem: format!(
                    "declares {:?}, expected {:?}",
                    spec.rung.as_str(),
                    rung.as_str()
                ),
            });
        }
        Ok(spec)
    }

    /// The embedded text of `probes/<rung>.toml`.
    pub fn builtin_text(rung: RungName) -> &'static str {
        BUILTIN
            .iter()
            .find(|(r, _, _)| *r == rung)
            .map_or("", |(_, _, t)| t)
    }

    /// Reads and parses a spec file (for tuning without rebuilding).
    ///
    /// Errors: [`SpecError::Read`], and those of [`ProbeSpec::from_toml`].
    pub fn from_file(path: &Path) -> Result<ProbeSpec, SpecError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            file: file.clone(),
            source,
        })?;
        ProbeSpec::from_toml(&file, &text)
    }

    /// Parses and checks a spec; `name` is used in errors (e.g. `probes/criu.toml`).
    ///
    /// Errors: [`SpecError::Toml`] (syntax, unknown or missing key, wrong type — the message
    /// names the key and line); [`SpecError::Key`] (unknown rung/kind/check, missing key for
    /// the kind, bad bound, duplicate id, bad path or pattern, no `pass` assertion).
    pub fn from_toml(name: &str, text: &str) -> Result<ProbeSpec, SpecError> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError::Toml {
            file: name.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let top = |key, problem: String| SpecError::Key {
            file: name.to_string(),
            at: "top level".into(),
            key,
            problem,
        };
        let rung = RungName::parse(&raw.rung).ok_or_else(|| {
            top(
                "rung",
                format!(
                    "unknown rung {:?}; one of kernel, criu, oci, external-netns",
                    raw.rung
                ),
            )
        })?;
        let mut assertions: Vec<AssertionSpec> = Vec::with_capacity(raw.assertion.len());
        for (i, a) in raw.assertion.into_iter().enumerate() {
            let cx = At {
                file: name,
                at: format!("assertion #{} ({:?})", i + 1, a.id),
                kind: &a.kind,
            };
            if !is_slug(&a.id) {
                return Err(cx.err("id", "must be non-empty [a-z0-9-]".into()));
            }
            if assertions.iter().any(|x| x.id == a.id) {
                return Err(cx.err("id", "duplicate id in this file".into()));
            }
            let check = cx.check(&a)?;
            assertions.push(AssertionSpec {
                id: a.id,
                role: a.role,
                description: a.description,
                check,
            });
        }
        if !assertions.iter().any(|a| a.role == PASS_ROLE) {
            return Err(top(
                "assertion",
                "no assertion has role = \"pass\"; a rung needs at least one to be decided".into(),
            ));
        }
        Ok(ProbeSpec {
            rung,
            question: raw.question,
            assertions,
        })
    }
}

/// Where a spec problem is (file, assertion, kind): builds the [`SpecError::Key`] of one
/// assertion and checks its keys.
struct At<'a> {
    file: &'a str,
    at: String,
    kind: &'a str,
}

/// `s` is non-empty and only `[a-z0-9-]`.
fn is_slug(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl At<'_> {
    fn err(&self, key: &'static str, problem: String) -> SpecError {
        SpecError::Key {
            file: self.file.to_string(),
            at: self.at.clone(),
            key,
            problem,
        }
    }

    /// A key the kind requires.
    fn need(&self, key: &'static str, v: &Option<String>) -> Result<String, SpecError> {
        v.clone()
            .ok_or_else(|| self.err(key, format!("required for kind = {:?}", self.kind)))
    }

    /// Keys the kind does not use must be unset (`(key, is set)`).
    fn forbid(&self, keys: &[(&'static str, bool)]) -> Result<(), SpecError> {
        match keys.iter().find(|(_, set)| *set) {
            Some((k, _)) => Err(self.err(k, format!("not used by kind = {:?}", self.kind))),
            None => Ok(()),
        }
    }

    /// A relative path inside the rung folder.
    fn rel(&self, key: &'static str, p: String) -> Result<String, SpecError> {
        if p.is_empty()
            || p.starts_with('/')
            || p.split('/').any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(self.err(
                key,
                format!("{p:?} must be a relative path inside the rung folder"),
            ));
        }
        Ok(p)
    }

    /// A non-empty one-line search string.
    fn needle(&self, key: &'static str, p: String) -> Result<String, SpecError> {
        if p.is_empty() || p.contains('\n') {
            return Err(self.err(key, "must be non-empty and on one line".into()));
        }
        Ok(p)
    }

    /// A required, well-formed bound.
    fn bound(&self, key: &'static str, b: Option<Bound>) -> Result<Bound, SpecError> {
        let b = b.ok_or_else(|| self.err(key, format!("required for kind = {:?}", self.kind)))?;
        b.check().map_err(|p| self.err(key, p.to_string()))?;
        Ok(b)
    }

    /// The role rule, then the check of the assertion's kind.
    fn check(&self, a: &RawAssertion) -> Result<Check, SpecError> {
        if !is_slug(&a.role) {
            return Err(self.err(
                "role",
                "must be `pass` or a [a-z0-9-] signature name".into(),
            ));
        }
        match a.kind.as_str() {
            "log" => self.log(a),
            "files" => self.files(a),
            "netstate" => self.netstate(a),
            "equal-files" => self.equal_files(a),
            other => Err(self.err(
                "kind",
                format!(
                    "unknown kind {other:?}; one of \"log\", \"files\", \"netstate\", \"equal-files\""
                ),
            )),
        }
    }

    /// `kind = "log"`.
    fn log(&self, a: &RawAssertion) -> Result<Check, SpecError> {
        self.forbid(&[
            ("glob", a.glob.is_some()),
            ("bytes", a.bytes.is_some()),
            ("file", a.file.is_some()),
            ("check", a.check.is_some()),
            ("expect", a.expect.is_some()),
            ("other", a.other.is_some()),
        ])?;
        Ok(Check::Log {
            log: self.rel("log", self.need("log", &a.log)?)?,
            query: LogQuery {
                pattern: self.needle("pattern", self.need("pattern", &a.pattern)?)?,
                after: a
                    .after
                    .clone()
                    .map(|s| self.needle("after", s))
                    .transpose()?,
                before: a
                    .before
                    .clone()
                    .map(|s| self.needle("before", s))
                    .transpose()?,
                exclude: a
                    .exclude
                    .iter()
                    .cloned()
                    .map(|s| self.needle("exclude", s))
                    .collect::<Result<_, _>>()?,
            },
            count: self.bound("count", a.count)?,
        })
    }

    /// `kind = "files"`.
    fn files(&self, a: &RawAssertion) -> Result<Check, SpecError> {
        self.forbid(&[
            ("log", a.log.is_some()),
            ("pattern", a.pattern.is_some()),
            ("after", a.after.is_some()),
            ("before", a.before.is_some()),
            ("exclude", !a.exclude.is_empty()),
            ("file", a.file.is_some()),
            ("check", a.check.is_some()),
            ("expect", a.expect.is_some()),
            ("other", a.other.is_some()),
        ])?;
        let glob = self.rel("glob", self.need("glob", &a.glob)?)?;
        if let Some((dir, _)) = glob.rsplit_once('/')
            && dir.contains(['*', '?', '['])
        {
            return Err(self.err(
                "glob",
                "wildcards are allowed only in the last path component".into(),
            ));
        }
        let bytes = match a.bytes {
            None => None,
            Some(b) => Some(self.bound("bytes", Some(b))?),
        };
        Ok(Check::Files {
            glob,
            count: self.bound("count", a.count)?,
            bytes,
        })
    }

    /// `kind = "equal-files"`.
    fn equal_files(&self, a: &RawAssertion) -> Result<Check, SpecError> {
        self.forbid(&[
            ("log", a.log.is_some()),
            ("pattern", a.pattern.is_some()),
            ("after", a.after.is_some()),
            ("before", a.before.is_some()),
            ("exclude", !a.exclude.is_empty()),
            ("glob", a.glob.is_some()),
            ("bytes", a.bytes.is_some()),
            ("count", a.count.is_some()),
            ("check", a.check.is_some()),
            ("expect", a.expect.is_some()),
        ])?;
        Ok(Check::EqualFiles {
            file: self.rel("file", self.need("file", &a.file)?)?,
            other: self.rel("other", self.need("other", &a.other)?)?,
        })
    }

    /// `kind = "netstate"`.
    fn netstate(&self, a: &RawAssertion) -> Result<Check, SpecError> {
        self.forbid(&[
            ("log", a.log.is_some()),
            ("pattern", a.pattern.is_some()),
            ("after", a.after.is_some()),
            ("before", a.before.is_some()),
            ("exclude", !a.exclude.is_empty()),
            ("glob", a.glob.is_some()),
            ("bytes", a.bytes.is_some()),
            ("count", a.count.is_some()),
        ])?;
        let file = self.rel("file", self.need("file", &a.file)?)?;
        let check = match self.need("check", &a.check)?.as_str() {
            "lo-up-127" => {
                self.forbid(&[("other", a.other.is_some())])?;
                NetStateCheck::LoUp127 {
                    expect: a.expect.ok_or_else(|| {
                        self.err(
                            "expect",
                            "required for check = \"lo-up-127\" (true or false)".into(),
                        )
                    })?,
                }
            }
            "no-criu-lock" => {
                self.forbid(&[("expect", a.expect.is_some()), ("other", a.other.is_some())])?;
                NetStateCheck::NoCriuLock
            }
            "equals" => {
                self.forbid(&[("expect", a.expect.is_some())])?;
                NetStateCheck::Equals {
                    other: self.rel("other", self.need("other", &a.other)?)?,
                }
            }
            other => {
                return Err(self.err(
                    "check",
                    format!(
                        "unknown check {other:?}; one of \"lo-up-127\", \"no-criu-lock\", \"equals\""
                    ),
                ));
            }
        };
        Ok(Check::NetState { file, check })
    }
}
