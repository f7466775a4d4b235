//! Facts about the machine: kernel, runtime and CRIU versions + sha256, pins, CRIU config-file refusal, prerequisites ("doctor").
