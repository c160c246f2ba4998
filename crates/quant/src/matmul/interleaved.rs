//! Weights re-laid out once at load for the few-rows kernels (decode, and batches below the
//! GEMM's 16 rows): 16 weight rows interleaved, one per 32-bit lane.
//!
//! The file's layout keeps a row's blocks together, so a GEMV that puts weight rows in lanes
//! must decode 16 rows separately and transpose their sums with an add tree; at 8 activation
//! rows that tree, the decode and the scale gathers cost more than the integer dots. Here,
//! per group of 16 rows and per block, each 64-byte [`Line`] holds 4 code bytes of every row
//! (lane `l` = row `l`), so one `vpdpbusd` against 4 activation bytes broadcast to all lanes
//! adds 4 products to each of the 16 rows' sums: no tree, nothing to transpose, the decode
//! (a mask and a shift for 4-bit codes) shared by every activation row, and the rows' f16
//! scales one load. AVX2 without VNNI reads the same lines as two halves of 8 lanes, with
//! `vpmaddubsw` in place of `vpdpbusd`. Each output is still [`super::gemm::reference_dot`]'s arithmetic (exact
//! integer block sums, then the same f32 steps in block order), so the bits equal every other
//! path's: batch invariance is kept.
//!
//! Per group (rows `16g .. 16g + 16`, missing rows zero), block by block:
//! - Q4_1: a scale line (`d` of the 16 rows as f16, then their `m`), then 4 code lines: line
//!   `q`, lane `l` = bytes `4q .. 4q + 4` of row `l`'s 16 nibble bytes (low nibbles are
//!   elements `4q ..`, high nibbles elements `16 + 4q ..`).
//! - Q4_0 and Q8_0 (no min): per pair of blocks one scale line (the first block's `d`, then the
//!   second's), then each block's code lines (Q8_0: 8 lines of bytes stored `+128`, unsigned).
//!
//! The same bytes as the file, within a scale line per odd block count: a group reads as one
//! sequential stream. The prefill GEMM unpacks its rows from the lanes too
//! ([`InterleavedMatrix::unpack_row`]), so the file's copy of a matrix is not read at all once
//! an interleaved copy exists.

use super::{best_kernel_path, KernelPath, Line, PackedMatrix};
use crate::{GgmlType, QuantError};

/// Weight rows per group (one per 32-bit lane of a 512-bit register).
pub(crate) const LANES: usize = 16;

/// A packed matrix re-laid out for the few-rows kernels; see the module docs. Built from a
/// [`PackedMatrix`] by [`InterleavedMatrix::new`] and handed back to the kernels through
/// [`PackedMatrix::interleaved`].
#[derive(Debug)]
pub struct InterleavedMatrix {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    lines: Vec<Line>,
}

/// Code lines per 32-element block.
fn code_lines(ty: GgmlType) -> usize {
    if ty == GgmlType::Q8_0 {
        8
    } else {
        4
    }
}

/// Whether this type has an interleaved layout.
fn interleavable(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0)
}

/// Whether `path` has kernels that read the interleaved layout: AVX-512 VNNI, and AVX2
/// without VNNI (also run by AVX-512 without VNNI). AVX-VNNI keeps the file's layout.
pub(crate) fn path_reads_interleaved(path: KernelPath) -> bool {
    cfg!(target_arch = "x86_64")
        && matches!(
            path,
            KernelPath::Avx512Vnni | KernelPath::Avx2 | KernelPath::Avx512
        )
}

/// Where block `b`'s data starts within a group: (scale line, which half of it holds `d`,
/// first code line). Q4_1 keeps `m` in the other half.
#[inline(always)]
pub(crate) fn block_lines(min: bool, cl: usize, b: usize) -> (usize, usize, usize) {
    if min {
        let s = b * (1 + cl);
        (s, 0, s + 1)
    } else {
        let s = (b / 2) * (1 + 2 * cl);
        (s, b % 2, s + 1 + (b % 2) * cl)
    }
}

fn group_lines(ty: GgmlType, nb: usize) -> usize {
    let cl = code_lines(ty);
    if ty == GgmlType::Q4_1 {
        nb * (1 + cl)
    } else {
        nb.div_ceil(2) + nb * cl
    }
}

fn line_bytes_mut(lines: &mut [Line]) -> &mut [u8] {
    // SAFETY: a `Line` is 64 plain bytes (`[i32; 16]`, no padding); the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast(), lines.len() * 64) }
}

impl InterleavedMatrix {
    /// `w` re-laid out, when this CPU's best kernel path reads the layout and the type has
    /// one (Q4_0, Q4_1, Q8_0); `Ok(None)` otherwise (the file's layout is then all there is).
    pub fn new(w: &PackedMatrix) -> Result<Option<Self>, QuantError> {
        if !interleavable(w.ty) || !path_reads_interleaved(best_kernel_path()) {
            return Ok(None);
        }
        Self::build(w).map(Some)
    }

    /// `w` re-laid out whatever the CPU (for tests of the layout); an error for a type
    /// without an interleaved layout or a malformed matrix.
    pub fn build(w: &PackedMatrix) -> Result<Self, QuantError> {
        if !interleavable(w.ty) {
            return Err(QuantError::Unsupported {
                ty: w.ty,
                operation: "interleaving for the few-rows kernels",
            });
        }
        let row_bytes = super::check_matrix(w)?;
        let (ty, cols) = (w.ty, w.cols);
        let nb = cols / 32;
        let (ts, cl, min) = (ty.type_size(), code_lines(ty), ty == GgmlType::Q4_1);
        let off = if min { 4 } else { 2 };
        let per_group = group_lines(ty, nb);
        let groups = w.rows.div_ceil(LANES);
        let mut lines = vec![Line::default(); groups * per_group];
        for (g, group) in lines.chunks_exact_mut(per_group.max(1)).enumerate() {
            let bytes = line_bytes_mut(group);
            for l in 0..LANES.min(w.rows - g * LANES) {
                let row = &w.data[(g * LANES + l) * row_bytes..][..row_bytes];
                for (b, blk) in row.chunks_exact(ts).enumerate() {
                    let (s, half, c) = block_lines(min, cl, b);
                    let sl = s * 64 + half * 32 + 2 * l;
                    bytes[sl..sl + 2].copy_from_slice(&blk[..2]);
                    if min {
                        bytes[sl + 32..sl + 34].copy_from_slice(&blk[2..4]);
                    }
                    for q in 0..cl {
                        let at = (c + q) * 64 + 4 * l;
                        let src = &blk[off + 4 * q..off + 4 * q + 4];
                        for (d, &v) in bytes[at..at + 4].iter_mut().zip(src) {
                            *d = if ty == GgmlType::Q8_0 { v ^ 0x80 } else { v };
                        }
                    }
                }
            }
        }
        Ok(Self {
            ty,
            rows: w.rows,
            cols,
            lines,
        })
    }

    /// The element type of the rows.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Bytes held (the interleaved copy; the file's bytes are separate).
    pub fn bytes(&self) -> usize {
        self.lines.len() * 64
    }

    /// Whether this is a copy of `w` in shape and type.
    pub(crate) fn matches(&self, w: &PackedMatrix) -> bool {
        (self.ty, self.rows, self.cols) == (w.ty, w.rows, w.cols)
    }

    /// The lines of group `g` (rows `16g .. 16g + 16`).
    pub(crate) fn group(&self, g: usize) -> &[Line] {
        let per_group = group_lines(self.ty, self.cols / 32);
        &self.lines[g * per_group..(g + 1) * per_group]
    }
}

impl InterleavedMatrix {
    /// Row `r` unpacked as [`super::gemm::Unpacked::unpack`] unpacks the file's row: codes to
    /// one unsigned byte per element (`q`, `cols` bytes; Q8_0 stored `+128`), `d` and `m` per
    /// block. Straight from the lanes, without rebuilding the file's bytes first.
    #[inline(always)]
    pub(crate) fn unpack_row(&self, r: usize, q: &mut [u8], d: &mut [f32], m: &mut [f32]) {
        for b in 0..self.cols / 32 {
            let out: &mut [u8; 32] = (&mut q[b * 32..b * 32 + 32]).try_into().unwrap();
            (d[b], m[b]) = self.unpack_block(r, b, out);
        }
    }

    /// Row `r` as f32: bit for bit what [`crate::dequantize`] gives for the file's row, read
    /// from the copy alone (so the file's pages need not stay resident for lookups).
    pub(crate) fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        let mut q = [0u8; 32];
        for (b, out) in out.chunks_exact_mut(32).enumerate() {
            let (d, m) = self.unpack_block(r, b, &mut q);
            for (o, &q) in out.iter_mut().zip(&q) {
                // The same products and sums as `dequant_q4_0`, `dequant_q4_1`, `dequant_q8_0`.
                *o = match self.ty {
                    GgmlType::Q4_0 => d * (q as i8 - 8) as f32,
                    GgmlType::Q4_1 => d * q as f32 + m,
                    _ => (q ^ 0x80) as i8 as f32 * d,
                };
            }
        }
    }

    /// Block `b` of row `r`: its 32 codes as unsigned bytes, and its `d` and `m` (0 unless
    /// Q4_1).
    #[inline(always)]
    fn unpack_block(&self, r: usize, b: usize, out: &mut [u8; 32]) -> (f32, f32) {
        let (ty, cl, min) = (self.ty, code_lines(self.ty), self.ty == GgmlType::Q4_1);
        let group = self.group(r / LANES);
        let l = r % LANES;
        let f16 = |line: &Line, half: usize| {
            let v = line.0[half * 8 + l / 2] as u32;
            crate::blocks::f16_to_f32(((v >> (16 * (l % 2))) as u16).to_le_bytes())
        };
        let (s, half, c) = block_lines(min, cl, b);
        let d = f16(&group[s], half);
        let m = if min { f16(&group[s], 1) } else { 0.0 };
        if ty == GgmlType::Q8_0 {
            for (k, line) in group[c..c + 8].iter().enumerate() {
                out[4 * k..4 * k + 4].copy_from_slice(&line.0[l].to_le_bytes());
            }
        } else {
            for (k, line) in group[c..c + 4].iter().enumerate() {
                let v = line.0[l] as u32;
                let lo = v & 0x0f0f_0f0f;
                let hi = (v >> 4) & 0x0f0f_0f0f;
                out[4 * k..4 * k + 4].copy_from_slice(&lo.to_le_bytes());
                out[16 + 4 * k..16 + 4 * k + 4].copy_from_slice(&hi.to_le_bytes());
            }
        }
        (d, m)
    }
}

/// Groups of weight rows `lo..hi` (multiples of [`LANES`], `hi` may be `rows`) against the
/// `m` activation rows of `a`; writes `y[i * rows + r]`.
///
/// Safety: the caller validated `w` against `iw` ([`InterleavedMatrix::matches`]), `a` (`m`
/// rows of `cols` in the 32-block format with `sums32` filled), that `out` points at
/// `m * rows` floats of which this task alone writes rows `lo..hi` of each output row, and
/// that the CPU runs `path`, one for which [`path_reads_interleaved`] holds.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemv_rows(
    path: KernelPath,
    iw: &InterleavedMatrix,
    a: &super::QActs,
    m: usize,
    out: *mut f32,
    lo: usize,
    hi: usize,
) {
    use super::gemv::kind as k;
    use GgmlType::*;
    type F<const R: usize> =
        unsafe fn(*const Line, usize, &super::QActs, usize) -> [[f32; LANES]; R];
    macro_rules! pick {
        ($kernel:ident, $r:literal) => {
            match iw.ty {
                Q4_0 => x86::$kernel::<{ k::Q4_0 }, $r> as F<$r>,
                Q4_1 => x86::$kernel::<{ k::Q4_1 }, $r>,
                _ => x86::$kernel::<{ k::Q8_0 }, $r>,
            }
        };
    }
    debug_assert!(path_reads_interleaved(path));
    // AVX2 has half the registers of AVX-512 for twice the vectors per group. An 8-row
    // kernel pays for spilled sums with one decode of each weight line for 8 rows instead of
    // two 4-row calls' two: a loss for 4-bit codes (their 16-bit block sums double the
    // registers a row needs), a gain for Q8_0 (Zen 2, `batch_sweep`, 49152x576 at m = 8:
    // 2.77-2.82 ms against 3.03-3.13; Q4_1 1536x576: 76.0-77.3 us against 74.8-75.6).
    let avx2_8 = iw.ty == Q8_0;
    let (f8, f4, f2, f1) = if path == KernelPath::Avx512Vnni {
        (
            Some(pick!(lanes_32, 8)),
            pick!(lanes_32, 4),
            pick!(lanes_32, 2),
            pick!(lanes_32, 1),
        )
    } else {
        (
            avx2_8.then_some(pick!(lanes_32_avx2, 8)),
            pick!(lanes_32_avx2, 4),
            pick!(lanes_32_avx2, 2),
            pick!(lanes_32_avx2, 1),
        )
    };
    let (rows, nb) = (iw.rows, iw.cols / 32);
    let store = |v: &[[f32; LANES]], i: usize, r0: usize, n: usize| {
        for (j, v) in v.iter().enumerate() {
            std::ptr::copy_nonoverlapping(v.as_ptr(), out.add((i + j) * rows + r0), n);
        }
    };
    let mut r0 = lo;
    while r0 < hi {
        let n = (hi - r0).min(LANES);
        let group = iw.group(r0 / LANES).as_ptr();
        let mut i = 0;
        while i < m {
            let left = m - i;
            if let (true, Some(f8)) = (left >= 8, f8) {
                store(&f8(group, nb, a, i), i, r0, n);
                i += 8;
            } else if left >= 4 {
                store(&f4(group, nb, a, i), i, r0, n);
                i += 4;
            } else if left >= 2 {
                store(&f2(group, nb, a, i), i, r0, n);
                i += 2;
            } else {
                store(&f1(group, nb, a, i), i, r0, n);
                i += 1;
            }
        }
        r0 += n;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::gemv::{kind::*, layout};
    use super::super::{Line, QActs};
    use super::{block_lines, LANES};

    /// Lines ahead of the current block that [`lanes_32`] prefetches.
    const PREFETCH_LINES: usize = 48;

    /// One group of 16 weight rows (`group`, [`super::group_lines`] lines) against activation
    /// rows `i0 .. i0 + R`: lane `l` of `out[j]` is weight row `l`'s output for row `i0 + j`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn lanes_32<const KIND: u8, const R: usize>(
        group: *const Line,
        nb: usize,
        a: &QActs,
        i0: usize,
    ) -> [[f32; LANES]; R] {
        let (_, _, min, _, shift) = layout(KIND);
        let cl = if KIND == Q8_0 { 8 } else { 4 };
        let cols = a.cols;
        let nibble = _mm512_set1_epi8(0x0f);
        let x: [*const u8; R] = std::array::from_fn(|j| a.qs.as_ptr().add((i0 + j) * cols).cast());
        // Four activation bytes as one dword, broadcast to every lane.
        let bcast = |p: *const u8| _mm512_set1_epi32(p.cast::<i32>().read_unaligned());
        let mut acc = [_mm512_setzero_ps(); R];
        for b in 0..nb {
            let (s, half, c) = block_lines(min, cl, b);
            // The weights stream from memory once per step at few rows: ask for the lines
            // PREFETCH_LINES ahead (into the next group at the end; a prefetch never faults).
            for l in 0..=cl {
                let ahead = group.wrapping_add(c + l + PREFETCH_LINES);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            }
            let sl = _mm512_load_si512(group.add(s).cast());
            let d = _mm512_cvtph_ps(if half == 0 {
                _mm512_castsi512_si256(sl)
            } else {
                _mm512_extracti64x4_epi64::<1>(sl)
            });
            // Two sums per row (low and high nibbles) halve the dependency chains.
            let mut lo_sum = [_mm512_setzero_si512(); R];
            let mut hi_sum = [_mm512_setzero_si512(); R];
            if KIND == Q8_0 {
                for q in 0..8 {
                    let v = _mm512_load_si512(group.add(c + q).cast());
                    // At 8 rows the second sums would not fit in the registers.
                    let sums = if R >= 8 || q % 2 == 0 {
                        &mut lo_sum
                    } else {
                        &mut hi_sum
                    };
                    for j in 0..R {
                        let xv = bcast(x[j].add(b * 32 + 4 * q));
                        sums[j] = _mm512_dpbusd_epi32(sums[j], v, xv);
                    }
                }
            } else {
                for q in 0..4 {
                    let v = _mm512_load_si512(group.add(c + q).cast());
                    let lo = _mm512_and_si512(v, nibble);
                    let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
                    for j in 0..R {
                        let xl = bcast(x[j].add(b * 32 + 4 * q));
                        let xh = bcast(x[j].add(b * 32 + 16 + 4 * q));
                        lo_sum[j] = _mm512_dpbusd_epi32(lo_sum[j], lo, xl);
                        if R >= 8 {
                            lo_sum[j] = _mm512_dpbusd_epi32(lo_sum[j], hi, xh);
                        } else {
                            hi_sum[j] = _mm512_dpbusd_epi32(hi_sum[j], hi, xh);
                        }
                    }
                }
            }
            let mn = if min {
                _mm512_cvtph_ps(_mm512_extracti64x4_epi64::<1>(sl))
            } else {
                _mm512_setzero_ps()
            };
            for j in 0..R {
                let k = (i0 + j) * nb + b;
                let isum = _mm512_add_epi32(lo_sum[j], hi_sum[j]);
                let isum = if min {
                    isum
                } else {
                    _mm512_sub_epi32(isum, _mm512_set1_epi32(*a.sums32.get_unchecked(k) << shift))
                };
                let [dx, dsum] = *a.ds.get_unchecked(k);
                let scale = _mm512_mul_ps(_mm512_set1_ps(dx), d);
                acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[j]);
                if min {
                    acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(dsum), mn, acc[j]);
                }
            }
        }
        let mut out = [[0f32; LANES]; R];
        for (o, v) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), v);
        }
        out
    }

    /// [`lanes_32`]'s arithmetic on AVX2 without VNNI (`vpmaddubsw`, then `vpmaddwd` against
    /// ones): a group's 16 rows in two passes of 8 lanes (the low and high 32 bytes of each
    /// line; the second pass finds the group's lines in L1).
    ///
    /// 4-bit codes sum their 8 byte-pair products per block in 16 bits (at most
    /// 8 * 2 * 15 * 128 = 30720, no saturation), so `vpmaddwd` runs once per block. Q8_0
    /// dots `|w|` with `sign(x, w)` (pairs at most 2 * 128 * 127) and needs no offset: the
    /// same exact integer as `w + 128` against `x` less `128 * sum(x)`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn lanes_32_avx2<const KIND: u8, const R: usize>(
        group: *const Line,
        nb: usize,
        a: &QActs,
        i0: usize,
    ) -> [[f32; LANES]; R] {
        let (_, _, min, _, shift) = layout(KIND);
        let cl = if KIND == Q8_0 { 8 } else { 4 };
        let cols = a.cols;
        let nibble = _mm256_set1_epi8(0x0f);
        let ones = _mm256_set1_epi16(1);
        let x: [*const u8; R] = std::array::from_fn(|j| a.qs.as_ptr().add((i0 + j) * cols).cast());
        let bcast = |p: *const u8| _mm256_set1_epi32(p.cast::<i32>().read_unaligned());
        // The 32 bytes of line `l` that hold rows `8h .. 8h + 8`.
        let half_line = |l: usize, h: usize| group.add(l).cast::<u8>().add(32 * h);
        let mut out = [[0f32; LANES]; R];
        for h in 0..2 {
            let mut acc = [_mm256_setzero_ps(); R];
            for b in 0..nb {
                let (s, half, c) = block_lines(min, cl, b);
                if h == 0 {
                    for l in 0..=cl {
                        let ahead = group.wrapping_add(c + l + PREFETCH_LINES);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                    }
                }
                // f16 `d` of the 8 rows (Q4_1: `m` 32 bytes further).
                let sl = half_line(s, 0).add(32 * half + 16 * h);
                let d = _mm256_cvtph_ps(_mm_load_si128(sl.cast()));
                let mut isum = [_mm256_setzero_si256(); R];
                if KIND == Q8_0 {
                    for q in 0..8 {
                        let ws = _mm256_xor_si256(
                            _mm256_load_si256(half_line(c + q, h).cast()),
                            _mm256_set1_epi8(-128),
                        );
                        let wa = _mm256_sign_epi8(ws, ws);
                        for j in 0..R {
                            let xv = _mm256_sign_epi8(bcast(x[j].add(b * 32 + 4 * q)), ws);
                            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, xv), ones);
                            isum[j] = _mm256_add_epi32(isum[j], p);
                        }
                    }
                } else {
                    let mut s16 = [_mm256_setzero_si256(); R];
                    for q in 0..4 {
                        let v = _mm256_load_si256(half_line(c + q, h).cast());
                        let lo = _mm256_and_si256(v, nibble);
                        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble);
                        for j in 0..R {
                            let xl = bcast(x[j].add(b * 32 + 4 * q));
                            let xh = bcast(x[j].add(b * 32 + 16 + 4 * q));
                            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(lo, xl));
                            s16[j] = _mm256_add_epi16(s16[j], _mm256_maddubs_epi16(hi, xh));
                        }
                    }
                    for j in 0..R {
                        isum[j] = _mm256_madd_epi16(s16[j], ones);
                    }
                }
                let mn = if min {
                    _mm256_cvtph_ps(_mm_load_si128(sl.add(32).cast()))
                } else {
                    _mm256_setzero_ps()
                };
                for j in 0..R {
                    let k = (i0 + j) * nb + b;
                    let isum = if min || KIND == Q8_0 {
                        isum[j]
                    } else {
                        let offset = *a.sums32.get_unchecked(k) << shift;
                        _mm256_sub_epi32(isum[j], _mm256_set1_epi32(offset))
                    };
                    let [dx, dsum] = *a.ds.get_unchecked(k);
                    let scale = _mm256_mul_ps(_mm256_set1_ps(dx), d);
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[j]);
                    if min {
                        acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dsum), mn, acc[j]);
                    }
                }
            }
            for (o, v) in out.iter_mut().zip(acc) {
                _mm256_storeu_ps(o.as_mut_ptr().add(8 * h), v);
            }
        }
        out
    }
}
