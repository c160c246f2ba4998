//! Slice-level CPU kernels with run-time CPU-feature dispatch and scalar reference paths.
//!
//! Every kernel works on plain slices, allocates nothing (except `matmul_f32`, whose `gemm`
//! crate packs into its own buffers) and picks its code path at run
//! time from [`active_isa`] (AVX-512, AVX2+FMA+F16C, NEON, or scalar; override downwards with env
//! `TORCHNATIVE_ISA`). Parallel kernels run on one persistent pool ([`set_num_threads`]).
//!
//! Contracts: lengths are the caller's responsibility (the runtime validates shapes once at
//! load); kernels `assert!` them where a short slice would make SIMD code read out of bounds,
//! and `attention_f32` returns an error naming the bad parameter.

// Off x86_64 and aarch64 the generic SIMD bodies have no instantiation (the scalar paths run).
#![cfg_attr(
    not(any(target_arch = "x86_64", target_arch = "aarch64")),
    allow(dead_code, unused_imports)
)]
#![warn(missing_docs)]

mod attention;
mod cast;
mod cpu;
mod elementwise;
mod linear;
mod norm;
mod rope;
mod simd;
mod softmax;
mod threads;

#[cfg(test)]
mod tests;

pub use attention::{
    attention, attention_f32, attention_paged, attention_paged_f32, attention_paged_seqs,
    attention_paged_seqs_f32, attention_scratch_len, AttentionParams, KvData, PagedAttentionParams,
    PagedSeq,
};
pub use cast::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_bf16_one, f32_to_f16};
pub use cpu::{active_isa, detected_isa, supported_isas, Isa};
pub use elementwise::{
    add_f32, add_inplace_f32, argmax_f32, dot_f32, gelu_erf_inplace_f32, scale_f32, silu_f32,
    silu_mul_f32, silu_mul_inplace_f32,
};
pub use linear::{linear_bf16, linear_f16, linear_f32, matmul_f32};
pub use norm::{layer_norm_f32, rms_norm_f32, rms_norm_inplace_f32, rms_norm_rows_f32};
pub use rope::{rope_f32, rope_row, rope_rows_f32, RopeStyle, RopeTable};
pub use softmax::{log_softmax_f32, softmax_f32, softmax_rows_f32};
pub use threads::{install, num_threads, set_num_threads};

/// Errors of kernel set-up calls and of `attention_f32`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelError {
    /// `set_num_threads(0)`.
    InvalidThreadCount {
        /// The rejected value.
        requested: usize,
    },
    /// The OS refused to start the pool's threads.
    ThreadPool(String),
    /// A shape or option is inconsistent; the message names the value and the limit.
    InvalidArgument(String),
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelError::InvalidThreadCount { requested } => {
                write!(
                    f,
                    "kernel thread count {requested} is invalid: must be at least 1"
                )
            }
            KernelError::ThreadPool(e) => write!(f, "cannot build the kernel thread pool: {e}"),
            KernelError::InvalidArgument(msg) => write!(f, "{msg}"),
        }
    }
}

impl std::error::Error for KernelError {}
