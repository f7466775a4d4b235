//! Log and evidence assertions: probes/*.toml loaded, logs scanned once with memchr.
