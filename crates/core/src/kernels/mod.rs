//! Slice-level CPU kernels with run-time CPU-feature dispatch and scalar reference paths.
