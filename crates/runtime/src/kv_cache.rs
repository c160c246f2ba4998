//! The KV cache: one interface, two implementations: [`DenseKvCache`] (contiguous buffers
//! per sequence, sessions) and `PagedKvCache` (blocks from one pool, the serving engine).
//!
//! Positions are per sequence: slot `p` of a sequence holds the key/value of its token at
//! position `p`. Buffers are allocated once, to the capacity, when the cache is made; the token
//! loop only writes slots and moves length counters.

use torchnative_core::kernels::KvData;

use crate::error::{invalid, Result, RuntimeError};

/// Shape of a cache: what the model needs per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvShape {
    pub n_layers: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

/// How a cache stores keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvDtype {
    /// f32: exactly what the forward pass computed (transformers' cache in f32).
    #[default]
    F32,
    /// f16, rounded to nearest even when written: half the memory and half the bytes
    /// attention reads (llama.cpp's default cache type). Logits move by the rounding.
    F16,
}

impl KvDtype {
    /// Bytes per stored element.
    pub fn bytes(self) -> usize {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 => 2,
        }
    }

    /// The name used on the command line and in Python (`f32`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
        }
    }
}

impl std::str::FromStr for KvDtype {
    type Err = RuntimeError;

    fn from_str(s: &str) -> Result<KvDtype> {
        match s {
            "f32" | "float32" => Ok(KvDtype::F32),
            "f16" | "float16" => Ok(KvDtype::F16),
            _ => Err(invalid(
                "kv cache dtype",
                format!("{s:?} (expected f32 or f16)"),
            )),
        }
    }
}

/// One layer's keys and values of one sequence, valid for positions `0..len`.
pub enum KvLayerView<'a> {
    /// `[kv_head][capacity][head_dim]` (what `kernels::attention_f32` reads).
    Dense {
        keys: &'a [f32],
        values: &'a [f32],
        capacity: usize,
        len: usize,
    },
    /// A pool of `[block][kv_head][block_size][head_dim]` and the sequence's blocks in position
    /// order (what `kernels::attention_paged` reads), stored as [`KvDtype`] says.
    Paged {
        keys: KvData<'a>,
        values: KvData<'a>,
        block_table: &'a [u32],
        block_size: usize,
        len: usize,
    },
}

/// The cache interface the model's forward pass talks to.
pub trait KvCache: Send {
    fn shape(&self) -> KvShape;
    /// Positions each sequence can hold.
    fn capacity(&self) -> usize;
    /// Number of sequence slots.
    fn n_seqs(&self) -> usize;
    /// Valid positions of sequence `seq`.
    fn len(&self, seq: usize) -> usize;
    /// Forget positions `len..` of `seq` (e.g. to reuse a shared prefix).
    fn truncate(&mut self, seq: usize, len: usize) -> Result<()>;
    /// Write the keys/values of `n` consecutive tokens of `seq` starting at position `pos0`
    /// for `layer`; `k` and `v` are `[n][n_kv_heads][head_dim]`. Does not move the length:
    /// [`KvCache::commit`] does, once every layer is written.
    fn write(&mut self, layer: usize, seq: usize, pos0: usize, k: &[f32], v: &[f32]) -> Result<()>;
    /// Mark positions `..len` of `seq` valid after a forward pass wrote them in every layer.
    fn commit(&mut self, seq: usize, len: usize) -> Result<()>;
    /// Keys and values of `layer` for `seq`, valid up to `len` (which may exceed the committed
    /// length while a forward pass is in flight).
    fn layer(&self, layer: usize, seq: usize, len: usize) -> Result<KvLayerView<'_>>;
    /// Bytes held by the cache buffers.
    fn bytes(&self) -> usize;
    /// Dynamic NTK RoPE and LongRoPE only: the sequence length `seq`'s tokens are rotated for
    /// at least: a token at position `p` takes the frequencies of a forward call of length
    /// `max(p + 1, floor)`, so a prompt read in any chunks rotates as one call of the floor's
    /// length and each later token as its own call (transformers' cached `generate`). `None`
    /// (the default, and after the sequence is emptied by truncating it to 0): each chunk is
    /// rotated for its own end, as transformers rotates one forward call.
    fn rope_floor(&self, seq: usize) -> Option<usize>;
    /// Set [`KvCache::rope_floor`] of `seq` (what its cached keys were or will be rotated with
    /// is the caller's to keep consistent).
    fn set_rope_floor(&mut self, seq: usize, floor: Option<usize>) -> Result<()>;
}

/// Check a [`KvCache::write`] of `k` / `v` (`[n][n_kv_heads][head_dim]`) at `pos0` of `layer`
/// against the shape and a sequence capacity; returns `n`.
pub(crate) fn check_write(
    shape: KvShape,
    layer: usize,
    pos0: usize,
    k: &[f32],
    v: &[f32],
    capacity: usize,
) -> Result<usize> {
    if layer >= shape.n_layers {
        return Err(invalid("layer", format!("{layer} >= {}", shape.n_layers)));
    }
    let row = shape.n_kv_heads * shape.head_dim;
    if k.len() != v.len() || k.len() % row != 0 {
        return Err(invalid(
            "kv write",
            format!(
                "k has {} and v {} elements; both must be a multiple of {row}",
                k.len(),
                v.len()
            ),
        ));
    }
    let n = k.len() / row;
    if pos0 + n > capacity {
        return Err(RuntimeError::ContextOverflow {
            prompt_tokens: pos0,
            max_new_tokens: n,
            capacity,
        });
    }
    Ok(n)
}

/// Contiguous per-sequence buffers preallocated to the capacity.
pub struct DenseKvCache {
    shape: KvShape,
    capacity: usize,
    /// `[seq][layer]` -> (keys, values), each `n_kv_heads * capacity * head_dim`.
    buffers: Vec<Vec<(Vec<f32>, Vec<f32>)>>,
    lens: Vec<usize>,
    /// Per sequence: [`KvCache::rope_floor`].
    rope_floors: Vec<Option<usize>>,
}

impl DenseKvCache {
    pub fn new(shape: KvShape, capacity: usize, n_seqs: usize) -> Result<DenseKvCache> {
        if capacity == 0 || n_seqs == 0 {
            return Err(invalid(
                "kv cache",
                format!("capacity {capacity} and sequence count {n_seqs} must both be positive"),
            ));
        }
        let per_buffer = shape
            .n_kv_heads
            .checked_mul(capacity)
            .and_then(|x| x.checked_mul(shape.head_dim))
            .ok_or_else(|| invalid("kv cache", "buffer size overflows"))?;
        let total_bytes = per_buffer
            .checked_mul(2 * 4 * shape.n_layers * n_seqs)
            .ok_or_else(|| invalid("kv cache", "buffer size overflows"))?;
        // A wildly large request is refused before the allocator aborts the process.
        const LIMIT: usize = 1 << 40;
        if total_bytes > LIMIT {
            return Err(invalid(
                "kv cache",
                format!("{total_bytes} bytes for capacity {capacity} x {n_seqs} sequences exceeds {LIMIT}"),
            ));
        }
        let buffers = (0..n_seqs)
            .map(|_| {
                (0..shape.n_layers)
                    .map(|_| (vec![0.0; per_buffer], vec![0.0; per_buffer]))
                    .collect()
            })
            .collect();
        Ok(DenseKvCache {
            shape,
            capacity,
            buffers,
            lens: vec![0; n_seqs],
            rope_floors: vec![None; n_seqs],
        })
    }

    fn check_seq(&self, seq: usize) -> Result<()> {
        if seq >= self.lens.len() {
            return Err(invalid(
                "sequence id",
                format!(
                    "{seq} is out of range for a cache of {} sequences",
                    self.lens.len()
                ),
            ));
        }
        Ok(())
    }
}

impl KvCache for DenseKvCache {
    fn shape(&self) -> KvShape {
        self.shape
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn n_seqs(&self) -> usize {
        self.lens.len()
    }

    fn len(&self, seq: usize) -> usize {
        self.lens.get(seq).copied().unwrap_or(0)
    }

    fn truncate(&mut self, seq: usize, len: usize) -> Result<()> {
        self.check_seq(seq)?;
        self.lens[seq] = self.lens[seq].min(len);
        if self.lens[seq] == 0 {
            self.rope_floors[seq] = None;
        }
        Ok(())
    }

    fn write(&mut self, layer: usize, seq: usize, pos0: usize, k: &[f32], v: &[f32]) -> Result<()> {
        self.check_seq(seq)?;
        let n = check_write(self.shape, layer, pos0, k, v, self.capacity)?;
        let KvShape {
            n_kv_heads,
            head_dim,
            ..
        } = self.shape;
        let row = n_kv_heads * head_dim;
        let (keys, values) = &mut self.buffers[seq][layer];
        for t in 0..n {
            for h in 0..n_kv_heads {
                let src = t * row + h * head_dim;
                let dst = (h * self.capacity + pos0 + t) * head_dim;
                keys[dst..dst + head_dim].copy_from_slice(&k[src..src + head_dim]);
                values[dst..dst + head_dim].copy_from_slice(&v[src..src + head_dim]);
            }
        }
        Ok(())
    }

    fn commit(&mut self, seq: usize, len: usize) -> Result<()> {
        self.check_seq(seq)?;
        if len > self.capacity {
            return Err(invalid(
                "kv commit",
                format!("length {len} > capacity {}", self.capacity),
            ));
        }
        self.lens[seq] = len;
        Ok(())
    }

    fn layer(&self, layer: usize, seq: usize, len: usize) -> Result<KvLayerView<'_>> {
        self.check_seq(seq)?;
        let (keys, values) = self.buffers[seq]
            .get(layer)
            .ok_or_else(|| invalid("layer", format!("{layer} >= {}", self.shape.n_layers)))?;
        if len > self.capacity {
            return Err(invalid(
                "kv read",
                format!("length {len} > capacity {}", self.capacity),
            ));
        }
        Ok(KvLayerView::Dense {
            keys,
            values,
            capacity: self.capacity,
            len,
        })
    }

    fn bytes(&self) -> usize {
        self.buffers
            .iter()
            .flatten()
            .map(|(k, v)| (k.len() + v.len()) * 4)
            .sum()
    }

    fn rope_floor(&self, seq: usize) -> Option<usize> {
        self.rope_floors.get(seq).copied().flatten()
    }

    fn set_rope_floor(&mut self, seq: usize, floor: Option<usize>) -> Result<()> {
        self.check_seq(seq)?;
        self.rope_floors[seq] = floor;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> KvShape {
        KvShape {
            n_layers: 2,
            n_kv_heads: 2,
            head_dim: 3,
        }
    }

    #[test]
    fn write_lands_in_head_major_slots_and_only_there() {
        let mut c = DenseKvCache::new(shape(), 4, 2).unwrap();
        // Two tokens at positions 1 and 2 of sequence 1, layer 1.
        let k: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let v: Vec<f32> = (0..12).map(|x| -(x as f32)).collect();
        c.write(1, 1, 1, &k, &v).unwrap();
        c.commit(1, 3).unwrap();
        let KvLayerView::Dense { keys, values, .. } = c.layer(1, 1, 3).unwrap() else {
            panic!("dense view")
        };
        // head 0, pos 1 = token 0 head 0; head 1, pos 2 = token 1 head 1.
        assert_eq!(&keys[3..6], &[0.0, 1.0, 2.0]);
        assert_eq!(&keys[(4 + 2) * 3..(4 + 2) * 3 + 3], &[9.0, 10.0, 11.0]);
        assert_eq!(&values[(4 + 2) * 3..(4 + 2) * 3 + 3], &[-9.0, -10.0, -11.0]);
        // Position 0 and everything of sequence 0 untouched.
        assert_eq!(&keys[0..3], &[0.0; 3]);
        let KvLayerView::Dense { keys: k0, .. } = c.layer(1, 0, 0).unwrap() else {
            panic!("dense view")
        };
        assert!(k0.iter().all(|&x| x == 0.0));
        assert_eq!((c.len(0), c.len(1)), (0, 3));
        assert_eq!(c.bytes(), 2 * 2 * 2 * (2 * 4 * 3) * 4);
    }

    #[test]
    fn overflow_and_bad_ids_are_errors() {
        let mut c = DenseKvCache::new(shape(), 4, 1).unwrap();
        let six = [0.0f32; 6];
        assert!(matches!(
            c.write(0, 0, 4, &six, &six),
            Err(RuntimeError::ContextOverflow { .. })
        ));
        assert!(c
            .write(0, 1, 0, &six, &six)
            .unwrap_err()
            .to_string()
            .contains("sequence id"));
        assert!(c.write(2, 0, 0, &six, &six).is_err());
        assert!(c.write(0, 0, 0, &six[..5], &six[..5]).is_err());
        assert!(DenseKvCache::new(shape(), 0, 1).is_err());
        assert!(DenseKvCache::new(shape(), usize::MAX / 2, 1).is_err());
    }

    #[test]
    fn truncate_keeps_a_prefix() {
        let mut c = DenseKvCache::new(shape(), 8, 1).unwrap();
        c.commit(0, 5).unwrap();
        c.set_rope_floor(0, Some(6)).unwrap();
        c.truncate(0, 3).unwrap();
        assert_eq!((c.len(0), c.rope_floor(0)), (3, Some(6)));
        c.truncate(0, 7).unwrap();
        assert_eq!(c.len(0), 3, "truncate never extends");
        c.truncate(0, 0).unwrap();
        assert_eq!(c.rope_floor(0), None, "an empty sequence has no floor");
        assert!(c.set_rope_floor(1, None).is_err());
    }
}
