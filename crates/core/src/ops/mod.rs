//! Tensor operations, grouped by kind. Most are `impl Tensor` methods; multi-input ops are
//! free functions.

pub mod complex;
pub mod conv;
pub mod creation;
pub mod index;
pub mod linalg;
pub mod linalg_decomp;
pub mod nn;
pub mod pointwise;
pub mod reduce;
pub mod special;
