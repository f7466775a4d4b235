//! The JSON Schemas (2020-12) of netprobe's files, embedded at build time, and validators.
//!
//! Schemas live in `evidence-schema/`; `netprobe-result.schema.json` mirrors
//! [`crate::evidence::result::RunResult`] field for field (Option fields are present as `null`).

use jsonschema::Validator;
use serde_json::Value;
use std::sync::LazyLock;

/// Text of `evidence-schema/netprobe-result.schema.json`.
pub const RESULT_SCHEMA: &str = include_str!("../../evidence-schema/netprobe-result.schema.json");

/// Text of `evidence-schema/holder.schema.json` (a slot's `holder.json`).
pub const HOLDER_SCHEMA: &str = include_str!("../../evidence-schema/holder.schema.json");

/// Compiles an embedded JSON Schema (draft 2020-12, formats asserted). Panics when the embedded
/// text is not a schema: a build defect, proven absent by the tests.
pub fn compile(name: &str, text: &str) -> Validator {
    // The schemas are embedded constants; tests prove they compile, so a failure here is a
    // build defect, not an input error.
    let schema: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("embedded schema {name} is not JSON: {e}"));
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("embedded schema {name} does not compile: {e}"))
}

static RESULT_VALIDATOR: LazyLock<Validator> =
    LazyLock::new(|| compile("netprobe-result.schema.json", RESULT_SCHEMA));
static HOLDER_VALIDATOR: LazyLock<Validator> =
    LazyLock::new(|| compile("holder.schema.json", HOLDER_SCHEMA));

/// Validates `v` with `validator`. Errors: every violation as `<JSON pointer>: <message>` (root
/// written `(root)`).
pub fn validate_with(validator: &Validator, v: &Value) -> Result<(), Vec<String>> {
    let errors: Vec<String> = validator
        .iter_errors(v)
        .map(|e| {
            let ptr = e.instance_path().as_str();
            let ptr = if ptr.is_empty() { "(root)" } else { ptr };
            format!("{ptr}: {e}")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Validates a `netprobe-result.json` document against `netprobe-result.schema.json`
/// (formats such as `date-time` are asserted, not just annotated).
///
/// Errors: every violation as `"<JSON pointer>: <message>"`, e.g.
/// `"/rungs/0/status: \"maybe\" is not one of ..."`; the pointer of the document root is
/// written `(root)`.
pub fn validate_result(v: &Value) -> Result<(), Vec<String>> {
    validate_with(&RESULT_VALIDATOR, v)
}

/// Validates a slot's `holder.json` (`{schema_version, pid, start_time, netns_inode,
/// netns_path, exe, created_at}`) against `holder.schema.json`.
///
/// Errors: every violation as `"<JSON pointer>: <message>"` (root written `(root)`).
pub fn validate_holder(v: &Value) -> Result<(), Vec<String>> {
    validate_with(&HOLDER_VALIDATOR, v)
}
