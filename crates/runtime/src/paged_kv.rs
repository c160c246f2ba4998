//! The paged KV cache: fixed-size blocks from one pool allocated at start, a block table per
//! sequence, reference-counted blocks with copy on write, and prefix caching.
//!
//! A block holds [`PagedKvCache::block_size`] consecutive positions of one sequence in every
//! layer. A full block whose tokens are known ([`PagedKvCache::register_full_blocks`]) is
//! keyed by the hash of all tokens up to its end, so another sequence starting with the same
//! tokens (a shared system prompt) attaches it instead of computing it
//! ([`PagedKvCache::attach_prefix`]). When no sequence uses a keyed block any more it stays
//! cached in an LRU list and is only reused for new data when the free list is empty.
//!
//! Attention reads keys and values through the block table (no gathering), in the canonical
//! order of `torchnative_core::kernels::attention_f32`: a block size dividing 64 makes the
//! paged result bit-identical to the dense one.

use std::collections::{HashMap, VecDeque};

use crate::error::{invalid, Result, RuntimeError};
use half::f16;
use torchnative_core::kernels::{self, KvData};

use crate::kv_cache::{check_write, KvCache, KvDtype, KvLayerView, KvShape};

/// One layer's keys or values for the whole pool, in the cache's [`KvDtype`].
enum PoolBuf {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

impl PoolBuf {
    fn new(dtype: KvDtype, len: usize) -> PoolBuf {
        match dtype {
            KvDtype::F32 => PoolBuf::F32(vec![0.0; len]),
            KvDtype::F16 => PoolBuf::F16(vec![f16::ZERO; len]),
        }
    }

    fn data(&self) -> KvData<'_> {
        match self {
            PoolBuf::F32(b) => KvData::F32(b),
            PoolBuf::F16(b) => KvData::F16(b),
        }
    }

    /// `self[at..at + src.len()] = src` (rounded to nearest even for f16).
    fn store(&mut self, at: usize, src: &[f32]) {
        match self {
            PoolBuf::F32(b) => b[at..at + src.len()].copy_from_slice(src),
            PoolBuf::F16(b) => kernels::f32_to_f16(src, &mut b[at..at + src.len()]),
        }
    }

    fn copy_within(&mut self, from: std::ops::Range<usize>, to: usize) {
        match self {
            PoolBuf::F32(b) => b.copy_within(from, to),
            PoolBuf::F16(b) => b.copy_within(from, to),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            PoolBuf::F32(b) => b.len() * 4,
            PoolBuf::F16(b) => b.len() * 2,
        }
    }
}

/// Counters of the prefix cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixStats {
    /// Prompt tokens looked up by [`PagedKvCache::attach_prefix`].
    pub looked_up_tokens: u64,
    /// Of those, tokens found in cached blocks (not computed again).
    pub hit_tokens: u64,
    /// Cached blocks reused for new data (evicted from the LRU list).
    pub evicted_blocks: u64,
}

/// A keyed block: what its hash stands for, checked on every lookup (no trust in the hash).
struct Key {
    hash: u64,
    parent: u64,
    tokens: Vec<u32>,
}

pub struct PagedKvCache {
    shape: KvShape,
    block_size: usize,
    n_blocks: usize,
    /// Positions one sequence may hold.
    max_len: usize,
    /// Per layer: keys and values, `[block][kv_head][block_size][head_dim]`.
    pool: Vec<(PoolBuf, PoolBuf)>,
    dtype: KvDtype,
    tables: Vec<Vec<u32>>,
    lens: Vec<usize>,
    refs: Vec<u32>,
    /// Unused blocks holding nothing worth keeping.
    free: Vec<u32>,
    /// Unused keyed blocks, least recently released first (entries may be stale: a block
    /// attached again or evicted is skipped when met).
    lru: VecDeque<u32>,
    keys: Vec<Option<Key>>,
    by_hash: HashMap<u64, u32>,
    /// Per sequence: the chained hash of each leading full block already keyed (or attached),
    /// so that registering after every step hashes only the blocks that became full.
    chains: Vec<Vec<u64>>,
    /// Per sequence: [`KvCache::rope_floor`]. It seeds the sequence's hash chain: with dynamic
    /// NTK RoPE a block's keys depend on the floor they were rotated with, not only on the
    /// tokens, so only sequences with the same floor share blocks.
    rope_floors: Vec<Option<usize>>,
    /// Per sequence: a number standing for whatever else its keys and values depend on besides
    /// the tokens (the LoRA adapters it runs with; 0: the base model). Seeds the hash chain
    /// like the floor.
    salts: Vec<u64>,
    /// Blocks with a reference (kept equal to the count of `refs[b] > 0`).
    used: usize,
    /// Keyed blocks without a reference (kept equal to that count).
    cached_unused: usize,
    stats: PrefixStats,
}

const ROOT_HASH: u64 = 0x243f_6a88_85a3_08d3;

/// Hash of a block's tokens chained to its parent's hash (FNV-1a style over 64-bit words,
/// then a final mix); lookups verify tokens and parent, so collisions cannot share data.
fn chain_hash(parent: u64, tokens: &[u32]) -> u64 {
    let mut h = parent ^ 0xcbf2_9ce4_8422_2325;
    for &t in tokens {
        h ^= t as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

impl PagedKvCache {
    /// A pool of `n_blocks` blocks of `block_size` positions (16, 32 or 64: a divisor of the
    /// attention kernel's 64-key blocks) for `n_seqs` sequences of at most `max_len` positions,
    /// storing keys and values as `dtype`.
    pub fn new(
        shape: KvShape,
        block_size: usize,
        n_blocks: usize,
        n_seqs: usize,
        max_len: usize,
        dtype: KvDtype,
    ) -> Result<PagedKvCache> {
        if ![16, 32, 64].contains(&block_size) {
            return Err(invalid(
                "kv block size",
                format!("{block_size} (must be 16, 32 or 64)"),
            ));
        }
        if n_blocks == 0 || n_seqs == 0 || max_len == 0 {
            return Err(invalid(
                "paged kv cache",
                format!(
                    "blocks {n_blocks}, sequences {n_seqs} and max_len {max_len} must be positive"
                ),
            ));
        }
        if n_blocks > u32::MAX as usize {
            return Err(invalid("paged kv cache", format!("{n_blocks} blocks")));
        }
        let per_layer = n_blocks
            .checked_mul(shape.n_kv_heads * block_size * shape.head_dim)
            .ok_or_else(|| invalid("paged kv cache", "pool size overflows"))?;
        let total_bytes = per_layer
            .checked_mul(2 * dtype.bytes() * shape.n_layers)
            .ok_or_else(|| invalid("paged kv cache", "pool size overflows"))?;
        const LIMIT: usize = 1 << 40;
        if total_bytes > LIMIT {
            return Err(invalid(
                "paged kv cache",
                format!("{total_bytes} bytes for {n_blocks} blocks exceeds {LIMIT}"),
            ));
        }
        Ok(PagedKvCache {
            shape,
            block_size,
            n_blocks,
            max_len,
            pool: (0..shape.n_layers)
                .map(|_| {
                    (
                        PoolBuf::new(dtype, per_layer),
                        PoolBuf::new(dtype, per_layer),
                    )
                })
                .collect(),
            dtype,
            tables: vec![Vec::new(); n_seqs],
            lens: vec![0; n_seqs],
            refs: vec![0; n_blocks],
            free: (0..n_blocks as u32).rev().collect(),
            lru: VecDeque::new(),
            keys: (0..n_blocks).map(|_| None).collect(),
            by_hash: HashMap::new(),
            chains: vec![Vec::new(); n_seqs],
            rope_floors: vec![None; n_seqs],
            salts: vec![0; n_seqs],
            used: 0,
            cached_unused: 0,
            stats: PrefixStats::default(),
        })
    }

    /// Bytes of one block in every layer.
    pub fn bytes_per_block(shape: KvShape, block_size: usize, dtype: KvDtype) -> usize {
        2 * dtype.bytes() * shape.n_layers * shape.n_kv_heads * block_size * shape.head_dim
    }

    /// How keys and values are stored.
    pub fn dtype(&self) -> KvDtype {
        self.dtype
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn n_blocks(&self) -> usize {
        self.n_blocks
    }

    /// Blocks referenced by at least one sequence.
    pub fn used_blocks(&self) -> usize {
        self.used
    }

    /// Blocks that can take new data now (free, or cached and unused).
    pub fn available_blocks(&self) -> usize {
        self.n_blocks - self.used_blocks()
    }

    /// Unused blocks still holding a cached prefix.
    pub fn cached_unused_blocks(&self) -> usize {
        self.cached_unused
    }

    pub fn prefix_stats(&self) -> PrefixStats {
        self.stats
    }

    /// New blocks `seq` needs to hold `len` positions (beyond its table; copies on write not
    /// counted: a sequence only writes into a shared block after truncating into it).
    pub fn blocks_needed(&self, seq: usize, len: usize) -> usize {
        let have = self.tables.get(seq).map_or(0, Vec::len);
        len.div_ceil(self.block_size).saturating_sub(have)
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

    /// A block for new data: a free one, else the least recently released cached one.
    fn take_block(&mut self) -> Result<u32> {
        if let Some(b) = self.free.pop() {
            return Ok(b);
        }
        while let Some(b) = self.lru.pop_front() {
            if self.refs[b as usize] == 0 && self.keys[b as usize].is_some() {
                self.unkey(b);
                self.cached_unused -= 1;
                self.stats.evicted_blocks += 1;
                return Ok(b);
            }
        }
        Err(RuntimeError::InvalidArgument {
            what: "paged kv cache".into(),
            reason: format!("all {} blocks are in use", self.n_blocks),
        })
    }

    fn unkey(&mut self, b: u32) {
        if let Some(k) = self.keys[b as usize].take() {
            if self.by_hash.get(&k.hash) == Some(&b) {
                self.by_hash.remove(&k.hash);
            }
        }
    }

    fn release(&mut self, b: u32) {
        let r = &mut self.refs[b as usize];
        *r -= 1;
        if *r == 0 {
            self.used -= 1;
            if self.keys[b as usize].is_some() {
                self.cached_unused += 1;
                self.lru.push_back(b);
            } else {
                self.free.push(b);
            }
        }
    }

    /// Another reference to `b` (a block from [`Self::take_block`] or an attached one).
    fn retain(&mut self, b: u32) {
        if self.refs[b as usize] == 0 {
            self.used += 1;
            if self.keys[b as usize].is_some() {
                self.cached_unused -= 1;
            }
        }
        self.refs[b as usize] += 1;
    }

    /// Element offset of (block, kv head, slot) in a layer's pool.
    fn offset(&self, block: u32, head: usize, slot: usize) -> usize {
        ((block as usize * self.shape.n_kv_heads + head) * self.block_size + slot)
            * self.shape.head_dim
    }

    /// Make block `j` of `seq` private before writing into it: copy a shared block (every
    /// layer), and forget the key of a keyed one (its content is about to change).
    fn own_block(&mut self, seq: usize, j: usize) -> Result<()> {
        let b = self.tables[seq][j];
        if self.refs[b as usize] > 1 {
            let nb = self.take_block()?;
            let span = self.shape.n_kv_heads * self.block_size * self.shape.head_dim;
            let (from, to) = (self.offset(b, 0, 0), self.offset(nb, 0, 0));
            for (k, v) in &mut self.pool {
                k.copy_within(from..from + span, to);
                v.copy_within(from..from + span, to);
            }
            self.release(b);
            self.retain(nb);
            self.tables[seq][j] = nb;
        } else if self.keys[b as usize].is_some() {
            self.unkey(b);
        }
        Ok(())
    }

    /// The parent hash of `seq`'s first block: the plain root, or one derived from its RoPE
    /// floor (blocks keyed under one floor are never found under another).
    fn root(&self, seq: usize) -> u64 {
        let salt = self.salts[seq];
        match (self.rope_floors[seq], salt) {
            (None, 0) => ROOT_HASH,
            (floor, _) => {
                let f = floor.map_or(u64::MAX, |f| f as u64);
                chain_hash(
                    !ROOT_HASH,
                    &[f as u32, (f >> 32) as u32, salt as u32, (salt >> 32) as u32],
                )
            }
        }
    }

    /// `seq` in range and holding no blocks: what seeds its blocks' keys (`what`) may change.
    fn check_empty(&self, seq: usize, what: &str) -> Result<()> {
        self.check_seq(seq)?;
        if !self.tables[seq].is_empty() {
            return Err(invalid(
                what,
                format!("sequence {seq} already holds blocks; set it before the first token"),
            ));
        }
        Ok(())
    }

    /// `seq`'s salt (see [`Self::set_prefix_salt`]).
    pub fn prefix_salt(&self, seq: usize) -> u64 {
        self.salts.get(seq).copied().unwrap_or(0)
    }

    /// What else than its tokens `seq`'s keys and values depend on (the LoRA adapters it runs
    /// with), as a number: blocks are shared only between sequences of the same salt. Only
    /// while `seq` holds nothing; emptying a sequence puts it back to 0.
    pub fn set_prefix_salt(&mut self, seq: usize, salt: u64) -> Result<()> {
        self.check_empty(seq, "prefix salt")?;
        self.salts[seq] = salt;
        Ok(())
    }

    /// Whether [`Self::attach_prefix`] can extend `seq` now: it holds only whole blocks, all
    /// keyed by their tokens.
    pub fn can_attach(&self, seq: usize) -> bool {
        seq < self.lens.len()
            && self.lens[seq] == self.tables[seq].len() * self.block_size
            && self.chains[seq].len() == self.tables[seq].len()
    }

    /// Attach the longest run of cached full blocks that continues `seq`'s tokens (`tokens`:
    /// the sequence's tokens from position 0), leaving at least the last token to evaluate;
    /// returns the positions attached. The sequence must be empty, or hold only whole blocks
    /// that are keyed (as [`Self::register_full_blocks`] leaves them): a request that waited
    /// for another to compute a prefix they share picks it up here.
    pub fn attach_prefix(&mut self, seq: usize, tokens: &[u32]) -> Result<usize> {
        self.check_seq(seq)?;
        let bs = self.block_size;
        let have = self.tables[seq].len();
        if !self.can_attach(seq) || tokens.len() < have * bs {
            return Err(invalid(
                "attach_prefix",
                format!(
                    "sequence {seq} holds {} positions, not {have} whole keyed blocks of its tokens",
                    self.lens[seq]
                ),
            ));
        }
        let mut parent = self.chains[seq].last().copied().unwrap_or(self.root(seq));
        let mut attached = 0;
        // Full blocks only, and never the block holding the last token.
        let usable = tokens.len().saturating_sub(1) / bs;
        for j in have..usable {
            let block_tokens = &tokens[j * bs..(j + 1) * bs];
            let hash = chain_hash(parent, block_tokens);
            let Some(&b) = self.by_hash.get(&hash) else {
                break;
            };
            let ok = self.keys[b as usize]
                .as_ref()
                .is_some_and(|k| k.parent == parent && k.tokens == block_tokens);
            if !ok {
                break;
            }
            self.retain(b);
            self.tables[seq].push(b);
            self.chains[seq].push(hash);
            attached += bs;
            parent = hash;
        }
        self.lens[seq] += attached;
        if have == 0 {
            self.stats.looked_up_tokens += tokens.len() as u64;
        }
        self.stats.hit_tokens += attached as u64;
        Ok(attached)
    }

    /// Key the full blocks of `seq` by their tokens (`tokens`: the sequence's tokens from
    /// position 0, at least as many as its committed length), so that later sequences can
    /// attach them. Blocks already keyed are left alone; a block whose content another block
    /// already caches under the same key stays unkeyed.
    pub fn register_full_blocks(&mut self, seq: usize, tokens: &[u32]) -> Result<()> {
        self.check_seq(seq)?;
        let bs = self.block_size;
        let full = self.lens[seq].min(tokens.len()) / bs;
        let done = self.chains[seq].len();
        let mut parent = self.chains[seq].last().copied().unwrap_or(self.root(seq));
        for j in done..full {
            let block_tokens = &tokens[j * bs..(j + 1) * bs];
            let hash = chain_hash(parent, block_tokens);
            let b = self.tables[seq][j];
            match &self.keys[b as usize] {
                Some(k) if k.hash == hash => {}
                Some(_) => break,
                None => {
                    if let std::collections::hash_map::Entry::Vacant(e) = self.by_hash.entry(hash) {
                        e.insert(b);
                        self.keys[b as usize] = Some(Key {
                            hash,
                            parent,
                            tokens: block_tokens.to_vec(),
                        });
                    }
                }
            }
            self.chains[seq].push(hash);
            parent = hash;
        }
        Ok(())
    }
}

impl KvCache for PagedKvCache {
    fn shape(&self) -> KvShape {
        self.shape
    }

    fn capacity(&self) -> usize {
        self.max_len
    }

    fn n_seqs(&self) -> usize {
        self.lens.len()
    }

    fn len(&self, seq: usize) -> usize {
        self.lens.get(seq).copied().unwrap_or(0)
    }

    fn truncate(&mut self, seq: usize, len: usize) -> Result<()> {
        self.check_seq(seq)?;
        let len = self.lens[seq].min(len);
        self.lens[seq] = len;
        let keep = len.div_ceil(self.block_size);
        // Blocks cut into are rewritten (and unkeyed) before they are read again.
        self.chains[seq].truncate(len / self.block_size);
        while self.tables[seq].len() > keep {
            let b = self.tables[seq].pop().expect("longer than keep");
            self.release(b);
        }
        if len == 0 {
            self.rope_floors[seq] = None;
            self.salts[seq] = 0;
        }
        Ok(())
    }

    fn write(&mut self, layer: usize, seq: usize, pos0: usize, k: &[f32], v: &[f32]) -> Result<()> {
        self.check_seq(seq)?;
        let n = check_write(self.shape, layer, pos0, k, v, self.max_len)?;
        let KvShape {
            n_kv_heads,
            head_dim,
            ..
        } = self.shape;
        let row = n_kv_heads * head_dim;
        if pos0 > self.tables[seq].len() * self.block_size {
            return Err(invalid(
                "kv write",
                format!("position {pos0} leaves a gap after the sequence's blocks"),
            ));
        }
        let bs = self.block_size;
        // Blocks first (every layer writes the same positions; the first layer's call
        // allocates and copies on write, the others find them in place).
        let first = pos0 / bs;
        let last = (pos0 + n).div_ceil(bs);
        for j in first..last {
            if j < self.tables[seq].len() {
                self.own_block(seq, j)?;
            } else {
                let b = self.take_block()?;
                self.retain(b);
                self.tables[seq].push(b);
            }
        }
        for t in 0..n {
            let p = pos0 + t;
            let b = self.tables[seq][p / bs];
            for h in 0..n_kv_heads {
                let src = t * row + h * head_dim;
                let dst = self.offset(b, h, p % bs);
                let (keys, values) = &mut self.pool[layer];
                keys.store(dst, &k[src..src + head_dim]);
                values.store(dst, &v[src..src + head_dim]);
            }
        }
        Ok(())
    }

    fn commit(&mut self, seq: usize, len: usize) -> Result<()> {
        self.check_seq(seq)?;
        if len > self.tables[seq].len() * self.block_size {
            return Err(invalid(
                "kv commit",
                format!("length {len} beyond the sequence's blocks"),
            ));
        }
        self.lens[seq] = len;
        Ok(())
    }

    fn layer(&self, layer: usize, seq: usize, len: usize) -> Result<KvLayerView<'_>> {
        self.check_seq(seq)?;
        let (keys, values) = self
            .pool
            .get(layer)
            .ok_or_else(|| invalid("layer", format!("{layer} >= {}", self.shape.n_layers)))?;
        if len > self.tables[seq].len() * self.block_size {
            return Err(invalid(
                "kv read",
                format!("length {len} beyond the sequence's blocks"),
            ));
        }
        Ok(KvLayerView::Paged {
            keys: keys.data(),
            values: values.data(),
            block_table: &self.tables[seq],
            block_size: self.block_size,
            len,
        })
    }

    fn bytes(&self) -> usize {
        self.pool.iter().map(|(k, v)| k.bytes() + v.bytes()).sum()
    }

    fn rope_floor(&self, seq: usize) -> Option<usize> {
        self.rope_floors.get(seq).copied().flatten()
    }

    /// Only while `seq` holds nothing: the floor is part of its blocks' keys.
    fn set_rope_floor(&mut self, seq: usize, floor: Option<usize>) -> Result<()> {
        self.check_empty(seq, "rope floor")?;
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

    /// Keys of `n` tokens from `pos0`: element value encodes (position, head, dim).
    fn kv(pos0: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
        let k: Vec<f32> = (0..n * 6)
            .map(|i| ((pos0 + i / 6) * 100 + i % 6) as f32)
            .collect();
        let v = k.iter().map(|x| -x).collect();
        (k, v)
    }

    /// Read position `p`, head `h` of `seq`, layer `l` back through the block table.
    fn read(c: &PagedKvCache, l: usize, seq: usize, p: usize, h: usize) -> Vec<f32> {
        let KvLayerView::Paged {
            keys,
            block_table,
            block_size,
            ..
        } = c.layer(l, seq, c.len(seq)).unwrap()
        else {
            panic!("paged view")
        };
        let b = block_table[p / block_size] as usize;
        let o = ((b * 2 + h) * block_size + p % block_size) * 3;
        match keys {
            KvData::F32(k) => k[o..o + 3].to_vec(),
            KvData::F16(k) => k[o..o + 3].iter().map(|x| x.to_f32()).collect(),
        }
    }

    fn fill(c: &mut PagedKvCache, seq: usize, pos0: usize, n: usize) {
        let (k, v) = kv(pos0, n);
        for l in 0..2 {
            c.write(l, seq, pos0, &k, &v).unwrap();
        }
        c.commit(seq, pos0 + n).unwrap();
        check_counters(c);
    }

    /// The kept counters equal a scan of the pool.
    fn check_counters(c: &PagedKvCache) {
        assert_eq!(c.used_blocks(), c.refs.iter().filter(|&&r| r > 0).count());
        let cached = c
            .keys
            .iter()
            .zip(&c.refs)
            .filter(|(k, &r)| k.is_some() && r == 0)
            .count();
        assert_eq!(c.cached_unused_blocks(), cached);
    }

    #[test]
    fn a_sequence_picks_up_blocks_another_computed_after_it_started() {
        let mut c = PagedKvCache::new(shape(), 16, 8, 2, 96, KvDtype::F32).unwrap();
        let tokens: Vec<u32> = (0..70).collect();
        // Both start together; sequence 1 computes its first block itself, then waits.
        assert_eq!(c.attach_prefix(0, &tokens).unwrap(), 0);
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 0);
        fill(&mut c, 1, 0, 16);
        c.register_full_blocks(1, &tokens).unwrap();
        fill(&mut c, 0, 0, 50);
        c.register_full_blocks(0, &tokens).unwrap();
        // Blocks 1 and 2 of sequence 0 continue sequence 1's chain.
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 32);
        assert_eq!(c.len(1), 48);
        assert_eq!(
            c.used_blocks(),
            5,
            "4 of sequence 0, sequence 1's own first block"
        );
        for p in 16..48 {
            assert_eq!(read(&c, 0, 1, p, 1), read(&c, 0, 0, p, 1));
        }
        check_counters(&c);
        // A sequence mid-block (or with blocks not yet keyed) cannot extend.
        fill(&mut c, 1, 48, 3);
        assert!(c.attach_prefix(1, &tokens).is_err());
        c.truncate(1, 20).unwrap();
        assert!(c.attach_prefix(1, &tokens).is_err());
        c.truncate(1, 16).unwrap();
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 32);
        check_counters(&c);
        // Only a prefix that matches: different tokens after the first block stop the run.
        c.truncate(1, 16).unwrap();
        let mut other = tokens.clone();
        other[40] = 7;
        assert_eq!(c.attach_prefix(1, &other).unwrap(), 16);
        check_counters(&c);
    }

    #[test]
    fn writes_read_back_through_block_tables() {
        let mut c = PagedKvCache::new(shape(), 16, 8, 2, 64, KvDtype::F32).unwrap();
        fill(&mut c, 0, 0, 20);
        fill(&mut c, 1, 0, 5);
        fill(&mut c, 0, 20, 13);
        assert_eq!(c.len(0), 33);
        assert_eq!(c.used_blocks(), 3 + 1);
        for p in 0..33 {
            assert_eq!(
                read(&c, 1, 0, p, 1),
                vec![
                    (p * 100 + 3) as f32,
                    (p * 100 + 4) as f32,
                    (p * 100 + 5) as f32
                ]
            );
        }
        assert_eq!(read(&c, 0, 1, 4, 0)[0], 400.0);
        c.truncate(0, 16).unwrap();
        assert_eq!(
            c.used_blocks(),
            1 + 1,
            "blocks past the length are released"
        );
        assert_eq!(c.available_blocks(), 6);
    }

    #[test]
    fn an_f16_pool_stores_rounded_values_in_half_the_bytes_and_copies_on_write() {
        let f32_pool = PagedKvCache::new(shape(), 16, 8, 2, 64, KvDtype::F32).unwrap();
        let mut c = PagedKvCache::new(shape(), 16, 8, 2, 64, KvDtype::F16).unwrap();
        assert_eq!(c.dtype(), KvDtype::F16);
        assert_eq!(2 * c.bytes(), f32_pool.bytes());
        assert_eq!(
            2 * PagedKvCache::bytes_per_block(shape(), 16, KvDtype::F16),
            PagedKvCache::bytes_per_block(shape(), 16, KvDtype::F32)
        );
        // Values f16 cannot hold exactly: each reads back as its nearest-even rounding.
        let value = |p: usize, i: usize| (p * 100 + i) as f32 / 7.0 + 0.01;
        let k: Vec<f32> = (0..40 * 6).map(|i| value(i / 6, i % 6)).collect();
        let v: Vec<f32> = k.iter().map(|x| -x).collect();
        for l in 0..2 {
            c.write(l, 0, 0, &k, &v).unwrap();
        }
        c.commit(0, 40).unwrap();
        let rounded = |x: f32| half::f16::from_f32(x).to_f32();
        assert_ne!(rounded(value(7, 4)), value(7, 4), "a value f16 rounds");
        for p in [0, 7, 17, 39] {
            let want: Vec<f32> = (3..6).map(|i| rounded(value(p, i))).collect();
            assert_eq!(read(&c, 1, 0, p, 1), want, "position {p}");
        }
        // Shared blocks, then a write into one: the copy keeps the other positions' values.
        let tokens: Vec<u32> = (0..40).collect();
        c.register_full_blocks(0, &tokens).unwrap();
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 32);
        c.truncate(1, 20).unwrap();
        let (k2, v2) = (vec![0.5f32; 6], vec![0.25f32; 6]);
        for l in 0..2 {
            c.write(l, 1, 20, &k2, &v2).unwrap();
        }
        c.commit(1, 21).unwrap();
        assert_eq!(read(&c, 0, 1, 20, 0), vec![0.5; 3]);
        assert_eq!(read(&c, 0, 1, 19, 1), read(&c, 0, 0, 19, 1));
        assert_eq!(
            read(&c, 0, 0, 20, 0),
            (0..3).map(|i| rounded(value(20, i))).collect::<Vec<_>>()
        );
        check_counters(&c);
    }

    #[test]
    fn only_sequences_with_the_same_rope_floor_share_blocks() {
        let mut c = PagedKvCache::new(shape(), 16, 8, 3, 64, KvDtype::F32).unwrap();
        let tokens: Vec<u32> = (0..40).collect();
        c.set_rope_floor(0, Some(40)).unwrap();
        fill(&mut c, 0, 0, 40);
        c.register_full_blocks(0, &tokens).unwrap();
        assert!(
            c.set_rope_floor(0, Some(41)).is_err(),
            "not once it holds blocks"
        );
        // No floor, or another one: the same tokens are other keys.
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 0);
        c.set_rope_floor(2, Some(48)).unwrap();
        assert_eq!(c.attach_prefix(2, &tokens).unwrap(), 0);
        c.truncate(2, 0).unwrap();
        assert_eq!(c.rope_floor(2), None, "emptied, the floor goes");
        c.set_rope_floor(2, Some(40)).unwrap();
        assert_eq!(c.attach_prefix(2, &tokens).unwrap(), 32);
        assert_eq!(read(&c, 0, 2, 31, 1), read(&c, 0, 0, 31, 1));
        check_counters(&c);
    }

    #[test]
    fn only_sequences_with_the_same_salt_share_blocks() {
        let mut c = PagedKvCache::new(shape(), 16, 8, 3, 64, KvDtype::F32).unwrap();
        let tokens: Vec<u32> = (0..40).collect();
        c.set_prefix_salt(0, 77).unwrap();
        fill(&mut c, 0, 0, 40);
        c.register_full_blocks(0, &tokens).unwrap();
        assert!(
            c.set_prefix_salt(0, 78).is_err(),
            "not once it holds blocks"
        );
        // Unsalted, or salted otherwise, the same tokens are other keys.
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 0);
        c.set_prefix_salt(2, 78).unwrap();
        assert_eq!(c.attach_prefix(2, &tokens).unwrap(), 0);
        c.truncate(2, 0).unwrap();
        assert_eq!(c.prefix_salt(2), 0, "emptied, the salt goes");
        c.set_prefix_salt(2, 77).unwrap();
        assert_eq!(c.attach_prefix(2, &tokens).unwrap(), 32);
        assert_eq!(read(&c, 0, 2, 31, 1), read(&c, 0, 0, 31, 1));
        // Salt and floor together: both must match.
        c.truncate(2, 0).unwrap();
        c.set_prefix_salt(2, 77).unwrap();
        c.set_rope_floor(2, Some(40)).unwrap();
        assert_eq!(c.attach_prefix(2, &tokens).unwrap(), 0);
        check_counters(&c);
    }

    #[test]
    fn prefixes_are_shared_copied_on_write_and_cached_after_release() {
        let mut c = PagedKvCache::new(shape(), 16, 6, 3, 64, KvDtype::F32).unwrap();
        let tokens: Vec<u32> = (0..40).collect();
        fill(&mut c, 0, 0, 40);
        c.register_full_blocks(0, &tokens).unwrap();
        // Same 40 tokens: the two full blocks attach, the partial third does not.
        assert_eq!(c.attach_prefix(1, &tokens).unwrap(), 32);
        assert_eq!(c.used_blocks(), 3, "shared, not copied");
        assert_eq!(read(&c, 0, 1, 31, 1), read(&c, 0, 0, 31, 1));
        // A different second block: only the first attaches.
        let mut other = tokens.clone();
        other[20] = 999;
        assert_eq!(c.attach_prefix(2, &other).unwrap(), 16);
        // Writing into a shared block copies it first (every layer).
        c.truncate(1, 30).unwrap();
        let (k, v) = kv(7000, 1);
        c.write(0, 1, 30, &k, &v).unwrap();
        c.write(1, 1, 30, &k, &v).unwrap();
        c.commit(1, 31).unwrap();
        assert_eq!(read(&c, 1, 1, 30, 0)[0], 700_000.0);
        assert_eq!(
            read(&c, 1, 0, 30, 0)[0],
            3000.0,
            "the original is untouched"
        );
        assert_eq!(
            read(&c, 1, 1, 29, 1),
            read(&c, 1, 0, 29, 1),
            "the copy kept the rest"
        );
        // Released keyed blocks stay attachable until the pool needs them.
        for s in 0..3 {
            c.truncate(s, 0).unwrap();
        }
        assert_eq!(c.used_blocks(), 0);
        assert!(c.cached_unused_blocks() >= 2);
        assert_eq!(c.attach_prefix(0, &tokens).unwrap(), 32);
        let st = c.prefix_stats();
        assert_eq!(st.hit_tokens, 32 + 16 + 32);
        // Filling the pool evicts cached blocks (least recently released first).
        c.truncate(0, 0).unwrap();
        fill(&mut c, 2, 0, 64);
        assert_eq!(c.prefix_stats().evicted_blocks, 0, "free blocks go first");
        fill(&mut c, 1, 0, 16);
        assert_eq!(c.prefix_stats().evicted_blocks, 1);
        assert_eq!(c.used_blocks(), 5);
        assert_eq!(c.cached_unused_blocks(), 1);
        check_counters(&c);
    }

    #[test]
    fn exhaustion_and_bad_input_are_errors() {
        let mut c = PagedKvCache::new(shape(), 16, 2, 2, 64, KvDtype::F32).unwrap();
        fill(&mut c, 0, 0, 32);
        let (k, v) = kv(0, 1);
        assert!(c
            .write(0, 1, 0, &k, &v)
            .unwrap_err()
            .to_string()
            .contains("in use"));
        assert!(c.write(0, 0, 64, &k, &v).is_err(), "past max_len");
        assert!(c.write(0, 5, 0, &k, &v).is_err(), "bad sequence");
        assert!(PagedKvCache::new(shape(), 24, 2, 2, 64, KvDtype::F32).is_err());
        assert!(PagedKvCache::new(shape(), 16, 0, 2, 64, KvDtype::F32).is_err());
        assert_eq!(c.blocks_needed(1, 33), 3);
    }
}
