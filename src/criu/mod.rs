//! CRIU invocation (dump/restore/check/version) and image inventory.
