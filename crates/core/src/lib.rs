//! Tensor core: dtypes, storage, strided views with PyTorch semantics, ops and CPU kernels.
