//! Prefill GEMM: many activation rows against packed weights, with AVX-512 VNNI or AVX2.
//!
//! Lanes are activation rows. The activations (quantized here anyway) are stored interleaved
//! in tiles of [`TILE`] rows: for each group of 4 consecutive elements, one 64-byte [`Line`]
//! holds those 4 bytes of all 16 rows. A weight row's 4 bytes for the same elements, broadcast
//! to every lane, meet all 16 rows in one `vpdpbusd`: no horizontal sums, and each weight
//! dword serves 16 rows. Weights stay in the file's layout; a task unpacks [`RC`] rows at a
//! time to one byte per element and reuses them for every tile (the unpack is paid once per
//! call, not once per activation row). The decode path (one activation row) does not use this.
//!
//! Integer sums are exact; scales are applied per block in f32, so results equal the row
//! kernels up to f32 summation order (not bit for bit).
//!
//! The AVX2 tiles (no `vpdpbusd`) compute the same integers with `vpmaddubsw` (i16 pair sums,
//! added in i16 only as many 4-byte groups as cannot saturate for the weight's code width)
//! then `vpmaddwd`, and apply the scales with the same f32 operations in the same order, so an
//! AVX2 GEMM result equals the VNNI GEMM's bit for bit. In both, an output element's value
//! depends on its activation row and weight row only: not on `m`, the tile or the lane.

use super::Line;
use super::PackedMatrix;
use crate::GgmlType;

/// Activation rows per tile (one per 32-bit lane of a 512-bit register).
pub(crate) const TILE: usize = 16;

/// Lines per tile and 32-element block: 8 groups of 4 bytes, `-sum(q)`, `d`, `d * sum(q)`.
pub(crate) const LINES_32: usize = 11;

/// Lines per tile and 256-element block: 64 groups of 4 bytes, `d`, and 8 lines of
/// `(sum16[2p], sum16[2p + 1])` as two i16 halves.
pub(crate) const LINES_256: usize = 73;

/// The activation format a GEMM type reads, or `None` if the GEMM does not handle it.
pub(crate) fn gemm_block(ty: GgmlType) -> Option<usize> {
    use GgmlType::*;
    match ty {
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => Some(32),
        Q4_K | Q5_K | Q6_K => Some(256),
        _ => None,
    }
}

/// Lines the tiles of `m x cols` activations need in either format.
pub(crate) fn tile_lines(m: usize, cols: usize) -> usize {
    let tiles = m.div_ceil(TILE);
    tiles.saturating_mul((cols / 32 * LINES_32).max(cols / 256 * LINES_256))
}

/// Where a tile keeps its activation bytes (the per-row lines, `d` and sums, are the same in
/// both: lane `l` is row `l`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TileLayout {
    /// x86: one line per group of 4 elements, holding those 4 bytes of every row (lane = row),
    /// for a broadcast weight dword against all rows.
    Lanes,
    /// aarch64 `usmmla`: rows in pairs; per pair, per 8 elements, 16 bytes (8 of the even row,
    /// 8 of the odd one), pairs one after another: a 2x8 operand per load.
    RowPairs,
}

/// `RowPairs`: byte offset, within a block's byte lines, of element `e` of tile row `l` in a
/// block of `bs` elements.
fn row_pairs_offset(l: usize, e: usize, bs: usize) -> usize {
    (l / 2) * 2 * bs + (e / 8) * 16 + (l % 2) * 8 + e % 8
}

/// Write row `l`'s block `q` (`bs` bytes) into the block's byte lines.
fn put_bytes(lines: &mut [Line], layout: TileLayout, l: usize, q: &[i8]) {
    let bs = q.len();
    match layout {
        TileLayout::Lanes => {
            for (g, line) in lines[..bs / 4].iter_mut().enumerate() {
                let d = &q[4 * g..4 * g + 4];
                line.0[l] = i32::from_le_bytes([d[0] as u8, d[1] as u8, d[2] as u8, d[3] as u8]);
            }
        }
        TileLayout::RowPairs => {
            // SAFETY: a `Line` is 64 plain bytes (`[i32; 16]`, no padding); the byte view
            // covers exactly `lines` and the borrow is exclusive.
            let bytes = unsafe {
                std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<u8>(), lines.len() * 64)
            };
            for (k, chunk) in q.chunks_exact(8).enumerate() {
                let o = row_pairs_offset(l, 8 * k, bs);
                for (dst, &v) in bytes[o..o + 8].iter_mut().zip(chunk) {
                    *dst = v as u8;
                }
            }
        }
    }
}

/// Interleave `rows` (at most [`TILE`]) row-quantized activations (32-blocks) into one tile;
/// lanes past `rows` are zero.
pub(crate) fn pack_tile_32(
    qs: &[i8],
    ds: &[[f32; 2]],
    rows: usize,
    cols: usize,
    tile: &mut [Line],
    layout: TileLayout,
) {
    let nb = cols / 32;
    for l in 0..TILE {
        for (b, lines) in tile[..nb * LINES_32].chunks_exact_mut(LINES_32).enumerate() {
            if l >= rows {
                put_bytes(&mut lines[..8], layout, l, &[0; 32]);
                for line in lines[8..].iter_mut() {
                    line.0[l] = 0;
                }
                continue;
            }
            let q = &qs[l * cols + b * 32..l * cols + b * 32 + 32];
            put_bytes(&mut lines[..8], layout, l, q);
            let sum: i32 = q.iter().map(|&v| v as i32).sum();
            let [d, dsum] = ds[l * nb + b];
            lines[8].0[l] = -sum;
            lines[9].0[l] = d.to_bits() as i32;
            lines[10].0[l] = dsum.to_bits() as i32;
        }
    }
}

/// Interleave `rows` row-quantized activations (256-blocks with sums of 16) into one tile.
pub(crate) fn pack_tile_256(
    qs: &[i8],
    ds: &[[f32; 2]],
    sums16: &[i32],
    rows: usize,
    cols: usize,
    tile: &mut [Line],
    layout: TileLayout,
) {
    let nb = cols / 256;
    for l in 0..TILE {
        for (b, lines) in tile[..nb * LINES_256]
            .chunks_exact_mut(LINES_256)
            .enumerate()
        {
            if l >= rows {
                put_bytes(&mut lines[..64], layout, l, &[0; 256]);
                for line in lines[64..].iter_mut() {
                    line.0[l] = 0;
                }
                continue;
            }
            let q = &qs[l * cols + b * 256..l * cols + b * 256 + 256];
            put_bytes(&mut lines[..64], layout, l, q);
            lines[64].0[l] = ds[l * nb + b][0].to_bits() as i32;
            let s = &sums16[(l * nb + b) * 16..(l * nb + b) * 16 + 16];
            for (p, line) in lines[65..].iter_mut().enumerate() {
                // Each sum of 16 bytes is within +-2032: it fits an i16 half.
                line.0[l] = (s[2 * p] & 0xffff) | (s[2 * p + 1] << 16);
            }
        }
    }
}

/// Weight rows a task unpacks and runs together.
pub(crate) const RC: usize = 8;

/// Rows an [`Unpacked`] holds: the GEMM's [`RC`] or the GEMV's 16, whichever is more.
const SLOTS: usize = if RC > super::gemv::GV {
    RC
} else {
    super::gemv::GV
};

/// [`RC`] weight rows unpacked to one byte per element (element order), with per-block
/// scales: `d`, `m` (Q4_1/Q5_1 min, K-types `dmin`), K-type sub-block scales (`sc`, as i32)
/// and i16 pairs for the K-type correction (`pairs`).
#[derive(Default)]
pub(crate) struct Unpacked {
    pub(super) q: Vec<u8>,
    /// aarch64: `q` in row pairs, as `usmmla` reads them: per pair of rows, per 8 elements,
    /// 8 bytes of the even row then 8 of the odd one.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    qp: Vec<u8>,
    pub(super) d: Vec<f32>,
    pub(super) m: Vec<f32>,
    pub(super) sc: Vec<i32>,
    pub(super) pairs: Vec<i32>,
}

impl Unpacked {
    /// Room for [`SLOTS`] rows of `cols` elements (the GEMM's [`RC`] and the GEMV's
    /// `gemv::GV`).
    pub(super) fn reserve(&mut self, cols: usize) {
        let grow_u8 = |v: &mut Vec<u8>, n| {
            if v.len() < n {
                v.resize(n, 0)
            }
        };
        grow_u8(&mut self.q, SLOTS * cols);
        #[cfg(target_arch = "aarch64")]
        grow_u8(&mut self.qp, RC * cols);
        let blocks = SLOTS * cols.div_ceil(32);
        if self.d.len() < blocks {
            self.d.resize(blocks, 0.0);
            self.m.resize(blocks, 0.0);
        }
        let k_blocks = SLOTS * cols.div_ceil(256);
        if self.sc.len() < k_blocks * 16 {
            self.sc.resize(k_blocks * 16, 0);
            self.pairs.resize(k_blocks * 8, 0);
        }
    }

    /// [`Unpacked::unpack`] compiled for AVX-512, where its byte loops vectorize.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
    fn unpack_avx512(&mut self, ty: GgmlType, row: &[u8], cols: usize, j: usize) {
        self.unpack(ty, row, cols, j)
    }

    /// [`Unpacked::unpack`] compiled for the CPU that runs `kind`'s kernels.
    ///
    /// Safety: the CPU runs them.
    pub(super) unsafe fn unpack_for(
        &mut self,
        kind: super::GemmTiles,
        ty: GgmlType,
        row: &[u8],
        cols: usize,
        j: usize,
    ) {
        match kind {
            #[cfg(target_arch = "x86_64")]
            super::GemmTiles::Vnni => self.unpack_avx512(ty, row, cols, j),
            #[cfg(target_arch = "x86_64")]
            super::GemmTiles::Avx2 | super::GemmTiles::AvxVnni => {
                self.unpack_avx2(ty, row, cols, j)
            }
            _ => self.unpack(ty, row, cols, j),
        }
    }

    /// Row `r` of an interleaved copy into slot `j`, as [`Unpacked::unpack`] would unpack
    /// the file's row, compiled for the CPU that runs `kind`'s kernels.
    ///
    /// Safety: the CPU runs them.
    pub(super) unsafe fn unpack_interleaved_for(
        &mut self,
        kind: super::GemmTiles,
        iw: &super::InterleavedMatrix,
        r: usize,
        cols: usize,
        j: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
        fn avx512(
            u: &mut Unpacked,
            iw: &super::InterleavedMatrix,
            r: usize,
            cols: usize,
            j: usize,
        ) {
            u.unpack_interleaved(iw, r, cols, j)
        }
        match kind {
            #[cfg(target_arch = "x86_64")]
            super::GemmTiles::Vnni => avx512(self, iw, r, cols, j),
            _ => self.unpack_interleaved(iw, r, cols, j),
        }
    }

    #[inline(always)]
    fn unpack_interleaved(
        &mut self,
        iw: &super::InterleavedMatrix,
        r: usize,
        cols: usize,
        j: usize,
    ) {
        let nb = cols / 32;
        iw.unpack_row(
            r,
            &mut self.q[j * cols..(j + 1) * cols],
            &mut self.d[j * nb..(j + 1) * nb],
            &mut self.m[j * nb..(j + 1) * nb],
        );
    }

    /// Copy the [`RC`] unpacked rows into `qp`'s row-pair layout.
    #[cfg(target_arch = "aarch64")]
    fn pair_rows(&mut self, cols: usize) {
        let (q, qp) = (&self.q, &mut self.qp);
        for p in 0..RC / 2 {
            let (even, odd) = (&q[2 * p * cols..], &q[(2 * p + 1) * cols..]);
            let dst = &mut qp[2 * p * cols..(2 * p + 2) * cols];
            for (k, d) in dst.chunks_exact_mut(16).enumerate() {
                d[..8].copy_from_slice(&even[8 * k..8 * k + 8]);
                d[8..].copy_from_slice(&odd[8 * k..8 * k + 8]);
            }
        }
    }

    /// [`Unpacked::unpack`] compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn unpack_avx2(&mut self, ty: GgmlType, row: &[u8], cols: usize, j: usize) {
        self.unpack(ty, row, cols, j)
    }

    /// Unpack one weight row (`row`, `ty.row_bytes(cols)` bytes) into slot `j`.
    #[inline(always)]
    pub(super) fn unpack(&mut self, ty: GgmlType, row: &[u8], cols: usize, j: usize) {
        use GgmlType::*;
        let f16 = |p: &[u8]| crate::blocks::f16_to_f32([p[0], p[1]]);
        let q = &mut self.q[j * cols..(j + 1) * cols];
        let bs = ty.block_size();
        let nb = cols / bs;
        let (d, m) = (
            &mut self.d[j * nb..(j + 1) * nb],
            &mut self.m[j * nb..(j + 1) * nb],
        );
        let row_blocks = row.chunks_exact(ty.type_size());
        match ty {
            Q4_0 | Q4_1 => {
                let off = if ty == Q4_0 { 2 } else { 4 };
                for (b, blk) in row_blocks.enumerate() {
                    d[b] = f16(blk);
                    if ty == Q4_1 {
                        m[b] = f16(&blk[2..]);
                    }
                    // Fixed-size arrays: no bounds checks, so the loop vectorizes.
                    let out: &mut [u8; 32] = (&mut q[b * 32..b * 32 + 32]).try_into().unwrap();
                    let src: &[u8; 16] = blk[off..off + 16].try_into().unwrap();
                    for t in 0..16 {
                        out[t] = src[t] & 15;
                        out[t + 16] = src[t] >> 4;
                    }
                }
            }
            Q5_0 | Q5_1 => {
                let off = if ty == Q5_0 { 2 } else { 4 };
                for (b, blk) in row_blocks.enumerate() {
                    d[b] = f16(blk);
                    if ty == Q5_1 {
                        m[b] = f16(&blk[2..]);
                    }
                    let qh =
                        u32::from_le_bytes([blk[off], blk[off + 1], blk[off + 2], blk[off + 3]]);
                    let out = &mut q[b * 32..b * 32 + 32];
                    for (t, &v) in blk[off + 4..off + 20].iter().enumerate() {
                        out[t] = (v & 15) | ((((qh >> t) & 1) as u8) << 4);
                        out[t + 16] = (v >> 4) | ((((qh >> (t + 16)) & 1) as u8) << 4);
                    }
                }
            }
            Q8_0 => {
                for (b, blk) in row_blocks.enumerate() {
                    d[b] = f16(blk);
                    let out: &mut [u8; 32] = (&mut q[b * 32..b * 32 + 32]).try_into().unwrap();
                    let src: &[u8; 32] = blk[2..34].try_into().unwrap();
                    for t in 0..32 {
                        // i8 -> u8 with +128; the kernel subtracts 128 * sum(x).
                        out[t] = src[t] ^ 0x80;
                    }
                }
            }
            Q4_K | Q5_K => {
                let five = ty == Q5_K;
                for (b, blk) in row_blocks.enumerate() {
                    d[b] = f16(blk);
                    m[b] = f16(&blk[2..]);
                    let scales: &[u8; 12] = blk[4..16].try_into().unwrap();
                    let (sc, mn) = crate::dequant::k_scale_min(scales);
                    let k = (j * nb + b) * 16;
                    for s in 0..8 {
                        self.sc[k + s] = sc[s] as i32;
                        // (m, m): one i16 per half of the sub-block's pair of sums.
                        self.pairs[(j * nb + b) * 8 + s] = mn[s] as i32 | ((mn[s] as i32) << 16);
                    }
                    let (qh, qs) = if five {
                        (&blk[16..48], &blk[48..176])
                    } else {
                        (&blk[16..16], &blk[16..144])
                    };
                    for p in 0..4 {
                        let out: &mut [u8; 64] = (&mut q[b * 256 + 64 * p..b * 256 + 64 * p + 64])
                            .try_into()
                            .unwrap();
                        let src: &[u8; 32] = qs[32 * p..32 * p + 32].try_into().unwrap();
                        if five {
                            let qh: &[u8; 32] = qh.try_into().unwrap();
                            for l in 0..32 {
                                out[l] = (src[l] & 15) | (((qh[l] >> (2 * p)) & 1) << 4);
                                out[l + 32] = (src[l] >> 4) | (((qh[l] >> (2 * p + 1)) & 1) << 4);
                            }
                        } else {
                            for l in 0..32 {
                                out[l] = src[l] & 15;
                                out[l + 32] = src[l] >> 4;
                            }
                        }
                    }
                }
            }
            Q6_K => {
                for (b, blk) in row_blocks.enumerate() {
                    let (ql, qh) = (&blk[0..128], &blk[128..192]);
                    let scales = &blk[192..208];
                    d[b] = f16(&blk[208..]);
                    let k = (j * nb + b) * 16;
                    for (sc, &v) in self.sc[k..k + 16].iter_mut().zip(scales) {
                        *sc = v as i8 as i32;
                    }
                    for p in 0..8 {
                        let lo = scales[2 * p] as i8 as i16 as u16 as i32;
                        let hi = scales[2 * p + 1] as i8 as i32;
                        self.pairs[(j * nb + b) * 8 + p] = lo | (hi << 16);
                    }
                    for half in 0..2 {
                        let ql: &[u8; 64] = ql[64 * half..64 * half + 64].try_into().unwrap();
                        let qh: &[u8; 32] = qh[32 * half..32 * half + 32].try_into().unwrap();
                        let out: &mut [u8; 128] = (&mut q
                            [b * 256 + 128 * half..b * 256 + 128 * half + 128])
                            .try_into()
                            .unwrap();
                        for l in 0..32 {
                            let h = qh[l];
                            out[l] = (ql[l] & 15) | ((h & 3) << 4);
                            out[l + 32] = (ql[l + 32] & 15) | (((h >> 2) & 3) << 4);
                            out[l + 64] = (ql[l] >> 4) | (((h >> 4) & 3) << 4);
                            out[l + 96] = (ql[l + 32] >> 4) | (((h >> 6) & 3) << 4);
                        }
                    }
                }
            }
            _ => unreachable!("gemm_block admits only the types above"),
        }
    }
}

/// Grow this thread's unpack buffers for rows of `cols` elements now, so that its first
/// prefill GEMM task does not allocate.
pub(crate) fn reserve_thread_buffers(cols: usize) {
    UNPACKED.with(|u| u.borrow_mut().reserve(cols));
}

thread_local! {
    /// Per-thread unpack buffers (GEMM and GEMV tasks): they grow once to the widest row
    /// this thread has seen.
    pub(super) static UNPACKED: std::cell::RefCell<Unpacked> = std::cell::RefCell::default();
}

/// Weight rows `lo..hi` against every activation tile; writes `y[i * rows + r]`, with the
/// tile kernels `kind` (all give the same bits: [`reference_dot`]).
///
/// Safety: the caller validated `w` (data length), `tiles` (packed for `m x w.cols` in the
/// type's format and `kind`'s layout), that `out` points at `m * w.rows` floats of which this
/// task alone writes rows `lo..hi` of each output row, and that the CPU runs `kind`'s kernels.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_rows(
    w: &PackedMatrix,
    row_bytes: usize,
    tiles: &[Line],
    m: usize,
    out: *mut f32,
    lo: usize,
    hi: usize,
    kind: super::GemmTiles,
) {
    let cols = w.cols;
    UNPACKED.with(|u| {
        let mut u = u.borrow_mut();
        u.reserve(cols);
        let mut r0 = lo;
        while r0 < hi {
            let n = (hi - r0).min(RC);
            for j in 0..n {
                let r = r0 + j;
                if let Some(iw) = w.interleaved {
                    // Straight from the interleaved copy: the file's bytes of this matrix are
                    // then never read (nor kept resident).
                    u.unpack_interleaved_for(kind, iw, r, cols, j);
                } else {
                    let row = &w.data[r * row_bytes..(r + 1) * row_bytes];
                    u.unpack_for(kind, w.ty, row, cols, j);
                }
            }
            #[cfg(target_arch = "aarch64")]
            if kind == super::GemmTiles::I8mm {
                u.pair_rows(cols);
            }
            for t in 0..m.div_ceil(TILE) {
                let acc = tile(kind, w.ty, &u, cols, tiles, t);
                // `acc[l]` holds activation row l's outputs for weight rows r0.. r0 + RC.
                for (l, a) in acc.iter().enumerate().take(TILE.min(m - t * TILE)) {
                    let y = out.add((t * TILE + l) * w.rows + r0);
                    if n == RC {
                        y.cast::<[f32; RC]>().write_unaligned(*a);
                    } else {
                        std::ptr::copy_nonoverlapping(a.as_ptr(), y, n);
                    }
                }
            }
            r0 += n;
        }
    })
}

/// One tile against the unpacked rows with `kind`'s kernel for `ty`.
///
/// Safety: as [`gemm_rows`].
#[inline]
unsafe fn tile(
    kind: super::GemmTiles,
    ty: GgmlType,
    u: &Unpacked,
    cols: usize,
    tiles: &[Line],
    t: usize,
) -> [[f32; RC]; TILE] {
    use super::GemmTiles;
    use GgmlType::*;
    match kind {
        #[cfg(target_arch = "x86_64")]
        GemmTiles::Vnni => match ty {
            Q4_0 => x86::tile_32::<3, false>(u, cols, tiles, t),
            Q5_0 => x86::tile_32::<4, false>(u, cols, tiles, t),
            Q8_0 => x86::tile_32::<7, false>(u, cols, tiles, t),
            Q4_1 | Q5_1 => x86::tile_32::<0, true>(u, cols, tiles, t),
            Q4_K | Q5_K => x86::tile_256::<false>(u, cols, tiles, t),
            Q6_K => x86::tile_256::<true>(u, cols, tiles, t),
            _ => unreachable!("gemm_block admits only the types above"),
        },
        #[cfg(target_arch = "x86_64")]
        GemmTiles::Avx2 => match ty {
            Q4_0 => x86::tile_32_avx2::<3, false, 4>(u, cols, tiles, t),
            Q5_0 => x86::tile_32_avx2::<4, false, 5>(u, cols, tiles, t),
            Q8_0 => x86::tile_32_avx2::<0, false, 8>(u, cols, tiles, t),
            Q4_1 => x86::tile_32_avx2::<0, true, 4>(u, cols, tiles, t),
            Q5_1 => x86::tile_32_avx2::<0, true, 5>(u, cols, tiles, t),
            Q4_K => x86::tile_256_avx2::<false, 4>(u, cols, tiles, t),
            Q5_K => x86::tile_256_avx2::<false, 5>(u, cols, tiles, t),
            Q6_K => x86::tile_256_avx2::<true, 6>(u, cols, tiles, t),
            _ => unreachable!("gemm_block admits only the types above"),
        },
        #[cfg(target_arch = "x86_64")]
        GemmTiles::AvxVnni => match ty {
            Q4_0 => x86::tile_32_avxvnni::<3, false>(u, cols, tiles, t),
            Q5_0 => x86::tile_32_avxvnni::<4, false>(u, cols, tiles, t),
            Q8_0 => x86::tile_32_avxvnni::<7, false>(u, cols, tiles, t),
            Q4_1 | Q5_1 => x86::tile_32_avxvnni::<0, true>(u, cols, tiles, t),
            Q4_K | Q5_K => x86::tile_256_avxvnni::<false>(u, cols, tiles, t),
            Q6_K => x86::tile_256_avxvnni::<true>(u, cols, tiles, t),
            _ => unreachable!("gemm_block admits only the types above"),
        },
        #[cfg(target_arch = "aarch64")]
        GemmTiles::I8mm => match ty {
            Q4_0 => arm::tile_32::<8, false>(u, cols, tiles, t),
            Q5_0 => arm::tile_32::<16, false>(u, cols, tiles, t),
            Q8_0 => arm::tile_32::<128, false>(u, cols, tiles, t),
            Q4_1 | Q5_1 => arm::tile_32::<0, true>(u, cols, tiles, t),
            Q4_K | Q5_K => arm::tile_256::<false>(u, cols, tiles, t),
            Q6_K => arm::tile_256::<true>(u, cols, tiles, t),
            _ => unreachable!("gemm_block admits only the types above"),
        },
        #[allow(unreachable_patterns)]
        _ => unreachable!("gemm_tiles admits only this architecture's kernels"),
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Line, Unpacked, LINES_256, LINES_32, RC, TILE};

    /// An 8x8 transpose of f32 registers: `out[l][i] = r[i][l]`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xee>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xee>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xee>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xee>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ]
    }

    /// Lanes `8 * half ..` of the tile: `[weight row][lane]` registers to `out[lane][row]`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn store_half(acc: [__m256; RC], half: usize, out: &mut [[f32; RC]; TILE]) {
        for (l, v) in transpose8(acc).into_iter().enumerate() {
            // SAFETY: `out[..]` rows are RC = 8 floats.
            unsafe { _mm256_storeu_ps(out[8 * half + l].as_mut_ptr(), v) };
        }
    }

    /// `[weight row][lane]` accumulators to `[lane][weight row]`: two 8x8 transposes of the
    /// registers' halves.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    fn transpose(acc: [__m512; RC]) -> [[f32; RC]; TILE] {
        let mut out = [[0f32; RC]; TILE];
        for half in 0..2 {
            let r: [__m256; RC] = std::array::from_fn(|i| {
                if half == 0 {
                    _mm512_castps512_ps256(acc[i])
                } else {
                    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(acc[i])))
                }
            });
            store_half(r, half, &mut out);
        }
        out
    }

    /// One tile (16 activation rows) against [`RC`] unpacked rows of a 32-block type.
    /// `SHIFT` is log2 of the weight's unsigned offset (`q_unsigned = q + 2^SHIFT`); `MIN` adds
    /// `m * d_x * sum(q_x)` (Q4_1 / Q5_1, which have no offset).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn tile_32<const SHIFT: u32, const MIN: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        let nb = cols / 32;
        let stride = super::tile_lines(TILE, cols);
        let lines = tiles[t * stride..t * stride + nb * LINES_32].as_ptr();
        let mut acc = [_mm512_setzero_ps(); RC];
        for b in 0..nb {
            let a = lines.add(b * LINES_32);
            let x: [__m512i; 8] = std::array::from_fn(|g| _mm512_load_si512(a.add(g).cast()));
            let init = if MIN {
                _mm512_setzero_si512()
            } else {
                _mm512_slli_epi32::<SHIFT>(_mm512_load_si512(a.add(8).cast()))
            };
            let dx = _mm512_load_ps(a.add(9).cast());
            for (r, acc) in acc.iter_mut().enumerate() {
                let wq = u.q.as_ptr().add(r * cols + b * 32);
                let mut s = init;
                for (g, &xg) in x.iter().enumerate() {
                    let wg = _mm512_set1_epi32(wq.add(4 * g).cast::<i32>().read_unaligned());
                    s = _mm512_dpbusd_epi32(s, wg, xg);
                }
                let scale = _mm512_mul_ps(dx, _mm512_set1_ps(*u.d.get_unchecked(r * nb + b)));
                *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, *acc);
                if MIN {
                    let dsum = _mm512_load_ps(a.add(10).cast());
                    *acc =
                        _mm512_fmadd_ps(dsum, _mm512_set1_ps(*u.m.get_unchecked(r * nb + b)), *acc);
                }
            }
        }
        transpose(acc)
    }

    /// One tile against [`RC`] unpacked rows of a K type: Q4_K / Q5_K (`Q6 = false`: 8
    /// sub-blocks of 32 with scales and mins) or Q6_K (16 sub-blocks of 16 with signed
    /// scales, offset 32).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn tile_256<const Q6: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        let nb = cols / 256;
        let stride = super::tile_lines(TILE, cols);
        let lines = tiles[t * stride..t * stride + nb * LINES_256].as_ptr();
        let mut acc = [_mm512_setzero_ps(); RC];
        for b in 0..nb {
            let a = lines.add(b * LINES_256);
            let mut iacc = [_mm512_setzero_si512(); RC];
            // Sub-blocks: 8 of 32 elements (8 lines) or 16 of 16 (4 lines).
            let (subs, per) = if Q6 { (16, 4) } else { (8, 8) };
            for s in 0..subs {
                let x: [__m512i; 8] = std::array::from_fn(|g| {
                    if g < per {
                        _mm512_load_si512(a.add(s * per + g).cast())
                    } else {
                        _mm512_setzero_si512()
                    }
                });
                for (r, iacc) in iacc.iter_mut().enumerate() {
                    let wq = u.q.as_ptr().add(r * cols + b * 256 + s * per * 4);
                    let mut sum = _mm512_setzero_si512();
                    for (g, &xg) in x.iter().enumerate().take(per) {
                        let wg = _mm512_set1_epi32(wq.add(4 * g).cast::<i32>().read_unaligned());
                        sum = _mm512_dpbusd_epi32(sum, wg, xg);
                    }
                    let sc = _mm512_set1_epi32(*u.sc.get_unchecked((r * nb + b) * 16 + s));
                    *iacc = _mm512_add_epi32(*iacc, _mm512_mullo_epi32(sum, sc));
                }
            }
            let dx = _mm512_load_ps(a.add(64).cast());
            let sums: [__m512i; 8] =
                std::array::from_fn(|p| _mm512_load_si512(a.add(65 + p).cast()));
            for (r, acc) in acc.iter_mut().enumerate() {
                let k = (r * nb + b) * 8;
                let mut corr = _mm512_setzero_si512();
                for (p, &sp) in sums.iter().enumerate() {
                    let pair = _mm512_set1_epi32(*u.pairs.get_unchecked(k + p));
                    corr = _mm512_dpwssd_epi32(corr, sp, pair);
                }
                let d = _mm512_mul_ps(dx, _mm512_set1_ps(*u.d.get_unchecked(r * nb + b)));
                if Q6 {
                    // sum_s sc_s * (q_unsigned - 32) . x = iacc - 32 * sum_s sc_s * sum_s(x)
                    let i = _mm512_sub_epi32(iacc[r], _mm512_slli_epi32::<5>(corr));
                    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), d, *acc);
                } else {
                    let dmin = _mm512_mul_ps(dx, _mm512_set1_ps(*u.m.get_unchecked(r * nb + b)));
                    *acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r]), d, *acc);
                    *acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), dmin, *acc);
                }
            }
        }
        transpose(acc)
    }

    /// 4-byte groups whose `vpmaddubsw` pair sums can be added in i16 without saturating, for
    /// unsigned weight codes of `bits` bits against activations within +-127: each pair is at
    /// most `2 * (2^bits - 1) * 127`.
    const fn i16_run(bits: u32) -> usize {
        let pair = 2 * ((1 << bits) - 1) * 127;
        let run = 32767 / pair;
        if run >= 8 {
            8
        } else if run >= 4 {
            4
        } else if run >= 2 {
            2
        } else {
            1
        }
    }

    /// Lanes `8 * half .. 8 * half + 8` of tile line `i` (tiles are 64-byte aligned).
    #[inline(always)]
    unsafe fn half_line(a: *const Line, i: usize, half: usize) -> *const __m256i {
        a.add(i).cast::<u8>().add(32 * half).cast()
    }

    /// Weight rows an AVX2 tile pass keeps in registers (16 ymm: 4 accumulators, 4 i16 and
    /// 4 i32 partial sums, the activation line, the weight broadcast).
    const RQ: usize = 4;

    /// Integer dots of weight rows `wq[j]` (RQ of them) with tile lines `groups` (4 bytes per
    /// group and lane): `sum_k wdword(k) . line(k)` per lane, each group's i16 pair sums
    /// collected `i16_run(BITS)` groups at a time, then widened by `vpmaddwd` with `mul` (ones,
    /// or a K-type sub-block scale). `BITS` = 8 means signed weight bytes stored `+ 128`
    /// (Q8_0), multiplied as `|w| * sign(x, w)`. With `VNNI` (AVX-VNNI `vpdpbusd` on 256 bits,
    /// exact in i32) the codes go in unsigned whatever their width, and `mul` (i16 halves)
    /// scales the i32 sums unless `SCALED` is false (ones).
    #[inline(always)]
    unsafe fn group_dots<const BITS: u32, const VNNI: bool, const SCALED: bool>(
        wq: [*const u8; RQ],
        a: *const Line,
        half: usize,
        groups: std::ops::Range<usize>,
        mul: [__m256i; RQ],
        s: &mut [__m256i; RQ],
    ) {
        if VNNI {
            let mut t = if SCALED {
                [_mm256_setzero_si256(); RQ]
            } else {
                *s
            };
            for k in groups {
                let x = _mm256_load_si256(half_line(a, k, half));
                for j in 0..RQ {
                    let wg = _mm256_set1_epi32(wq[j].add(4 * k).cast::<i32>().read_unaligned());
                    t[j] = _mm256_dpbusd_avx_epi32(t[j], wg, x);
                }
            }
            for j in 0..RQ {
                s[j] = if SCALED {
                    let scale = _mm256_srai_epi32::<16>(mul[j]);
                    _mm256_add_epi32(s[j], _mm256_mullo_epi32(t[j], scale))
                } else {
                    t[j]
                };
            }
            return;
        }
        let run = i16_run(BITS);
        let mut g = groups.start;
        while g < groups.end {
            let mut s16 = [_mm256_setzero_si256(); RQ];
            for k in g..(g + run).min(groups.end) {
                let x = _mm256_load_si256(half_line(a, k, half));
                for j in 0..RQ {
                    let wg = _mm256_set1_epi32(wq[j].add(4 * k).cast::<i32>().read_unaligned());
                    let p = if BITS == 8 {
                        let ws = _mm256_xor_si256(wg, _mm256_set1_epi8(-128));
                        _mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(x, ws))
                    } else {
                        _mm256_maddubs_epi16(wg, x)
                    };
                    s16[j] = _mm256_add_epi16(s16[j], p);
                }
            }
            for j in 0..RQ {
                s[j] = _mm256_add_epi32(s[j], _mm256_madd_epi16(s16[j], mul[j]));
            }
            g += run;
        }
    }

    /// [`tile_32`] with AVX2: the same integers and the same f32 operations, one half of the
    /// tile (8 lanes) and [`RQ`] weight rows at a time. `BITS` is the weight code width (4, 5;
    /// 8 for Q8_0, whose integer dot is taken signed, so it has no offset: `SHIFT` = 0).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn tile_32_avx2<const SHIFT: u32, const MIN: bool, const BITS: u32>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        tile_32_body::<SHIFT, MIN, BITS, false>(u, cols, tiles, t)
    }

    /// [`tile_32_avx2`] with AVX-VNNI: unsigned codes of any width (Q8_0 as `w + 128`,
    /// `SHIFT` = 7, like [`tile_32`]).
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    pub(super) unsafe fn tile_32_avxvnni<const SHIFT: u32, const MIN: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        tile_32_body::<SHIFT, MIN, 8, true>(u, cols, tiles, t)
    }

    #[inline(always)]
    unsafe fn tile_32_body<const SHIFT: u32, const MIN: bool, const BITS: u32, const VNNI: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        let nb = cols / 32;
        let stride = super::tile_lines(TILE, cols);
        let lines = tiles[t * stride..t * stride + nb * LINES_32].as_ptr();
        let ones = [_mm256_set1_epi16(1); RQ];
        let mut out = [[0f32; RC]; TILE];
        for half in 0..2 {
            let mut all = [_mm256_setzero_ps(); RC];
            for r0 in (0..RC).step_by(RQ) {
                let mut acc = [_mm256_setzero_ps(); RQ];
                for b in 0..nb {
                    let a = lines.add(b * LINES_32);
                    let wq = std::array::from_fn(|j| u.q.as_ptr().add((r0 + j) * cols + b * 32));
                    let mut s = [_mm256_setzero_si256(); RQ];
                    if !MIN && SHIFT > 0 {
                        let neg_sum = _mm256_load_si256(half_line(a, 8, half));
                        let init = _mm256_sllv_epi32(neg_sum, _mm256_set1_epi32(SHIFT as i32));
                        s = [init; RQ];
                    }
                    group_dots::<BITS, VNNI, false>(wq, a, half, 0..8, ones, &mut s);
                    let dx = _mm256_load_ps(half_line(a, 9, half).cast());
                    for j in 0..RQ {
                        let k = (r0 + j) * nb + b;
                        let scale = _mm256_mul_ps(dx, _mm256_set1_ps(*u.d.get_unchecked(k)));
                        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[j]), scale, acc[j]);
                        if MIN {
                            let dsum = _mm256_load_ps(half_line(a, 10, half).cast());
                            let m = _mm256_set1_ps(*u.m.get_unchecked(k));
                            acc[j] = _mm256_fmadd_ps(dsum, m, acc[j]);
                        }
                    }
                }
                all[r0..r0 + RQ].copy_from_slice(&acc);
            }
            store_half(all, half, &mut out);
        }
        out
    }

    /// [`tile_256`] with AVX2, [`RQ`] weight rows at a time (the integer sums, taken in any
    /// order, are the same numbers; each accumulator sees the same f32 operations). The
    /// sub-block scales multiply the i16 pair sums inside `vpmaddwd`. `BITS` is the weight
    /// code width (Q4_K 4, Q5_K 5, Q6_K 6).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn tile_256_avx2<const Q6: bool, const BITS: u32>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        tile_256_body::<Q6, BITS, false>(u, cols, tiles, t)
    }

    /// [`tile_256_avx2`] with AVX-VNNI.
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    pub(super) unsafe fn tile_256_avxvnni<const Q6: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        tile_256_body::<Q6, 8, true>(u, cols, tiles, t)
    }

    #[inline(always)]
    unsafe fn tile_256_body<const Q6: bool, const BITS: u32, const VNNI: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        let nb = cols / 256;
        let stride = super::tile_lines(TILE, cols);
        let lines = tiles[t * stride..t * stride + nb * LINES_256].as_ptr();
        let (subs, per) = if Q6 { (16, 4) } else { (8, 8) };
        let mut out = [[0f32; RC]; TILE];
        for half in 0..2 {
            let mut all = [_mm256_setzero_ps(); RC];
            for r0 in (0..RC).step_by(RQ) {
                let mut acc = [_mm256_setzero_ps(); RQ];
                for b in 0..nb {
                    let a = lines.add(b * LINES_256);
                    let wq = std::array::from_fn(|j| u.q.as_ptr().add((r0 + j) * cols + b * 256));
                    let mut iacc = [_mm256_setzero_si256(); RQ];
                    for s in 0..subs {
                        // Sub-block scales are 6-bit (Q4_K, Q5_K) or i8 (Q6_K): i16 is exact.
                        let sc = std::array::from_fn(|j| {
                            let k = ((r0 + j) * nb + b) * 16 + s;
                            _mm256_set1_epi16(*u.sc.get_unchecked(k) as i16)
                        });
                        let groups = s * per..(s + 1) * per;
                        group_dots::<BITS, VNNI, true>(wq, a, half, groups, sc, &mut iacc);
                    }
                    let mut corr = [_mm256_setzero_si256(); RQ];
                    for p in 0..8 {
                        let sp = _mm256_load_si256(half_line(a, 65 + p, half));
                        for (j, corr) in corr.iter_mut().enumerate() {
                            let k = ((r0 + j) * nb + b) * 8 + p;
                            let pair = _mm256_set1_epi32(*u.pairs.get_unchecked(k));
                            *corr = _mm256_add_epi32(*corr, _mm256_madd_epi16(sp, pair));
                        }
                    }
                    let dx = _mm256_load_ps(half_line(a, 64, half).cast());
                    for j in 0..RQ {
                        let k = (r0 + j) * nb + b;
                        let d = _mm256_mul_ps(dx, _mm256_set1_ps(*u.d.get_unchecked(k)));
                        if Q6 {
                            let i = _mm256_sub_epi32(iacc[j], _mm256_slli_epi32::<5>(corr[j]));
                            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), d, acc[j]);
                        } else {
                            let dmin = _mm256_mul_ps(dx, _mm256_set1_ps(*u.m.get_unchecked(k)));
                            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[j]), d, acc[j]);
                            acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr[j]), dmin, acc[j]);
                        }
                    }
                }
                all[r0..r0 + RQ].copy_from_slice(&acc);
            }
            store_half(all, half, &mut out);
        }
        out
    }
}

/// The GEMM's arithmetic, written plainly: one output element from one packed weight row and
/// one activation row in the row format (`qs`, `ds`, `sums16` of that row). Every GEMM tile
/// kernel must give exactly these bits: exact integer dots per block (or sub-block), then per
/// block, in block order, `acc = fma(isum, dx * dw, acc)` and, for types with a min,
/// `acc = fma(dx * sum(qx), m, acc)` (32-blocks) or `acc = fma(-corr, dx * dmin, acc)`
/// (K types).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn reference_dot(
    ty: GgmlType,
    row: &[u8],
    cols: usize,
    qs: &[i8],
    ds: &[[f32; 2]],
    sums16: &[i32],
) -> f32 {
    let mut u = Unpacked::default();
    u.reserve(cols);
    u.unpack(ty, row, cols, 0);
    reference_dot_unpacked(ty, &u, 0, cols, qs, ds, sums16)
}

/// [`reference_dot`] of the row already unpacked into slot `j` of `u`: the scalar path's
/// kernel, and the definition every SIMD kernel (GEMM tiles, GEMV) is tested against.
pub(crate) fn reference_dot_unpacked(
    ty: GgmlType,
    u: &Unpacked,
    j: usize,
    cols: usize,
    qs: &[i8],
    ds: &[[f32; 2]],
    sums16: &[i32],
) -> f32 {
    use GgmlType::*;
    let q = &u.q[j * cols..(j + 1) * cols];
    let dot = |lo: usize, hi: usize| -> i32 {
        q[lo..hi]
            .iter()
            .zip(&qs[lo..hi])
            .map(|(&w, &x)| w as i32 * x as i32)
            .sum()
    };
    let mut acc = 0f32;
    match ty {
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => {
            let offset = match ty {
                Q4_0 => 8,
                Q5_0 => 16,
                Q8_0 => 128,
                _ => 0,
            };
            let nb = cols / 32;
            let (d, m) = (&u.d[j * nb..(j + 1) * nb], &u.m[j * nb..(j + 1) * nb]);
            for b in 0..nb {
                let sum: i32 = qs[b * 32..b * 32 + 32].iter().map(|&v| v as i32).sum();
                let isum = dot(b * 32, b * 32 + 32) - offset * sum;
                let [dx, dsum] = ds[b];
                acc = (isum as f32).mul_add(dx * d[b], acc);
                if matches!(ty, Q4_1 | Q5_1) {
                    acc = dsum.mul_add(m[b], acc);
                }
            }
        }
        Q4_K | Q5_K | Q6_K => {
            let (subs, per) = if ty == Q6_K { (16, 16) } else { (8, 32) };
            let nb = cols / 256;
            for b in 0..nb {
                let base = b * 256;
                let k = j * nb + b;
                let iacc: i32 = (0..subs)
                    .map(|s| u.sc[k * 16 + s] * dot(base + s * per, base + (s + 1) * per))
                    .sum();
                let corr: i32 = (0..8)
                    .map(|p| {
                        let pair = u.pairs[k * 8 + p];
                        let (lo, hi) = (pair as i16 as i32, pair >> 16);
                        lo * sums16[b * 16 + 2 * p] + hi * sums16[b * 16 + 2 * p + 1]
                    })
                    .sum();
                let dx = ds[b][0];
                if ty == Q6_K {
                    acc = ((iacc - 32 * corr) as f32).mul_add(dx * u.d[k], acc);
                } else {
                    acc = (iacc as f32).mul_add(dx * u.d[k], acc);
                    acc = (-(corr as f32)).mul_add(dx * u.m[k], acc);
                }
            }
        }
        _ => unreachable!("gemm_block admits only the types above"),
    }
    acc
}

/// The GEMM tiles on aarch64 with FEAT_I8MM. `usmmla` multiplies a 2x8 block of unsigned
/// weight codes (two weight rows) by a 2x8 block of signed activations (two activation rows)
/// into a 2x2 block of i32 sums: lanes `[(r, i), (r, i+1), (r+1, i), (r+1, i+1)]`. Scales are
/// laid out in the same lane order, so each lane sees exactly the f32 operations of
/// [`reference_dot`].
#[cfg(target_arch = "aarch64")]
// The tile loops index [activation pair][weight pair] arrays together; ranges read plainer.
#[allow(clippy::needless_range_loop)]
mod arm {
    use std::arch::aarch64::*;
    use std::arch::asm;

    use super::{Line, Unpacked, LINES_256, LINES_32, RC, TILE};

    /// Weight pairs per tile pass (all [`RC`] rows).
    const WP: usize = RC / 2;

    /// `acc + A * B^T` for A = 2x8 unsigned bytes, B = 2x8 signed bytes. Inline assembly:
    /// the I8MM intrinsics are not stable; callers run after `has_i8mm()`.
    #[inline(always)]
    unsafe fn usmmla(acc: int32x4_t, a: uint8x16_t, b: int8x16_t) -> int32x4_t {
        let mut acc = acc;
        asm!(
            "usmmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
            acc = inout(vreg) acc,
            a = in(vreg) a,
            b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    }

    /// Activation pair `p`'s two lanes of a per-row line, as `[l0, l1, l0, l1]`.
    #[inline(always)]
    unsafe fn act_f32(a: *const Line, line: usize, p: usize) -> float32x4_t {
        let v = vld1_f32(a.add(line).cast::<f32>().add(2 * p));
        vcombine_f32(v, v)
    }

    #[inline(always)]
    unsafe fn act_i32(a: *const Line, line: usize, p: usize) -> int32x4_t {
        let v = vld1_s32(a.add(line).cast::<i32>().add(2 * p));
        vcombine_s32(v, v)
    }

    /// Weight pair `wp`'s two values as `[w0, w0, w1, w1]`.
    #[inline(always)]
    fn w_f32(v: &[f32], k0: usize, k1: usize) -> float32x4_t {
        // SAFETY: plain NEON arithmetic (the baseline).
        unsafe { vcombine_f32(vdup_n_f32(v[k0]), vdup_n_f32(v[k1])) }
    }

    #[inline(always)]
    fn w_i32(a: i32, b: i32) -> int32x4_t {
        // SAFETY: as above.
        unsafe { vcombine_s32(vdup_n_s32(a), vdup_n_s32(b)) }
    }

    /// Scatter one pass's `[act pair][weight pair]` lanes into `out[row][weight row]`.
    #[inline(always)]
    unsafe fn store(acc: &[[float32x4_t; WP]], p0: usize, out: &mut [[f32; RC]; TILE]) {
        for (dp, row) in acc.iter().enumerate() {
            let i = 2 * (p0 + dp);
            for (wp, &v) in row.iter().enumerate() {
                out[i][2 * wp] = vgetq_lane_f32::<0>(v);
                out[i + 1][2 * wp] = vgetq_lane_f32::<1>(v);
                out[i][2 * wp + 1] = vgetq_lane_f32::<2>(v);
                out[i + 1][2 * wp + 1] = vgetq_lane_f32::<3>(v);
            }
        }
    }

    /// One tile (16 activation rows) against [`RC`] unpacked rows of a 32-block type.
    /// `OFFSET` is the weight codes' unsigned offset (Q4_0 8, Q5_0 16, Q8_0 128); `MIN` adds
    /// `m * d_x * sum(q_x)` (Q4_1 / Q5_1).
    #[target_feature(enable = "neon,i8mm")]
    pub(super) unsafe fn tile_32<const OFFSET: i32, const MIN: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        const AP: usize = 2;
        let nb = cols / 32;
        let stride = super::tile_lines(TILE, cols);
        let lines = tiles[t * stride..t * stride + nb * LINES_32].as_ptr();
        let qp = u.qp.as_ptr();
        let mut out = [[0f32; RC]; TILE];
        for p0 in (0..TILE / 2).step_by(AP) {
            let mut acc = [[vdupq_n_f32(0.0); WP]; AP];
            for b in 0..nb {
                let a = lines.add(b * LINES_32);
                let bytes = a.cast::<i8>();
                let mut isum = [[vdupq_n_s32(0); WP]; AP];
                if OFFSET != 0 {
                    for (dp, s) in isum.iter_mut().enumerate() {
                        *s = [vmulq_n_s32(act_i32(a, 8, p0 + dp), OFFSET); WP];
                    }
                }
                for j in 0..4 {
                    let x: [int8x16_t; AP] =
                        std::array::from_fn(|dp| vld1q_s8(bytes.add((p0 + dp) * 64 + j * 16)));
                    for wp in 0..WP {
                        let w = vld1q_u8(qp.add(wp * 2 * cols + (b * 4 + j) * 16));
                        for dp in 0..AP {
                            isum[dp][wp] = usmmla(isum[dp][wp], w, x[dp]);
                        }
                    }
                }
                for dp in 0..AP {
                    let dx = act_f32(a, 9, p0 + dp);
                    for wp in 0..WP {
                        let (k0, k1) = ((2 * wp) * nb + b, (2 * wp + 1) * nb + b);
                        let scale = vmulq_f32(dx, w_f32(&u.d, k0, k1));
                        let v = &mut acc[dp][wp];
                        *v = vfmaq_f32(*v, vcvtq_f32_s32(isum[dp][wp]), scale);
                        if MIN {
                            let dsum = act_f32(a, 10, p0 + dp);
                            *v = vfmaq_f32(*v, dsum, w_f32(&u.m, k0, k1));
                        }
                    }
                }
            }
            store(&acc, p0, &mut out);
        }
        out
    }

    /// One tile against [`RC`] unpacked rows of a K type: Q4_K / Q5_K (`Q6 = false`: 8
    /// sub-blocks of 32 with scales and mins) or Q6_K (16 sub-blocks of 16 with signed
    /// scales, offset 32).
    #[target_feature(enable = "neon,i8mm")]
    pub(super) unsafe fn tile_256<const Q6: bool>(
        u: &Unpacked,
        cols: usize,
        tiles: &[Line],
        t: usize,
    ) -> [[f32; RC]; TILE] {
        let nb = cols / 256;
        let stride = super::tile_lines(TILE, cols);
        let lines = tiles[t * stride..t * stride + nb * LINES_256].as_ptr();
        let qp = u.qp.as_ptr();
        // Sub-blocks and their 8-element steps.
        let (subs, steps) = if Q6 { (16, 2) } else { (8, 4) };
        let mut out = [[0f32; RC]; TILE];
        for p in 0..TILE / 2 {
            let mut acc = [[vdupq_n_f32(0.0); WP]; 1];
            for b in 0..nb {
                let a = lines.add(b * LINES_256);
                let bytes = a.cast::<i8>().add(p * 512);
                let mut iacc = [vdupq_n_s32(0); WP];
                for s in 0..subs {
                    let mut isub = [vdupq_n_s32(0); WP];
                    for j in s * steps..(s + 1) * steps {
                        let x = vld1q_s8(bytes.add(j * 16));
                        for (wp, v) in isub.iter_mut().enumerate() {
                            let w = vld1q_u8(qp.add(wp * 2 * cols + (b * 32 + j) * 16));
                            *v = usmmla(*v, w, x);
                        }
                    }
                    for (wp, v) in iacc.iter_mut().enumerate() {
                        let k = |r: usize| (r * nb + b) * 16 + s;
                        let sc = w_i32(u.sc[k(2 * wp)], u.sc[k(2 * wp + 1)]);
                        *v = vmlaq_s32(*v, isub[wp], sc);
                    }
                }
                let dx = act_f32(a, 64, p);
                for (wp, v) in acc[0].iter_mut().enumerate() {
                    let mut corr = vdupq_n_s32(0);
                    for q in 0..8 {
                        let sums = act_i32(a, 65 + q, p);
                        let (lo, hi) = (
                            vshrq_n_s32::<16>(vshlq_n_s32::<16>(sums)),
                            vshrq_n_s32::<16>(sums),
                        );
                        let pr = |r: usize| u.pairs[(r * nb + b) * 8 + q];
                        let (p0, p1) = (pr(2 * wp), pr(2 * wp + 1));
                        let wlo = w_i32(p0 as i16 as i32, p1 as i16 as i32);
                        let whi = w_i32(p0 >> 16, p1 >> 16);
                        corr = vmlaq_s32(vmlaq_s32(corr, lo, wlo), hi, whi);
                    }
                    let (k0, k1) = ((2 * wp) * nb + b, (2 * wp + 1) * nb + b);
                    let d = vmulq_f32(dx, w_f32(&u.d, k0, k1));
                    if Q6 {
                        let i = vsubq_s32(iacc[wp], vshlq_n_s32::<5>(corr));
                        *v = vfmaq_f32(*v, vcvtq_f32_s32(i), d);
                    } else {
                        let dmin = vmulq_f32(dx, w_f32(&u.m, k0, k1));
                        *v = vfmaq_f32(*v, vcvtq_f32_s32(iacc[wp]), d);
                        *v = vfmsq_f32(*v, vcvtq_f32_s32(corr), dmin);
                    }
                }
            }
            store(&acc, p, &mut out);
        }
        out
    }
}
