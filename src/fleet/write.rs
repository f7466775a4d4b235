//! The fleet's documents written one host at a time: `fleet.json` host by host (each host
//! validated against `evidence-schema/fleet.schema.json` in the document's envelope before it is
//! written), the tables rendered by their templates straight into their files. Peak memory: the
//! rows (a few hundred bytes a host) and one host's text, whatever the number of hosts. Each
//! file replaces the previous one whole (temporary name, then rename); the bytes are those of
//! the whole document rendered at once (`serde_json::to_vec_pretty` of its value, the template
//! rendered to a string).

use super::FleetError;
use super::model::{FLEET_SCHEMA, FleetResult};
use crate::evidence::fsio;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, LazyLock};

/// Why a document could not be written: the schema refused a host, or an I/O error.
enum Fail {
    /// A schema violation (or a value that would not serialize): the text of
    /// [`FleetError::Schema`].
    Schema(String),
    /// Writing the file.
    Io(std::io::Error),
}

impl From<std::io::Error> for Fail {
    fn from(e: std::io::Error) -> Fail {
        Fail::Io(e)
    }
}

impl Fail {
    fn into_error(self, path: &Path) -> FleetError {
        match self {
            Fail::Schema(s) => FleetError::Schema(s),
            Fail::Io(source) => FleetError::Write {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// The schema of `fleet.json`, compiled once.
static V: LazyLock<jsonschema::Validator> =
    LazyLock::new(|| crate::evidence::schema::compile("fleet.schema.json", FLEET_SCHEMA));

fn schema_err(e: serde_json::Error) -> Fail {
    Fail::Schema(e.to_string())
}

/// `f` without its hosts, as a value (its `hosts` an empty array).
fn envelope(f: &FleetResult) -> Result<Value, Fail> {
    serde_json::to_value(FleetResult {
        schema_version: f.schema_version,
        tool: f.tool.clone(),
        tool_version: f.tool_version.clone(),
        written_at: f.written_at.clone(),
        expect: f.expect,
        hosts: Vec::new(),
        exit_class: f.exit_class,
        exit_code: f.exit_code,
    })
    .map_err(schema_err)
}

/// Writes `fleet.json` of `f` into `w`, one host at a time: the envelope with that one host is
/// validated against the schema (every constraint of the schema is on the envelope or on one
/// host), then the host is written at the indentation of `serde_json::to_vec_pretty`.
fn json_to(f: &FleetResult, w: &mut dyn Write) -> Result<(), Fail> {
    let mut env = envelope(f)?;
    // The envelope's text around its empty `hosts` (its keys in serde_json's order: sorted).
    let text = serde_json::to_string_pretty(&env).map_err(schema_err)?;
    const EMPTY: &str = "\"hosts\": []";
    let Some((head, tail)) = text.split_once(EMPTY) else {
        return Err(Fail::Schema(format!("no {EMPTY} in the envelope")));
    };
    if f.hosts.is_empty() {
        crate::evidence::schema::validate_with(&V, &env).map_err(|e| Fail::Schema(e.join("; ")))?;
        w.write_all(text.as_bytes())?;
        return Ok(());
    }
    w.write_all(head.as_bytes())?;
    w.write_all(b"\"hosts\": [")?;
    for (i, h) in f.hosts.iter().enumerate() {
        env["hosts"] = Value::Array(vec![serde_json::to_value(h).map_err(schema_err)?]);
        crate::evidence::schema::validate_with(&V, &env)
            .map_err(|e| Fail::Schema(format!("host {:?}: {}", h.name, e.join("; "))))?;
        let host = serde_json::to_string_pretty(&env["hosts"][0]).map_err(schema_err)?;
        w.write_all(if i == 0 { b"\n" } else { b",\n" })?;
        for (j, line) in host.split('\n').enumerate() {
            if j > 0 {
                w.write_all(b"\n")?;
            }
            w.write_all(b"    ")?;
            w.write_all(line.as_bytes())?;
        }
    }
    w.write_all(b"\n  ]")?;
    w.write_all(tail.as_bytes())?;
    Ok(())
}

/// Replaces `path` with `fleet.json` of `f`, streamed ([`json_to`]). Errors:
/// [`FleetError::Schema`] (nothing replaced), [`FleetError::Write`].
pub fn json(path: &Path, f: &FleetResult) -> Result<(), FleetError> {
    fsio::replace_atomic_with(path, |w| json_to(f, w)).map_err(|e| e.into_error(path))
}

/// Replaces `path` with the table of `f` in `format`, rendered into the file row by row.
/// Errors: [`FleetError::Write`].
pub fn table(
    path: &Path,
    f: &Arc<FleetResult>,
    format: crate::report::Format,
) -> Result<(), FleetError> {
    fsio::replace_atomic_with(path, |w| {
        crate::report::fleet_report_to(f, format, w).map_err(Fail::Io)
    })
    .map_err(|e| e.into_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{RungName, Status, VerdictCode};
    use crate::exit::ExitClass;
    use crate::fleet::model::*;

    fn host(name: &str, state: HostState, odd: bool) -> FleetHost {
        let b = |s: &str| FleetBinary {
            path: "/x".into(),
            version: "1.2.3".into(),
            sha256: s.repeat(64),
        };
        FleetHost {
            name: name.into(),
            folder: name.into(),
            evidence: Some(format!("{name}/run/evidence")),
            state,
            reason: (state != HostState::Verified).then(|| "a \"reason\"\nwith | a <line>".into()),
            mismatches: vec!["one".into(), "two\tthree".into()],
            kernel: Some("6.18.0".into()),
            cgroup: Some("v2".into()),
            runtime: Some(b("a")),
            criu: None,
            verdict: Some(VerdictCode::RuntimeEmptyNs),
            rungs: vec![FleetRung {
                name: RungName::Oci,
                status: Status::Pass,
            }],
            run_exit: Some(0),
            doctor_exit: None,
            disagrees: odd.then(|| Disagreement {
                against: DisagreeKind::Peers,
                expected: VerdictCode::CriuNetns,
                compared_with: Some("b".into()),
                diff_command: Some("netprobe diff b a".into()),
                diff: Some("verdict CHANGED\n```\n".into()),
            }),
            matrix: odd.then(|| FleetMatrix {
                folder: format!("{name}/run/matrix"),
                verified: false,
                problems: vec!["part kernel: x".into()],
                cells: vec![FleetCell {
                    label: "runc 1.4.3 × CRIU 4.3".into(),
                    verdict: VerdictCode::RuntimeEmptyNs,
                    expected: None,
                }],
                exit: Some(0),
            }),
        }
    }

    fn fleet(hosts: Vec<FleetHost>) -> FleetResult {
        FleetResult {
            schema_version: FLEET_SCHEMA_VERSION,
            tool: "netprobe".into(),
            tool_version: "1.0.0".into(),
            written_at: "2026-12-08T01:00:00Z".into(),
            expect: Some(VerdictCode::RuntimeEmptyNs),
            hosts,
            exit_class: ExitClass::Gate,
            exit_code: 1,
        }
    }

    #[test]
    fn streamed_json_is_the_whole_documents_bytes() {
        for hosts in [
            vec![host("a", HostState::Verified, false)],
            vec![
                host("a", HostState::Verified, true),
                host("b", HostState::NotVerified, false),
                host("c", HostState::Unreachable, false),
            ],
        ] {
            let f = fleet(hosts);
            let mut out = Vec::new();
            assert!(json_to(&f, &mut out).is_ok());
            let whole = serde_json::to_vec_pretty(&serde_json::to_value(&f).unwrap()).unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                String::from_utf8(whole).unwrap()
            );
        }
    }

    #[test]
    fn a_host_the_schema_refuses_is_named() {
        let mut h = host("a", HostState::Verified, false);
        h.name = String::new();
        let mut out = Vec::new();
        match json_to(&fleet(vec![h]), &mut out) {
            Err(Fail::Schema(s)) => assert!(s.contains("/hosts/0/name"), "{s}"),
            _ => panic!("accepted"),
        }
    }
}
