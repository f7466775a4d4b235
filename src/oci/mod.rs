//! OCI bundle (rootfs, config.json via oci-spec) and runtime wrapper (runc first, crun-ready).
