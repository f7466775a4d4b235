//! Errors of profile loading and checking: each names the profile file, the field and the fix.

use std::path::PathBuf;

/// A profile that cannot be used. Every variant is a usage error (exit 2) except
/// [`ProfileError::Sha256Mismatch`], a refused image (exit 1, a gate: the pin does not hold).
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read, or is not a regular file of at most 1 MiB of UTF-8.
    #[error(
        "profile {path}: {source}; fix: give --profile an existing TOML profile file (a regular \
         file of at most 1 MiB, e.g. profiles/desktop.toml)"
    )]
    Read {
        /// The profile file.
        path: PathBuf,
        /// Why it was not read (I/O error, not a regular file, over the cap, not UTF-8).
        source: crate::evidence::BoundedReadError,
    },
    /// TOML syntax, an unknown key, a missing key or a wrong type (toml's message names the key
    /// and its line).
    #[error(
        "profile {path}: {message}\nfix: {fix}; the format is \
         evidence-schema/slot-profile.schema.json (examples: profiles/*.toml)"
    )]
    Parse {
        /// The profile file.
        path: PathBuf,
        /// The toml crate's message (key, line, column).
        message: String,
        /// What to do: add a missing key, or correct or remove the one named.
        fix: String,
    },
    /// A field's value is not usable.
    #[error("profile {path}: {field}: {problem}; fix: {fix}")]
    Field {
        /// The profile file.
        path: PathBuf,
        /// The dotted field name, e.g. `image.path`.
        field: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        fix: String,
    },
    /// The image's sha256 differs from the profile's pin.
    #[error(
        "profile {path}: {field}: image {image} has sha256 {actual}, the pin is {expected}; fix: \
         use the image the pin was taken from, or (if this image is the one you trust) pin it: \
         sha256sum {image}"
    )]
    Sha256Mismatch {
        /// The profile file.
        path: PathBuf,
        /// `image.sha256` or `image.sha256_file`.
        field: String,
        /// The image file.
        image: PathBuf,
        /// The pinned sha256.
        expected: String,
        /// The sha256 of the image's bytes now.
        actual: String,
    },
}

impl ProfileError {
    /// The CLI exit code (docs/REFERENCE.md's table): 1 for a sha256 mismatch (the image gate), else 2.
    pub fn exit_code(&self) -> i32 {
        match self {
            ProfileError::Sha256Mismatch { .. } => 1,
            _ => 2,
        }
    }
}

/// Result with [`ProfileError`].
pub type Result<T> = std::result::Result<T, ProfileError>;
