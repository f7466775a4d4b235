//! Namespaces and processes: holder child with its own netns, setns by pid/path, pidfd, process identity.
