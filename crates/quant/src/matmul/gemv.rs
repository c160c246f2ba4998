//! Few activation rows (decode, and batches below the GEMM's 16): weight rows in lanes.
//!
//! A kernel takes [`GV`] consecutive weight rows and one activation row and computes the 16
//! outputs together: per block, each row's codes are unpacked in registers straight from the
//! file's bytes, each row's exact integer dot is taken (`vpdpbusd` or `vpmaddubsw` on x86,
//! `sdot` or `smull` + `sadalp` on aarch64), the rows' lanes are summed by a transposing add
//! tree so that lane `l` holds row `l`'s sum, and the f32 scale step of
//! [`gemm::reference_dot`] runs once for all the rows of a register (16, 8, or 4 on NEON), in
//! block order. Every output thus gets exactly the reference arithmetic, the prefill GEMM's
//! bits: a token's result does not depend on `m`, on its place in the batch, on the kernel
//! path, or on how rows were split over tasks.
//!
//! The rows are read block-major (16 rows at once), which would defeat the hardware's
//! stream prefetch; each kernel prefetches the next group's bytes in address order instead.

use super::gemm::{self, UNPACKED};
use super::{PackedMatrix, QActs};
use crate::GgmlType;

/// Weight rows per GEMV group (one per 32-bit lane of a 512-bit register).
pub(crate) const GV: usize = 16;

/// Which GEMV kernels a path runs; all give [`gemm::reference_dot`]'s bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemvKind {
    /// Plain Rust: rows unpacked, then [`gemm::reference_dot_unpacked`] per output.
    Reference,
    /// AVX-512 VNNI: `vpdpbusd` on 512 bits, 16 rows per register.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Vnni512,
    /// AVX2: `vpmaddubsw` + `vpmaddwd` on 256 bits, 8 rows per register (also run by
    /// AVX-512 without VNNI).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    /// AVX-VNNI: `vpdpbusd` on 256 bits.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    AvxVnni,
    /// aarch64 NEON: `smull` + `sadalp` integer dots, 4 rows per register.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Neon,
    /// aarch64 FEAT_DotProd: `sdot` integer dots, 4 rows per register (also run by the I8MM
    /// path: one activation row gains nothing from `usmmla`'s 2x2 products).
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    NeonDotprod,
}

/// Per activation row, the exact sum of each 32-block's quantized values (the offset term of
/// Q4_0 / Q5_0 / Q8_0): `sums[i * cols / 32 + b]`.
pub(crate) fn block_sums(qs: &[i8], sums: &mut [i32]) {
    for (s, q) in sums.iter_mut().zip(qs.chunks_exact(32)) {
        *s = q.iter().map(|&v| v as i32).sum();
    }
}

/// A kernel reading `n` (1 ..= [`GV`]) packed rows from `rows` (`row_bytes` apart) for
/// activation row `i`; lane `l` is row `l`'s output (lanes from `n` on are not meaningful).
type GroupFn = unsafe fn(*const u8, usize, usize, &QActs, usize) -> [f32; GV];

/// The SIMD kernel of `kind` for `ty` (a [`gemm::gemm_block`] type); `None` for the
/// reference.
fn group_fn(kind: GemvKind, ty: GgmlType) -> Option<GroupFn> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        use self::kind as k;
        #[cfg(target_arch = "aarch64")]
        use arm::*;
        #[cfg(target_arch = "x86_64")]
        use x86::*;
        use GgmlType::*;
        macro_rules! pick {
            ($k32:ident, $k256:ident) => {
                Some(match ty {
                    Q4_0 => $k32::<{ k::Q4_0 }> as GroupFn,
                    Q4_1 => $k32::<{ k::Q4_1 }>,
                    Q5_0 => $k32::<{ k::Q5_0 }>,
                    Q5_1 => $k32::<{ k::Q5_1 }>,
                    Q8_0 => $k32::<{ k::Q8_0 }>,
                    Q4_K => $k256::<{ k::Q4_K }>,
                    Q5_K => $k256::<{ k::Q5_K }>,
                    _ => $k256::<{ k::Q6_K }>,
                })
            };
        }
        match kind {
            #[cfg(target_arch = "x86_64")]
            GemvKind::Vnni512 => return pick!(packed_32, packed_256),
            #[cfg(target_arch = "x86_64")]
            GemvKind::Avx2 => return pick!(avx2_32, avx2_256),
            #[cfg(target_arch = "x86_64")]
            GemvKind::AvxVnni => return pick!(avxvnni_32, avxvnni_256),
            #[cfg(target_arch = "aarch64")]
            GemvKind::Neon => return pick!(neon_32, neon_256),
            #[cfg(target_arch = "aarch64")]
            GemvKind::NeonDotprod => return pick!(dot_32, dot_256),
            _ => {}
        }
    }
    let _ = (kind, ty);
    None
}

/// Weight rows `lo..hi` against the `m` activation rows of `a`; writes `y[i * rows + r]`.
///
/// Safety: the caller validated `w` (data length, a [`gemm::gemm_block`] type), `a` (`m`
/// rows of `w.cols` in the type's row format, `sums32` filled by [`block_sums`] for 32-block
/// types), that `out` points at `m * w.rows` floats of which this task alone writes rows
/// `lo..hi` of each output row, and that the CPU runs `kind`'s kernels.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemv_rows(
    w: &PackedMatrix,
    row_bytes: usize,
    a: &QActs,
    m: usize,
    out: *mut f32,
    lo: usize,
    hi: usize,
    kind: GemvKind,
) {
    let Some(f) = group_fn(kind, w.ty) else {
        return reference_rows(w, row_bytes, a, m, out, lo, hi);
    };
    // Several activation rows: kernels that decode each weight block once for 4 of them.
    let multi = if m > 1 { group4_fn(kind, w.ty) } else { None };
    let mut r0 = lo;
    while r0 < hi {
        let n = (hi - r0).min(GV);
        let rows = w.data.as_ptr().add(r0 * row_bytes);
        let mut i = 0;
        if let Some(f4) = multi {
            while i < m {
                let mi = (m - i).min(4);
                let vs = f4(rows, row_bytes, n, a, i, mi);
                for (j, v) in vs.iter().enumerate().take(mi) {
                    std::ptr::copy_nonoverlapping(v.as_ptr(), out.add((i + j) * w.rows + r0), n);
                }
                i += mi;
            }
        }
        while i < m {
            let v = f(rows, row_bytes, n, a, i);
            std::ptr::copy_nonoverlapping(v.as_ptr(), out.add(i * w.rows + r0), n);
            i += 1;
        }
        r0 += n;
    }
}

/// A kernel like [`GroupFn`] for activation rows `i .. i + mi` (`mi` 1..=4) at once.
type Group4Fn = unsafe fn(*const u8, usize, usize, &QActs, usize, usize) -> [[f32; GV]; 4];

/// The multi-row kernel of `kind` for `ty`, where there is one.
fn group4_fn(kind: GemvKind, ty: GgmlType) -> Option<Group4Fn> {
    #[cfg(target_arch = "x86_64")]
    if kind == GemvKind::Vnni512 {
        use self::kind as k;
        use GgmlType::*;
        return match ty {
            Q4_0 => Some(x86::packed_32_x4::<{ k::Q4_0 }>),
            Q4_1 => Some(x86::packed_32_x4::<{ k::Q4_1 }>),
            Q5_0 => Some(x86::packed_32_x4::<{ k::Q5_0 }>),
            Q5_1 => Some(x86::packed_32_x4::<{ k::Q5_1 }>),
            Q8_0 => Some(x86::packed_32_x4::<{ k::Q8_0 }>),
            _ => None,
        };
    }
    let _ = (kind, ty);
    None
}

/// [`gemv_rows`] in plain Rust.
///
/// Safety: as [`gemv_rows`].
#[allow(clippy::too_many_arguments)]
unsafe fn reference_rows(
    w: &PackedMatrix,
    row_bytes: usize,
    a: &QActs,
    m: usize,
    out: *mut f32,
    lo: usize,
    hi: usize,
) {
    let (ty, cols) = (w.ty, w.cols);
    let nb = cols / ty.block_size();
    UNPACKED.with(|u| {
        let mut u = u.borrow_mut();
        u.reserve(cols);
        for r in lo..hi {
            u.unpack(ty, &w.data[r * row_bytes..(r + 1) * row_bytes], cols, 0);
            for i in 0..m {
                let (qs, ds) = (&a.qs[i * cols..(i + 1) * cols], &a.ds[i * nb..(i + 1) * nb]);
                let sums16 = &a.sums16[i * cols / 16..(i + 1) * cols / 16];
                let v = gemm::reference_dot_unpacked(ty, &u, 0, cols, qs, ds, sums16);
                *out.add(i * w.rows + r) = v;
            }
        }
    })
}

/// The packed types, as the SIMD kernels' `KIND` parameter.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) mod kind {
    pub(crate) const Q4_0: u8 = 0;
    pub(crate) const Q4_1: u8 = 1;
    pub(crate) const Q5_0: u8 = 2;
    pub(crate) const Q5_1: u8 = 3;
    pub(crate) const Q8_0: u8 = 4;
    pub(crate) const Q4_K: u8 = 5;
    pub(crate) const Q5_K: u8 = 6;
    pub(crate) const Q6_K: u8 = 7;
}

/// Of a 32-block `KIND`: bytes per block, offset of the codes, whether a min follows `d`,
/// offset of the 5th bits (Q5), log2 of the unsigned offset of the codes.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) const fn layout(kind: u8) -> (usize, usize, bool, Option<usize>, u32) {
    use kind::*;
    match kind {
        Q4_0 => (18, 2, false, None, 3),
        Q4_1 => (20, 4, true, None, 0),
        Q5_0 => (22, 6, false, Some(2), 4),
        Q5_1 => (24, 8, true, Some(4), 0),
        _ => (34, 2, false, None, 7),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::QActs;
    use super::GV;

    /// 16 rows' vectors to per-128-bit-lane row sums: `out[j]`'s 128-bit lane `q` holds, for
    /// rows `4j .. 4j + 4` (dword `t` = row `4j + t`), the sum of that row's four dwords in
    /// lane `q`. Integer adds: exact, so the tree's order is free.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn lane_sums(z: &[__m512i; GV]) -> [__m512i; 4] {
        let a: [__m512i; 8] = std::array::from_fn(|i| {
            let (x, y) = (z[2 * i], z[2 * i + 1]);
            _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y))
        });
        std::array::from_fn(|j| {
            let (x, y) = (a[2 * j], a[2 * j + 1]);
            _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y))
        })
    }

    /// [`lane_sums`] to two segments of 32 bytes (lanes 0-1 and 2-3): lane `l` of `out[s]` is
    /// row `l`'s sum over segment `s`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn halves(b: [__m512i; 4]) -> [__m512i; 2] {
        let pair = |x: __m512i, y: __m512i| {
            _mm512_add_epi32(
                _mm512_shuffle_i32x4::<0x88>(x, y),
                _mm512_shuffle_i32x4::<0xdd>(x, y),
            )
        };
        let (c01, c23) = (pair(b[0], b[1]), pair(b[2], b[3]));
        [
            _mm512_shuffle_i32x4::<0x88>(c01, c23),
            _mm512_shuffle_i32x4::<0xdd>(c01, c23),
        ]
    }

    /// [`lane_sums`] to four segments of 16 bytes (one per 128-bit lane).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn quarters(b: [__m512i; 4]) -> [__m512i; 4] {
        let t0 = _mm512_shuffle_i32x4::<0x44>(b[0], b[1]);
        let t1 = _mm512_shuffle_i32x4::<0xee>(b[0], b[1]);
        let t2 = _mm512_shuffle_i32x4::<0x44>(b[2], b[3]);
        let t3 = _mm512_shuffle_i32x4::<0xee>(b[2], b[3]);
        [
            _mm512_shuffle_i32x4::<0x88>(t0, t2),
            _mm512_shuffle_i32x4::<0xdd>(t0, t2),
            _mm512_shuffle_i32x4::<0x88>(t1, t3),
            _mm512_shuffle_i32x4::<0xdd>(t1, t3),
        ]
    }

    use super::kind::*;
    use super::layout;

    /// Blocks `b` and `b + 1` (only `b` unless `two`, the rest zero, nothing read past it)
    /// of the packed row at `p` as 64 unsigned codes in element order: the bytes
    /// `Unpacked::unpack` would write.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    unsafe fn codes2<const KIND: u8>(p: *const u8, b: usize, two: bool) -> __m512i {
        let (ts, qs, _, qh, _) = layout(KIND);
        let (b0, b1) = (p.add(b * ts), p.add((b + 1) * ts));
        if KIND == Q8_0 {
            let lo = _mm256_loadu_si256(b0.add(qs).cast());
            let hi = if two {
                _mm256_loadu_si256(b1.add(qs).cast())
            } else {
                _mm256_setzero_si256()
            };
            let z = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
            let flip = _mm512_set1_epi8(-128);
            return if two {
                _mm512_xor_si512(z, flip)
            } else {
                _mm512_mask_xor_epi64(z, 0x0f, z, flip)
            };
        }
        let lo = _mm_loadu_si128(b0.add(qs).cast());
        let hi = if two {
            _mm_loadu_si128(b1.add(qs).cast())
        } else {
            _mm_setzero_si128()
        };
        let y =
            _mm512_castsi256_si512(_mm256_inserti128_si256::<1>(_mm256_castsi128_si256(lo), hi));
        // 128-bit lanes [lo, lo, hi, hi], the second of each pair shifted to its high nibbles.
        let z = _mm512_shuffle_i64x2::<0x50>(y, y);
        let shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
        let mut c = _mm512_and_si512(_mm512_srlv_epi64(z, shifts), _mm512_set1_epi8(0x0f));
        if let Some(qh) = qh {
            let h0 = b0.add(qh).cast::<u32>().read_unaligned() as u64;
            let h1 = if two {
                b1.add(qh).cast::<u32>().read_unaligned() as u64
            } else {
                0
            };
            let fifth = _mm512_maskz_mov_epi8(h0 | (h1 << 32), _mm512_set1_epi8(0x10));
            c = _mm512_or_si512(c, fifth);
        }
        c
    }

    /// One activation row against `n` packed rows of a 32-block type, read in place (no
    /// unpack buffer): the arithmetic of [`vnni_32`].
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn packed_32<const KIND: u8>(
        rows: *const u8,
        row_bytes: usize,
        n: usize,
        a: &QActs,
        i: usize,
    ) -> [f32; GV] {
        let (ts, _, min, _, shift) = layout(KIND);
        let cols = a.cols;
        let nb = cols / 32;
        // Rows past `n` repeat the last one (their lanes are not stored).
        let ptr: [*const u8; GV] = std::array::from_fn(|r| rows.add(r.min(n - 1) * row_bytes));
        let next = rows.wrapping_add(GV * row_bytes);
        let first = _mm512_mullo_epi32(
            _mm512_min_epi32(
                _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                _mm512_set1_epi32(n as i32 - 1),
            ),
            _mm512_set1_epi32(row_bytes as i32),
        );
        let x = a.qs.as_ptr().add(i * cols);
        let (ds, sums) = (&a.ds[i * nb..(i + 1) * nb], &a.sums32[i * nb..(i + 1) * nb]);
        let mut acc = _mm512_setzero_ps();
        let mut b = 0;
        while b < nb {
            let two = b + 1 < nb;
            let mask: u64 = if two { !0 } else { 0xffff_ffff };
            // The rows are read block-major; the next group's bytes are fetched ahead in
            // step, in address order, so memory streams as if one row were read at a time.
            let ahead = next.wrapping_add(b * GV * ts);
            for line in (0..2 * GV * ts).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
            }
            let xv = _mm512_maskz_loadu_epi8(mask, x.add(b * 32).cast());
            let z: [__m512i; GV] = std::array::from_fn(|r| {
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes2::<KIND>(ptr[r], b, two), xv)
            });
            let s = halves(lane_sums(&z));
            for (h, &isum) in s.iter().enumerate().take(1 + two as usize) {
                let bb = b + h;
                let isum = if min {
                    isum
                } else {
                    _mm512_sub_epi32(isum, _mm512_set1_epi32(sums[bb] << shift))
                };
                let [dx, dsum] = ds[bb];
                // The block's first dword: `d` (and `m` for types with a min) as f16.
                let at = _mm512_add_epi32(first, _mm512_set1_epi32((bb * ts) as i32));
                let dm = _mm512_i32gather_epi32::<1>(at, rows.cast());
                let d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
                let scale = _mm512_mul_ps(_mm512_set1_ps(dx), d);
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc);
                if min {
                    let mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(dm)));
                    acc = _mm512_fmadd_ps(_mm512_set1_ps(dsum), mw, acc);
                }
            }
            b += 2;
        }
        let mut out = [0f32; GV];
        _mm512_storeu_ps(out.as_mut_ptr(), acc);
        out
    }

    /// [`packed_32`] for activation rows `i0 .. i0 + mi` (`mi` at most 4) at once: each weight
    /// block is decoded once for all of them. Same arithmetic per output (the integer sums are
    /// exact, the f32 steps the same), so the same bits.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn packed_32_x4<const KIND: u8>(
        rows: *const u8,
        row_bytes: usize,
        n: usize,
        a: &QActs,
        i0: usize,
        mi: usize,
    ) -> [[f32; GV]; 4] {
        let (ts, _, min, _, shift) = layout(KIND);
        let cols = a.cols;
        let nb = cols / 32;
        let ptr: [*const u8; GV] = std::array::from_fn(|r| rows.add(r.min(n - 1) * row_bytes));
        let next = rows.wrapping_add(GV * row_bytes);
        let first = _mm512_mullo_epi32(
            _mm512_min_epi32(
                _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                _mm512_set1_epi32(n as i32 - 1),
            ),
            _mm512_set1_epi32(row_bytes as i32),
        );
        // Rows past `mi` repeat the last one (their outputs are not used).
        let act: [usize; 4] = std::array::from_fn(|j| i0 + j.min(mi - 1));
        let mut acc = [_mm512_setzero_ps(); 4];
        let mut b = 0;
        while b < nb {
            let ahead = next.wrapping_add(b * GV * ts);
            for line in (0..2 * GV * ts).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
            }
            let two = b + 1 < nb;
            let mask: u64 = if two { !0 } else { 0xffff_ffff };
            let xv: [__m512i; 4] = std::array::from_fn(|j| {
                _mm512_maskz_loadu_epi8(mask, a.qs.as_ptr().add(act[j] * cols + b * 32).cast())
            });
            // The first level of `lane_sums` (row pairs) per activation row, each pair's
            // codes decoded once.
            let mut l1 = [[_mm512_setzero_si512(); 8]; 4];
            for k in 0..8 {
                let ca = codes2::<KIND>(ptr[2 * k], b, two);
                let cb = codes2::<KIND>(ptr[2 * k + 1], b, two);
                for j in 0..4 {
                    let za = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ca, xv[j]);
                    let zb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), cb, xv[j]);
                    l1[j][k] = _mm512_add_epi32(
                        _mm512_unpacklo_epi32(za, zb),
                        _mm512_unpackhi_epi32(za, zb),
                    );
                }
            }
            let at0 = _mm512_add_epi32(first, _mm512_set1_epi32((b * ts) as i32));
            let dm = [
                _mm512_i32gather_epi32::<1>(at0, rows.cast()),
                _mm512_i32gather_epi32::<1>(
                    _mm512_add_epi32(at0, _mm512_set1_epi32(ts as i32)),
                    rows.cast(),
                ),
            ];
            for j in 0..4 {
                let l2: [__m512i; 4] = std::array::from_fn(|q| {
                    let (x, y) = (l1[j][2 * q], l1[j][2 * q + 1]);
                    _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y))
                });
                let s = halves(l2);
                let nbj = act[j] * nb;
                for (h, &isum) in s.iter().enumerate().take(1 + two as usize) {
                    let bb = b + h;
                    let isum = if min {
                        isum
                    } else {
                        _mm512_sub_epi32(isum, _mm512_set1_epi32(a.sums32[nbj + bb] << shift))
                    };
                    let [dx, dsum] = a.ds[nbj + bb];
                    let d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm[h]));
                    let scale = _mm512_mul_ps(_mm512_set1_ps(dx), d);
                    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[j]);
                    if min {
                        let mw =
                            _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(dm[h])));
                        acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(dsum), mw, acc[j]);
                    }
                }
            }
            b += 2;
        }
        let mut out = [[0f32; GV]; 4];
        for (o, a) in out.iter_mut().zip(acc) {
            _mm512_storeu_ps(o.as_mut_ptr(), a);
        }
        out
    }

    /// Chunk `c` (elements `64c .. 64c + 64`) of the K-type super-block at `p` as unsigned
    /// codes in element order (the bytes `Unpacked::unpack` writes).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    unsafe fn k_codes<const KIND: u8>(p: *const u8, c: usize) -> __m512i {
        let m4 = _mm256_set1_epi8(0x0f);
        if KIND == Q6_K {
            let (h, second) = (c / 2, c % 2 == 1);
            let l = _mm512_loadu_si512(p.add(64 * h).cast());
            let hb = _mm256_loadu_si256(p.add(128 + 32 * h).cast());
            // Bits 4-5 of each code from two bits of `qh` (16-bit shifts: bits crossing a
            // byte land outside 0x30).
            let (hi_lo, hi_hi) = if second {
                (hb, _mm256_srli_epi16::<2>(hb))
            } else {
                (_mm256_slli_epi16::<4>(hb), _mm256_slli_epi16::<2>(hb))
            };
            let hz = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(hi_lo), hi_hi);
            let hz = _mm512_and_si512(hz, _mm512_set1_epi8(0x30));
            let lo = if second { _mm512_srli_epi16::<4>(l) } else { l };
            return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi8(0x0f)), hz);
        }
        let qs = if KIND == Q5_K { 48 } else { 16 };
        let y = _mm256_loadu_si256(p.add(qs + 32 * c).cast());
        let lo = _mm256_and_si256(y, m4);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(y), m4);
        let mut z = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
        if KIND == Q5_K {
            let qh = _mm256_loadu_si256(p.add(16).cast());
            let bit = |k: usize| _mm256_test_epi8_mask(qh, _mm256_set1_epi8(1 << k)) as u64;
            let fifth = bit(2 * c) | (bit(2 * c + 1) << 32);
            z = _mm512_or_si512(z, _mm512_maskz_mov_epi8(fifth, _mm512_set1_epi8(0x10)));
        }
        z
    }

    /// Byte `k` (0..4) of each lane, zero-extended.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn byte_of(v: __m512i, k: u32) -> __m512i {
        _mm512_and_si512(
            _mm512_srlv_epi32(v, _mm512_set1_epi32(8 * k as i32)),
            _mm512_set1_epi32(0xff),
        )
    }

    /// One activation row against `n` packed rows of a K type, read in place: the arithmetic
    /// of [`vnni_256`] (sub-block scales and mins decoded lane-wise from gathered dwords).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn packed_256<const KIND: u8>(
        rows: *const u8,
        row_bytes: usize,
        n: usize,
        a: &QActs,
        i: usize,
    ) -> [f32; GV] {
        let ts = match KIND {
            Q4_K => 144,
            Q5_K => 176,
            _ => 210,
        };
        let cols = a.cols;
        let nb = cols / 256;
        let ptr: [*const u8; GV] = std::array::from_fn(|r| rows.add(r.min(n - 1) * row_bytes));
        let next = rows.wrapping_add(GV * row_bytes);
        let first = _mm512_mullo_epi32(
            _mm512_min_epi32(
                _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                _mm512_set1_epi32(n as i32 - 1),
            ),
            _mm512_set1_epi32(row_bytes as i32),
        );
        let gather = |b: usize, off: usize| {
            let at = _mm512_add_epi32(first, _mm512_set1_epi32((b * ts + off) as i32));
            _mm512_i32gather_epi32::<1>(at, rows.cast())
        };
        let x = a.qs.as_ptr().add(i * cols);
        let mut acc = _mm512_setzero_ps();
        for b in 0..nb {
            let ahead = next.wrapping_add(b * GV * ts);
            for line in (0..GV * ts).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
            }
            let s16 = &a.sums16[(i * nb + b) * 16..(i * nb + b) * 16 + 16];
            let mut iacc = _mm512_setzero_si512();
            let mut corr = _mm512_setzero_si512();
            // Per sub-block s: the 16 rows' scales (and mins) as i32 lanes.
            let (sc, mn): ([__m512i; 16], [__m512i; 8]) = if KIND == Q6_K {
                let words: [__m512i; 4] = std::array::from_fn(|k| gather(b, 192 + 4 * k));
                let sc = std::array::from_fn(|s| {
                    let shift = _mm512_set1_epi32(24 - 8 * (s % 4) as i32);
                    let up = _mm512_sllv_epi32(words[s / 4], shift);
                    _mm512_srai_epi32::<24>(up)
                });
                (sc, [_mm512_setzero_si512(); 8])
            } else {
                let (wa, wb, wc) = (gather(b, 4), gather(b, 8), gather(b, 12));
                let m63 = _mm512_set1_epi32(0x3f3f_3f3f);
                let sc_lo = _mm512_and_si512(wa, m63);
                let mn_lo = _mm512_and_si512(wb, m63);
                let m0f = _mm512_set1_epi32(0x0f0f_0f0f);
                let m30 = _mm512_set1_epi32(0x3030_3030);
                let sc_hi = _mm512_or_si512(
                    _mm512_and_si512(wc, m0f),
                    _mm512_and_si512(_mm512_srli_epi32::<2>(wa), m30),
                );
                let mn_hi = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi32::<4>(wc), m0f),
                    _mm512_and_si512(_mm512_srli_epi32::<2>(wb), m30),
                );
                let pick = |lo: __m512i, hi: __m512i, s: usize| {
                    byte_of(if s < 4 { lo } else { hi }, (s % 4) as u32)
                };
                let mut sc = [_mm512_setzero_si512(); 16];
                for (s, v) in sc.iter_mut().enumerate().take(8) {
                    *v = pick(sc_lo, sc_hi, s);
                }
                (sc, std::array::from_fn(|s| pick(mn_lo, mn_hi, s)))
            };
            for c in 0..4 {
                let off = b * 256 + 64 * c;
                let xv = _mm512_loadu_si512(x.add(off).cast());
                let z: [__m512i; GV] = std::array::from_fn(|r| {
                    let codes = k_codes::<KIND>(ptr[r].add(b * ts), c);
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, xv)
                });
                let sums = lane_sums(&z);
                if KIND == Q6_K {
                    for (t, v) in quarters(sums).into_iter().enumerate() {
                        iacc = _mm512_add_epi32(iacc, _mm512_mullo_epi32(v, sc[4 * c + t]));
                    }
                } else {
                    for (t, v) in halves(sums).into_iter().enumerate() {
                        iacc = _mm512_add_epi32(iacc, _mm512_mullo_epi32(v, sc[2 * c + t]));
                    }
                }
            }
            // The offset (Q6_K: 32 per code) or min term through the activations' sums of 16.
            if KIND == Q6_K {
                for (s, &v) in sc.iter().enumerate() {
                    corr = _mm512_add_epi32(corr, _mm512_mullo_epi32(v, _mm512_set1_epi32(s16[s])));
                }
            } else {
                for (s, &v) in mn.iter().enumerate() {
                    let pair = _mm512_set1_epi32(s16[2 * s] + s16[2 * s + 1]);
                    corr = _mm512_add_epi32(corr, _mm512_mullo_epi32(v, pair));
                }
            }
            let dx = _mm512_set1_ps(a.ds[i * nb + b][0]);
            if KIND == Q6_K {
                // `d` is the block's last two bytes: the high half of the dword at 206.
                let dw = _mm512_srli_epi32::<16>(gather(b, 206));
                let d = _mm512_mul_ps(dx, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dw)));
                let v = _mm512_sub_epi32(iacc, _mm512_slli_epi32::<5>(corr));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), d, acc);
            } else {
                let dm = gather(b, 0);
                let d = _mm512_mul_ps(dx, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
                let mw = _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(dm));
                let dmin = _mm512_mul_ps(dx, _mm512_cvtph_ps(mw));
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc), d, acc);
                acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), dmin, acc);
            }
        }
        let mut out = [0f32; GV];
        _mm512_storeu_ps(out.as_mut_ptr(), acc);
        out
    }

    /// 8 rows' vectors to per-128-bit-lane row sums: `out[j]`'s lane `q` holds, for rows
    /// `4j .. 4j + 4`, the sum of the row's four dwords in lane `q`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn lane_sums8(z: &[__m256i; 8]) -> [__m256i; 2] {
        let a: [__m256i; 4] = std::array::from_fn(|i| {
            let (x, y) = (z[2 * i], z[2 * i + 1]);
            _mm256_add_epi32(_mm256_unpacklo_epi32(x, y), _mm256_unpackhi_epi32(x, y))
        });
        std::array::from_fn(|j| {
            let (x, y) = (a[2 * j], a[2 * j + 1]);
            _mm256_add_epi32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y))
        })
    }

    /// Row `l`'s sum over its whole register.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn whole8(b: [__m256i; 2]) -> __m256i {
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(b[0], b[1]),
            _mm256_permute2x128_si256::<0x31>(b[0], b[1]),
        )
    }

    /// Row `l`'s sums over the register's two 16-byte halves.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn halves8(b: [__m256i; 2]) -> [__m256i; 2] {
        [
            _mm256_permute2x128_si256::<0x20>(b[0], b[1]),
            _mm256_permute2x128_si256::<0x31>(b[0], b[1]),
        ]
    }

    /// 8-bit lanes `[1, 2, 4, .., 128]` repeated: one bit per byte.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn bit_per_byte() -> __m256i {
        _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64)
    }

    /// `0x10` in byte `k` where bit `k` of `qh` is set (the 5th bit of code `k`).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn fifth_bits(qh: u32) -> __m256i {
        let v = _mm256_set1_epi32(qh as i32);
        // Byte k takes source byte k / 8 (each 128-bit lane holds the whole dword).
        let idx = _mm256_setr_epi64x(
            0,
            0x0101_0101_0101_0101,
            0x0202_0202_0202_0202,
            0x0303_0303_0303_0303,
        );
        let spread = _mm256_and_si256(_mm256_shuffle_epi8(v, idx), bit_per_byte());
        let set = _mm256_cmpeq_epi8(spread, bit_per_byte());
        _mm256_and_si256(set, _mm256_set1_epi8(0x10))
    }

    /// The 32 codes of the block at `p` of a 32-block type (Q8_0 as `w + 128`): the bytes
    /// `Unpacked::unpack` writes.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn codes32<const KIND: u8>(p: *const u8) -> __m256i {
        let (_, qs, _, qh, _) = layout(KIND);
        if KIND == Q8_0 {
            let q = _mm256_loadu_si256(p.add(qs).cast());
            return _mm256_xor_si256(q, _mm256_set1_epi8(-128));
        }
        let q = _mm_loadu_si128(p.add(qs).cast());
        let m4 = _mm_set1_epi8(0x0f);
        let (lo, hi) = (
            _mm_and_si128(q, m4),
            _mm_and_si128(_mm_srli_epi16::<4>(q), m4),
        );
        let c = _mm256_set_m128i(hi, lo);
        match qh {
            Some(off) => _mm256_or_si256(c, fifth_bits(p.add(off).cast::<u32>().read_unaligned())),
            None => c,
        }
    }

    /// Codes `32q .. 32q + 32` of the K-type super-block at `p` (what `Unpacked::unpack`
    /// writes).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn k_codes32<const KIND: u8>(p: *const u8, q: usize) -> __m256i {
        let m4 = _mm256_set1_epi8(0x0f);
        if KIND == Q6_K {
            let (h, t) = (q / 4, q % 4);
            let l = _mm256_loadu_si256(p.add(64 * h + 32 * (t % 2)).cast());
            let lo = if t < 2 { l } else { _mm256_srli_epi16::<4>(l) };
            let hb = _mm256_loadu_si256(p.add(128 + 32 * h).cast());
            let hb = match t {
                0 => _mm256_slli_epi16::<4>(hb),
                1 => _mm256_slli_epi16::<2>(hb),
                2 => hb,
                _ => _mm256_srli_epi16::<2>(hb),
            };
            return _mm256_or_si256(
                _mm256_and_si256(lo, m4),
                _mm256_and_si256(hb, _mm256_set1_epi8(0x30)),
            );
        }
        let qs = if KIND == Q5_K { 48 } else { 16 };
        let y = _mm256_loadu_si256(p.add(qs + 32 * (q / 2)).cast());
        let y = if q.is_multiple_of(2) {
            y
        } else {
            _mm256_srli_epi16::<4>(y)
        };
        let c = _mm256_and_si256(y, m4);
        if KIND == Q5_K {
            let qh = _mm256_loadu_si256(p.add(16).cast());
            let bit = _mm256_set1_epi8((1u8 << q) as i8);
            let set = _mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit);
            return _mm256_or_si256(c, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
        }
        c
    }

    /// The low (`HIGH = false`) or high f16 halves of 8 i32 lanes, widened.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn f16_halves<const HIGH: bool>(v: __m256i) -> __m256 {
        let v = if HIGH {
            _mm256_srli_epi32::<16>(v)
        } else {
            _mm256_and_si256(v, _mm256_set1_epi32(0xffff))
        };
        let packed = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        _mm256_cvtph_ps(packed)
    }

    /// Byte `k` (0..4) of each lane, zero-extended.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn byte_of8(v: __m256i, k: u32) -> __m256i {
        _mm256_and_si256(
            _mm256_srlv_epi32(v, _mm256_set1_epi32(8 * k as i32)),
            _mm256_set1_epi32(0xff),
        )
    }

    /// Integer dots of 32 codes with 32 activations into 8 i32 lanes, `vpmaddubsw` +
    /// `vpmaddwd`: pairs stay below 2 * 63 * 127 for codes up to 6 bits; Q8_0 (`signed8`,
    /// codes `w + 128`) takes |w| and sign(x, w), pairs at most 2 * 128 * 127. The dot is then
    /// of `w` itself (no offset to subtract).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn dot_avx2(w: __m256i, x: __m256i, signed8: bool) -> __m256i {
        let ones = _mm256_set1_epi16(1);
        if signed8 {
            let ws = _mm256_xor_si256(w, _mm256_set1_epi8(-128));
            let p = _mm256_maddubs_epi16(_mm256_sign_epi8(ws, ws), _mm256_sign_epi8(x, ws));
            _mm256_madd_epi16(p, ones)
        } else {
            _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones)
        }
    }

    /// `vpdpbusd` on 256 bits: codes unsigned (Q8_0's `w + 128` too: its offset is
    /// subtracted like the others), so `signed8` is never set.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    fn dot_avxvnni(w: __m256i, x: __m256i, signed8: bool) -> __m256i {
        debug_assert!(!signed8);
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, x)
    }

    /// Lane `l` (0..8): byte offset of row `min(8 * half + l, n - 1)`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn row_offsets8(half: usize, n: usize, row_bytes: usize) -> __m256i {
        let l = _mm256_add_epi32(
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
            _mm256_set1_epi32(8 * half as i32),
        );
        let l = _mm256_min_epi32(l, _mm256_set1_epi32(n as i32 - 1));
        _mm256_mullo_epi32(l, _mm256_set1_epi32(row_bytes as i32))
    }

    macro_rules! ymm_kernels {
        ($features:literal, $name32:ident, $name256:ident, $dot:ident, $vnni:expr) => {
            /// [`packed_32`]'s arithmetic on 256 bits: two halves of 8 rows.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name32<const KIND: u8>(
                rows: *const u8,
                row_bytes: usize,
                n: usize,
                a: &QActs,
                i: usize,
            ) -> [f32; GV] {
                let (ts, _, min, _, shift) = layout(KIND);
                let signed8 = KIND == Q8_0 && !$vnni;
                let cols = a.cols;
                let nb = cols / 32;
                let x = a.qs.as_ptr().add(i * cols);
                let (ds, sums) = (&a.ds[i * nb..(i + 1) * nb], &a.sums32[i * nb..(i + 1) * nb]);
                let mut out = [0f32; GV];
                for half in 0..n.div_ceil(8) {
                    let ptr: [*const u8; 8] =
                        std::array::from_fn(|r| rows.add((8 * half + r).min(n - 1) * row_bytes));
                    let first = row_offsets8(half, n, row_bytes);
                    let next = rows.wrapping_add((8 * half + 8) * row_bytes);
                    let mut acc = _mm256_setzero_ps();
                    for b in 0..nb {
                        let ahead = next.wrapping_add(b * 8 * ts);
                        for line in (0..8 * ts).step_by(64) {
                            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
                        }
                        let xv = _mm256_loadu_si256(x.add(b * 32).cast());
                        let z: [__m256i; 8] = std::array::from_fn(|r| {
                            $dot(codes32::<KIND>(ptr[r].add(b * ts)), xv, signed8)
                        });
                        let isum = whole8(lane_sums8(&z));
                        let isum = if min || signed8 {
                            isum
                        } else {
                            _mm256_sub_epi32(isum, _mm256_set1_epi32(sums[b] << shift))
                        };
                        let [dx, dsum] = ds[b];
                        let at = _mm256_add_epi32(first, _mm256_set1_epi32((b * ts) as i32));
                        let dm = _mm256_i32gather_epi32::<1>(rows.cast(), at);
                        let scale = _mm256_mul_ps(_mm256_set1_ps(dx), f16_halves::<false>(dm));
                        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc);
                        if min {
                            let mw = f16_halves::<true>(dm);
                            acc = _mm256_fmadd_ps(_mm256_set1_ps(dsum), mw, acc);
                        }
                    }
                    _mm256_storeu_ps(out.as_mut_ptr().add(8 * half), acc);
                }
                out
            }

            /// [`packed_256`]'s arithmetic on 256 bits: two halves of 8 rows.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name256<const KIND: u8>(
                rows: *const u8,
                row_bytes: usize,
                n: usize,
                a: &QActs,
                i: usize,
            ) -> [f32; GV] {
                let ts = match KIND {
                    Q4_K => 144,
                    Q5_K => 176,
                    _ => 210,
                };
                let cols = a.cols;
                let nb = cols / 256;
                let x = a.qs.as_ptr().add(i * cols);
                let mut out = [0f32; GV];
                for half in 0..n.div_ceil(8) {
                    let ptr: [*const u8; 8] =
                        std::array::from_fn(|r| rows.add((8 * half + r).min(n - 1) * row_bytes));
                    let first = row_offsets8(half, n, row_bytes);
                    let gather = |b: usize, off: usize| {
                        let at = _mm256_add_epi32(first, _mm256_set1_epi32((b * ts + off) as i32));
                        _mm256_i32gather_epi32::<1>(rows.cast(), at)
                    };
                    let next = rows.wrapping_add((8 * half + 8) * row_bytes);
                    let mut acc = _mm256_setzero_ps();
                    for b in 0..nb {
                        let ahead = next.wrapping_add(b * 8 * ts);
                        for line in (0..8 * ts).step_by(64) {
                            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
                        }
                        let s16 = &a.sums16[(i * nb + b) * 16..(i * nb + b) * 16 + 16];
                        let (sc, mn): ([__m256i; 16], [__m256i; 8]) = if KIND == Q6_K {
                            let words: [__m256i; 4] =
                                std::array::from_fn(|k| gather(b, 192 + 4 * k));
                            let sc = std::array::from_fn(|s| {
                                let shift = _mm256_set1_epi32(24 - 8 * (s % 4) as i32);
                                _mm256_srai_epi32::<24>(_mm256_sllv_epi32(words[s / 4], shift))
                            });
                            (sc, [_mm256_setzero_si256(); 8])
                        } else {
                            let (wa, wb, wc) = (gather(b, 4), gather(b, 8), gather(b, 12));
                            let m63 = _mm256_set1_epi32(0x3f3f_3f3f);
                            let m0f = _mm256_set1_epi32(0x0f0f_0f0f);
                            let m30 = _mm256_set1_epi32(0x3030_3030);
                            let sc_lo = _mm256_and_si256(wa, m63);
                            let mn_lo = _mm256_and_si256(wb, m63);
                            let sc_hi = _mm256_or_si256(
                                _mm256_and_si256(wc, m0f),
                                _mm256_and_si256(_mm256_srli_epi32::<2>(wa), m30),
                            );
                            let mn_hi = _mm256_or_si256(
                                _mm256_and_si256(_mm256_srli_epi32::<4>(wc), m0f),
                                _mm256_and_si256(_mm256_srli_epi32::<2>(wb), m30),
                            );
                            let pick = |lo: __m256i, hi: __m256i, s: usize| {
                                byte_of8(if s < 4 { lo } else { hi }, (s % 4) as u32)
                            };
                            let mut sc = [_mm256_setzero_si256(); 16];
                            for (s, v) in sc.iter_mut().enumerate().take(8) {
                                *v = pick(sc_lo, sc_hi, s);
                            }
                            (sc, std::array::from_fn(|s| pick(mn_lo, mn_hi, s)))
                        };
                        let mut iacc = _mm256_setzero_si256();
                        for q in 0..8 {
                            let xv = _mm256_loadu_si256(x.add(b * 256 + 32 * q).cast());
                            let z: [__m256i; 8] = std::array::from_fn(|r| {
                                $dot(k_codes32::<KIND>(ptr[r].add(b * ts), q), xv, false)
                            });
                            let sums = lane_sums8(&z);
                            if KIND == Q6_K {
                                let [h0, h1] = halves8(sums);
                                iacc = _mm256_add_epi32(iacc, _mm256_mullo_epi32(h0, sc[2 * q]));
                                iacc =
                                    _mm256_add_epi32(iacc, _mm256_mullo_epi32(h1, sc[2 * q + 1]));
                            } else {
                                let v = _mm256_mullo_epi32(whole8(sums), sc[q]);
                                iacc = _mm256_add_epi32(iacc, v);
                            }
                        }
                        let mut corr = _mm256_setzero_si256();
                        if KIND == Q6_K {
                            for (s, &v) in sc.iter().enumerate() {
                                let x16 = _mm256_set1_epi32(s16[s]);
                                corr = _mm256_add_epi32(corr, _mm256_mullo_epi32(v, x16));
                            }
                        } else {
                            for (s, &v) in mn.iter().enumerate() {
                                let pair = _mm256_set1_epi32(s16[2 * s] + s16[2 * s + 1]);
                                corr = _mm256_add_epi32(corr, _mm256_mullo_epi32(v, pair));
                            }
                        }
                        let dx = _mm256_set1_ps(a.ds[i * nb + b][0]);
                        if KIND == Q6_K {
                            let d = _mm256_mul_ps(dx, f16_halves::<true>(gather(b, 206)));
                            let v = _mm256_sub_epi32(iacc, _mm256_slli_epi32::<5>(corr));
                            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), d, acc);
                        } else {
                            let dm = gather(b, 0);
                            let d = _mm256_mul_ps(dx, f16_halves::<false>(dm));
                            let dmin = _mm256_mul_ps(dx, f16_halves::<true>(dm));
                            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc), d, acc);
                            acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr), dmin, acc);
                        }
                    }
                    _mm256_storeu_ps(out.as_mut_ptr().add(8 * half), acc);
                }
                out
            }
        };
    }

    ymm_kernels!("avx2,fma,f16c", avx2_32, avx2_256, dot_avx2, false);
    ymm_kernels!(
        "avx2,fma,f16c,avxvnni",
        avxvnni_32,
        avxvnni_256,
        dot_avxvnni,
        true
    );
}

/// The aarch64 kernels: 4 weight rows per 128-bit register, the [`GV`] rows of a group in
/// passes of 4 (each pass reads its 4 rows block-major and prefetches the next 4).
///
/// Codes are unpacked from the packed bytes as `Unpacked::unpack` writes them (0..63, so
/// `sdot` and `smull` read them as signed bytes unchanged), except Q8_0, whose signed bytes
/// are dotted as they are (the reference's `w + 128` and its `- 128 * sum(x)` cancel: the
/// same exact integer). Each row's dot vectors are summed pairwise (`addp`) so that lane `r`
/// holds row `r`'s integer; the f32 steps of [`gemm::reference_dot`] then run on the 4 lanes.
#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;
    use std::arch::asm;

    use super::super::neon::widen_f16x4;
    use super::super::QActs;
    use super::kind::*;
    use super::{layout, GV};

    /// Weight rows per pass: one per i32 lane.
    const R: usize = 4;

    /// `acc + dot(a, b)` over 16 signed bytes into 4 i32 lanes (which products land in which
    /// lane differs between implementations: only lane sums are used).
    trait IDot {
        unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
    }

    /// Base NEON: `smull` / `smull2` to i16 (|a * b| <= 128 * 127), pairwise-accumulated to
    /// i32 (`sadalp`): exact.
    struct Base;

    impl IDot for Base {
        #[inline(always)]
        unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
            let lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
            let hi = vmull_high_s8(a, b);
            vpadalq_s16(vpadalq_s16(acc, lo), hi)
        }
    }

    /// FEAT_DotProd `sdot` (inline assembly: its intrinsic is not stable).
    struct Dot;

    impl IDot for Dot {
        #[inline(always)]
        unsafe fn dot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
            let mut acc = acc;
            // SAFETY: only inlined into `#[target_feature(enable = "neon,dotprod")]` entry
            // points, which the NeonDotprod / NeonI8mm paths run after `has_dotprod()`.
            asm!(
                "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
                acc = inout(vreg) acc,
                a = in(vreg) a,
                b = in(vreg) b,
                options(pure, nomem, nostack, preserves_flags)
            );
            acc
        }
    }

    /// Lane `r` = the sum of `z[r]`'s lanes (integer adds: exact in any order).
    #[inline(always)]
    unsafe fn lanes(z: [int32x4_t; R]) -> int32x4_t {
        vpaddq_s32(vpaddq_s32(z[0], z[1]), vpaddq_s32(z[2], z[3]))
    }

    /// The f16 at byte `off` of each row, widened: lane `r` = row `r`'s.
    #[inline(always)]
    unsafe fn f16_lanes(ptr: &[*const u8; R], off: usize) -> float32x4_t {
        let h: [u16; R] = std::array::from_fn(|r| ptr[r].add(off).cast::<u16>().read_unaligned());
        widen_f16x4(vld1_u16(h.as_ptr()))
    }

    /// The two f16 at bytes `off` and `off + 2` of each row (`d` and `m`), widened.
    #[inline(always)]
    unsafe fn f16_pair_lanes(ptr: &[*const u8; R], off: usize) -> (float32x4_t, float32x4_t) {
        let w: [u32; R] = std::array::from_fn(|r| ptr[r].add(off).cast::<u32>().read_unaligned());
        let v = vreinterpretq_u16_u32(vld1q_u32(w.as_ptr()));
        (
            widen_f16x4(vget_low_u16(vuzp1q_u16(v, v))),
            widen_f16x4(vget_low_u16(vuzp2q_u16(v, v))),
        )
    }

    /// Prefetch `len` bytes from `p` (addresses past the data are harmless: `prfm` never
    /// faults).
    #[inline(always)]
    unsafe fn prefetch(p: *const u8, len: usize) {
        for line in (0..len).step_by(64) {
            asm!(
                "prfm pldl1keep, [{p}]",
                p = in(reg) p.wrapping_add(line),
                options(readonly, nostack, preserves_flags)
            );
        }
    }

    /// The 32 codes of the block at `p` of a 32-block type as two halves of 16: the bytes
    /// `Unpacked::unpack` writes, except Q8_0's, which stay signed.
    #[inline(always)]
    unsafe fn codes32<const KIND: u8>(p: *const u8) -> (int8x16_t, int8x16_t) {
        let (_, qs, _, qh, _) = layout(KIND);
        if KIND == Q8_0 {
            return (vld1q_s8(p.add(qs).cast()), vld1q_s8(p.add(qs + 16).cast()));
        }
        let raw = vld1q_u8(p.add(qs));
        let (mut lo, mut hi) = (vandq_u8(raw, vdupq_n_u8(0x0f)), vshrq_n_u8::<4>(raw));
        if let Some(off) = qh {
            // Code t's 5th bit is bit t of `qh`: byte t / 8, bit t % 8.
            const IDX: [u8; 32] = [
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
            ];
            const BITS: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
            let h = vreinterpretq_u8_u32(vdupq_n_u32(p.add(off).cast::<u32>().read_unaligned()));
            let bits = vld1q_u8(BITS.as_ptr());
            let sixteen = vdupq_n_u8(0x10);
            let spread_lo = vqtbl1q_u8(h, vld1q_u8(IDX.as_ptr()));
            let spread_hi = vqtbl1q_u8(h, vld1q_u8(IDX.as_ptr().add(16)));
            lo = vorrq_u8(lo, vandq_u8(vtstq_u8(spread_lo, bits), sixteen));
            hi = vorrq_u8(hi, vandq_u8(vtstq_u8(spread_hi, bits), sixteen));
        }
        (vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi))
    }

    /// Q4_K / Q5_K sub-block scales and mins of the super-block at `p` as i32 vectors:
    /// `[sc[0..4], sc[4..8], mn[0..4], mn[4..8]]` (`k_scale_min` of its 12 bytes).
    #[inline(always)]
    unsafe fn k_scales(p: *const u8) -> [int32x4_t; 4] {
        let v = vld1q_u8(p.add(4));
        let first = vget_low_u8(v);
        // [sc 0..4, mn 0..4]
        let lo = vand_u8(first, vdup_n_u8(0x3f));
        // Bytes 8..12 twice: their low nibbles (scales 4..8), then their high ones (mins).
        let last = vreinterpret_u8_u32(vdup_laneq_u32::<2>(vreinterpretq_u32_u8(v)));
        let nibbles = vand_u8(
            vshl_u8(last, vcreate_s8(0xfcfc_fcfc_0000_0000)),
            vdup_n_u8(0x0f),
        );
        // [sc 4..8, mn 4..8]
        let hi = vorr_u8(nibbles, vand_u8(vshr_n_u8::<2>(first), vdup_n_u8(0x30)));
        let (lo, hi) = (vmovl_u8(lo), vmovl_u8(hi));
        [
            vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))),
            vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))),
            vreinterpretq_s32_u32(vmovl_high_u16(lo)),
            vreinterpretq_s32_u32(vmovl_high_u16(hi)),
        ]
    }

    /// One activation row against `n` packed rows of a 32-block type. (No closure may wrap
    /// `D::dot`: closures would not inline into the entry points that enable `dotprod`.)
    #[inline(always)]
    unsafe fn group_32<D: IDot, const KIND: u8>(
        rows: *const u8,
        row_bytes: usize,
        n: usize,
        a: &QActs,
        i: usize,
    ) -> [f32; GV] {
        let (ts, _, min, _, shift) = layout(KIND);
        // Q8_0's signed codes need no offset; the types with a min have none.
        let offset = !min && KIND != Q8_0;
        let cols = a.cols;
        let nb = cols / 32;
        let x = a.qs.as_ptr().add(i * cols);
        let (ds, sums) = (&a.ds[i * nb..(i + 1) * nb], &a.sums32[i * nb..(i + 1) * nb]);
        let zero = vdupq_n_s32(0);
        let mut out = [0f32; GV];
        for g in 0..n.div_ceil(R) {
            // Rows past `n` repeat the last one (their lanes are not stored).
            let ptr: [*const u8; R] =
                std::array::from_fn(|r| rows.add((R * g + r).min(n - 1) * row_bytes));
            let next = rows.wrapping_add((R * g + R) * row_bytes);
            let mut acc = vdupq_n_f32(0.0);
            for b in 0..nb {
                // The next 4 rows' bytes, in address order, in step with this pass.
                prefetch(next.wrapping_add(b * R * ts), R * ts);
                let (x0, x1) = (vld1q_s8(x.add(32 * b)), vld1q_s8(x.add(32 * b + 16)));
                let mut z = [zero; R];
                for (z, p) in z.iter_mut().zip(&ptr) {
                    let (lo, hi) = codes32::<KIND>(p.add(b * ts));
                    *z = D::dot(D::dot(zero, lo, x0), hi, x1);
                }
                let mut isum = lanes(z);
                if offset {
                    isum = vsubq_s32(isum, vdupq_n_s32(sums[b] << shift));
                }
                let [dx, dsum] = ds[b];
                if min {
                    let (d, m) = f16_pair_lanes(&ptr, b * ts);
                    acc = vfmaq_f32(acc, vcvtq_f32_s32(isum), vmulq_n_f32(d, dx));
                    acc = vfmaq_f32(acc, vdupq_n_f32(dsum), m);
                } else {
                    let d = f16_lanes(&ptr, b * ts);
                    acc = vfmaq_f32(acc, vcvtq_f32_s32(isum), vmulq_n_f32(d, dx));
                }
            }
            vst1q_f32(out.as_mut_ptr().add(R * g), acc);
        }
        out
    }

    /// Q4_K / Q5_K (`KIND`): one row's super-block at `p` against the activations at `x`
    /// (`xs`: their sums per sub-block of 32), as lanes summing to `iacc = sum sc * dot` and
    /// `corr = sum mn * xs`.
    #[inline(always)]
    unsafe fn k45_row<D: IDot, const KIND: u8>(
        p: *const u8,
        x: *const i8,
        xs: [int32x4_t; 2],
    ) -> (int32x4_t, int32x4_t) {
        let five = KIND == Q5_K;
        let qs = p.add(if five { 48 } else { 16 });
        let m4 = vdupq_n_u8(0x0f);
        let [sc_lo, sc_hi, mn_lo, mn_hi] = k_scales(p);
        let qh = [vld1q_u8(p.add(16)), vld1q_u8(p.add(32))];
        let mut z = [vdupq_n_s32(0); 8];
        for (sub, z) in z.iter_mut().enumerate() {
            // Sub-block `sub`: the low (even) or high nibbles of 32 bytes from `32 * (sub / 2)`
            // (Q5_K: bit `sub` of `qh` as the 5th bit).
            for (half, &qh) in qh.iter().enumerate() {
                let raw = vld1q_u8(qs.add(32 * (sub / 2) + 16 * half));
                let mut q = if sub % 2 == 0 {
                    vandq_u8(raw, m4)
                } else {
                    vshrq_n_u8::<4>(raw)
                };
                if five {
                    let bit = vtstq_u8(qh, vdupq_n_u8(1u8 << sub));
                    q = vorrq_u8(q, vandq_u8(bit, vdupq_n_u8(0x10)));
                }
                let xv = vld1q_s8(x.add(32 * sub + 16 * half));
                *z = D::dot(*z, vreinterpretq_s8_u8(q), xv);
            }
        }
        let lo = lanes([z[0], z[1], z[2], z[3]]);
        let hi = lanes([z[4], z[5], z[6], z[7]]);
        (
            vmlaq_s32(vmulq_s32(lo, sc_lo), hi, sc_hi),
            vmlaq_s32(vmulq_s32(xs[0], mn_lo), xs[1], mn_hi),
        )
    }

    /// Q6_K: one row's super-block at `p` against the activations at `x`, as lanes summing to
    /// `iacc - 32 * corr = sum sc * (dot - 32 * sum16)`. Pass `k` (`h = k / 2`, `t = k % 2`)
    /// unpacks sub-blocks `8h + t + {0, 2, 4, 6}`; `s32[k]` holds their `32 * sum16` in that
    /// order.
    #[inline(always)]
    unsafe fn q6_row<D: IDot>(p: *const u8, x: *const i8, s32: &[int32x4_t; 4]) -> int32x4_t {
        const PERM: [u8; 16] = [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15];
        let (m4, m30) = (vdupq_n_u8(0x0f), vdupq_n_u8(0x30));
        let sc = vqtbl1q_s8(vld1q_s8(p.add(192).cast()), vld1q_u8(PERM.as_ptr()));
        let (sc_lo, sc_hi) = (vmovl_s8(vget_low_s8(sc)), vmovl_high_s8(sc));
        let sc = [
            vmovl_s16(vget_low_s16(sc_lo)),
            vmovl_high_s16(sc_lo),
            vmovl_s16(vget_low_s16(sc_hi)),
            vmovl_high_s16(sc_hi),
        ];
        let mut v = vdupq_n_s32(0);
        for (k, (&sk, &sck)) in s32.iter().zip(&sc).enumerate() {
            let (h, t) = (k / 2, k % 2);
            let ql0 = vld1q_u8(p.add(64 * h + 16 * t));
            let ql1 = vld1q_u8(p.add(64 * h + 32 + 16 * t));
            let qh = vld1q_u8(p.add(128 + 32 * h + 16 * t));
            // What `Unpacked::unpack` writes for elements 128h + 32j + 16t + (0..16).
            let parts = [
                vorrq_u8(vandq_u8(ql0, m4), vandq_u8(vshlq_n_u8::<4>(qh), m30)),
                vorrq_u8(vandq_u8(ql1, m4), vandq_u8(vshlq_n_u8::<2>(qh), m30)),
                vorrq_u8(vshrq_n_u8::<4>(ql0), vandq_u8(qh, m30)),
                vorrq_u8(vshrq_n_u8::<4>(ql1), vandq_u8(vshrq_n_u8::<2>(qh), m30)),
            ];
            let mut z = [vdupq_n_s32(0); R];
            for (j, (z, &q)) in z.iter_mut().zip(&parts).enumerate() {
                let xv = vld1q_s8(x.add(16 * (8 * h + t + 2 * j)));
                *z = D::dot(*z, vreinterpretq_s8_u8(q), xv);
            }
            v = vmlaq_s32(v, vsubq_s32(lanes(z), sk), sck);
        }
        v
    }

    /// One activation row against `n` packed rows of a K type.
    #[inline(always)]
    unsafe fn group_256<D: IDot, const KIND: u8>(
        rows: *const u8,
        row_bytes: usize,
        n: usize,
        a: &QActs,
        i: usize,
    ) -> [f32; GV] {
        let ts = match KIND {
            Q4_K => 144,
            Q5_K => 176,
            _ => 210,
        };
        let cols = a.cols;
        let nb = cols / 256;
        let x = a.qs.as_ptr().add(i * cols);
        let zero = vdupq_n_s32(0);
        let mut out = [0f32; GV];
        for g in 0..n.div_ceil(R) {
            let ptr: [*const u8; R] =
                std::array::from_fn(|r| rows.add((R * g + r).min(n - 1) * row_bytes));
            let next = rows.wrapping_add((R * g + R) * row_bytes);
            let mut acc = vdupq_n_f32(0.0);
            for b in 0..nb {
                prefetch(next.wrapping_add(b * R * ts), R * ts);
                let xb = x.add(256 * b);
                let s16 = a.sums16.as_ptr().add((i * nb + b) * 16);
                let s: [int32x4_t; 4] = std::array::from_fn(|k| vld1q_s32(s16.add(4 * k)));
                // Per row, lanes to be summed: iacc (and, Q4_K / Q5_K, the min term corr).
                let (mut iv, mut cv) = ([zero; R], [zero; R]);
                if KIND == Q6_K {
                    let s32 = [
                        vuzp1q_s32(s[0], s[1]),
                        vuzp2q_s32(s[0], s[1]),
                        vuzp1q_s32(s[2], s[3]),
                        vuzp2q_s32(s[2], s[3]),
                    ]
                    .map(|v| vshlq_n_s32::<5>(v));
                    for (v, p) in iv.iter_mut().zip(&ptr) {
                        *v = q6_row::<D>(p.add(b * ts), xb, &s32);
                    }
                } else {
                    // Sums of 32 per sub-block: pairs of the sums of 16.
                    let xs = [vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3])];
                    for ((v, c), p) in iv.iter_mut().zip(&mut cv).zip(&ptr) {
                        (*v, *c) = k45_row::<D, KIND>(p.add(b * ts), xb, xs);
                    }
                }
                let iacc = vcvtq_f32_s32(lanes(iv));
                let dx = a.ds[i * nb + b][0];
                if KIND == Q6_K {
                    let d = f16_lanes(&ptr, b * ts + 208);
                    acc = vfmaq_f32(acc, iacc, vmulq_n_f32(d, dx));
                } else {
                    let (d, dmin) = f16_pair_lanes(&ptr, b * ts);
                    let corr = vcvtq_f32_s32(lanes(cv));
                    acc = vfmaq_f32(acc, iacc, vmulq_n_f32(d, dx));
                    // fma(-corr, dx * dmin, acc): `fmls` negates exactly.
                    acc = vfmsq_f32(acc, corr, vmulq_n_f32(dmin, dx));
                }
            }
            vst1q_f32(out.as_mut_ptr().add(R * g), acc);
        }
        out
    }

    macro_rules! entries {
        ($name32:ident, $name256:ident, $dot:ty, $features:literal) => {
            /// [`group_32`] with these integer dots.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name32<const KIND: u8>(
                rows: *const u8,
                row_bytes: usize,
                n: usize,
                a: &QActs,
                i: usize,
            ) -> [f32; GV] {
                group_32::<$dot, KIND>(rows, row_bytes, n, a, i)
            }

            /// [`group_256`] with these integer dots.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name256<const KIND: u8>(
                rows: *const u8,
                row_bytes: usize,
                n: usize,
                a: &QActs,
                i: usize,
            ) -> [f32; GV] {
                group_256::<$dot, KIND>(rows, row_bytes, n, a, i)
            }
        };
    }

    entries!(neon_32, neon_256, Base, "neon");
    entries!(dot_32, dot_256, Dot, "neon,dotprod");
}
