//! Unit tests of the verbs over a temporary slot with the recording fake runtime.
