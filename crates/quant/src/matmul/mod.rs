//! Packed matrix kernels: `y = x * W^T` straight from GGUF-packed weights.
//!
//! Activations are quantized on the fly (as ggml does) into [`ActivationScratch`]: to 8-bit
//! blocks of 32 with an f32 scale and the block sum (for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 weights) or
//! to 8-bit blocks of 256 with sums of every 16 (for K-quant weights). Each weight block's dot
//! product with an activation block is then an exact integer sum, scaled once in f32.
//! F32 / F16 / BF16 weights are multiplied with the f32 activations directly.
//!
//! Kernels are chosen at run time ([`best_kernel_path`]); every path can also be forced
//! ([`matmul_with`]) so tests compare them with the scalar reference.

mod gemm;
mod gemv;
mod interleaved;
#[cfg(target_arch = "aarch64")]
mod neon;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::sync::OnceLock;

use rayon::prelude::*;

use crate::blocks::f16_to_f32;
use crate::{dequantize, GgmlType, QuantError};

pub use interleaved::InterleavedMatrix;

/// A weight matrix in its file's packed form: `rows` rows of `cols` elements, row-major,
/// each row `ty.row_bytes(cols)` bytes (PyTorch Linear layout: rows = out features).
#[derive(Clone, Copy, Debug)]
pub struct PackedMatrix<'a> {
    /// Element type of the packed data.
    pub ty: GgmlType,
    /// `rows * ty.row_bytes(cols)` bytes, any alignment.
    pub data: &'a [u8],
    /// Output features (rows of the weight).
    pub rows: usize,
    /// Input features (elements per row), a multiple of the block size.
    pub cols: usize,
    /// The same matrix re-laid out for the few-rows kernels ([`InterleavedMatrix::new`]),
    /// when there is one: the kernels that read it then never touch `data`.
    pub interleaved: Option<&'a InterleavedMatrix>,
}

impl<'a> PackedMatrix<'a> {
    /// A matrix read straight from its file bytes, without an interleaved copy.
    pub fn new(ty: GgmlType, data: &'a [u8], rows: usize, cols: usize) -> Self {
        PackedMatrix {
            ty,
            data,
            rows,
            cols,
            interleaved: None,
        }
    }
}

/// Scratch for activations quantized on the fly; allocate once for the largest shape
/// ([`ActivationScratch::reserve`]) and reuse it every token: then [`matmul`] never allocates.
#[derive(Debug, Default)]
pub struct ActivationScratch {
    /// Quantized activations, `m * cols`.
    qs: Vec<i8>,
    /// Per block: `[d, d * sum(q)]` (32-blocks) or `[d, 0]` (256-blocks).
    ds: Vec<[f32; 2]>,
    /// Per 16 activations: `sum(q)` (256-block format only).
    sums16: Vec<i32>,
    /// Per 32-block: `sum(q)` (32-block format, for the GEMV's weight offsets).
    sums32: Vec<i32>,
    /// The same activations interleaved for the prefill GEMM (see `gemm`).
    tiles: Vec<Line>,
}

/// 64 bytes, 64-byte aligned: one 512-bit register's worth of a GEMM activation tile.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct Line(pub [i32; 16]);

impl ActivationScratch {
    /// Empty scratch; grows on first use unless reserved.
    pub fn new() -> Self {
        Self::default()
    }

    /// Make room for `m` activation rows of `cols` elements in any supported format.
    pub fn reserve(&mut self, m: usize, cols: usize) {
        let n = m.saturating_mul(cols);
        grow(&mut self.qs, n, 0);
        grow(&mut self.ds, n / 32 + 1, [0.0; 2]);
        grow(&mut self.sums16, n / 16 + 1, 0);
        grow(&mut self.sums32, n / 32 + 1, 0);
        if m >= GEMM_MIN_ROWS {
            grow(&mut self.tiles, gemm::tile_lines(m, cols), Line::default());
        }
    }
}

fn grow<T: Clone>(v: &mut Vec<T>, n: usize, fill: T) {
    if v.len() < n {
        v.resize(n, fill);
    }
}

/// A set of kernels (instruction-set level). Paths without a dedicated kernel for a type use
/// the next lower path's kernel for it (ultimately the scalar reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelPath {
    /// Portable Rust, the reference every other path is tested against.
    Scalar,
    /// x86-64 AVX2 + FMA + F16C (`vpmaddubsw` integer dots).
    Avx2,
    /// x86-64 AVX2 with AVX-VNNI (256-bit `vpdpbusd`, VEX-encoded: CPUs without AVX-512 such
    /// as Alder Lake have it): AVX2's row kernels, the prefill GEMM on `vpdpbusd`.
    Avx2Vnni,
    /// x86-64 AVX-512 F/BW/VL (`vpmaddubsw` on 512 bits for Q4_0 / Q4_1 / Q8_0) on top of AVX2.
    Avx512,
    /// x86-64 AVX-512 F/BW/VL + VNNI (`vpdpbusd` integer dots) on top of AVX2.
    Avx512Vnni,
    /// aarch64 NEON (`smull` + `sadalp` integer dots), every type; NEON activation quantizer.
    Neon,
    /// aarch64 NEON + FEAT_DotProd (`sdot` integer dots), every type.
    NeonDotprod,
    /// aarch64 NeonDotprod's GEMV, and the prefill GEMM with FEAT_I8MM (`usmmla`
    /// 2x2x8 integer matrix products).
    NeonI8mm,
}

impl KernelPath {
    /// All paths, lowest first.
    pub const ALL: [KernelPath; 8] = [
        KernelPath::Scalar,
        KernelPath::Avx2,
        KernelPath::Avx2Vnni,
        KernelPath::Avx512,
        KernelPath::Avx512Vnni,
        KernelPath::Neon,
        KernelPath::NeonDotprod,
        KernelPath::NeonI8mm,
    ];

    /// The `TORCHNATIVE_ISA` level the path belongs to: 0 scalar, 1 plain AVX2 or NEON, 2
    /// AVX-512 or AVX-VNNI (so `avx2` means plain AVX2, the widest common x86 level).
    fn level(self) -> u8 {
        match self {
            KernelPath::Scalar => 0,
            KernelPath::Avx2 | KernelPath::Neon | KernelPath::NeonDotprod => 1,
            KernelPath::NeonI8mm => 1,
            KernelPath::Avx2Vnni | KernelPath::Avx512 | KernelPath::Avx512Vnni => 2,
        }
    }

    /// Whether this CPU can run the path.
    pub fn is_available(self) -> bool {
        match self {
            KernelPath::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx2 => x86::has_avx2(),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx2Vnni => x86::has_avx2() && x86::has_avx_vnni(),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512 => x86::has_avx2() && x86::has_avx512(),
            #[cfg(target_arch = "x86_64")]
            KernelPath::Avx512Vnni => x86::has_avx2() && x86::has_avx512_vnni(),
            // NEON is part of the aarch64 baseline.
            #[cfg(target_arch = "aarch64")]
            KernelPath::Neon => true,
            #[cfg(target_arch = "aarch64")]
            KernelPath::NeonDotprod => neon::has_dotprod(),
            #[cfg(target_arch = "aarch64")]
            KernelPath::NeonI8mm => neon::has_dotprod() && neon::has_i8mm(),
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }
}

/// The fastest path this CPU supports (detected once, then cached), lowered (never raised)
/// by env `TORCHNATIVE_ISA=scalar|avx2|avx512|neon` as the core kernels are, so a whole run
/// can be measured on a smaller machine's kernels (see [`isa_cap`]).
pub fn best_kernel_path() -> KernelPath {
    static BEST: OnceLock<KernelPath> = OnceLock::new();
    *BEST.get_or_init(|| {
        let cap = std::env::var("TORCHNATIVE_ISA")
            .ok()
            .and_then(|v| isa_cap(&v));
        KernelPath::ALL
            .into_iter()
            .rev()
            .filter(|p| cap.is_none_or(|c| p.level() <= c))
            .find(|p| p.is_available())
            .unwrap_or(KernelPath::Scalar)
    })
}

/// The highest [`KernelPath::level`] a `TORCHNATIVE_ISA` value allows: `None` (no cap) for an
/// unknown name, as the core ignores those; 0 (scalar) for the other architecture's levels,
/// as the core lowers them.
fn isa_cap(name: &str) -> Option<u8> {
    let x86 = cfg!(target_arch = "x86_64");
    let arm = cfg!(target_arch = "aarch64");
    match name.trim().to_ascii_lowercase().as_str() {
        "scalar" => Some(0),
        "avx2" => Some(if x86 { 1 } else { 0 }),
        "avx512" => Some(if x86 { 2 } else { 0 }),
        "neon" => Some(if arm { 1 } else { 0 }),
        _ => None,
    }
}

/// The paths this CPU supports, lowest first.
pub fn available_kernel_paths() -> Vec<KernelPath> {
    KernelPath::ALL
        .into_iter()
        .filter(|p| p.is_available())
        .collect()
}

/// Grow the calling thread's prefill-GEMM buffers (each thread that runs GEMM tasks keeps its
/// own, grown on first use) for weights of `cols` columns. A caller that must not allocate
/// after warm-up runs it on every pool thread (`rayon::broadcast`): which threads take GEMM
/// tasks in a warm-up call is up to the scheduler.
pub fn reserve_gemm_thread_buffers(cols: usize) {
    gemm::reserve_thread_buffers(cols);
}

/// Whether [`matmul`] handles weights of type `ty`.
pub fn supports_matmul(ty: GgmlType) -> bool {
    activation_format(ty).is_some()
}

/// How activations are prepared for a weight type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ActFormat {
    /// f32 as given.
    Float,
    /// 8-bit blocks of 32: `ds = [d, d * sum]`.
    Q8x32,
    /// 8-bit blocks of 256: `ds = [d, 0]`, sums of each 16 in `sums16`.
    Q8x256,
}

fn activation_format(ty: GgmlType) -> Option<ActFormat> {
    use GgmlType::*;
    match ty {
        F32 | F16 | BF16 => Some(ActFormat::Float),
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => Some(ActFormat::Q8x32),
        Q4_K | Q5_K | Q6_K => Some(ActFormat::Q8x256),
        _ => None,
    }
}

/// Quantized activations as the kernels read them.
pub(crate) struct QActs<'a> {
    pub qs: &'a [i8],
    pub ds: &'a [[f32; 2]],
    pub sums16: &'a [i32],
    pub sums32: &'a [i32],
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub tiles: &'a [Line],
    pub xf: &'a [f32],
    pub cols: usize,
}

/// Dot products of one packed weight row with activation rows `r0 .. r0 + N`.
///
/// Safety: the caller checked the row length (`ty.row_bytes(acts.cols)`), that `r0 + N` rows
/// exist in `acts`, and that the CPU has the kernel's target features.
pub(crate) type DotFn<const N: usize> = unsafe fn(&[u8], &QActs, usize) -> [f32; N];

/// Activation rows handled together in prefill (each weight block is unpacked once for them).
const PREFILL_ROWS: usize = 4;

/// Activation rows from which the paths with a GEMM switch from the GEMV to it.
pub(crate) const GEMM_MIN_ROWS: usize = 16;

/// Which prefill GEMM tiles a path runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GemmTiles {
    /// `vpdpbusd` on 512 bits.
    Vnni,
    /// `vpmaddubsw` + `vpmaddwd` on 256 bits (AVX-512 without VNNI runs these too); results
    /// equal the VNNI tiles' bit for bit.
    Avx2,
    /// AVX-VNNI `vpdpbusd` on 256 bits; the same bits again.
    AvxVnni,
    /// aarch64 `usmmla` (FEAT_I8MM) on activation tiles laid out in row pairs; results equal
    /// the x86 tiles' bit for bit.
    I8mm,
}

impl GemmTiles {
    /// How the tiles' activation bytes are laid out.
    fn layout(self) -> gemm::TileLayout {
        match self {
            GemmTiles::Vnni | GemmTiles::Avx2 | GemmTiles::AvxVnni => gemm::TileLayout::Lanes,
            GemmTiles::I8mm => gemm::TileLayout::RowPairs,
        }
    }
}

fn gemm_tiles(path: KernelPath) -> Option<GemmTiles> {
    match path {
        KernelPath::Avx512Vnni if cfg!(target_arch = "x86_64") => Some(GemmTiles::Vnni),
        KernelPath::Avx2 | KernelPath::Avx512 if cfg!(target_arch = "x86_64") => {
            Some(GemmTiles::Avx2)
        }
        KernelPath::Avx2Vnni if cfg!(target_arch = "x86_64") => Some(GemmTiles::AvxVnni),
        KernelPath::NeonI8mm if cfg!(target_arch = "aarch64") => Some(GemmTiles::I8mm),
        _ => None,
    }
}

/// Which GEMV kernels a path runs for the GEMM's types below [`GEMM_MIN_ROWS`] rows (and
/// for all rows on paths without a GEMM); `None` only for the other architecture's paths.
fn gemv_kind(path: KernelPath) -> Option<gemv::GemvKind> {
    use gemv::GemvKind;
    match path {
        KernelPath::Scalar => Some(GemvKind::Reference),
        KernelPath::Avx512Vnni if cfg!(target_arch = "x86_64") => Some(GemvKind::Vnni512),
        KernelPath::Avx2 | KernelPath::Avx512 if cfg!(target_arch = "x86_64") => {
            Some(GemvKind::Avx2)
        }
        KernelPath::Avx2Vnni if cfg!(target_arch = "x86_64") => Some(GemvKind::AvxVnni),
        KernelPath::Neon if cfg!(target_arch = "aarch64") => Some(GemvKind::Neon),
        KernelPath::NeonDotprod | KernelPath::NeonI8mm if cfg!(target_arch = "aarch64") => {
            Some(GemvKind::NeonDotprod)
        }
        _ => None,
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Kernels {
    pub one: DotFn<1>,
    pub many: DotFn<PREFILL_ROWS>,
}

fn kernels(ty: GgmlType, path: KernelPath) -> Option<Kernels> {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(k) = x86::kernels(ty, path) {
            return Some(k);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if let Some(k) = neon::kernels(ty, path) {
            return Some(k);
        }
    }
    let _ = path;
    scalar::kernels(ty)
}

/// `y[m x rows] = x[m x cols] * W^T` with the fastest kernels for this CPU.
///
/// m == 1 is decode (one dot per weight row); m > 1 is prefill, where each weight block is
/// reused for several activation rows. Output rows are split over the current rayon pool (the
/// global one unless called inside `ThreadPool::install`). No allocation when `scratch` was
/// reserved for `m x cols` (rayon itself, called from outside its pool, allocates a 1.5 KB
/// queue block every 63 calls; calls made inside `install` avoid even that).
pub fn matmul(
    w: &PackedMatrix,
    x: &[f32],
    m: usize,
    y: &mut [f32],
    scratch: &mut ActivationScratch,
) -> Result<(), QuantError> {
    matmul_with(best_kernel_path(), w, x, m, y, scratch)
}

/// [`matmul`] on a chosen kernel path (an error if this CPU cannot run it): for tests and
/// benchmarks comparing paths.
pub fn matmul_with(
    path: KernelPath,
    w: &PackedMatrix,
    x: &[f32],
    m: usize,
    y: &mut [f32],
    scratch: &mut ActivationScratch,
) -> Result<(), QuantError> {
    matmul_multi_with(path, std::slice::from_ref(w), x, m, &mut [y], scratch)
}

/// Several matmuls of the same input: `ys[j] = x * ws[j]^T` (e.g. the Q, K and V projections,
/// or gate and up). `x` is quantized once and all outputs' rows are split over the pool in one
/// parallel section, which saves a pool round trip per matrix in decode. The matrices (at most
/// [`MAX_MULTI`]) must share `cols` and an activation format (all 32-block types, all K types,
/// or all float).
pub fn matmul_multi(
    ws: &[PackedMatrix],
    x: &[f32],
    m: usize,
    ys: &mut [&mut [f32]],
    scratch: &mut ActivationScratch,
) -> Result<(), QuantError> {
    matmul_multi_with(best_kernel_path(), ws, x, m, ys, scratch)
}

/// [`matmul_multi`] on a chosen kernel path.
pub fn matmul_multi_with(
    path: KernelPath,
    ws: &[PackedMatrix],
    x: &[f32],
    m: usize,
    ys: &mut [&mut [f32]],
    scratch: &mut ActivationScratch,
) -> Result<(), QuantError> {
    if ws.len() != ys.len() {
        return Err(QuantError::LengthMismatch {
            what: "matmul outputs (one per matrix)",
            expected: ws.len(),
            actual: ys.len(),
        });
    }
    let Some(first) = ws.first() else {
        return Ok(());
    };
    let unsupported = |ty| QuantError::Unsupported {
        ty,
        operation: "matmul",
    };
    let format = activation_format(first.ty).ok_or(unsupported(first.ty))?;
    let cols = first.cols;
    let x_len = m.checked_mul(cols).ok_or(QuantError::BadShape {
        what: "m * cols",
        value: m,
        limit: usize::MAX / cols.max(1),
    })?;
    if x.len() != x_len {
        return Err(QuantError::LengthMismatch {
            what: "matmul input x (m * cols)",
            expected: x_len,
            actual: x.len(),
        });
    }
    if !path.is_available() {
        return Err(QuantError::Unsupported {
            ty: first.ty,
            operation: "this CPU's kernel path for matmul",
        });
    }
    if ws.len() > MAX_MULTI {
        return Err(QuantError::BadShape {
            what: "matrices in one multi-matmul",
            value: ws.len(),
            limit: MAX_MULTI,
        });
    }
    // A fixed array, not a Vec: a reserved matmul must not allocate.
    let mut jobs: [Option<Job>; MAX_MULTI] = [None; MAX_MULTI];
    for ((w, y), slot) in ws.iter().zip(ys.iter_mut()).zip(&mut jobs) {
        if activation_format(w.ty).ok_or(unsupported(w.ty))? != format {
            return Err(QuantError::IncompatibleTypes {
                first: first.ty,
                other: w.ty,
            });
        }
        if w.cols != cols {
            return Err(QuantError::LengthMismatch {
                what: "cols of a matrix in a multi-matmul",
                expected: cols,
                actual: w.cols,
            });
        }
        let row_bytes = check_matrix(w)?;
        if w.interleaved.is_some_and(|iw| !iw.matches(w)) {
            return Err(QuantError::BadShape {
                what: "interleaved copy of a different matrix (type, rows or cols)",
                value: w.rows,
                limit: w.rows,
            });
        }
        let y_len = m.checked_mul(w.rows).ok_or(QuantError::BadShape {
            what: "m * rows",
            value: m,
            limit: usize::MAX / w.rows.max(1),
        })?;
        if y.len() != y_len {
            return Err(QuantError::LengthMismatch {
                what: "matmul output y (m * rows)",
                expected: y_len,
                actual: y.len(),
            });
        }
        let kernels = kernels(w.ty, path).ok_or(unsupported(w.ty))?;
        *slot = Some(Job {
            w,
            row_bytes,
            out: OutPtr(y.as_mut_ptr()),
            kernels,
            gemm: false,
            gemv: gemv_kind(path).filter(|_| gemm::gemm_block(w.ty).is_some()),
            tasks: 0,
        });
    }
    if m == 0 {
        return Ok(());
    }
    // The GEMM serves every matrix of the call or none (they share one activation layout).
    // Interleaved copies go to the few-rows kernels at any m: with no add tree and the
    // decode shared by 8 activation rows they match the GEMM per row even at 512 rows
    // (`examples/batch_sweep`), and one kernel for every m keeps prefill on one code path.
    let all_interleaved =
        interleaved::path_reads_interleaved(path) && ws.iter().all(|w| w.interleaved.is_some());
    let gemm = gemm_tiles(path).is_some()
        && m >= GEMM_MIN_ROWS
        && !all_interleaved
        && ws.iter().all(|w| gemm::gemm_block(w.ty).is_some());
    prepare_acts(format, path, gemm, x, m, cols, scratch);
    if !gemm && format == ActFormat::Q8x32 {
        let n = m * cols;
        gemv::block_sums(&scratch.qs[..n], &mut scratch.sums32[..n / 32]);
    }
    if gemm {
        for job in jobs.iter_mut().flatten() {
            job.gemm = true;
            job.gemv = None;
        }
    }
    let acts = QActs {
        qs: &scratch.qs,
        ds: &scratch.ds,
        sums16: &scratch.sums16,
        sums32: &scratch.sums32,
        tiles: &scratch.tiles,
        xf: x,
        cols,
    };
    run_jobs(path, &mut jobs[..ws.len()], m, &acts);
    Ok(())
}

/// Validate a packed matrix; returns its row size in bytes.
fn check_matrix(w: &PackedMatrix) -> Result<usize, QuantError> {
    let row_bytes = w.ty.row_bytes(w.cols).ok_or(QuantError::PartialElements {
        ty: w.ty,
        elements: w.cols,
        block_size: w.ty.block_size(),
    })?;
    let total = row_bytes.checked_mul(w.rows).ok_or(QuantError::BadShape {
        what: "packed matrix rows",
        value: w.rows,
        limit: usize::MAX / row_bytes.max(1),
    })?;
    if w.data.len() != total {
        return Err(QuantError::LengthMismatch {
            what: "packed matrix data (bytes)",
            expected: total,
            actual: w.data.len(),
        });
    }
    Ok(row_bytes)
}

/// Row `row` of a packed matrix dequantized into `out` (`cols` floats): embedding lookup.
pub fn dequantize_row(w: &PackedMatrix, row: usize, out: &mut [f32]) -> Result<(), QuantError> {
    let row_bytes = check_matrix(w)?;
    if row >= w.rows {
        return Err(QuantError::BadShape {
            what: "row index",
            value: row,
            limit: w.rows,
        });
    }
    if out.len() != w.cols {
        return Err(QuantError::LengthMismatch {
            what: "dequantized row output",
            expected: w.cols,
            actual: out.len(),
        });
    }
    match w.interleaved {
        Some(iw) if iw.matches(w) => {
            iw.dequantize_row(row, out);
            Ok(())
        }
        _ => dequantize(w.ty, &w.data[row * row_bytes..(row + 1) * row_bytes], out),
    }
}

/// The output pointer shared by the row tasks; each task writes a disjoint set of columns.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: tasks write disjoint elements (distinct weight rows) and the borrow of `y` outlives
// the parallel section.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

/// Weight bytes below which a matmul is not worth splitting across threads.
const MIN_TASK_BYTES: usize = 24 * 1024;

/// Most matrices one multi-matmul takes.
pub const MAX_MULTI: usize = 8;

/// One matrix of a (multi-)matmul, with its share of the parallel tasks.
#[derive(Clone, Copy)]
struct Job<'a> {
    w: &'a PackedMatrix<'a>,
    row_bytes: usize,
    out: OutPtr,
    kernels: Kernels,
    /// Run by the prefill GEMM (tasks then split rows in multiples of `gemm::RC`).
    gemm: bool,
    /// Run by these GEMV kernels (tasks split rows in multiples of `gemv::GV`) instead of
    /// the row kernels.
    gemv: Option<gemv::GemvKind>,
    tasks: usize,
}

/// Split every job's rows into tasks (by weight bytes) and run all tasks in one parallel
/// section (inline when there is only one).
fn run_jobs(path: KernelPath, jobs: &mut [Option<Job>], m: usize, acts: &QActs) {
    let threads = rayon::current_num_threads().max(1);
    for job in jobs.iter_mut().flatten() {
        let by_size = (job.w.rows * job.row_bytes * m.min(8)) / MIN_TASK_BYTES;
        let units = if job.gemm {
            job.w.rows.div_ceil(gemm::RC)
        } else if job.gemv.is_some() {
            job.w.rows.div_ceil(gemv::GV)
        } else {
            job.w.rows
        };
        job.tasks = by_size.clamp(1, threads * 4).min(units);
    }
    let jobs = &*jobs;
    let total: usize = jobs.iter().flatten().map(|j| j.tasks).sum();
    let run = |mut t: usize| {
        for job in jobs.iter().flatten() {
            if t < job.tasks {
                let rows = job.w.rows;
                // SAFETY: `check_matrix` validated the data; `matmul_multi_with` validated x,
                // y and scratch sizes and the path's CPU features (VNNI tiles only on AVX-512
                // VNNI, AVX2 tiles on AVX2 or AVX-512, I8MM tiles with FEAT_I8MM; tiles packed
                // for m x cols in the tiles' layout); task row ranges are disjoint.
                if let (true, Some(tiles)) = (job.gemm, gemm_tiles(path)) {
                    let units = rows.div_ceil(gemm::RC);
                    let lo = (units * t / job.tasks * gemm::RC).min(rows);
                    let hi = (units * (t + 1) / job.tasks * gemm::RC).min(rows);
                    let (w, out) = (job.w, job.out.0);
                    unsafe { gemm::gemm_rows(w, job.row_bytes, acts.tiles, m, out, lo, hi, tiles) };
                    return;
                }
                if let Some(kind) = job.gemv {
                    let units = rows.div_ceil(gemv::GV);
                    let lo = (units * t / job.tasks * gemv::GV).min(rows);
                    let hi = (units * (t + 1) / job.tasks * gemv::GV).min(rows);
                    let (w, out) = (job.w, job.out.0);
                    #[cfg(target_arch = "x86_64")]
                    if let (true, Some(iw)) =
                        (interleaved::path_reads_interleaved(path), w.interleaved)
                    {
                        unsafe { interleaved::gemv_rows(path, iw, acts, m, out, lo, hi) };
                        return;
                    }
                    unsafe { gemv::gemv_rows(w, job.row_bytes, acts, m, out, lo, hi, kind) };
                    return;
                }
                let (lo, hi) = (rows * t / job.tasks, rows * (t + 1) / job.tasks);
                unsafe { rows_task(job, m, acts, lo, hi) };
                return;
            }
            t -= job.tasks;
        }
    };
    if total == 1 {
        run(0);
    } else {
        (0..total).into_par_iter().for_each(run);
    }
}

/// Weight rows `lo..hi` of one job for all activation rows.
unsafe fn rows_task(job: &Job, m: usize, acts: &QActs, lo: usize, hi: usize) {
    let (w, row_bytes, out, k) = (job.w, job.row_bytes, job.out, job.kernels);
    let rows = w.rows;
    // Weight rows outermost: each row is read from memory once and reused, from L1, for every
    // group of activation rows (which stay cache-resident across weight rows). Decode thus
    // walks one weight row at a time: interleaving several weight rows (tried: 4 at once) was
    // faster from cache but much slower streaming from memory.
    for r in lo..hi {
        let wr = &w.data[r * row_bytes..(r + 1) * row_bytes];
        let mut i = 0;
        while i + PREFILL_ROWS <= m {
            let v = (k.many)(wr, acts, i);
            for (j, v) in v.into_iter().enumerate() {
                *out.0.add((i + j) * rows + r) = v;
            }
            i += PREFILL_ROWS;
        }
        while i < m {
            *out.0.add(i * rows + r) = (k.one)(wr, acts, i)[0];
            i += 1;
        }
    }
}

/// Round half away from zero, as ggml's `roundf`.
#[inline]
fn round_i8(v: f32) -> i8 {
    v.round() as i8
}

/// `amax / 127` of an activation block; NaN if the block holds a NaN, so that NaN inputs give
/// NaN outputs (as an f32 matmul would) instead of being quantized away.
fn block_scale(xb: &[f32]) -> f32 {
    let mut amax = 0f32;
    for &v in xb {
        if v.is_nan() {
            return f32::NAN;
        }
        amax = amax.max(v.abs());
    }
    amax / 127.0
}

/// [`quantize_q8x32_scalar`] for the SIMD quantizers' rare blocks (a NaN, an infinity, a
/// subnormal scale), kept out of line: inlined, its 32 scalar loads were hoisted above the
/// SIMD path's branch and ran for every block.
#[cold]
#[inline(never)]
pub(crate) fn quantize_q8x32_scalar_cold(x: &[f32], qs: &mut [i8], ds: &mut [[f32; 2]]) {
    quantize_q8x32_scalar(x, qs, ds)
}

/// [`quantize_q8x256_scalar`] out of line, as [`quantize_q8x32_scalar_cold`].
#[cold]
#[inline(never)]
pub(crate) fn quantize_q8x256_scalar_cold(
    x: &[f32],
    qs: &mut [i8],
    ds: &mut [[f32; 2]],
    sums16: &mut [i32],
) {
    quantize_q8x256_scalar(x, qs, ds, sums16)
}

/// Quantize whole 32-blocks: `d = amax / 127`, `q = round(x / d)`, `ds = [d, d * sum(q)]`.
pub(crate) fn quantize_q8x32_scalar(x: &[f32], qs: &mut [i8], ds: &mut [[f32; 2]]) {
    for ((xb, qb), ds) in x.chunks_exact(32).zip(qs.chunks_exact_mut(32)).zip(ds) {
        let d = block_scale(xb);
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        let mut sum = 0i32;
        for (q, &v) in qb.iter_mut().zip(xb) {
            *q = round_i8(v * id);
            sum += *q as i32;
        }
        *ds = [d, d * sum as f32];
    }
}

/// Quantize whole 256-blocks: `ds = [d, 0]` and the sum of every 16 q's.
pub(crate) fn quantize_q8x256_scalar(
    x: &[f32],
    qs: &mut [i8],
    ds: &mut [[f32; 2]],
    sums16: &mut [i32],
) {
    let blocks = x.chunks_exact(256).zip(qs.chunks_exact_mut(256)).zip(ds);
    for (((xb, qb), ds), sums) in blocks.zip(sums16.chunks_exact_mut(16)) {
        let d = block_scale(xb);
        let id = if d == 0.0 { 0.0 } else { 1.0 / d };
        for (q, &v) in qb.iter_mut().zip(xb) {
            *q = round_i8(v * id);
        }
        for (sum, q16) in sums.iter_mut().zip(qb.chunks_exact(16)) {
            *sum = q16.iter().map(|&q| q as i32).sum();
        }
        *ds = [d, 0.0];
    }
}

/// One tile's worth of activation rows and their quantized forms.
struct RowsPart<'a> {
    x: &'a [f32],
    qs: &'a mut [i8],
    ds: &'a mut [[f32; 2]],
    sums16: &'a mut [i32],
}

/// Which activation quantizer a path runs; every one gives the scalar quantizer's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Quantizer {
    Scalar,
    /// x86-64 AVX2 + FMA (the CPU was checked by the path).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    /// x86-64 AVX-512 F/BW/VL.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
    /// aarch64 NEON (the baseline).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Neon,
}

fn quantizer(path: KernelPath) -> Quantizer {
    match path {
        KernelPath::Scalar => Quantizer::Scalar,
        KernelPath::Avx2 | KernelPath::Avx2Vnni => Quantizer::Avx2,
        KernelPath::Avx512 | KernelPath::Avx512Vnni => Quantizer::Avx512,
        KernelPath::Neon | KernelPath::NeonDotprod | KernelPath::NeonI8mm => Quantizer::Neon,
    }
}

/// Quantize `rows` activation rows into the row format and, with `tile`, pack them (at most
/// [`gemm::TILE`] rows) into that GEMM tile.
fn quantize_rows(
    format: ActFormat,
    quantizer: Quantizer,
    part: RowsPart,
    rows: usize,
    cols: usize,
    tile: Option<(&mut [Line], gemm::TileLayout)>,
) {
    let RowsPart { x, qs, ds, sums16 } = part;
    // SAFETY (all SIMD calls): the quantizer comes from a kernel path whose CPU features
    // `matmul_multi_with` checked (NEON is the aarch64 baseline).
    match (format, quantizer) {
        (ActFormat::Float, _) => return,
        #[cfg(target_arch = "x86_64")]
        (ActFormat::Q8x32, Quantizer::Avx512) => unsafe { x86::quantize_q8x32_avx512(x, qs, ds) },
        #[cfg(target_arch = "x86_64")]
        (ActFormat::Q8x32, Quantizer::Avx2) => unsafe { x86::quantize_q8x32_avx2(x, qs, ds) },
        #[cfg(target_arch = "aarch64")]
        (ActFormat::Q8x32, Quantizer::Neon) => unsafe { neon::quantize_q8x32_neon(x, qs, ds) },
        (ActFormat::Q8x32, _) => quantize_q8x32_scalar(x, qs, ds),
        #[cfg(target_arch = "x86_64")]
        (ActFormat::Q8x256, Quantizer::Avx512) => unsafe {
            x86::quantize_q8x256_avx512(x, qs, ds, sums16)
        },
        #[cfg(target_arch = "x86_64")]
        (ActFormat::Q8x256, Quantizer::Avx2) => unsafe {
            x86::quantize_q8x256_avx2(x, qs, ds, sums16)
        },
        #[cfg(target_arch = "aarch64")]
        (ActFormat::Q8x256, Quantizer::Neon) => unsafe {
            neon::quantize_q8x256_neon(x, qs, ds, sums16)
        },
        (ActFormat::Q8x256, _) => quantize_q8x256_scalar(x, qs, ds, sums16),
    }
    if let Some((tile, layout)) = tile {
        match format {
            ActFormat::Q8x32 => gemm::pack_tile_32(qs, ds, rows, cols, tile, layout),
            _ => gemm::pack_tile_256(qs, ds, sums16, rows, cols, tile, layout),
        }
    }
}

/// Quantize `m` activation rows for `format` (and pack GEMM tiles when `gemm`); in parallel
/// over tiles of 16 rows when there are several.
fn prepare_acts(
    format: ActFormat,
    path: KernelPath,
    gemm: bool,
    x: &[f32],
    m: usize,
    cols: usize,
    s: &mut ActivationScratch,
) {
    if format == ActFormat::Float {
        return;
    }
    s.reserve(m, cols);
    let quantizer = quantizer(path);
    let layout = gemm_tiles(path).map_or(gemm::TileLayout::Lanes, GemmTiles::layout);
    let nb = cols / if format == ActFormat::Q8x32 { 32 } else { 256 };
    let tile_rows = gemm::TILE;
    let n_tiles = m.div_ceil(tile_rows);
    let tile_lines = if gemm {
        gemm::tile_lines(tile_rows, cols)
    } else {
        0
    };
    // `reserve` sized the tiles too (gemm implies m >= GEMM_MIN_ROWS).
    let (qs, ds) = (&mut s.qs[..m * cols], &mut s.ds[..m * nb]);
    let sums16 = &mut s.sums16[..m * cols / 16];
    let tiles = &mut s.tiles[..n_tiles * tile_lines];
    let rows_of = |t: usize| (m - t * tile_rows).min(tile_rows);
    if n_tiles == 1 {
        let part = RowsPart { x, qs, ds, sums16 };
        let tile = gemm.then_some((tiles, layout));
        quantize_rows(format, quantizer, part, m, cols, tile);
        return;
    }
    let parts = x
        .par_chunks(tile_rows * cols)
        .zip(qs.par_chunks_mut(tile_rows * cols))
        .zip(ds.par_chunks_mut(tile_rows * nb))
        .zip(sums16.par_chunks_mut(tile_rows * cols / 16))
        .map(|(((x, qs), ds), sums16)| RowsPart { x, qs, ds, sums16 });
    if gemm {
        parts
            .zip(tiles.par_chunks_mut(tile_lines))
            .enumerate()
            .for_each(|(t, (part, tile))| {
                quantize_rows(
                    format,
                    quantizer,
                    part,
                    rows_of(t),
                    cols,
                    Some((tile, layout)),
                )
            });
    } else {
        parts
            .enumerate()
            .for_each(|(t, part)| quantize_rows(format, quantizer, part, rows_of(t), cols, None));
    }
}

/// Widen an f16 scale stored at `p[0..2]`.
#[inline]
pub(crate) fn f16_at(p: &[u8], off: usize) -> f32 {
    f16_to_f32([p[off], p[off + 1]])
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    /// Values that hit every rounding case: exact halves (ties away from zero), near-halves,
    /// zeros, blocks with NaN, infinities, subnormal and huge magnitudes.
    fn awkward_rows(n: usize) -> Vec<f32> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        (0..n)
            .map(|i| {
                let r = next();
                match (i / 256) % 6 {
                    // One 127 per block keeps the scale 1: then k + 0.5 are exact ties.
                    0 if i % 32 == 0 => 127.0,
                    0 => (r % 255) as f32 / 2.0 - 63.5,
                    1 => {
                        f32::from_bits(r as u32 & 0x3fff_ffff)
                            * if r >> 40 & 1 == 1 { -1.0 } else { 1.0 }
                    }
                    2 if i % 97 == 5 => f32::NAN,
                    3 if i % 101 == 7 => f32::INFINITY,
                    4 => f32::from_bits((r as u32) & 0x0000_ffff),
                    _ => ((r % 20001) as f32 - 10000.0) * 1e-3,
                }
            })
            .collect()
    }

    /// The SIMD activation quantizers of this target that the CPU runs.
    #[cfg(target_arch = "x86_64")]
    fn simd_quantizers() -> Vec<(&'static str, Q8x32Fn, Q8x256Fn)> {
        let mut all = Vec::new();
        if KernelPath::Avx2.is_available() {
            all.push((
                "avx2",
                x86::quantize_q8x32_avx2 as Q8x32Fn,
                x86::quantize_q8x256_avx2 as Q8x256Fn,
            ));
        }
        if KernelPath::Avx512.is_available() {
            all.push((
                "avx512",
                x86::quantize_q8x32_avx512 as Q8x32Fn,
                x86::quantize_q8x256_avx512 as Q8x256Fn,
            ));
        }
        all
    }

    #[cfg(target_arch = "aarch64")]
    fn simd_quantizers() -> Vec<(&'static str, Q8x32Fn, Q8x256Fn)> {
        assert!(KernelPath::Neon.is_available());
        vec![(
            "neon",
            neon::quantize_q8x32_neon as Q8x32Fn,
            neon::quantize_q8x256_neon as Q8x256Fn,
        )]
    }

    type Q8x32Fn = unsafe fn(&[f32], &mut [i8], &mut [[f32; 2]]);
    type Q8x256Fn = unsafe fn(&[f32], &mut [i8], &mut [[f32; 2]], &mut [i32]);

    /// Guards against silently testing only the scalar path on an aarch64 machine.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn neon_paths_are_available_and_chosen() {
        assert!(KernelPath::Neon.is_available());
        let best = if neon::has_dotprod() && neon::has_i8mm() {
            KernelPath::NeonI8mm
        } else if neon::has_dotprod() {
            KernelPath::NeonDotprod
        } else {
            KernelPath::Neon
        };
        assert_eq!(best_kernel_path(), best);
        assert_eq!(*available_kernel_paths().last().unwrap(), best);
    }

    /// Offsets of the f16 scale fields in a block of each GEMM type.
    fn f16_fields(ty: GgmlType) -> &'static [usize] {
        use GgmlType::*;
        match ty {
            Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
            Q6_K => &[208],
            _ => &[0],
        }
    }

    #[test]
    fn every_gemm_and_gemv_path_gives_the_reference_bits() {
        use GgmlType::*;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut ran = 0;
        for ty in [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K] {
            // Ragged on purpose: 37 weight rows (not a multiple of the GEMM's 8 or the GEMV's
            // 16), up to 37 activation rows (two full tiles and a partial one).
            let (rows, m) = (37, 37);
            let cols = if ty.block_size() == 256 { 512 } else { 96 };
            let mut data: Vec<u8> = (0..rows * ty.row_bytes(cols).unwrap())
                .map(|_| next() as u8)
                .collect();
            for block in data.chunks_exact_mut(ty.type_size()) {
                for &off in f16_fields(ty) {
                    let v = ((next() % 2001) as f32 - 1000.0) * 2e-5;
                    block[off..off + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
                }
            }
            let w = PackedMatrix::new(ty, &data, rows, cols);
            let x: Vec<f32> = (0..m * cols)
                .map(|_| ((next() % 20001) as f32 - 10000.0) * 1e-4)
                .collect();
            let (mut qs, mut ds) = (vec![0i8; m * cols], vec![[0f32; 2]; m * cols / 32]);
            let mut sums16 = vec![0i32; m * cols / 16];
            let nb = cols / ty.block_size();
            if ty.block_size() == 32 {
                quantize_q8x32_scalar(&x, &mut qs, &mut ds);
            } else {
                quantize_q8x256_scalar(&x, &mut qs, &mut ds, &mut sums16);
            }
            let row_bytes = ty.row_bytes(cols).unwrap();
            let want: Vec<f32> = (0..m * rows)
                .map(|k| {
                    let (i, r) = (k / rows, k % rows);
                    gemm::reference_dot(
                        ty,
                        &data[r * row_bytes..(r + 1) * row_bytes],
                        cols,
                        &qs[i * cols..(i + 1) * cols],
                        &ds[i * nb..(i + 1) * nb],
                        &sums16[i * cols / 16..(i + 1) * cols / 16],
                    )
                })
                .collect();
            // Decode (1), small batches (GEMV), and the GEMM from 16 rows.
            for path in available_kernel_paths() {
                for mi in [1, 2, 15, 16, 37] {
                    let gemm = mi >= GEMM_MIN_ROWS && gemm_tiles(path).is_some();
                    assert!(
                        gemm || gemv_kind(path).is_some(),
                        "{path:?} m = {mi}: no GEMV or GEMM"
                    );
                    let mut y = vec![f32::NAN; mi * rows];
                    let (x, mut s) = (&x[..mi * cols], ActivationScratch::new());
                    matmul_with(path, &w, x, mi, &mut y, &mut s).unwrap();
                    for (k, (g, e)) in y.iter().zip(&want).enumerate() {
                        assert_eq!(
                            g.to_bits(),
                            e.to_bits(),
                            "{ty} {path:?} m = {mi}: y[{}, {}] = {g}, reference {e}",
                            k / rows,
                            k % rows
                        );
                    }
                    ran += 1;
                }
            }
        }
        assert_eq!(ran, 8 * 5 * available_kernel_paths().len());
    }

    #[test]
    fn simd_quantizers_give_the_scalar_bytes() {
        let x = awkward_rows(256 * 12);
        let n = x.len();
        let bits = |d: &[[f32; 2]]| d.iter().flatten().map(|v| v.to_bits()).collect::<Vec<_>>();
        for (name, q8x32, q8x256) in simd_quantizers() {
            let (mut q1, mut q2) = (vec![0i8; n], vec![0i8; n]);
            let (mut d1, mut d2) = (vec![[0f32; 2]; n / 32], vec![[0f32; 2]; n / 32]);
            quantize_q8x32_scalar(&x, &mut q1, &mut d1);
            unsafe { q8x32(&x, &mut q2, &mut d2) };
            assert_eq!(q1, q2, "{name} 32-blocks");
            assert_eq!(bits(&d1), bits(&d2), "{name} 32-block scales");
            let (mut s1, mut s2) = (vec![0i32; n / 16], vec![0i32; n / 16]);
            quantize_q8x256_scalar(&x, &mut q1, &mut d1[..n / 256], &mut s1);
            unsafe { q8x256(&x, &mut q2, &mut d2[..n / 256], &mut s2) };
            assert_eq!(q1, q2, "{name} 256-blocks");
            assert_eq!(
                bits(&d1[..n / 256]),
                bits(&d2[..n / 256]),
                "{name} 256 scales"
            );
            assert_eq!(s1, s2, "{name} sums of 16");
        }
    }
}
