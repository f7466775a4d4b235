//! CRIU-exact link dump (raw request bytes, CRIU-style decode) and NetState capture, canonical JSON, diff.
